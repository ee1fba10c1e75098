/*
 * testtool.c: the tool the conformance cases stack, built once per tag
 * (-DTOOL_TAG='"A"' into testtool_a.so, "B" into testtool_b.so) so that two
 * copies can be loaded at once. TESTTOOL_<TAG> picks what it does:
 *
 *   log    (default) pass mscclppGetVersion, mscclppCommRank and
 *          mscclppGetErrorString through, printing to stderr
 *          "testtool <TAG> enter <function> layer=<n> below=<m>" before the
 *          next layer and "testtool <TAG> exit <function>" after it
 *   short  mscclppCommRank returns mscclppSuccess and rank 42 without
 *          calling the next layer
 *   twice  mscclppGetVersion calls the next layer twice
 *   change mscclppGetErrorString passes mscclppInvalidArgument down instead
 *          of mscclppSuccess; mscclppGetVersion adds 1000 to the version;
 *          mscclppCommSize answers mscclppInProgress for any error below
 *   hijack registers no layer of its own but tries to hook mscclppGetVersion
 *          and set the context of layer 1 (another tool's), printing
 *          "testtool <TAG> hijack <call>: <result>: <last error>"; loaded by
 *          MSCCLPP_TOOLS it must be refused (it is then unloaded: an
 *          interceptor left behind would be unmapped code)
 *
 * At exit (its fini) it prints "testtool <TAG> fini calls=<n> ctx=<ok|BAD>":
 * the calls it intercepted, and whether mscclppToolGetContext gave back, in
 * every call, the context it set. In C because a tool is a shared library.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mscclpp_tools.h"

#ifndef TOOL_TAG
#define TOOL_TAG "A"
#endif

struct state
{
  char mode[16];
  unsigned long calls;
  int ctxBad;
};
static struct state st;

/* Our context, as the library gives it back; counts the call. */
static struct state* self(int layer)
{
  void* ctx = NULL;
  if (mscclppToolGetContext(layer, &ctx) != mscclppSuccess || ctx != &st) __atomic_store_n(&st.ctxBad, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&st.calls, 1, __ATOMIC_RELAXED);
  return &st;
}

static void (*nextOf(int layer, mscclppToolFunction fn, int* below))(void)
{
  void (*next)(void) = NULL;
  if (mscclppToolGetNext(layer, fn, &next, below) != mscclppSuccess) {
    fprintf(stderr, "testtool " TOOL_TAG ": mscclppToolGetNext(%d, %d) failed\n", layer, (int)fn);
    abort();
  }
  return next;
}

static int is(const struct state* s, const char* mode) { return strcmp(s->mode, mode) == 0; }

static mscclppResult_t ttGetVersion(int layer, int* version)
{
  struct state* s = self(layer);
  int below;
  mscclppToolGetVersion_t next = (mscclppToolGetVersion_t)nextOf(layer, mscclppToolFnGetVersion, &below);
  if (is(s, "log")) fprintf(stderr, "testtool " TOOL_TAG " enter mscclppGetVersion layer=%d below=%d\n", layer, below);
  mscclppResult_t r = next(below, version);
  if (is(s, "twice")) {
    fprintf(stderr, "testtool " TOOL_TAG " calls mscclppGetVersion again\n");
    r = next(below, version);
  }
  if (is(s, "change") && r == mscclppSuccess && version != NULL) *version += 1000;
  if (is(s, "log")) fprintf(stderr, "testtool " TOOL_TAG " exit mscclppGetVersion\n");
  return r;
}

static mscclppResult_t ttCommRank(int layer, mscclppComm_t comm, int* rank)
{
  struct state* s = self(layer);
  if (is(s, "short")) {
    fprintf(stderr, "testtool " TOOL_TAG " short-circuits mscclppCommRank\n");
    if (rank != NULL) *rank = 42;
    return mscclppSuccess;
  }
  int below;
  mscclppToolCommRank_t next = (mscclppToolCommRank_t)nextOf(layer, mscclppToolFnCommRank, &below);
  if (is(s, "log")) fprintf(stderr, "testtool " TOOL_TAG " enter mscclppCommRank layer=%d below=%d\n", layer, below);
  mscclppResult_t r = next(below, comm, rank);
  if (is(s, "log")) fprintf(stderr, "testtool " TOOL_TAG " exit mscclppCommRank\n");
  return r;
}

static mscclppResult_t ttCommSize(int layer, mscclppComm_t comm, int* size)
{
  struct state* s = self(layer);
  int below;
  mscclppToolCommSize_t next = (mscclppToolCommSize_t)nextOf(layer, mscclppToolFnCommSize, &below);
  mscclppResult_t r = next(below, comm, size);
  if (is(s, "change") && r != mscclppSuccess) r = mscclppInProgress;
  return r;
}

static const char* ttGetErrorString(int layer, mscclppResult_t result)
{
  struct state* s = self(layer);
  int below;
  mscclppToolGetErrorString_t next = (mscclppToolGetErrorString_t)nextOf(layer, mscclppToolFnGetErrorString, &below);
  if (is(s, "change") && result == mscclppSuccess) result = mscclppInvalidArgument;
  if (is(s, "log"))
    fprintf(stderr, "testtool " TOOL_TAG " enter mscclppGetErrorString layer=%d below=%d\n", layer, below);
  const char* str = next(below, result);
  if (is(s, "log")) fprintf(stderr, "testtool " TOOL_TAG " exit mscclppGetErrorString\n");
  return str;
}

static void fini(void* ctx)
{
  struct state* s = (struct state*)ctx;
  fprintf(stderr, "testtool " TOOL_TAG " fini calls=%lu ctx=%s\n", s->calls, s == &st && !s->ctxBad ? "ok" : "BAD");
}

static void hijack(void)
{
  mscclppToolGetVersion_t v = ttGetVersion;
  mscclppResult_t r = mscclppToolRegisterFunction(1, mscclppToolFnGetVersion, (void (*)(void))v);
  fprintf(stderr, "testtool " TOOL_TAG " hijack mscclppToolRegisterFunction: %s: %s\n", mscclppGetErrorString(r),
          mscclppGetLastError(NULL));
  r = mscclppToolSetContext(1, &st, fini);
  fprintf(stderr, "testtool " TOOL_TAG " hijack mscclppToolSetContext: %s: %s\n", mscclppGetErrorString(r),
          mscclppGetLastError(NULL));
}

__attribute__((constructor)) static void testtoolInit(void)
{
  const char* mode = getenv("TESTTOOL_" TOOL_TAG);
  snprintf(st.mode, sizeof(st.mode), "%s", mode != NULL && *mode != '\0' ? mode : "log");
  if (is(&st, "hijack")) {
    hijack();
    return;
  }
  int layer;
  if (mscclppToolRegisterName("testtool " TOOL_TAG, &layer) != mscclppSuccess) {
    fprintf(stderr, "testtool " TOOL_TAG ": not registered: %s\n", mscclppGetLastError(NULL));
    return;
  }
  mscclppToolGetVersion_t v = ttGetVersion;
  mscclppToolCommRank_t r = ttCommRank;
  mscclppToolCommSize_t z = ttCommSize;
  mscclppToolGetErrorString_t e = ttGetErrorString;
  if (mscclppToolRegisterFunction(layer, mscclppToolFnGetVersion, (void (*)(void))v) != mscclppSuccess ||
      mscclppToolRegisterFunction(layer, mscclppToolFnCommRank, (void (*)(void))r) != mscclppSuccess ||
      mscclppToolRegisterFunction(layer, mscclppToolFnCommSize, (void (*)(void))z) != mscclppSuccess ||
      mscclppToolRegisterFunction(layer, mscclppToolFnGetErrorString, (void (*)(void))e) != mscclppSuccess ||
      mscclppToolSetContext(layer, &st, fini) != mscclppSuccess)
    fprintf(stderr, "testtool " TOOL_TAG ": registration failed: %s\n", mscclppGetLastError(NULL));
  else
    fprintf(stderr, "testtool " TOOL_TAG " registered as layer %d, mode %s\n", layer, st.mode);
}
