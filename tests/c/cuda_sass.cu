// cuda_sass.cu: one kernel per device method of mscclpp.h, for check-cuda.sh's SASS check
// (sass-check.awk). A kernel is named sass_<method>_<poll loops>: how many loops the method
// spins in. Each writes data before the method (what a release must publish) and reads data
// after it into out (what an acquire must order). Only compiled and disassembled, never run.
#include "mscclpp.h"

extern "C" __global__ void sass_wait_1(mscclppDevConn* c, const uint64_t* data, uint64_t* out)
{
  c->wait();
  out[0] = data[0];
}

extern "C" __global__ void sass_push_2(mscclppDevConn* c, uint64_t* data, uint64_t* out)
{
  data[0] = 1;
  out[0] = c->fifo.push(mscclppData, 64, 0, 8);
}

extern "C" __global__ void sass_sync_1(mscclppDevConn* c, const uint64_t* data, uint64_t* out, uint64_t h)
{
  c->fifo.sync(h);
  out[0] = data[0];
}

extern "C" __global__ void sass_put_2(mscclppDevConn* c, uint64_t* data)
{
  data[0] = 1;
  c->put(64, 0, 8);
}

extern "C" __global__ void sass_signal_2(mscclppDevConn* c, uint64_t* data)
{
  data[0] = 1;
  c->signal();
}

extern "C" __global__ void sass_putWithSignal_2(mscclppDevConn* c, uint64_t* data)
{
  data[0] = 1;
  c->putWithSignal(64, 0, 8);
}

extern "C" __global__ void sass_flush_3(mscclppDevConn* c, uint64_t* data, uint64_t* out)
{
  data[0] = 1;
  c->flush();
  out[0] = data[1];
}

extern "C" __global__ void sass_putWithSignalAndFlush_3(mscclppDevConn* c, uint64_t* data, uint64_t* out)
{
  data[0] = 1;
  c->putWithSignalAndFlush(64, 0, 8);
  out[0] = data[1];
}
