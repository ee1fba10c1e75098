/*
 * tools_ref.c: the reference of the tool-dispatch benchmark, built as its
 * own shared library: refErrorString is mscclppGetErrorString as it was
 * before tools (the same switch), so a call to it from tools_bench crosses a
 * library boundary (PLT) exactly as a call into libmscclpp does. In C, like
 * the function it stands for.
 */
const char* refErrorString(int code)
{
  switch (code) {
  case 0: return "no error";
  case 1: return "unhandled cuda error";
  case 2: return "unhandled system error";
  case 3: return "internal error";
  case 4: return "invalid argument";
  case 5: return "invalid usage";
  case 6: return "remote process exited or there was a network error";
  case 7: return "MSCCL++ operation in progress";
  default: return "unknown result code";
  }
}
