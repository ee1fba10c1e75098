/*
 * counter.c: an example tool. Counts the calls of every API function that
 * passes through its layer and, when the process exits, prints one line per
 * function called, "mscclpp-counter: <function> <count>", then
 * "mscclpp-counter: total <count>", to stderr (or to the file named by
 * MSCCLPP_COUNTER_FILE).
 *
 *   cc -shared -fPIC counter.c -o libmscclpp_counter.so $(pkg-config --cflags --libs mscclpp)
 *   MSCCLPP_TOOLS=./libmscclpp_counter.so ./app
 *
 * In C because a tool is a shared library the library dlopens; every
 * interceptor is generated from MSCCLPP_TOOL_FUNCTIONS and only counts,
 * then calls the next layer.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mscclpp_tools.h"

static unsigned long counts[mscclppToolNumFunctions];

/* The next layer's handler of fn; a failure here is a bug in the stack. */
static void (*nextOf(int layer, mscclppToolFunction fn, int* below))(void)
{
  void (*next)(void) = NULL;
  if (mscclppToolGetNext(layer, fn, &next, below) != mscclppSuccess) {
    fprintf(stderr, "mscclpp-counter: mscclppToolGetNext(%d, %d) failed\n", layer, (int)fn);
    abort();
  }
  return next;
}

#define COUNT(Name, Ret, Params, Args)                                                      \
  static Ret count##Name(int layer, MSCCLPP_TOOL_UNPAREN Params)                            \
  {                                                                                         \
    __atomic_fetch_add(&counts[mscclppToolFn##Name], 1, __ATOMIC_RELAXED);                  \
    int below;                                                                              \
    void (*next)(void) = nextOf(layer, mscclppToolFn##Name, &below);                        \
    return ((mscclppTool##Name##_t)next)(below, MSCCLPP_TOOL_UNPAREN Args);                 \
  }
#define COUNT_VOID(Name, Ret, Params, Args)                                                 \
  static Ret count##Name(int layer, MSCCLPP_TOOL_UNPAREN Params)                            \
  {                                                                                         \
    __atomic_fetch_add(&counts[mscclppToolFn##Name], 1, __ATOMIC_RELAXED);                  \
    int below;                                                                              \
    void (*next)(void) = nextOf(layer, mscclppToolFn##Name, &below);                        \
    ((mscclppTool##Name##_t)next)(below, MSCCLPP_TOOL_UNPAREN Args);                        \
  }
MSCCLPP_TOOL_FUNCTIONS(COUNT)
MSCCLPP_TOOL_VOID_FUNCTIONS(COUNT_VOID)

static void report(void* ctx)
{
  unsigned long* c = (unsigned long*)ctx;
  const char* path = getenv("MSCCLPP_COUNTER_FILE");
  FILE* out = path != NULL && *path != '\0' ? fopen(path, "a") : NULL;
  FILE* w = out != NULL ? out : stderr;
  unsigned long total = 0;
  for (int fn = 0; fn < mscclppToolNumFunctions; fn++) {
    unsigned long n = __atomic_load_n(&c[fn], __ATOMIC_RELAXED);
    if (n == 0) continue;
    fprintf(w, "mscclpp-counter: %s %lu\n", mscclppToolFunctionName((mscclppToolFunction)fn), n);
    total += n;
  }
  fprintf(w, "mscclpp-counter: total %lu\n", total);
  if (out != NULL) fclose(out);
  else fflush(stderr);
}

__attribute__((constructor)) static void counterInit(void)
{
  int layer;
  if (mscclppToolRegisterName("counter", &layer) != mscclppSuccess) {
    fprintf(stderr, "mscclpp-counter: not registered: %s\n", mscclppGetLastError(NULL));
    return;
  }
  /* the assignment checks each interceptor against the header's type */
#define REGISTER(Name, Ret, Params, Args)                                                   \
  {                                                                                         \
    mscclppTool##Name##_t f = count##Name;                                                  \
    mscclppToolRegisterFunction(layer, mscclppToolFn##Name, (void (*)(void))f);             \
  }
  MSCCLPP_TOOL_FUNCTIONS(REGISTER)
  MSCCLPP_TOOL_VOID_FUNCTIONS(REGISTER)
  mscclppToolSetContext(layer, counts, report);
}
