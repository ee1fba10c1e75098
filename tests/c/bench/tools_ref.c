/*
 * tools_ref.c: the reference of the tool-dispatch benchmark, built as its
 * own shared library: refErrorString is mscclppGetErrorString without tools
 * (the same table lookup), so a call to it from tools_bench crosses a
 * library boundary (PLT) exactly as a call into libmscclpp does. In C, like
 * the function it stands for.
 */
const char* refErrorString(int code)
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
