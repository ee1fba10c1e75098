/*
 * ibvpath.h: the data-path half of ibvapi.h's verbs.h subset: completions
 * (iba_wc and its status), work requests (iba_send_wr, iba_sge), the
 * context's ops table and the leading fields of iba_context, iba_cq and
 * iba_qp that verbs.h's hot-path inlines read, and those inlines
 * (iba_post_send, iba_poll_cq, iba_post_recv), which jump through
 * context->ops exactly as verbs.h's do. Real layouts under the iba_/IBA_
 * prefix, checked by layout_check.c. A file of its own: what ibpath.c posts
 * and polls on the proxy thread, apart from set-up (ibvsetup.h). Include
 * ibvapi.h, not this.
 */
#ifndef MSCCLPP_IBVPATH_H_
#define MSCCLPP_IBVPATH_H_

#include "ibvsetup.h"

#ifdef __cplusplus
extern "C" {
#endif

enum iba_wc_status {
  IBA_WC_SUCCESS,
  IBA_WC_LOC_LEN_ERR,
  IBA_WC_LOC_QP_OP_ERR,
  IBA_WC_LOC_EEC_OP_ERR,
  IBA_WC_LOC_PROT_ERR,
  IBA_WC_WR_FLUSH_ERR,
  IBA_WC_MW_BIND_ERR,
  IBA_WC_BAD_RESP_ERR,
  IBA_WC_LOC_ACCESS_ERR,
  IBA_WC_REM_INV_REQ_ERR,
  IBA_WC_REM_ACCESS_ERR,
  IBA_WC_REM_OP_ERR,
  IBA_WC_RETRY_EXC_ERR,
  IBA_WC_RNR_RETRY_EXC_ERR,
  IBA_WC_LOC_RDD_VIOL_ERR,
  IBA_WC_REM_INV_RD_REQ_ERR,
  IBA_WC_REM_ABORT_ERR,
  IBA_WC_INV_EECN_ERR,
  IBA_WC_INV_EEC_STATE_ERR,
  IBA_WC_FATAL_ERR,
  IBA_WC_RESP_TIMEOUT_ERR,
  IBA_WC_GENERAL_ERR
};

enum iba_wc_opcode {
  IBA_WC_SEND,
  IBA_WC_RDMA_WRITE,
  IBA_WC_RDMA_READ,
  IBA_WC_COMP_SWAP,
  IBA_WC_FETCH_ADD,
  IBA_WC_BIND_MW,
  IBA_WC_LOCAL_INV,
  IBA_WC_TSO,
  IBA_WC_RECV = 1 << 7,
  IBA_WC_RECV_RDMA_WITH_IMM
};

struct iba_wc {
  uint64_t wr_id;
  enum iba_wc_status status;
  enum iba_wc_opcode opcode;
  uint32_t vendor_err;
  uint32_t byte_len;
  union {
    uint32_t imm_data; /* big-endian */
    uint32_t invalidated_rkey;
  };
  uint32_t qp_num;
  uint32_t src_qp;
  unsigned int wc_flags;
  uint16_t pkey_index;
  uint16_t slid;
  uint8_t sl;
  uint8_t dlid_path_bits;
};

enum iba_wr_opcode {
  IBA_WR_RDMA_WRITE,
  IBA_WR_RDMA_WRITE_WITH_IMM,
  IBA_WR_SEND,
  IBA_WR_SEND_WITH_IMM,
  IBA_WR_RDMA_READ,
  IBA_WR_ATOMIC_CMP_AND_SWP,
  IBA_WR_ATOMIC_FETCH_AND_ADD
};

enum iba_send_flags {
  IBA_SEND_FENCE = 1 << 0,
  IBA_SEND_SIGNALED = 1 << 1,
  IBA_SEND_SOLICITED = 1 << 2,
  IBA_SEND_INLINE = 1 << 3
};

struct iba_sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

struct iba_mw_bind_info {
  struct iba_mr* mr;
  uint64_t addr;
  uint64_t length;
  unsigned int mw_access_flags;
};

struct iba_send_wr {
  uint64_t wr_id;
  struct iba_send_wr* next;
  struct iba_sge* sg_list;
  int num_sge;
  enum iba_wr_opcode opcode;
  unsigned int send_flags;
  union {
    uint32_t imm_data; /* big-endian */
    uint32_t invalidate_rkey;
  };
  union {
    struct {
      uint64_t remote_addr;
      uint32_t rkey;
    } rdma;
    struct {
      uint64_t remote_addr;
      uint64_t compare_add;
      uint64_t swap;
      uint32_t rkey;
    } atomic;
    struct {
      struct iba_ah* ah;
      uint32_t remote_qpn;
      uint32_t remote_qkey;
    } ud;
  } wr;
  union {
    struct {
      uint32_t remote_srqn;
    } xrc;
  } qp_type;
  union {
    struct {
      struct iba_mw* mw;
      uint32_t rkey;
      struct iba_mw_bind_info bind_info;
    } bind_mw;
    struct {
      void* hdr;
      uint16_t hdr_sz;
      uint16_t mss;
    } tso;
  };
};

struct iba_recv_wr {
  uint64_t wr_id;
  struct iba_recv_wr* next;
  struct iba_sge* sg_list;
  int num_sge;
};

/* struct ibv_context_ops: only poll_cq, post_send and post_recv are called
 * (the verbs.h inlines ibv_poll_cq, ibv_post_send, ibv_post_recv jump
 * through them); the other slots keep the layout. */
struct iba_context_ops {
  void* _compat_query_device;
  void* _compat_query_port;
  void* _compat_alloc_pd;
  void* _compat_dealloc_pd;
  void* _compat_reg_mr;
  void* _compat_rereg_mr;
  void* _compat_dereg_mr;
  void* alloc_mw;
  void* bind_mw;
  void* dealloc_mw;
  void* _compat_create_cq;
  int (*poll_cq)(struct iba_cq* cq, int num_entries, struct iba_wc* wc);
  void* req_notify_cq;
  void* _compat_cq_event;
  void* _compat_resize_cq;
  void* _compat_destroy_cq;
  void* _compat_create_srq;
  void* _compat_modify_srq;
  void* _compat_query_srq;
  void* _compat_destroy_srq;
  void* post_srq_recv;
  void* _compat_create_qp;
  void* _compat_query_qp;
  void* _compat_modify_qp;
  void* _compat_destroy_qp;
  int (*post_send)(struct iba_qp* qp, struct iba_send_wr* wr, struct iba_send_wr** bad_wr);
  int (*post_recv)(struct iba_qp* qp, struct iba_recv_wr* wr, struct iba_recv_wr** bad_wr);
  void* _compat_create_ah;
  void* _compat_destroy_ah;
  void* _compat_attach_mcast;
  void* _compat_detach_mcast;
  void* _compat_async_event;
};

struct iba_context {
  struct iba_device* device;
  struct iba_context_ops ops;
  int cmd_fd;
  int async_fd;
  int num_comp_vectors;
  pthread_mutex_t mutex;
  void* abi_compat;
};

struct iba_cq {
  struct iba_context* context;
  struct iba_comp_channel* channel;
  void* cq_context;
  uint32_t handle;
  int cqe;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t comp_events_completed;
  uint32_t async_events_completed;
};

struct iba_qp {
  struct iba_context* context;
  void* qp_context;
  struct iba_pd* pd;
  struct iba_cq* send_cq;
  struct iba_cq* recv_cq;
  struct iba_srq* srq;
  uint32_t handle;
  uint32_t qp_num;
  enum iba_qp_state state;
  enum iba_qp_type qp_type;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t events_completed;
};

/* The calls of the hot path, exactly as verbs.h's static inlines make them. */
static inline int iba_post_send(struct iba_qp* qp, struct iba_send_wr* wr, struct iba_send_wr** bad_wr)
{
  return qp->context->ops.post_send(qp, wr, bad_wr);
}
static inline int iba_post_recv(struct iba_qp* qp, struct iba_recv_wr* wr, struct iba_recv_wr** bad_wr)
{
  return qp->context->ops.post_recv(qp, wr, bad_wr);
}
static inline int iba_poll_cq(struct iba_cq* cq, int num_entries, struct iba_wc* wc)
{
  return cq->context->ops.poll_cq(cq, num_entries, wc);
}

#ifdef __cplusplus
}
#endif

#endif
