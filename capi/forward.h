/*
 * forward.h: what the Go exports need from forward.c. Fork detection and
 * the last-error text live below capi, in impl/status (errs.h).
 */
#ifndef MSCCLPP_CAPI_FORWARD_H_
#define MSCCLPP_CAPI_FORWARD_H_

#include "../include/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Calls a log handler (Go cannot call a C function pointer). */
void capiCallLogHandler(mscclppLogHandler_t h, const char* msg);
#ifdef __cplusplus
}
#endif

#endif
