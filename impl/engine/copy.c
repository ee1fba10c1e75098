/*
 * copy.c: a put's bytes into a registration (copy.h): engWrite, and large
 * puts into mapped memory (engCopyLarge). Two ways to copy those: glibc's
 * memcpy, or non-temporal stores that bypass this core's cache
 * (copyStreaming). Which is faster depends on the machine (glibc switches to
 * its own non-temporal path only above 3/4 of the L3 it is told of; where
 * its threshold is lower, or its `rep movsb` avoids the read for ownership,
 * memcpy can win). So each communicator times its first large puts both
 * ways, per power-of-two size band, and then keeps the faster one for that
 * band, timing the other way again now and then (engComm.streamAuto 0:
 * always stream).
 */
#define _GNU_SOURCE
#include "copy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "backoff.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The same with 32-byte stores where the CPU has AVX2: half the store instructions, so the
 * loop keeps more of the memory bus busy than the 16-byte one does (checked at run time: the
 * library is built for any x86-64). */
#if defined(__x86_64__) && defined(__GNUC__)
#define ENG_COPY_AVX2 1
__attribute__((target("avx2"))) static void copyStreamingAvx2(char* dst, const char* src, size_t n)
{
  size_t head = (32 - ((uintptr_t)dst & 31)) & 31;
  if (head > n) head = n;
  memcpy(dst, src, head);
  dst += head, src += head, n -= head;
  for (; n >= 128; n -= 128, dst += 128, src += 128) {
    __m256i a = _mm256_loadu_si256((const __m256i*)src), b = _mm256_loadu_si256((const __m256i*)(src + 32));
    __m256i c = _mm256_loadu_si256((const __m256i*)(src + 64)), d = _mm256_loadu_si256((const __m256i*)(src + 96));
    _mm256_stream_si256((__m256i*)dst, a);
    _mm256_stream_si256((__m256i*)(dst + 32), b);
    _mm256_stream_si256((__m256i*)(dst + 64), c);
    _mm256_stream_si256((__m256i*)(dst + 96), d);
  }
  _mm_sfence(); /* the streamed data is visible before any later signal store */
  memcpy(dst, src, n);
}
#endif

/* A copy with non-temporal stores: for large puts the destination is the peer's,
 * and pulling it through this core's cache only evicts useful lines. */
static void copyStreaming(char* dst, const char* src, size_t n)
{
#if defined(ENG_COPY_AVX2)
  if (__builtin_cpu_supports("avx2")) {
    copyStreamingAvx2(dst, src, n);
    return;
  }
#endif
#if defined(__SSE2__)
  size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
  if (head > n) head = n;
  memcpy(dst, src, head);
  dst += head, src += head, n -= head;
  for (; n >= 64; n -= 64, dst += 64, src += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)src), b = _mm_loadu_si128((const __m128i*)(src + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(src + 32)), d = _mm_loadu_si128((const __m128i*)(src + 48));
    _mm_stream_si128((__m128i*)dst, a);
    _mm_stream_si128((__m128i*)(dst + 16), b);
    _mm_stream_si128((__m128i*)(dst + 32), c);
    _mm_stream_si128((__m128i*)(dst + 48), d);
  }
  _mm_sfence(); /* the streamed data is visible before any later signal store */
#endif
  memcpy(dst, src, n);
}

/* The band of a size: floor(log2(size)) - 20, clamped to the table. */
static int copyBand(uint64_t size)
{
  int b = 63 - __builtin_clzll(size | 1) - 20;
  return b < 0 ? 0 : b >= ENG_COPY_BANDS ? ENG_COPY_BANDS - 1 : b;
}

/* How many puts of each way band b times before it keeps one: ENG_COPY_PROBES, fewer where one
 * put lasts long enough to be timed alone (32 MiB: 2; 64 MiB and up: 1), so that timing the
 * slower way costs a few puts' worth of milliseconds, not most of a short run of large puts. */
static uint32_t copyProbes(int b) { return b >= 6 ? 1 : b == 5 ? 2 : ENG_COPY_PROBES; }

/* Which way band b copies now: 0 memcpy, 1 streaming. While either way has fewer than probes
 * samples, the one with fewer (memcpy on a tie); then the one with the lower best time per
 * byte. The fields are read and written without a lock: threads racing on one band at worst
 * take one sample more or less. */
static int copyChoose(const engCopyBand* band, uint32_t probes)
{
  uint32_t n0 = __atomic_load_n(&band->n[0], __ATOMIC_RELAXED), n1 = __atomic_load_n(&band->n[1], __ATOMIC_RELAXED);
  if (n0 < probes || n1 < probes) return n1 < n0;
  return __atomic_load_n(&band->best[1], __ATOMIC_RELAXED) < __atomic_load_n(&band->best[0], __ATOMIC_RELAXED);
}

/* Whether band b has chosen (each way has its probes), and *way, the way it copies now (copyChoose). */
static int copyChosen(const engCopyBand* band, int b, int* way)
{
  uint32_t probes = copyProbes(b);
  *way = copyChoose(band, probes);
  return __atomic_load_n(&band->n[*way], __ATOMIC_RELAXED) >= probes;
}

static void copyWay(int way, char* dst, const char* src, uint64_t size)
{
  if (way) copyStreaming(dst, src, (size_t)size);
  else memcpy(dst, src, (size_t)size);
}

void engCopyLarge(engComm* comm, char* dst, const char* src, uint64_t size)
{
  if (!comm->streamAuto) {
    copyStreaming(dst, src, (size_t)size);
    return;
  }
  int b = copyBand(size), way;
  engCopyBand* band = &comm->copyBands[b];
  if (copyChosen(band, b, &way)) {
    /* A probe slowed by another process can cost the faster way its place: every
     * ENG_COPY_RECHECK-th put of a band that has chosen times the other way once more (a
     * best time only improves). */
    if (__atomic_add_fetch(&band->chosen, 1, __ATOMIC_RELAXED) % ENG_COPY_RECHECK != 0) {
      copyWay(way, dst, src, size);
      return;
    }
    way = !way;
  }
  uint64_t t0 = engNowNs();
  copyWay(way, dst, src, size);
  /* picoseconds per byte, so that sizes within a band compare */
  uint64_t perByte = (engNowNs() - t0) * 1000 / size;
  uint64_t best = __atomic_load_n(&band->best[way], __ATOMIC_RELAXED);
  if (best == 0 || perByte < best) __atomic_store_n(&band->best[way], perByte ? perByte : 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&band->n[way], 1, __ATOMIC_RELAXED);
}

int engCopyChoice(engComm* comm, uint64_t size)
{
  int b = copyBand(size), way;
  return copyChosen(&comm->copyBands[b], b, &way) ? way : -1;
}

void engCopySamples(engComm* comm, uint64_t size, uint32_t n[2])
{
  const engCopyBand* band = &comm->copyBands[copyBand(size)];
  n[0] = __atomic_load_n(&band->n[0], __ATOMIC_RELAXED);
  n[1] = __atomic_load_n(&band->n[1], __ATOMIC_RELAXED);
}

/* Whether the owner of r may have exited and its pid named another process since: never write
 * into that one. A poll of the pidfd costs about a third of an 8-byte process_vm_writev, so
 * a poll that found the owner running less than ENG_PIDFD_CHECK_NS ago stands for one: the kernel
 * hands a pid out again only after every other free pid of its namespace (it takes them in
 * turn), which takes far longer than that. */
#define ENG_PIDFD_CHECK_NS 100000
static int pidReused(engReg* r)
{
  uint64_t now = engNowNs();
  if (now - __atomic_load_n(&r->pidfdChecked, __ATOMIC_RELAXED) < ENG_PIDFD_CHECK_NS) return 0;
  if (engPidfdExited(r->pidfd)) return 1;
  __atomic_store_n(&r->pidfdChecked, now, __ATOMIC_RELAXED);
  return 0;
}

int engWrite(engComm* comm, const engReg* r, uint64_t off, const void* src, uint64_t size, char* err, int errLen)
{
  if (r->mapped != NULL) {
    if (engCopiesLarge(comm, size))
      engCopyLarge(comm, r->mapped + off, (const char*)src, size);
    else
      memcpy(r->mapped + off, src, size);
    return mscclppSuccess;
  }
  if (r->pidfd > 0 && pidReused((engReg*)r)) {
    snprintf(err, (size_t)errLen, "the peer's process (pid %d) has exited (peer gone): %llu bytes not written", r->pid,
             (unsigned long long)size);
    return mscclppRemoteError;
  }
  uint64_t done = 0;
  while (done < size) {
    struct iovec l = {(void*)((const char*)src + done), (size_t)(size - done)};
    struct iovec rv = {(void*)(uintptr_t)(r->addr + off + done), (size_t)(size - done)};
    ssize_t n = process_vm_writev(r->pid, &l, 1, &rv, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      snprintf(err, (size_t)errLen, "process_vm_writev of %llu bytes into pid %d failed: %s",
               (unsigned long long)(size - done), r->pid, strerror(e));
      return (e == ESRCH) ? mscclppRemoteError : mscclppSystemError;
    }
    if (n == 0) {
      snprintf(err, (size_t)errLen, "process_vm_writev into pid %d made no progress", r->pid);
      return mscclppSystemError;
    }
    done += (uint64_t)n;
  }
  return mscclppSuccess;
}
