/*
 * ibvapi.h: the subset of <infiniband/verbs.h> (rdma-core, libibverbs ABI
 * IBVERBS_1.1) that libmscclpp and the test double use, written out by hand
 * so that neither needs libibverbs-dev to build. Every type is the real one
 * under an "iba_" prefix (IBA_ for constants) with the real layout;
 * layout_check.c asserts offsets, sizes and values against the real header
 * wherever libibverbs-dev is installed (TestLayoutAgainstVerbsH).
 *
 * Only leading fields of a struct are used where the rest is never touched
 * here (iba_device, iba_srq, iba_comp_channel, iba_ah, iba_mw are opaque);
 * structs the library allocates or that a library fills are complete.
 */
#ifndef MSCCLPP_IBVAPI_H_
#define MSCCLPP_IBVAPI_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IBA_SYSFS_NAME_MAX 64

struct iba_device; /* opaque: read its name with ibv_get_device_name */
struct iba_context;
struct iba_pd;
struct iba_cq;
struct iba_qp;
struct iba_srq;
struct iba_comp_channel;
struct iba_ah;
struct iba_mw;

union iba_gid {
  uint8_t raw[16];
  struct {
    uint64_t subnet_prefix; /* big-endian */
    uint64_t interface_id;  /* big-endian */
  } global;
};

enum iba_mtu { IBA_MTU_256 = 1, IBA_MTU_512 = 2, IBA_MTU_1024 = 3, IBA_MTU_2048 = 4, IBA_MTU_4096 = 5 };

enum iba_port_state {
  IBA_PORT_NOP = 0,
  IBA_PORT_DOWN = 1,
  IBA_PORT_INIT = 2,
  IBA_PORT_ARMED = 3,
  IBA_PORT_ACTIVE = 4,
  IBA_PORT_ACTIVE_DEFER = 5
};

enum { IBA_LINK_LAYER_UNSPECIFIED = 0, IBA_LINK_LAYER_INFINIBAND = 1, IBA_LINK_LAYER_ETHERNET = 2 };

enum iba_atomic_cap { IBA_ATOMIC_NONE = 0, IBA_ATOMIC_HCA = 1, IBA_ATOMIC_GLOB = 2 };

struct iba_device_attr {
  char fw_ver[64];
  uint64_t node_guid;
  uint64_t sys_image_guid;
  uint64_t max_mr_size;
  uint64_t page_size_cap;
  uint32_t vendor_id;
  uint32_t vendor_part_id;
  uint32_t hw_ver;
  int max_qp;
  int max_qp_wr;
  unsigned int device_cap_flags;
  int max_sge;
  int max_sge_rd;
  int max_cq;
  int max_cqe;
  int max_mr;
  int max_pd;
  int max_qp_rd_atom;
  int max_ee_rd_atom;
  int max_res_rd_atom;
  int max_qp_init_rd_atom;
  int max_ee_init_rd_atom;
  enum iba_atomic_cap atomic_cap;
  int max_ee;
  int max_rdd;
  int max_mw;
  int max_raw_ipv6_qp;
  int max_raw_ethy_qp;
  int max_mcast_grp;
  int max_mcast_qp_attach;
  int max_total_mcast_qp_attach;
  int max_ah;
  int max_fmr;
  int max_map_per_fmr;
  int max_srq;
  int max_srq_wr;
  int max_srq_sge;
  uint16_t max_pkeys;
  uint8_t local_ca_ack_delay;
  uint8_t phys_port_cnt;
};

/* struct ibv_port_attr. The exported ibv_query_port (the path verbs.h's
 * inline takes for a context without the extended query) fills the fields
 * up to and including flags; the caller zeroes the struct first, as the
 * inline does. */
struct iba_port_attr {
  enum iba_port_state state;
  enum iba_mtu max_mtu;
  enum iba_mtu active_mtu;
  int gid_tbl_len;
  uint32_t port_cap_flags;
  uint32_t max_msg_sz;
  uint32_t bad_pkey_cntr;
  uint32_t qkey_viol_cntr;
  uint16_t pkey_tbl_len;
  uint16_t lid;
  uint16_t sm_lid;
  uint8_t lmc;
  uint8_t max_vl_num;
  uint8_t sm_sl;
  uint8_t subnet_timeout;
  uint8_t init_type_reply;
  uint8_t active_width;
  uint8_t active_speed;
  uint8_t phys_state;
  uint8_t link_layer;
  uint8_t flags;
  uint16_t port_cap_flags2;
};

enum iba_access_flags {
  IBA_ACCESS_LOCAL_WRITE = 1,
  IBA_ACCESS_REMOTE_WRITE = (1 << 1),
  IBA_ACCESS_REMOTE_READ = (1 << 2),
  IBA_ACCESS_REMOTE_ATOMIC = (1 << 3),
  IBA_ACCESS_RELAXED_ORDERING = (1 << 20) /* IBV_ACCESS_OPTIONAL_FIRST: data MRs only, through reg_mr_iova2 */
};

struct iba_pd {
  struct iba_context* context;
  uint32_t handle;
};

struct iba_mr {
  struct iba_context* context;
  struct iba_pd* pd;
  void* addr;
  size_t length;
  uint32_t handle;
  uint32_t lkey;
  uint32_t rkey;
};

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

enum iba_qp_type { IBA_QPT_RC = 2, IBA_QPT_UC = 3, IBA_QPT_UD = 4 };

struct iba_qp_cap {
  uint32_t max_send_wr;
  uint32_t max_recv_wr;
  uint32_t max_send_sge;
  uint32_t max_recv_sge;
  uint32_t max_inline_data;
};

struct iba_qp_init_attr {
  void* qp_context;
  struct iba_cq* send_cq;
  struct iba_cq* recv_cq;
  struct iba_srq* srq;
  struct iba_qp_cap cap;
  enum iba_qp_type qp_type;
  int sq_sig_all;
};

enum iba_qp_attr_mask {
  IBA_QP_STATE = 1 << 0,
  IBA_QP_CUR_STATE = 1 << 1,
  IBA_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2,
  IBA_QP_ACCESS_FLAGS = 1 << 3,
  IBA_QP_PKEY_INDEX = 1 << 4,
  IBA_QP_PORT = 1 << 5,
  IBA_QP_QKEY = 1 << 6,
  IBA_QP_AV = 1 << 7,
  IBA_QP_PATH_MTU = 1 << 8,
  IBA_QP_TIMEOUT = 1 << 9,
  IBA_QP_RETRY_CNT = 1 << 10,
  IBA_QP_RNR_RETRY = 1 << 11,
  IBA_QP_RQ_PSN = 1 << 12,
  IBA_QP_MAX_QP_RD_ATOMIC = 1 << 13,
  IBA_QP_ALT_PATH = 1 << 14,
  IBA_QP_MIN_RNR_TIMER = 1 << 15,
  IBA_QP_SQ_PSN = 1 << 16,
  IBA_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
  IBA_QP_PATH_MIG_STATE = 1 << 18,
  IBA_QP_CAP = 1 << 19,
  IBA_QP_DEST_QPN = 1 << 20
};

enum iba_qp_state {
  IBA_QPS_RESET,
  IBA_QPS_INIT,
  IBA_QPS_RTR,
  IBA_QPS_RTS,
  IBA_QPS_SQD,
  IBA_QPS_SQE,
  IBA_QPS_ERR,
  IBA_QPS_UNKNOWN
};

enum iba_mig_state { IBA_MIG_MIGRATED, IBA_MIG_REARM, IBA_MIG_ARMED };

struct iba_global_route {
  union iba_gid dgid;
  uint32_t flow_label;
  uint8_t sgid_index;
  uint8_t hop_limit;
  uint8_t traffic_class;
};

struct iba_ah_attr {
  struct iba_global_route grh;
  uint16_t dlid;
  uint8_t sl;
  uint8_t src_path_bits;
  uint8_t static_rate;
  uint8_t is_global;
  uint8_t port_num;
};

struct iba_qp_attr {
  enum iba_qp_state qp_state;
  enum iba_qp_state cur_qp_state;
  enum iba_mtu path_mtu;
  enum iba_mig_state path_mig_state;
  uint32_t qkey;
  uint32_t rq_psn;
  uint32_t sq_psn;
  uint32_t dest_qp_num;
  unsigned int qp_access_flags;
  struct iba_qp_cap cap;
  struct iba_ah_attr ah_attr;
  struct iba_ah_attr alt_ah_attr;
  uint16_t pkey_index;
  uint16_t alt_pkey_index;
  uint8_t en_sqd_async_notify;
  uint8_t sq_draining;
  uint8_t max_rd_atomic;
  uint8_t max_dest_rd_atomic;
  uint8_t min_rnr_timer;
  uint8_t port_num;
  uint8_t timeout;
  uint8_t retry_cnt;
  uint8_t rnr_retry;
  uint8_t alt_port_num;
  uint8_t alt_timeout;
  uint32_t rate_limit;
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

/* The exported functions used, with the signatures of their IBVERBS_1.1 versions
 * (ibv_query_port: the exported compat entry, which fills iba_port_attr up to flags). */
typedef struct iba_device** (*iba_get_device_list_fn)(int* num_devices);
typedef void (*iba_free_device_list_fn)(struct iba_device** list);
typedef const char* (*iba_get_device_name_fn)(struct iba_device* device);
typedef struct iba_context* (*iba_open_device_fn)(struct iba_device* device);
typedef int (*iba_close_device_fn)(struct iba_context* context);
typedef int (*iba_query_device_fn)(struct iba_context* context, struct iba_device_attr* attr);
typedef int (*iba_query_port_fn)(struct iba_context* context, uint8_t port_num, struct iba_port_attr* attr);
typedef int (*iba_query_gid_fn)(struct iba_context* context, uint8_t port_num, int index, union iba_gid* gid);
typedef struct iba_pd* (*iba_alloc_pd_fn)(struct iba_context* context);
typedef int (*iba_dealloc_pd_fn)(struct iba_pd* pd);
typedef struct iba_mr* (*iba_reg_mr_fn)(struct iba_pd* pd, void* addr, size_t length, int access);
typedef int (*iba_dereg_mr_fn)(struct iba_mr* mr);
/* IBVERBS_1.12 (rdma-core 34): a dma-buf registration (GPU memory exported by the CUDA driver) */
typedef struct iba_mr* (*iba_reg_dmabuf_mr_fn)(struct iba_pd* pd, uint64_t offset, size_t length, uint64_t iova,
                                               int fd, int access);
/* IBVERBS_1.8 (rdma-core 28): takes the optional access flags (relaxed ordering) */
typedef struct iba_mr* (*iba_reg_mr_iova2_fn)(struct iba_pd* pd, void* addr, size_t length, uint64_t iova,
                                              unsigned int access);
typedef struct iba_cq* (*iba_create_cq_fn)(struct iba_context* context, int cqe, void* cq_context,
                                            struct iba_comp_channel* channel, int comp_vector);
typedef int (*iba_destroy_cq_fn)(struct iba_cq* cq);
typedef struct iba_qp* (*iba_create_qp_fn)(struct iba_pd* pd, struct iba_qp_init_attr* attr);
typedef int (*iba_modify_qp_fn)(struct iba_qp* qp, struct iba_qp_attr* attr, int attr_mask);
typedef int (*iba_destroy_qp_fn)(struct iba_qp* qp);
typedef const char* (*iba_wc_status_str_fn)(enum iba_wc_status status);

#ifdef __cplusplus
}
#endif

#endif
