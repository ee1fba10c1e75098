/*
 * ibvsetup.h: the set-up half of ibvapi.h's verbs.h subset: the objects and
 * attributes a device, a port, a PD, an MR and a QP's creation and
 * transitions are described with (iba_device_attr, iba_port_attr, iba_mr,
 * iba_qp_init_attr, iba_qp_attr and their enums), and the opaque objects.
 * Real layouts under the iba_/IBA_ prefix, checked by layout_check.c like
 * the rest. A file of its own: what ibcore.c, qp.c and mr.c fill in and read
 * once per device or connection, apart from the work requests and
 * completions of the hot path (ibvpath.h). Include ibvapi.h, not this.
 */
#ifndef MSCCLPP_IBVSETUP_H_
#define MSCCLPP_IBVSETUP_H_

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

#ifdef __cplusplus
}
#endif

#endif
