/*
 * errs.c: the one home of error text (see errs.h): the result-code table,
 * the process's last error, the per-communicator records and the fork check.
 */
#include "errs.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "../../include/mscclpp.h"

static pthread_mutex_t globalLock = PTHREAD_MUTEX_INITIALIZER;
static char globalMsg[1024];

volatile int errForkedChild;
static int loadPid;

static void onForkChild(void)
{
  errForkedChild = 1;
  /* the lock may have been held by another thread at fork time */
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  globalLock = fresh;
}

__attribute__((constructor)) static void errsLoad(void)
{
  loadPid = (int)getpid();
  pthread_atfork(NULL, NULL, onForkChild);
}

_Static_assert(ERR_STRINGS == mscclppNumResults + 1, "one string per result code, then the unknown one");

/* MSCCL++ 0.1's strings, by result code */
const char* const errStrings[ERR_STRINGS] = {
    [mscclppSuccess] = "no error",
    [mscclppUnhandledCudaError] = "unhandled cuda error",
    [mscclppSystemError] = "unhandled system error",
    [mscclppInternalError] = "internal error",
    [mscclppInvalidArgument] = "invalid argument",
    [mscclppInvalidUsage] = "invalid usage",
    [mscclppRemoteError] = "remote process exited or there was a network error",
    [mscclppInProgress] = "MSCCL++ operation in progress",
    [ERR_STRINGS - 1] = "unknown result code",
};

void errRecordInit(errRecord* r)
{
  pthread_mutex_init(&r->lock, NULL);
  r->asyncErr = 0;
  r->asyncMsg[0] = r->lastMsg[0] = '\0';
}

void errRecordDestroy(errRecord* r) { pthread_mutex_destroy(&r->lock); }

static void setGlobal(const char* msg)
{
  pthread_mutex_lock(&globalLock);
  snprintf(globalMsg, sizeof(globalMsg), "%s", msg);
  pthread_mutex_unlock(&globalLock);
}

/* Records msg: always as r's last error and the process's, except that unlessFailed records
 * nothing once r has an asynchronous error (looked at under r's lock); async also makes it r's
 * first asynchronous error unless one is recorded already. */
static int record(errRecord* r, int code, const char* msg, int async, int unlessFailed)
{
  if (r != NULL) {
    pthread_mutex_lock(&r->lock);
    int skip = unlessFailed && r->asyncErr != 0;
    if (async && r->asyncErr == 0) {
      snprintf(r->asyncMsg, sizeof(r->asyncMsg), "%s", msg);
      __atomic_store_n(&r->asyncErr, code, __ATOMIC_RELEASE);
    }
    if (!skip) snprintf(r->lastMsg, sizeof(r->lastMsg), "%s", msg);
    pthread_mutex_unlock(&r->lock);
    if (skip) return code;
  }
  setGlobal(msg);
  return code;
}

int errSet(errRecord* r, int code, const char* msg) { return record(r, code, msg, 0, 0); }

int errSetAsync(errRecord* r, int code, const char* msg) { return record(r, code, msg, 1, 0); }

int errSetUnlessFailed(errRecord* r, int code, const char* msg) { return record(r, code, msg, 0, 1); }

/* record with the message formatted from fmt and ap */
static int vrecord(errRecord* r, int code, int async, const char* fmt, va_list ap)
{
  char msg[1024];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  return record(r, code, msg, async, 0);
}

int errFail(errRecord* r, int code, const char* fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int rc = vrecord(r, code, 0, fmt, ap);
  va_end(ap);
  return rc;
}

int errFailAsync(errRecord* r, int code, const char* fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int rc = vrecord(r, code, 1, fmt, ap);
  va_end(ap);
  return rc;
}

int errAsync(errRecord* r, char* buf, int len)
{
  pthread_mutex_lock(&r->lock);
  int code = r->asyncErr;
  if (buf != NULL && len > 0) snprintf(buf, (size_t)len, "%s", r->asyncMsg);
  pthread_mutex_unlock(&r->lock);
  return code;
}

const char* errLast(errRecord* r) { return r != NULL ? r->lastMsg : globalMsg; }

int errForkedRecord(const char* fn)
{
  char msg[512];
  snprintf(msg, sizeof(msg),
           "%s called in pid %d, a child forked from pid %d after libmscclpp was loaded; the Go runtime behind "
           "the library does not survive fork(): use mscclpp only in the parent, or exec a new program",
           fn, (int)getpid(), loadPid);
  setGlobal(msg);
  return 1;
}
