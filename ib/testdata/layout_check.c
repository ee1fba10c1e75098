/*
 * layout_check.c: compiled (never run) by TestLayoutAgainstVerbsH where
 * libibverbs-dev is installed. Asserts that ../ibvapi.h matches the real
 * <infiniband/verbs.h>: sizes, field offsets and constant values.
 */
#include <infiniband/verbs.h>

#include "../ibvapi.h"

#define SAME_SIZE(t) _Static_assert(sizeof(struct iba_##t) == sizeof(struct ibv_##t), "sizeof " #t)
#define SAME_OFF(t, f) \
  _Static_assert(offsetof(struct iba_##t, f) == offsetof(struct ibv_##t, f), "offsetof " #t "." #f)
#define SAME_VAL(a) _Static_assert((long)IBA_##a == (long)IBV_##a, "value of " #a)

_Static_assert(sizeof(union iba_gid) == sizeof(union ibv_gid), "sizeof gid");
_Static_assert(offsetof(union iba_gid, global.interface_id) == offsetof(union ibv_gid, global.interface_id), "gid");

SAME_SIZE(device_attr);
SAME_OFF(device_attr, max_qp_wr);
SAME_OFF(device_attr, max_cqe);
SAME_OFF(device_attr, max_sge);
SAME_OFF(device_attr, atomic_cap);
SAME_OFF(device_attr, phys_port_cnt);

SAME_SIZE(port_attr);
SAME_OFF(port_attr, state);
SAME_OFF(port_attr, active_mtu);
SAME_OFF(port_attr, gid_tbl_len);
SAME_OFF(port_attr, max_msg_sz);
SAME_OFF(port_attr, lid);
SAME_OFF(port_attr, link_layer);
SAME_OFF(port_attr, flags);
SAME_OFF(port_attr, port_cap_flags2);

SAME_SIZE(pd);
SAME_OFF(pd, context);
SAME_OFF(pd, handle);

SAME_SIZE(mr);
SAME_OFF(mr, context);
SAME_OFF(mr, pd);
SAME_OFF(mr, addr);
SAME_OFF(mr, length);
SAME_OFF(mr, handle);
SAME_OFF(mr, lkey);
SAME_OFF(mr, rkey);

SAME_SIZE(wc);
SAME_OFF(wc, wr_id);
SAME_OFF(wc, status);
SAME_OFF(wc, opcode);
SAME_OFF(wc, vendor_err);
SAME_OFF(wc, byte_len);
SAME_OFF(wc, imm_data);
SAME_OFF(wc, qp_num);
SAME_OFF(wc, src_qp);
SAME_OFF(wc, wc_flags);
SAME_OFF(wc, slid);
SAME_OFF(wc, dlid_path_bits);

SAME_SIZE(qp_cap);
SAME_OFF(qp_cap, max_send_wr);
SAME_OFF(qp_cap, max_recv_wr);
SAME_OFF(qp_cap, max_inline_data);

SAME_SIZE(qp_init_attr);
SAME_OFF(qp_init_attr, send_cq);
SAME_OFF(qp_init_attr, recv_cq);
SAME_OFF(qp_init_attr, cap);
SAME_OFF(qp_init_attr, qp_type);
SAME_OFF(qp_init_attr, sq_sig_all);

SAME_SIZE(global_route);
SAME_OFF(global_route, dgid);
SAME_OFF(global_route, sgid_index);
SAME_OFF(global_route, hop_limit);
SAME_OFF(global_route, traffic_class);

SAME_SIZE(ah_attr);
SAME_OFF(ah_attr, grh);
SAME_OFF(ah_attr, dlid);
SAME_OFF(ah_attr, sl);
SAME_OFF(ah_attr, is_global);
SAME_OFF(ah_attr, port_num);

SAME_SIZE(qp_attr);
SAME_OFF(qp_attr, qp_state);
SAME_OFF(qp_attr, path_mtu);
SAME_OFF(qp_attr, rq_psn);
SAME_OFF(qp_attr, sq_psn);
SAME_OFF(qp_attr, dest_qp_num);
SAME_OFF(qp_attr, qp_access_flags);
SAME_OFF(qp_attr, cap);
SAME_OFF(qp_attr, ah_attr);
SAME_OFF(qp_attr, alt_ah_attr);
SAME_OFF(qp_attr, pkey_index);
SAME_OFF(qp_attr, max_rd_atomic);
SAME_OFF(qp_attr, max_dest_rd_atomic);
SAME_OFF(qp_attr, min_rnr_timer);
SAME_OFF(qp_attr, port_num);
SAME_OFF(qp_attr, timeout);
SAME_OFF(qp_attr, retry_cnt);
SAME_OFF(qp_attr, rnr_retry);
SAME_OFF(qp_attr, rate_limit);

SAME_SIZE(sge);
SAME_OFF(sge, addr);
SAME_OFF(sge, length);
SAME_OFF(sge, lkey);

SAME_SIZE(send_wr);
SAME_OFF(send_wr, wr_id);
SAME_OFF(send_wr, next);
SAME_OFF(send_wr, sg_list);
SAME_OFF(send_wr, num_sge);
SAME_OFF(send_wr, opcode);
SAME_OFF(send_wr, send_flags);
SAME_OFF(send_wr, imm_data);
SAME_OFF(send_wr, wr.rdma.remote_addr);
SAME_OFF(send_wr, wr.rdma.rkey);
SAME_OFF(send_wr, wr.atomic.remote_addr);
SAME_OFF(send_wr, wr.atomic.compare_add);
SAME_OFF(send_wr, wr.atomic.rkey);
SAME_OFF(send_wr, qp_type);
SAME_OFF(send_wr, bind_mw);

SAME_SIZE(recv_wr);
SAME_OFF(recv_wr, sg_list);
SAME_OFF(recv_wr, num_sge);

SAME_SIZE(context_ops);
SAME_OFF(context_ops, poll_cq);
SAME_OFF(context_ops, post_send);
SAME_OFF(context_ops, post_recv);
SAME_OFF(context_ops, _compat_async_event);

SAME_SIZE(context);
SAME_OFF(context, device);
SAME_OFF(context, ops);
SAME_OFF(context, cmd_fd);
SAME_OFF(context, num_comp_vectors);
SAME_OFF(context, mutex);
SAME_OFF(context, abi_compat);

SAME_SIZE(cq);
SAME_OFF(cq, context);
SAME_OFF(cq, cq_context);
SAME_OFF(cq, cqe);
SAME_OFF(cq, async_events_completed);

SAME_SIZE(qp);
SAME_OFF(qp, context);
SAME_OFF(qp, pd);
SAME_OFF(qp, send_cq);
SAME_OFF(qp, recv_cq);
SAME_OFF(qp, handle);
SAME_OFF(qp, qp_num);
SAME_OFF(qp, state);
SAME_OFF(qp, qp_type);
SAME_OFF(qp, events_completed);

SAME_VAL(MTU_256);
SAME_VAL(MTU_4096);
SAME_VAL(PORT_DOWN);
SAME_VAL(PORT_ACTIVE);
SAME_VAL(PORT_ACTIVE_DEFER);
SAME_VAL(LINK_LAYER_INFINIBAND);
SAME_VAL(LINK_LAYER_ETHERNET);
SAME_VAL(ACCESS_LOCAL_WRITE);
SAME_VAL(ACCESS_REMOTE_WRITE);
SAME_VAL(ACCESS_REMOTE_READ);
SAME_VAL(ACCESS_REMOTE_ATOMIC);
SAME_VAL(ACCESS_RELAXED_ORDERING);
SAME_VAL(WC_SUCCESS);
SAME_VAL(WC_WR_FLUSH_ERR);
SAME_VAL(WC_REM_ACCESS_ERR);
SAME_VAL(WC_RETRY_EXC_ERR);
SAME_VAL(WC_GENERAL_ERR);
SAME_VAL(WC_RDMA_WRITE);
SAME_VAL(WC_FETCH_ADD);
SAME_VAL(WC_RECV_RDMA_WITH_IMM);
SAME_VAL(QPT_RC);
SAME_VAL(QP_STATE);
SAME_VAL(QP_ACCESS_FLAGS);
SAME_VAL(QP_PKEY_INDEX);
SAME_VAL(QP_PORT);
SAME_VAL(QP_AV);
SAME_VAL(QP_PATH_MTU);
SAME_VAL(QP_TIMEOUT);
SAME_VAL(QP_RETRY_CNT);
SAME_VAL(QP_RNR_RETRY);
SAME_VAL(QP_RQ_PSN);
SAME_VAL(QP_MAX_QP_RD_ATOMIC);
SAME_VAL(QP_MIN_RNR_TIMER);
SAME_VAL(QP_SQ_PSN);
SAME_VAL(QP_MAX_DEST_RD_ATOMIC);
SAME_VAL(QP_DEST_QPN);
SAME_VAL(QPS_RESET);
SAME_VAL(QPS_INIT);
SAME_VAL(QPS_RTR);
SAME_VAL(QPS_RTS);
SAME_VAL(QPS_ERR);
SAME_VAL(WR_RDMA_WRITE);
SAME_VAL(WR_RDMA_WRITE_WITH_IMM);
SAME_VAL(WR_ATOMIC_FETCH_AND_ADD);
SAME_VAL(SEND_SIGNALED);
SAME_VAL(SEND_INLINE);
SAME_VAL(SYSFS_NAME_MAX);

/* The function pointer types against the real prototypes (ibv_query_port is a macro there). */
#define SAME_FN(f) _Static_assert(sizeof(iba_##f##_fn) == sizeof(&ibv_##f), #f)
SAME_FN(get_device_list);
SAME_FN(open_device);
SAME_FN(reg_dmabuf_mr);
SAME_FN(reg_mr_iova2);
