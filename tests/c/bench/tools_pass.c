/*
 * tools_pass.c: a pass-through tool for the tool-dispatch benchmark, built
 * twice (-DPASS_NAME='"pass1"' and '"pass2"') so that one or two can be
 * stacked with MSCCLPP_TOOLS. It intercepts mscclppGetErrorString and
 * mscclppGetVersion and only calls the next layer: what it costs is the
 * price of a layer. In C because a tool is a shared library.
 */
#include "mscclpp_tools.h"

#ifndef PASS_NAME
#define PASS_NAME "pass"
#endif

static const char* passGetErrorString(int layer, mscclppResult_t result)
{
  void (*next)(void);
  int below;
  mscclppToolGetNext(layer, mscclppToolFnGetErrorString, &next, &below); /* cannot fail for our own layer */
  return ((mscclppToolGetErrorString_t)next)(below, result);
}

static mscclppResult_t passGetVersion(int layer, int* version)
{
  void (*next)(void);
  int below;
  mscclppToolGetNext(layer, mscclppToolFnGetVersion, &next, &below);
  return ((mscclppToolGetVersion_t)next)(below, version);
}

__attribute__((constructor)) static void passInit(void)
{
  int layer;
  if (mscclppToolRegisterName(PASS_NAME, &layer) != mscclppSuccess) return;
  mscclppToolRegisterFunction(layer, mscclppToolFnGetErrorString, (void (*)(void))passGetErrorString);
  mscclppToolRegisterFunction(layer, mscclppToolFnGetVersion, (void (*)(void))passGetVersion);
}
