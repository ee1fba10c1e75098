// cuda_devconn.cu: nvcc compile check of the header's device side. A kernel
// calls every device method of mscclppDevConn and mscclppConcurrentFifo; a
// host function calls the same methods (host mode) in the same translation
// unit. Only compiled (nvcc -c), never run: see check-cuda.sh.
#include "mscclpp.h"

static_assert(sizeof(mscclppDevConn) == 80, "mscclppDevConn is 80 bytes under nvcc");
static_assert(alignof(mscclppDevConn) == 8, "mscclppDevConn is 8-aligned under nvcc");
static_assert(sizeof(mscclppTrigger) == 16 && alignof(mscclppTrigger) == 16, "trigger under nvcc");
static_assert(sizeof(mscclppConcurrentFifo) == 32, "fifo under nvcc");
static_assert(sizeof(mscclppDevConnSignalEpochId) == 16, "epochs under nvcc");

__global__ void everyDeviceMethod(mscclppDevConn* conns, int nConns, uint64_t* out)
{
  mscclppDevConn& c = conns[threadIdx.x % nConns];
  c.put(64, 0, 32);                   // put(dst, src, size)
  c.put(128, 16);                     // put(off, size)
  c.signal();                         // epochIncrement + Flag
  c.putWithSignal(256, 0, 32);        // putWithSignal(dst, src, size)
  c.putWithSignal(512, 8);            // putWithSignal(off, size)
  c.putWithSignalAndFlush(0, 0, 1);   // putWithSignalAndFlush(dst, src, size)
  c.putWithSignalAndFlush(1024, 4);   // putWithSignalAndFlush(off, size)
  c.flush();                          // Sync + spin
  c.wait();                           // ++waitEpochId, spin on proxy
  c.epochIncrement();                 // ++device
  uint64_t h = c.fifo.push(mscclppData | mscclppFlag, 1, 2, 3);
  c.fifo.sync(h);
  out[threadIdx.x] = h + c.localSignalEpochId->device + *c.waitEpochId + c.failed() + c.fifo.failed();
}

// The same calls on the host (host mode), compiled by nvcc's host compiler.
void everyHostMethod(mscclppDevConn& c)
{
  c.put(64, 0, 32);
  c.put(128, 16);
  c.signal();
  c.putWithSignal(256, 0, 32);
  c.putWithSignal(512, 8);
  c.putWithSignalAndFlush(0, 0, 1);
  c.putWithSignalAndFlush(1024, 4);
  c.flush();
  c.wait();
  c.epochIncrement();
  c.fifo.sync(c.fifo.push(mscclppSync, 0, 0, 1));
}

void launchEveryDeviceMethod(mscclppDevConn* conns, int nConns, uint64_t* out)
{
  everyDeviceMethod<<<1, 32>>>(conns, nConns, out);
}
