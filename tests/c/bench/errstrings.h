/*
 * errstrings.h: MSCCL++ 0.1's result strings as one table lookup, what
 * mscclppGetErrorString does without tools: the body of the tool-dispatch
 * bench's two references (a plain call in tools_bench.c, a call into
 * another shared library in tools_ref.c).
 */
#ifndef MSCCLPP_BENCH_ERRSTRINGS_H_
#define MSCCLPP_BENCH_ERRSTRINGS_H_

static inline const char* benchErrString(int code)
{
  static const char* const strings[9] = {
      "no error",
      "unhandled cuda error",
      "unhandled system error",
      "internal error",
      "invalid argument",
      "invalid usage",
      "remote process exited or there was a network error",
      "MSCCL++ operation in progress",
      "unknown result code",
  };
  return strings[(unsigned)code < 8u ? (unsigned)code : 8u];
}

#endif
