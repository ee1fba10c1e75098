/*
 * ibcore.h: the C side of the IB provider. Setup (device, PD, MR, CQ, QP
 * and its transitions) is called from Go; the data path (ibWrite,
 * ibWriteSignal, ibPoll, ibFlush) is plain C that an engOps implementation
 * calls directly on the proxy thread, never entering Go.
 *
 * Completion accounting: every WR gets a sequence number (1, 2, ...) as
 * its wr_id; a successful completion of WR n means WRs 1..n are done (a
 * QP completes in order), so `completed` is the largest n seen. A WR is
 * signaled when the caller asks, and at least every max_send_wr/2 WRs, so
 * a full send queue always holds a signaled WR to wait for. A flush is
 * completed == posted (posting a zero-length signaled write first when the
 * last WR was unsignaled).
 *
 * Thread safety: calls on one QP serialize on its lock; a CQ's poll runs
 * under the CQ's lock. Lock order: QP, then CQ.
 */
#ifndef MSCCLPP_IBCORE_H_
#define MSCCLPP_IBCORE_H_

#include "../impl/dynlib/dynlib.h"
#include <pthread.h>
#include <stdint.h>

#include "ibvapi.h"

#define IB_ERR_LEN 320
#define IB_CQ_MAX_QPS 1024

/* The entry points of one loaded libibverbs (every one resolved, never NULL). */
typedef struct ibApi {
  iba_get_device_list_fn get_device_list;
  iba_free_device_list_fn free_device_list;
  iba_get_device_name_fn get_device_name;
  iba_open_device_fn open_device;
  iba_close_device_fn close_device;
  iba_query_device_fn query_device;
  iba_query_port_fn query_port;
  iba_query_gid_fn query_gid;
  iba_alloc_pd_fn alloc_pd;
  iba_dealloc_pd_fn dealloc_pd;
  iba_reg_mr_fn reg_mr;
  iba_dereg_mr_fn dereg_mr;
  iba_create_cq_fn create_cq;
  iba_destroy_cq_fn destroy_cq;
  iba_create_qp_fn create_qp;
  iba_modify_qp_fn modify_qp;
  iba_destroy_qp_fn destroy_qp;
  iba_wc_status_str_fn wc_status_str;
} ibApi;

/* The entry points of ibApi at IBVERBS_1.1, for impl/dynlib's loader (NULL-terminated). */
extern const dynSym ibSyms[];

/* Entry points a libibverbs may lack, in a table of their own (mr.c): failing to load it means
 * "not offered". ibv_reg_dmabuf_mr is at IBVERBS_1.12. */
typedef struct ibDmabufApi {
  iba_reg_dmabuf_mr_fn reg_dmabuf_mr;
} ibDmabufApi;
extern const dynSym ibDmabufSyms[];
/* Optional too: ibv_reg_mr_iova2 (IBVERBS_1.8), the registration that takes relaxed ordering
 * (NCCL's test of a library that knows the flag). */
typedef struct ibRoApi {
  iba_reg_mr_iova2_fn reg_mr_iova2;
} ibRoApi;
extern const dynSym ibRoSyms[];

/* Formats fmt into err (when err is not NULL and errLen > 0) and returns -1: the error path of
 * every set-up call (ibcore.c). */
int ibErrf(char* err, int errLen, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

/* Names of the devices the library sees: fills names[i] (up to max), returns
 * the count, or -1 with err. Never calls ibv_free_device_list(NULL). */
int ibDeviceNames(const ibApi* a, char (*names)[IBA_SYSFS_NAME_MAX], int max, char* err, int errLen);

/* An open device: its context, one PD, and the port and GID this library uses. */
typedef struct ibCtx {
  const ibApi* api;
  struct iba_context* ctx;
  struct iba_pd* pd;
  char name[IBA_SYSFS_NAME_MAX];
  int port;     /* the port in use: the one asked for, else the first ACTIVE one */
  uint8_t sl;   /* service level of every QP's address (MSCCLPP_IB_SL) */
  uint8_t tc;   /* traffic class of every QP's GRH, RoCE (MSCCLPP_IB_TC) */
  uint8_t ackTimeout; /* every QP's local ACK timeout, 4.096 us * 2^n (MSCCLPP_IB_TIMEOUT) */
  uint8_t retryCnt;   /* every QP's transport retry count (MSCCLPP_IB_RETRY_CNT) */
  int gidIndex; /* MSCCLPP_IB_GID_INDEX, or picked from sysfs (gid.go); -1 until set */
  struct iba_port_attr portAttr;
  struct iba_device_attr devAttr;
  union iba_gid gid;
} ibCtx;

/* Opens device name (exact verbs name), picks port (> 0: that one, which must be ACTIVE; 0: the
 * first ACTIVE one), reads GID gidIndex (negative: later, ibCtxSetGid), allocates a PD. NULL with
 * err on failure. */
ibCtx* ibCtxOpen(const ibApi* a, const char* name, int gidIndex, int port, uint64_t skipPorts, char* err,
                 int errLen);
/* Reads GID gidIndex of c's port (gid.c): 0, or -1 with err (out of range, empty on RoCE, no LID on IB). */
int ibCtxSetGid(ibCtx* c, int gidIndex, char* err, int errLen);
void ibCtxClose(ibCtx* c);

/* Registers [addr, addr+size) (mr.c) with LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ (no relaxed ordering). */
struct iba_mr* ibMrReg(ibCtx* c, uint64_t addr, uint64_t size, char* err, int errLen);
int ibMrDereg(ibCtx* c, struct iba_mr* mr, char* err, int errLen);
/* Registers length bytes at offset of dma-buf fd (GPU memory), addressed at iova, with the access
 * of ibMrReg (mr.c). */
struct iba_mr* ibMrRegDmabuf(ibCtx* c, const ibDmabufApi* d, uint64_t offset, uint64_t length, uint64_t iova, int fd,
                             int relaxed, char* err, int errLen);
/* ibMrReg with relaxed ordering (IBV_ACCESS_RELAXED_ORDERING: a data buffer, never a signal
 * slot, whose writes need no order among themselves), through ibv_reg_mr_iova2 (mr.c). */
struct iba_mr* ibMrRegRelaxed(ibCtx* c, const ibRoApi* ro, uint64_t addr, uint64_t size, char* err, int errLen);

typedef struct ibQp ibQp;

typedef struct ibCq {
  ibCtx* ctx;
  struct iba_cq* cq;
  int capacity;         /* entries asked for: the sum of its QPs' max_send_wr must fit */
  int committed;        /* sum of max_send_wr of the QPs created on it */
  pthread_mutex_t lock; /* poll, and the QP table */
  int nqp;
  ibQp* qps[IB_CQ_MAX_QPS];
  uint64_t polled; /* completions seen, for tests and stats */
} ibCq;

/* CQs and QPs, their creation and state transitions: qp.c. */
ibCq* ibCqCreate(ibCtx* c, int entries, char* err, int errLen);
int ibCqDestroy(ibCq* cq, char* err, int errLen);

/* Polls cq once (up to 16 completions): advances each QP's completed count;
 * an error completion marks its QP failed with a message naming the peer.
 * Returns the completions seen, or -1 when ibv_poll_cq itself failed (the
 * message goes to err). */
int ibPoll(ibCq* cq, char* err, int errLen);

/* What a peer needs to connect to a QP (exchanged through the bootstrap). */
typedef struct ibQpInfo {
  uint16_t lid;
  uint8_t port;
  uint8_t linkLayer;
  uint32_t qpn;
  uint8_t gid[16];
  uint32_t mtu; /* enum iba_mtu */
  uint32_t psn; /* 24 bits */
} ibQpInfo;

struct ibQp {
  ibCtx* ctx;
  ibCq* cq;
  struct iba_qp* qp;
  uint32_t maxSendWr;
  uint32_t maxInline;   /* max_inline_data the QP granted: signals go inline when >= 8 */
  uint32_t signalEvery; /* max_send_wr/2, at least 1 */
  uint32_t psn;
  char peer[64];        /* who is on the other side, for messages ("rank 3") */
  pthread_mutex_t lock; /* posting */
  uint64_t posted;      /* WRs posted (the last wr_id) */
  uint64_t completed;   /* atomic: every WR up to this wr_id completed */
  uint32_t unsignaled;  /* WRs since the last signaled one */
  int lastSignaled;     /* the last WR posted was signaled */
  uint64_t lastRaddr;   /* a valid remote target, for the zero-length flush write */
  uint32_t lastRkey;
  uint64_t* sigBuf; /* staging slots of signal values: slot n % maxSendWr for WR n */
  struct iba_mr* sigMr;
  int failed; /* atomic: 1 after an error completion (sticky; the QP is in ERR) */
  int abandon; /* atomic: the owner is closing: a wait for room or for completions gives up at once */
  char failMsg[IB_ERR_LEN]; /* why, naming the peer */
  char err[IB_ERR_LEN];     /* the last refused post or flush timeout (q->lock) */
};

/* An RC QP on cq with max_send_wr outstanding WRs; peer names the other side in messages. */
ibQp* ibQpCreate(ibCtx* c, ibCq* cq, uint32_t maxSendWr, const char* peer, char* err, int errLen);
int ibQpDestroy(ibQp* q, char* err, int errLen);
void ibQpLocalInfo(const ibQp* q, ibQpInfo* out);
/* RESET -> INIT, INIT -> RTR (towards remote), RTR -> RTS. */
int ibQpInit(ibQp* q, char* err, int errLen);
int ibQpRtr(ibQp* q, const ibQpInfo* remote, char* err, int errLen);
int ibQpRts(ibQp* q, char* err, int errLen);

/* Records the QP's first failure (later ones are flushes it caused); ibQpError returns it. */
void ibQpSetFailed(ibQp* q, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* The data path (ibpath.c). Each returns 0, or -1 with the QP's error text (ibQpError). */
/* RDMA-writes size bytes from mr+loff to raddr+roff (rkey); size may exceed 2 GiB (split into WRs). */
int ibWrite(ibQp* q, const struct iba_mr* mr, uint64_t loff, uint64_t raddr, uint32_t rkey, uint64_t roff,
            uint64_t size, int signaled);
/* RDMA-writes the 8-byte value to raddr (rkey) after every earlier WR of the QP; inline
 * (IBV_SEND_INLINE, the value copied at post time) when the QP's max_inline_data allows. */
int ibWriteSignal(ibQp* q, uint64_t value, uint64_t raddr, uint32_t rkey, int signaled);
/* Waits until every posted WR completed (polling the QP's CQ); timeoutMs <= 0: no limit. */
int ibFlush(ibQp* q, int timeoutMs);
/* Makes every wait for room or completions on q give up at once (on: 1) or wait again (0): a
 * communicator being destroyed never waits for a peer. */
void ibQpAbandon(ibQp* q, int on);
/* The QP's first error, or NULL. */
const char* ibQpError(ibQp* q);
/* 1 once an error completion failed the QP (it is then in ERR: every later call fails). */
int ibQpFailed(ibQp* q);
uint64_t ibQpPosted(ibQp* q);
uint64_t ibQpCompleted(ibQp* q);

#endif
