/*
 * regmem.cc: the two C++-only entry points, mscclppRegisterBuffer and
 * mscclppRegisteredBufferWrite, whose arguments hold a std::vector that Go
 * cannot touch. They convert the vector to a plain array and forward to Go.
 * Like forward.c, each checks for a forked child first, then for a tool
 * intercepting it (tools.h); capiLib<Name> is the library's own layer.
 */
#include <vector>

#include "_cgo_export.h" /* the Go exports go_<name>, as cgo declares them */
#include "../impl/status/errs.h"         /* impl/status: the fork check */
#include "../include/mscclpp.h"
#include "tools.h"

extern "C" {

mscclppResult_t capiLibRegisterBuffer(int, mscclppComm_t comm, void* local_memory, size_t size,
                                      mscclppRegisteredMemory* regMem)
{
  std::vector<mscclppRegisteredMemoryP2P> tmp(1024);
  int n = 0;
  mscclppResult_t r =
    go_mscclppRegisterBuffer(comm, local_memory, size, regMem != nullptr, tmp.data(), (int)tmp.size(), &n);
  if (r == mscclppSuccess) regMem->p2p.insert(regMem->p2p.end(), tmp.begin(), tmp.begin() + n);
  return r;
}

mscclppResult_t mscclppRegisterBuffer(mscclppComm_t comm, void* local_memory, size_t size,
                                      mscclppRegisteredMemory* regMem)
{
  if (errForked("mscclppRegisterBuffer")) return mscclppInvalidUsage;
  int top = capiToolTop(mscclppToolFnRegisterBuffer);
  if (__builtin_expect(top != 0, 0))
    return ((mscclppToolRegisterBuffer_t)capiToolAt(top, mscclppToolFnRegisterBuffer))(top, comm, local_memory, size,
                                                                                       regMem);
  return capiLibRegisterBuffer(0, comm, local_memory, size, regMem);
}

mscclppResult_t capiLibRegisteredBufferWrite(int, mscclppComm_t comm, mscclppRegisteredMemory* regMem, void* srcBuff,
                                             size_t size, uint32_t srcOffset, uint32_t dstOffset, int64_t stream)
{
  void* entries = regMem ? (void*)regMem->p2p.data() : nullptr;
  int n = regMem ? (int)regMem->p2p.size() : 0;
  return go_mscclppRegisteredBufferWrite(comm, entries, n, srcBuff, size, srcOffset, dstOffset, stream);
}

mscclppResult_t mscclppRegisteredBufferWrite(mscclppComm_t comm, mscclppRegisteredMemory* regMem, void* srcBuff,
                                             size_t size, uint32_t srcOffset, uint32_t dstOffset, int64_t stream)
{
  if (errForked("mscclppRegisteredBufferWrite")) return mscclppInvalidUsage;
  int top = capiToolTop(mscclppToolFnRegisteredBufferWrite);
  if (__builtin_expect(top != 0, 0))
    return ((mscclppToolRegisteredBufferWrite_t)capiToolAt(top, mscclppToolFnRegisteredBufferWrite))(
      top, comm, regMem, srcBuff, size, srcOffset, dstOffset, stream);
  return capiLibRegisteredBufferWrite(0, comm, regMem, srcBuff, size, srcOffset, dstOffset, stream);
}
}
