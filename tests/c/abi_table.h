/*
 * abi_table.h: the layout facts of API.md section 1 as runtime checks,
 * shared by abi_layout.c (C11) and abi_layout.cc (C++11..20). Include it
 * after mscclpp.h and check.h; the includer defines TEST_ALIGNOF(type).
 */
#ifndef MSCCLPP_TEST_ABI_TABLE_H_
#define MSCCLPP_TEST_ABI_TABLE_H_

#define ABI_EQ(what, got, want)                                                                            \
  do {                                                                                                     \
    unsigned long long got_ = (unsigned long long)(got), want_ = (unsigned long long)(want);               \
    if (CHECK(got_ == want_, "%s is %llu (0x%llx), expected %llu (0x%llx)", what, got_, got_, want_, want_)) \
      printf("ok   %-58s = %llu\n", what, got_);                                                         \
  } while (0)

#define ABI_SIZE(T, n) ABI_EQ("sizeof(" #T ")", sizeof(T), n)
#define ABI_ALIGN(T, n) ABI_EQ("alignof(" #T ")", TEST_ALIGNOF(T), n)
#define ABI_OFF(T, f, n) ABI_EQ("offsetof(" #T ", " #f ")", offsetof(T, f), n)
#define ABI_FSIZE(T, f, n) ABI_EQ("sizeof(((" #T "*)0)->" #f ")", sizeof(((T*)0)->f), n)

static void abi_check_macros(void)
{
  ABI_EQ("MSCCLPP_MAJOR", MSCCLPP_MAJOR, 0);
  ABI_EQ("MSCCLPP_MINOR", MSCCLPP_MINOR, 1);
  ABI_EQ("MSCCLPP_PATCH", MSCCLPP_PATCH, 0);
  ABI_EQ("MSCCLPP_VERSION", MSCCLPP_VERSION, 100);
  ABI_EQ("MSCCLPP_VERSION formula", MSCCLPP_VERSION, MSCCLPP_MAJOR * 10000 + MSCCLPP_MINOR * 100 + MSCCLPP_PATCH);
  ABI_EQ("MSCCLPP_PROXY_FIFO_SIZE", MSCCLPP_PROXY_FIFO_SIZE, 128);
  ABI_EQ("MSCCLPP_PROXY_FIFO_FLUSH_COUNTER", MSCCLPP_PROXY_FIFO_FLUSH_COUNTER, 4);
  ABI_EQ("MSCCLPP_UNIQUE_ID_BYTES", MSCCLPP_UNIQUE_ID_BYTES, 128);
  ABI_EQ("MSCCLPP_BITS_SIZE", MSCCLPP_BITS_SIZE, 32);
  ABI_EQ("MSCCLPP_BITS_OFFSET", MSCCLPP_BITS_OFFSET, 32);
  ABI_EQ("MSCCLPP_BITS_TYPE", MSCCLPP_BITS_TYPE, 3);
  ABI_EQ("MSCCLPP_BITS_CONNID", MSCCLPP_BITS_CONNID, 10);
}

static void abi_check_enums(void)
{
  ABI_SIZE(mscclppResult_t, 4);
  ABI_EQ("mscclppSuccess", mscclppSuccess, 0);
  ABI_EQ("mscclppUnhandledCudaError", mscclppUnhandledCudaError, 1);
  ABI_EQ("mscclppSystemError", mscclppSystemError, 2);
  ABI_EQ("mscclppInternalError", mscclppInternalError, 3);
  ABI_EQ("mscclppInvalidArgument", mscclppInvalidArgument, 4);
  ABI_EQ("mscclppInvalidUsage", mscclppInvalidUsage, 5);
  ABI_EQ("mscclppRemoteError", mscclppRemoteError, 6);
  ABI_EQ("mscclppInProgress", mscclppInProgress, 7);
  ABI_EQ("mscclppNumResults", mscclppNumResults, 8);

  ABI_SIZE(mscclppTransport_t, 4);
  ABI_EQ("mscclppTransportP2P", mscclppTransportP2P, 0);
  ABI_EQ("mscclppTransportSHM", mscclppTransportSHM, 1);
  ABI_EQ("mscclppTransportIB", mscclppTransportIB, 2);

  ABI_SIZE(mscclppTriggerType_t, 8);
  ABI_EQ("mscclppData", mscclppData, 1);
  ABI_EQ("mscclppFlag", mscclppFlag, 2);
  ABI_EQ("mscclppSync", mscclppSync, 4);
  ABI_EQ("mscclppData | mscclppFlag | mscclppSync", (uint64_t)(mscclppData | mscclppFlag | mscclppSync), 7);

  ABI_SIZE(mscclppBufferHandle_t, 4);
}

static void abi_check_structs(void)
{
  /* union mscclppTrigger */
  ABI_SIZE(union mscclppTrigger, 16);
  ABI_SIZE(mscclppTrigger, 16);
  ABI_ALIGN(union mscclppTrigger, 16);
  ABI_OFF(union mscclppTrigger, value, 0);
  ABI_FSIZE(union mscclppTrigger, value, 16);
  ABI_FSIZE(union mscclppTrigger, value[0], 8);
  ABI_OFF(union mscclppTrigger, fields, 0);
  ABI_SIZE(mscclppTrigger_t, sizeof(void*));

  /* struct mscclppConcurrentFifo */
  ABI_SIZE(struct mscclppConcurrentFifo, 32);
  ABI_OFF(struct mscclppConcurrentFifo, triggerFifo, 0);
  ABI_OFF(struct mscclppConcurrentFifo, triggerFifoTail, 8);
  ABI_OFF(struct mscclppConcurrentFifo, triggerFifoHead, 16);
  ABI_OFF(struct mscclppConcurrentFifo, connId, 24);
  ABI_FSIZE(struct mscclppConcurrentFifo, connId, 4);

  /* struct mscclppDevConnSignalEpochId */
  ABI_SIZE(struct mscclppDevConnSignalEpochId, 16);
  ABI_SIZE(mscclppDevConnSignalEpochId, 16);
  ABI_ALIGN(struct mscclppDevConnSignalEpochId, 16);
  ABI_OFF(struct mscclppDevConnSignalEpochId, device, 0);
  ABI_OFF(struct mscclppDevConnSignalEpochId, proxy, 8);
  ABI_FSIZE(struct mscclppDevConnSignalEpochId, device, 8);
  ABI_FSIZE(struct mscclppDevConnSignalEpochId, proxy, 8);

  /* struct mscclppDevConn */
  ABI_SIZE(struct mscclppDevConn, 80);
  ABI_SIZE(mscclppDevConn_t, 80);
  ABI_ALIGN(struct mscclppDevConn, 8);
  ABI_OFF(struct mscclppDevConn, fifo, 0);
  ABI_FSIZE(struct mscclppDevConn, fifo, 32);
  ABI_OFF(struct mscclppDevConn, remoteRank, 32);
  ABI_OFF(struct mscclppDevConn, tag, 36);
  ABI_OFF(struct mscclppDevConn, localBuff, 40);
  ABI_OFF(struct mscclppDevConn, localSignalEpochId, 48);
  ABI_OFF(struct mscclppDevConn, remoteSignalEpochId, 56);
  ABI_OFF(struct mscclppDevConn, waitEpochId, 64);
  ABI_OFF(struct mscclppDevConn, remoteBuff, 72);
  ABI_FSIZE(struct mscclppDevConn, remoteRank, 4);
  ABI_FSIZE(struct mscclppDevConn, tag, 4);

  /* mscclppUniqueId */
  ABI_SIZE(mscclppUniqueId, 128);
  ABI_OFF(mscclppUniqueId, internal, 0);
  ABI_FSIZE(mscclppUniqueId, internal, 128);
  ABI_FSIZE(mscclppUniqueId, internal[0], 1);
}

/* The spec's example through the bit-fields, both ways, and the header's
 * packing macros. */
static void abi_check_trigger(void)
{
  mscclppTrigger t;
  memset(&t, 0, sizeof t);
  t.fields.dataSize = 1;
  t.fields.srcDataOffset = 2;
  t.fields.dstDataOffset = 3;
  t.fields.connId = 4;
  t.fields.type = 5;
  ABI_EQ("trigger example value[0]", t.value[0], 0x200000001ull);
  ABI_EQ("trigger example value[1]", t.value[1], 0x140400000003ull);

  mscclppTrigger u;
  u.value[0] = 0x200000001ull;
  u.value[1] = 0x140400000003ull;
  ABI_EQ("decoded dataSize", u.fields.dataSize, 1);
  ABI_EQ("decoded srcDataOffset", u.fields.srcDataOffset, 2);
  ABI_EQ("decoded dstDataOffset", u.fields.dstDataOffset, 3);
  ABI_EQ("decoded connId", u.fields.connId, 4);
  ABI_EQ("decoded type", u.fields.type, 5);

  /* field widths: all ones in each field lands in the documented bits */
  memset(&t, 0, sizeof t);
  t.fields.dataSize = 0xffffffffull;
  ABI_EQ("dataSize bits 0-31 of word 0", t.value[0], 0x00000000ffffffffull);
  memset(&t, 0, sizeof t);
  t.fields.srcDataOffset = 0xffffffffull;
  ABI_EQ("srcDataOffset bits 32-63 of word 0", t.value[0], 0xffffffff00000000ull);
  memset(&t, 0, sizeof t);
  t.fields.dstDataOffset = 0xffffffffull;
  ABI_EQ("dstDataOffset bits 0-31 of word 1", t.value[1], 0x00000000ffffffffull);
  memset(&t, 0, sizeof t);
  t.fields.connId = 0x3ff;
  ABI_EQ("connId bits 32-41 of word 1", t.value[1], 0x000003ff00000000ull);
  memset(&t, 0, sizeof t);
  t.fields.type = 7;
  ABI_EQ("type bits 42-44 of word 1", t.value[1], 0x00001c0000000000ull);

  ABI_EQ("MSCCLPP_TRIGGER_WORD0(2, 1)", MSCCLPP_TRIGGER_WORD0(2, 1), 0x200000001ull);
  ABI_EQ("MSCCLPP_TRIGGER_WORD1(5, 4, 3)", MSCCLPP_TRIGGER_WORD1(5, 4, 3), 0x140400000003ull);
  /* the decode macros read back what the bit-fields hold, every field all ones too */
  ABI_EQ("MSCCLPP_TRIGGER_SIZE", MSCCLPP_TRIGGER_SIZE(u.value[0]), 1);
  ABI_EQ("MSCCLPP_TRIGGER_SRC_OFFSET", MSCCLPP_TRIGGER_SRC_OFFSET(u.value[0]), 2);
  ABI_EQ("MSCCLPP_TRIGGER_DST_OFFSET", MSCCLPP_TRIGGER_DST_OFFSET(u.value[1]), 3);
  ABI_EQ("MSCCLPP_TRIGGER_CONNID", MSCCLPP_TRIGGER_CONNID(u.value[1]), 4);
  ABI_EQ("MSCCLPP_TRIGGER_TYPE", MSCCLPP_TRIGGER_TYPE(u.value[1]), 5);
  memset(&t, 0xff, sizeof t);
  ABI_EQ("MSCCLPP_TRIGGER_SIZE of ones", MSCCLPP_TRIGGER_SIZE(t.value[0]), t.fields.dataSize);
  ABI_EQ("MSCCLPP_TRIGGER_SRC_OFFSET of ones", MSCCLPP_TRIGGER_SRC_OFFSET(t.value[0]), t.fields.srcDataOffset);
  ABI_EQ("MSCCLPP_TRIGGER_DST_OFFSET of ones", MSCCLPP_TRIGGER_DST_OFFSET(t.value[1]), t.fields.dstDataOffset);
  ABI_EQ("MSCCLPP_TRIGGER_CONNID of ones", MSCCLPP_TRIGGER_CONNID(t.value[1]), t.fields.connId);
  ABI_EQ("MSCCLPP_TRIGGER_TYPE of ones", MSCCLPP_TRIGGER_TYPE(t.value[1]), t.fields.type);

  mscclppTrigger_t p = &u;
  ABI_EQ("mscclppTrigger_t points at a trigger", p->fields.connId, 4);
}

static void abi_check_version(void)
{
  int v = -1;
  mscclppResult_t r = mscclppGetVersion(&v);
  CHECK(r == mscclppSuccess, "mscclppGetVersion returned %d (%s)", (int)r, mscclppGetErrorString(r));
  ABI_EQ("mscclppGetVersion()", v, MSCCLPP_VERSION);
}

/* Every exported function, referenced so that the link fails when one is
 * missing from the library. */
typedef void (*abi_any_fn)(void);
#define ABI_FN(f) ((abi_any_fn)(f))
static void abi_check_symbols(void)
{
  static abi_any_fn volatile fns[] = {
    ABI_FN(mscclppGetUniqueId),
    ABI_FN(mscclppCommInitRank),
    ABI_FN(mscclppCommInitRankFromId),
    ABI_FN(mscclppBootstrapAllGather),
    ABI_FN(mscclppBootstrapBarrier),
    ABI_FN(mscclppCommDestroy),
    ABI_FN(mscclppGetErrorString),
    ABI_FN(mscclppConnect),
    ABI_FN(mscclppConnectWithoutBuffer),
    ABI_FN(mscclppRegisterBufferForConnection),
    ABI_FN(mscclppConnectionSetup),
    ABI_FN(mscclppGetAllDeviceConnections),
    ABI_FN(mscclppGetDeviceConnection),
    ABI_FN(mscclppProxyLaunch),
    ABI_FN(mscclppProxyStop),
    ABI_FN(mscclppCommRank),
    ABI_FN(mscclppCommSize),
    ABI_FN(mscclppSetBootstrapConnTimeout),
    ABI_FN(mscclppDefaultLogHandler),
    ABI_FN(mscclppSetLogHandler),
    ABI_FN(mscclppGetLastError),
    ABI_FN(mscclppGetVersion),
    ABI_FN(mscclppCommGetAsyncError),
    ABI_FN(mscclppHostAlloc),
    ABI_FN(mscclppHostFree),
    ABI_FN(mscclppCommReport),
    ABI_FN(mscclppConnOp),
    ABI_FN(mscclppConnPutHandle),
    ABI_FN(mscclppConnWait),
    ABI_FN(mscclppFifoPush),
    ABI_FN(mscclppFifoWaitServed),
  };
  int missing = 0;
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
    if (fns[i] == NULL)
      missing++;
  ABI_EQ("exported functions resolved (null count)", missing, 0);
}

static void abi_run_all(void)
{
  abi_check_macros();
  abi_check_enums();
  abi_check_structs();
  abi_check_trigger();
  abi_check_symbols();
  abi_check_version();
}

#endif /* MSCCLPP_TEST_ABI_TABLE_H_ */
