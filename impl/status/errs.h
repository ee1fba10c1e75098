/*
 * errs.h: the one home of error text, below everything else in the library:
 * the result-code strings (mscclppGetErrorString), the process's last error
 * (mscclppGetLastError(NULL)), each communicator's last and first
 * asynchronous error (an errRecord inside its engComm), and the fork check
 * every entry point makes first. capi, the tools layer, the engine, the
 * transports and Go (package status) all call down into it; it calls nothing
 * of theirs. In C because the data path and the library's constructor use it
 * where Go cannot run (a forked child, before the runtime is up).
 *
 * The one C idiom: `return errFail(rec, code, fmt, ...)` (rec NULL: the
 * process's text only), or, in the engine and the transports, `return
 * engFail(comm, code, fmt, ...)` (engine.h), which records the communicator's
 * first asynchronous error too.
 */
#ifndef MSCCLPP_STATUS_ERRS_H_
#define MSCCLPP_STATUS_ERRS_H_

#include <pthread.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What one communicator knows of its errors. */
typedef struct errRecord {
  pthread_mutex_t lock;
  volatile int asyncErr; /* the first asynchronous error (mscclppResult_t), 0 when none */
  char asyncMsg[512];    /* its message */
  char lastMsg[1024];    /* the latest error of any call on the communicator (mscclppGetLastError) */
} errRecord;

void errRecordInit(errRecord* r);
void errRecordDestroy(errRecord* r);

/* Records msg as r's last error (r may be NULL) and as the process's; returns code. */
int errSet(errRecord* r, int code, const char* msg);
/* errSet, and r's first asynchronous error unless one is recorded already. */
int errSetAsync(errRecord* r, int code, const char* msg);
/* errSet unless r has recorded an asynchronous error (then nothing is recorded): for news that
 * is no failure itself (a peer's goodbye) and must not replace the text a failure left. */
int errSetUnlessFailed(errRecord* r, int code, const char* msg);
/* errSet / errSetAsync with a formatted message. */
int errFail(errRecord* r, int code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
int errFailAsync(errRecord* r, int code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

/* r's first asynchronous error, or 0; copies its message into buf (len > 0). */
int errAsync(errRecord* r, char* buf, int len);
/* r's first asynchronous error code, without the lock (hot paths). */
static inline int errAsyncCode(errRecord* r) { return __atomic_load_n(&r->asyncErr, __ATOMIC_ACQUIRE); }
/* The text of r's last error (r NULL: the process's); only ever overwritten in place. */
const char* errLast(errRecord* r);

/* The text of a result code: the one table behind mscclppGetErrorString and Go's
 * status.Code.String. Inline, a load and no branch through a jump table, since
 * mscclppGetErrorString is the call a tool-less dispatch is measured by. */
#define ERR_STRINGS 9 /* mscclppNumResults + 1: the last is any other value's */
extern const char* const errStrings[ERR_STRINGS];
static inline const char* errString(int code)
{
  return errStrings[(unsigned)code < ERR_STRINGS - 1 ? (unsigned)code : ERR_STRINGS - 1];
}

/* Set in a child forked after the library was loaded (one load to test). */
extern volatile int errForkedChild;
/* Records the process's last error: fn was called in a forked child. Returns 1. */
int errForkedRecord(const char* fn);
/* The fork check every entry point makes first, capi's and the engine's data path alike: 1,
 * with the process's last error naming fn, in a child forked after the library was loaded (its
 * Go runtime and proxies are gone: a call may hang or write into the parent's peers); else 0,
 * after one load. */
static inline __attribute__((always_inline)) int errForked(const char* fn)
{
  return __builtin_expect(errForkedChild, 0) ? errForkedRecord(fn) : 0;
}

#ifdef __cplusplus
}
#endif

#endif
