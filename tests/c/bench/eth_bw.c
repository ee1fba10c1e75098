/*
 * eth_bw: the Ethernet transport's put bandwidth beside a raw TCP stream
 * between the same two processes, interleaved block by block.
 *
 *   launch -p 2 eth_bw [sizeBytes...]  (default 64 KiB, 256 KiB, 1 MiB, 16 MiB, 256 MiB)
 *
 * ours: rank 0 putWithSignal's size bytes to rank 1 over
 *       mscclppTransportEthernet, rank 1 waits and signals back;
 * tcp:  rank 0 sends size bytes on a plain TCP socket to rank 1, which
 *       receives them into its buffer and sends one byte back.
 * Both include the one small message back, so the ratio compares like with
 * like. Each size starts with two unrecorded warm-up blocks, then runs blocks
 * (one of each, in alternating order) until BENCH_BUDGET_S passed (at least
 * 5, at most 256).
 * Figures: eth.<size>.ours.gbps and eth.<size>.tcp.gbps (medians over the
 * blocks) and eth.<size>.ratio, the median over blocks of the block's
 * ours/tcp bandwidth ratio (a load change between blocks moves both).
 * The socket address comes from MSCCLPP_TEST_ETH_IP (default 127.0.0.1) so
 * the same program measures across simulated nodes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <mscclpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "bench.h"

#define CK(call) BENCH_CK(NULL, call)

static void sendAll(int fd, const char* p, size_t n)
{
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) BENCH_DIE("send: %s", strerror(errno));
    p += k, n -= (size_t)k;
  }
}

static void recvAll(int fd, char* p, size_t n)
{
  while (n > 0) {
    ssize_t k = recv(fd, p, n, MSG_WAITALL);
    if (k <= 0) BENCH_DIE("recv: %s", k == 0 ? "end of stream" : strerror(errno));
    p += k, n -= (size_t)k;
  }
}

/* The diagnostic reference's reader first spins on the socket (non-blocking recv) for as long as
 * a reading wait of ours does before it blocks: 25 ns per pause of MSCCLPP_WAIT_SPIN (4000 by
 * default on this machine's 2 ranks), at most 0.5 ms; 0 with MSCCLPP_WAIT_SPIN=0. */
static uint64_t spinNs(void)
{
  const char* v = getenv("MSCCLPP_WAIT_SPIN");
  uint64_t ns = 25ull * (v != NULL && *v ? strtoull(v, NULL, 0) : 4000ull);
  return ns > 500000ull ? 500000ull : ns;
}

/* recvAll, spinning up to spin ns on a non-blocking recv before it blocks. */
static void recvSpin(int fd, char* p, size_t n, uint64_t spin)
{
  uint64_t t0 = bench_now_ns();
  while (n > 0 && bench_now_ns() - t0 < spin) {
    ssize_t k = recv(fd, p, n, MSG_DONTWAIT);
    if (k == 0) BENCH_DIE("recv: end of stream");
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) BENCH_DIE("recv: %s", strerror(errno));
    if (k > 0) p += k, n -= (size_t)k;
  }
  recvAll(fd, p, n);
}

/* ours: rank 0 putWithSignal's size bytes and waits for the signal back; ns. */
static uint64_t timeOurs(mscclppDevConn_t* conn, int rank, size_t size)
{
  uint64_t t0 = bench_now_ns();
  if (rank == 0) {
    CK(mscclppDevConnPutWithSignal(conn, 0, 0, size));
    CK(mscclppDevConnWaitTimeout(conn, 60000));
  } else {
    CK(mscclppDevConnWaitTimeout(conn, 60000));
    CK(mscclppDevConnSignal(conn));
  }
  return bench_now_ns() - t0;
}

/* tcp: rank 0 sends size bytes, rank 1 receives them into buf and sends one byte back; ns. */
static uint64_t timeTcp(int fd, int rank, char* buf, size_t size)
{
  char ack = 1;
  uint64_t t0 = bench_now_ns();
  if (rank == 0) {
    sendAll(fd, buf, size);
    recvAll(fd, &ack, 1);
  } else {
    recvAll(fd, buf, size);
    sendAll(fd, &ack, 1);
  }
  return bench_now_ns() - t0;
}

/* tcp with spinning readers (a diagnostic: like for like with ours, whose reading waits spin first). */
static uint64_t timeTcpSpin(int fd, int rank, char* buf, size_t size, uint64_t spin)
{
  char ack = 1;
  uint64_t t0 = bench_now_ns();
  if (rank == 0) {
    sendAll(fd, buf, size);
    recvSpin(fd, &ack, 1, spin);
  } else {
    recvSpin(fd, buf, size, spin);
    sendAll(fd, &ack, 1);
  }
  return bench_now_ns() - t0;
}

/* A TCP socket between the two ranks: rank 1 listens, rank 0 connects. */
static int rawSocket(mscclppComm_t comm, int rank)
{
  const char* ip = getenv("MSCCLPP_TEST_ETH_IP");
  if (ip == NULL || *ip == 0) ip = "127.0.0.1";
  struct sockaddr_in a = {.sin_family = AF_INET};
  int port[2] = {0, 0};
  char ips[2][64];
  memset(ips, 0, sizeof(ips));
  snprintf(ips[rank], sizeof(ips[rank]), "%s", ip);
  int ln = -1;
  if (rank == 1) {
    ln = socket(AF_INET, SOCK_STREAM, 0);
    inet_pton(AF_INET, ip, &a.sin_addr);
    if (bind(ln, (struct sockaddr*)&a, sizeof(a)) != 0 || listen(ln, 1) != 0) BENCH_DIE("listen: %s", strerror(errno));
    socklen_t l = sizeof(a);
    getsockname(ln, (struct sockaddr*)&a, &l);
    port[1] = ntohs(a.sin_port);
  }
  CK(mscclppBootstrapAllGather(comm, port, sizeof(int)));
  CK(mscclppBootstrapAllGather(comm, ips, sizeof(ips[0])));
  int fd;
  if (rank == 1) {
    fd = accept(ln, NULL, NULL);
    close(ln);
  } else {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_port = htons((uint16_t)port[1]);
    inet_pton(AF_INET, ips[1], &a.sin_addr);
    if (connect(fd, (struct sockaddr*)&a, sizeof(a)) != 0) BENCH_DIE("connect: %s", strerror(errno));
  }
  if (fd < 0) BENCH_DIE("accept: %s", strerror(errno));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

int main(int argc, char** argv)
{
  bench_start();
  int rank = bench_env_int("BENCH_RANK", 0);
  const char* addr = getenv("BENCH_ADDR");
  if (addr == NULL) BENCH_DIE("no BENCH_ADDR: start me with launch -p 2");
  size_t sizes[8] = {64 << 10, 256 << 10, 1 << 20, 16 << 20, 256 << 20};
  int nsizes = 5;
  if (argc > 1) {
    nsizes = 0;
    for (int i = 1; i < argc && nsizes < 8; i++) sizes[nsizes++] = (size_t)strtoull(argv[i], NULL, 0);
  }
  size_t maxSize = 0;
  for (int i = 0; i < nsizes; i++)
    if (sizes[i] > maxSize) maxSize = sizes[i];
  mscclppComm_t comm;
  CK(mscclppCommInitRank(&comm, 2, addr, rank));
  char* buf = (char*)malloc(maxSize);
  if (buf == NULL) BENCH_DIE("malloc %zu", maxSize);
  memset(buf, rank, maxSize);
  CK(mscclppConnect(comm, 1 - rank, 0, buf, maxSize, mscclppTransportEthernet, NULL));
  CK(mscclppConnectionSetup(comm));
  CK(mscclppProxyLaunch(comm));
  mscclppDevConn_t* conn;
  CK(mscclppGetDeviceConnection(comm, 1 - rank, 0, &conn));
  int fd = rawSocket(comm, rank);
  bench_ready();
  double budget = bench_env_double("BENCH_BUDGET_S", 0.3);
  uint64_t spin = spinNs();
  for (int si = 0; si < nsizes; si++) {
    size_t size = sizes[si];
    enum { WARM = 2, MAXN = 256 };
    uint64_t ours[MAXN], tcp[MAXN], ratio[MAXN], spun[MAXN], spunRatio[MAXN];
    int n = 0, warm = 0;
    uint64_t start = bench_now_ns();
    for (;;) {
      /* ours and tcp, in alternating order: neither always runs first after the bootstrap's stop vote */
      if ((n + warm) % 2 == 0) {
        ours[n] = timeOurs(conn, rank, size);
        tcp[n] = timeTcp(fd, rank, buf, size);
      } else {
        tcp[n] = timeTcp(fd, rank, buf, size);
        ours[n] = timeOurs(conn, rank, size);
      }
      spun[n] = timeTcpSpin(fd, rank, buf, size, spin); /* the diagnostic reference, after both */
      if (warm < WARM) {
        warm++;
        start = bench_now_ns();
      } else {
        ratio[n] = tcp[n] * 1000000 / (ours[n] ? ours[n] : 1); /* bandwidth ratio, parts per million */
        spunRatio[n] = spun[n] * 1000000 / (ours[n] ? ours[n] : 1);
        n++;
      }
      /* rank 0 decides when to stop; rank 1 learns it through the bootstrap */
      int stop = (rank == 0) && (n >= MAXN || (n >= 5 && (double)(bench_now_ns() - start) * 1e-9 > budget));
      int both[2] = {0, 0};
      both[rank] = stop;
      CK(mscclppBootstrapAllGather(comm, both, sizeof(int)));
      if (both[0]) break;
    }
    if (rank == 0) {
      char key[64];
      snprintf(key, sizeof(key), "eth.%zu.ours.gbps", size);
      bench_result(key, (double)size / (double)bench_median(ours, (size_t)n));
      snprintf(key, sizeof(key), "eth.%zu.tcp.gbps", size);
      bench_result(key, (double)size / (double)bench_median(tcp, (size_t)n));
      snprintf(key, sizeof(key), "eth.%zu.ratio", size);
      bench_result(key, (double)bench_median(ratio, (size_t)n) * 1e-6);
      snprintf(key, sizeof(key), "eth.%zu.tcpspin.gbps", size);
      bench_result(key, (double)size / (double)bench_median(spun, (size_t)n));
      snprintf(key, sizeof(key), "eth.%zu.spinratio", size);
      bench_result(key, (double)bench_median(spunRatio, (size_t)n) * 1e-6);
    }
  }
  close(fd);
  CK(mscclppProxyStop(comm));
  CK(mscclppCommDestroy(comm));
  free(buf);
  return 0;
}
