/*
 * tools.h: what the public entry points (forward.c, regmem.cc) need from the
 * tool stack of tools.c: the outermost layer intercepting a function (0 when
 * none: the one predictable branch on the path without tools), a layer's
 * handler, and the library's own layer-0 functions, capiLib<Name>, which
 * forward.c and regmem.cc define. In C because the dispatch sits in front of
 * the Go exports and must cost one load and one branch when no tool is loaded.
 */
#ifndef MSCCLPP_CAPI_TOOLS_H_
#define MSCCLPP_CAPI_TOOLS_H_

#include "../include/mscclpp_tools.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*capiToolFn)(void);

/* capiToolFirst[k][fn]: the first layer >= k (k >= 1) with a handler for fn,
 * else 0 (the library). Row MSCCLPP_TOOL_MAX_LAYERS + 1 stays 0. Entries only
 * ever go from 0 to a layer or from a layer to a smaller one. */
extern unsigned char capiToolFirst[MSCCLPP_TOOL_MAX_LAYERS + 2][mscclppToolNumFunctions];
/* capiToolHandler[layer][fn], layer >= 1: set before capiToolFirst points at it. */
extern capiToolFn capiToolHandler[MSCCLPP_TOOL_MAX_LAYERS + 1][mscclppToolNumFunctions];

/* The outermost layer intercepting fn; 0 when no tool does. */
static inline int capiToolTop(mscclppToolFunction fn)
{
  return __atomic_load_n(&capiToolFirst[1][fn], __ATOMIC_ACQUIRE);
}

/* The handler of fn in layer (>= 1), once capiToolFirst said layer has one. */
static inline capiToolFn capiToolAt(int layer, mscclppToolFunction fn)
{
  return __atomic_load_n(&capiToolHandler[layer][fn], __ATOMIC_RELAXED);
}

/* Takes the library's layer (library[fn]: capiLib<Name>) and loads the libraries named
 * in MSCCLPP_TOOLS (from the library's constructor in forward.c). */
void capiToolsLoad(const capiToolFn* library);

/* The library's layer: capiLib<Name>(layer, args...) for every function. */
#define CAPI_TOOL_DECLARE_LIB(Name, Ret, Params, Args) Ret capiLib##Name(int layer, MSCCLPP_TOOL_UNPAREN Params);
MSCCLPP_TOOL_FUNCTIONS(CAPI_TOOL_DECLARE_LIB)
MSCCLPP_TOOL_VOID_FUNCTIONS(CAPI_TOOL_DECLARE_LIB)
#undef CAPI_TOOL_DECLARE_LIB

#ifdef __cplusplus
}
#endif

#endif
