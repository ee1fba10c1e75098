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

/* The types: set-up objects and attributes (ibvsetup.h), completions, work requests and the
 * hot-path inlines (ibvpath.h). This file adds the table of exported functions. */
#include "ibvpath.h"

#ifdef __cplusplus
extern "C" {
#endif

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
