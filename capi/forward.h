/*
 * forward.h: the C side of capi: fork detection and the process-wide
 * last-error text, shared by forward.c, regmem.cc and the Go exports.
 */
#ifndef MSCCLPP_CAPI_FORWARD_H_
#define MSCCLPP_CAPI_FORWARD_H_

#include "mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif
/* 1 (and the last error set) when called in a child forked after the library loaded. */
int capiForked(const char* fn);
/* 1 in a child forked after the library loaded (sets nothing). */
int capiForkedChild(void);
/* Sets the process-wide last-error text. */
void capiSetGlobalError(const char* msg);
/* Calls a log handler (Go cannot call a C function pointer). */
void capiCallLogHandler(mscclppLogHandler_t h, const char* msg);
#ifdef __cplusplus
}
#endif

#endif
