/*
 * tools_ref.c: the reference of the tool-dispatch benchmark, built as its
 * own shared library: refErrorString is mscclppGetErrorString without tools
 * (the same table lookup), so a call to it from tools_bench crosses a
 * library boundary (PLT) exactly as a call into libmscclpp does. In C, like
 * the function it stands for.
 */
#include "errstrings.h"

const char* refErrorString(int code)
{
  return benchErrString(code);
}
