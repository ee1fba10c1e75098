/*
 * tools.c: the tool stack (include/mscclpp_tools.h). Layers register by name
 * and per function; a call enters the outermost layer that intercepts it and
 * each layer finds the next one with mscclppToolGetNext, down to layer 0,
 * the library (capiLib<Name> in forward.c and regmem.cc, handed over by forward.c). MSCCLPP_TOOLS
 * names libraries to dlopen while the library loads; a tool that fails to
 * load is skipped with a WARN line on stderr.
 *
 * In C because it runs in the library's constructor, before the Go runtime
 * is guaranteed to be up, and because the dispatch in front of every entry
 * point must stay one load and one branch when no tool is loaded.
 *
 * Concurrency: registration takes a mutex; calls read without one. A
 * handler is stored before the capiToolFirst entries that lead to it, with
 * release/acquire, and layer numbers, once handed out, never change meaning,
 * so a call racing a registration sees either the old stack or the new one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../impl/status/errs.h" /* impl/status: the process's last error, the fork check */
#include "tools.h"

unsigned char capiToolFirst[MSCCLPP_TOOL_MAX_LAYERS + 2][mscclppToolNumFunctions];
capiToolFn capiToolHandler[MSCCLPP_TOOL_MAX_LAYERS + 1][mscclppToolNumFunctions];

/* Layer 0: the library's functions (forward.c hands them to capiToolsLoad). */
static const capiToolFn* libraryFn;
#define CAPI_TOOL_NAME_ENTRY(Name, Ret, Params, Args) [mscclppToolFn##Name] = "mscclpp" #Name,
static const char* const functionName[mscclppToolNumFunctions] = {
  MSCCLPP_TOOL_FUNCTIONS(CAPI_TOOL_NAME_ENTRY) MSCCLPP_TOOL_VOID_FUNCTIONS(CAPI_TOOL_NAME_ENTRY)};

struct layer
{
  char name[MSCCLPP_TOOL_MAX_NAME + 1];
  void* ctx;
  void (*fini)(void*);
};

static pthread_mutex_t regLock = PTHREAD_MUTEX_INITIALIZER;
static struct layer layers[MSCCLPP_TOOL_MAX_LAYERS + 1]; /* [0]: the library */
static int numLayers;                                    /* read with atomics outside regLock */
static int finiRegistered;
/* While capiToolsLoad dlopens a library: its first possible layer (layers below belong to
 * others, which it may not hook: a library that registers no layer is dlclosed, and an
 * interceptor or fini of it left on another layer would be unmapped code); 0 otherwise. */
static int loadingFloor;

/* Whether layer is one the library being loaded may change (always, outside a load). */
static int ownedByLoading(int layer)
{
  int floor = __atomic_load_n(&loadingFloor, __ATOMIC_ACQUIRE);
  return floor == 0 || layer >= floor;
}

/* ---- errors: return errFail(NULL, code, fmt, ...) (impl/status/errs.h) ---- */

/* A WARN line in the library's format (impl/logx), always on stderr: a tool
 * that was asked for and is missing must be seen, logging on or not. The
 * device is -1: none is chosen while the library loads. */
static void toolWarn(int line, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void toolWarn(int line, const char* fmt, ...)
{
  char msg[1024], host[256], out[1500];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  errSet(NULL, 0, msg);
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown");
  host[sizeof(host) - 1] = '\0';
  char* dot = strchr(host, '.');
  if (dot != NULL && dot != host) *dot = '\0';
  int n = snprintf(out, sizeof(out), "%s:%d:%ld [-1] tools.c:%d MSCCLPP WARN %s\n", host, (int)getpid(),
                   (long)syscall(SYS_gettid), line, msg);
  if (n > (int)sizeof(out) - 1) n = (int)sizeof(out) - 1;
  if (write(STDERR_FILENO, out, (size_t)n) < 0) { /* nowhere left to report it */
  }
}

static int validLayer(int layer) { return layer >= 1 && layer <= __atomic_load_n(&numLayers, __ATOMIC_ACQUIRE); }
static int validFn(mscclppToolFunction fn) { return (int)fn >= 0 && (int)fn < mscclppToolNumFunctions; }

/* ---- registration ---- */

mscclppResult_t mscclppToolRegisterName(const char* name, int* layer)
{
  if (name == NULL || layer == NULL)
    return errFail(NULL, mscclppInvalidArgument, "mscclppToolRegisterName: %s is NULL", name == NULL ? "name" : "layer");
  size_t len = strlen(name);
  if (len == 0 || len > MSCCLPP_TOOL_MAX_NAME)
    return errFail(NULL, mscclppInvalidArgument, "mscclppToolRegisterName: name \"%.80s\" must have 1 to %d characters",
                     name, MSCCLPP_TOOL_MAX_NAME);
  pthread_mutex_lock(&regLock);
  for (int l = 1; l <= numLayers; l++) {
    if (strcmp(layers[l].name, name) == 0) {
      pthread_mutex_unlock(&regLock);
      return errFail(NULL, mscclppInvalidUsage, "mscclppToolRegisterName: a layer named \"%s\" is registered already (layer %d)",
                       name, l);
    }
  }
  if (numLayers == MSCCLPP_TOOL_MAX_LAYERS) {
    pthread_mutex_unlock(&regLock);
    return errFail(NULL, mscclppInvalidUsage, "mscclppToolRegisterName: \"%s\": all %d layers are taken", name,
                     MSCCLPP_TOOL_MAX_LAYERS);
  }
  int l = numLayers + 1;
  memcpy(layers[l].name, name, len + 1);
  __atomic_store_n(&numLayers, l, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&regLock);
  *layer = l;
  return mscclppSuccess;
}

mscclppResult_t mscclppToolRegisterFunction(int layer, mscclppToolFunction fn, void (*interceptor)(void))
{
  if (!validLayer(layer))
    return errFail(NULL, mscclppInvalidArgument, "mscclppToolRegisterFunction: layer %d is not registered", layer);
  if (!validFn(fn)) return errFail(NULL, mscclppInvalidArgument, "mscclppToolRegisterFunction: unknown function %d", (int)fn);
  if (interceptor == NULL)
    return errFail(NULL, mscclppInvalidArgument, "mscclppToolRegisterFunction: interceptor for %s is NULL",
                     functionName[fn]);
  if (!ownedByLoading(layer))
    return errFail(NULL, mscclppInvalidUsage,
                     "mscclppToolRegisterFunction: layer %d (\"%s\") belongs to another tool; a library loaded by "
                     "MSCCLPP_TOOLS may hook only the layers it registers",
                     layer, layers[layer].name);
  pthread_mutex_lock(&regLock);
  __atomic_store_n(&capiToolHandler[layer][fn], interceptor, __ATOMIC_RELEASE);
  /* every k <= layer whose first interceptor lies below layer (or is the library) now starts at layer */
  for (int k = layer; k >= 1; k--) {
    int cur = capiToolFirst[k][fn];
    if (cur != 0 && cur <= layer) break; /* and so does every k' < k */
    __atomic_store_n(&capiToolFirst[k][fn], (unsigned char)layer, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&regLock);
  return mscclppSuccess;
}

mscclppResult_t mscclppToolGetNext(int layer, mscclppToolFunction fn, void (**next)(void), int* below)
{
  if (!validLayer(layer))
    return errFail(NULL, mscclppInvalidArgument, "mscclppToolGetNext: layer %d is not a registered tool layer", layer);
  if (!validFn(fn)) return errFail(NULL, mscclppInvalidArgument, "mscclppToolGetNext: unknown function %d", (int)fn);
  if (next == NULL || below == NULL)
    return errFail(NULL, mscclppInvalidArgument, "mscclppToolGetNext: %s is NULL", next == NULL ? "next" : "below");
  int b = __atomic_load_n(&capiToolFirst[layer + 1][fn], __ATOMIC_ACQUIRE);
  *next = b != 0 ? capiToolAt(b, fn) : libraryFn[fn];
  *below = b;
  return mscclppSuccess;
}

/* ---- contexts ---- */

static void runFini(void)
{
  if (errForkedChild) return; /* the parent runs them */
  for (int l = __atomic_load_n(&numLayers, __ATOMIC_ACQUIRE); l >= 1; l--) {
    pthread_mutex_lock(&regLock);
    void (*fini)(void*) = layers[l].fini;
    void* ctx = layers[l].ctx;
    layers[l].fini = NULL; /* once */
    pthread_mutex_unlock(&regLock);
    if (fini != NULL) fini(ctx);
  }
}

mscclppResult_t mscclppToolSetContext(int layer, void* ctx, void (*fini)(void* ctx))
{
  if (!validLayer(layer))
    return errFail(NULL, mscclppInvalidArgument, "mscclppToolSetContext: layer %d is not registered", layer);
  if (!ownedByLoading(layer))
    return errFail(NULL, mscclppInvalidUsage,
                     "mscclppToolSetContext: layer %d (\"%s\") belongs to another tool; a library loaded by "
                     "MSCCLPP_TOOLS may set the context only of the layers it registers",
                     layer, layers[layer].name);
  pthread_mutex_lock(&regLock);
  layers[layer].ctx = ctx;
  layers[layer].fini = fini;
  int need = fini != NULL && !finiRegistered;
  if (need) finiRegistered = 1;
  pthread_mutex_unlock(&regLock);
  /* atexit from a shared library runs at exit, before any library's destructor */
  if (need && atexit(runFini) != 0) {
    pthread_mutex_lock(&regLock);
    finiRegistered = 0;
    pthread_mutex_unlock(&regLock);
    return errFail(NULL, mscclppSystemError, "mscclppToolSetContext: atexit failed: no room for the fini callback");
  }
  return mscclppSuccess;
}

mscclppResult_t mscclppToolGetContext(int layer, void** ctx)
{
  if (!validLayer(layer))
    return errFail(NULL, mscclppInvalidArgument, "mscclppToolGetContext: layer %d is not registered", layer);
  if (ctx == NULL) return errFail(NULL, mscclppInvalidArgument, "mscclppToolGetContext: ctx is NULL");
  pthread_mutex_lock(&regLock);
  *ctx = layers[layer].ctx;
  pthread_mutex_unlock(&regLock);
  return mscclppSuccess;
}

/* ---- names ---- */

const char* mscclppToolFunctionName(mscclppToolFunction fn) { return validFn(fn) ? functionName[fn] : NULL; }

const char* mscclppToolLayerName(int layer)
{
  if (layer == MSCCLPP_TOOL_LAYER_LIBRARY) return "libmscclpp";
  return validLayer(layer) ? layers[layer].name : NULL; /* names never change once registered */
}

int mscclppToolNumLayers(void) { return __atomic_load_n(&numLayers, __ATOMIC_ACQUIRE); }

/* ---- MSCCLPP_TOOLS ---- */

void capiToolsLoad(const capiToolFn* library)
{
  libraryFn = library;
  const char* env = getenv("MSCCLPP_TOOLS");
  if (env == NULL || *env == '\0') return;
  char* list = strdup(env);
  if (list == NULL) {
    toolWarn(__LINE__, "MSCCLPP_TOOLS: out of memory; no tool loaded");
    return;
  }
  char* save = NULL;
  for (char* path = strtok_r(list, ":", &save); path != NULL; path = strtok_r(NULL, ":", &save)) {
    int before = mscclppToolNumLayers();
    /* already in the process (listed twice, or loaded by the program): its
     * constructor ran then and will not run again */
    void* pre = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    __atomic_store_n(&loadingFloor, before + 1, __ATOMIC_RELEASE);
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    __atomic_store_n(&loadingFloor, 0, __ATOMIC_RELEASE);
    if (h == NULL) {
      const char* why = dlerror();
      toolWarn(__LINE__, "MSCCLPP_TOOLS: cannot load %s: %s; skipped", path, why != NULL ? why : "unknown error");
      continue;
    }
    if (mscclppToolNumLayers() == before && pre != NULL) {
      toolWarn(__LINE__,
               "MSCCLPP_TOOLS: %s was already loaded (listed twice, or loaded by the program); "
               "its layers, if any, are registered once; skipped",
               path);
      dlclose(h);
    } else if (mscclppToolNumLayers() == before) {
      toolWarn(__LINE__,
               "MSCCLPP_TOOLS: %s loaded but registered no layer (its constructor must call "
               "mscclppToolRegisterName); skipped",
               path);
      dlclose(h);
    }
    if (pre != NULL) dlclose(pre);
    /* a loaded tool stays loaded: its interceptors are called until the process ends */
  }
  free(list);
}
