/*
 * boot_tcp: the plain-TCP reference for the bootstrap, timed by boot.h.
 * Started by launch, like boot_mscclpp.
 *
 *   launch N boot_tcp [init|proto]
 *
 * Init: every rank opens a ring listener on its address (127.0.0.1, or
 * MSCCLPP_TEST_NODE_ADDR, which tests/multinode/rank.sh sets in a simulated
 * cluster), connects to rank 0 (which listens at BENCH_ADDR; refused
 * connects are retried every 100 µs) and sends its listener's address;
 * rank 0 answers everyone with the table of addresses; each rank then
 * connects to rank+1's listener and accepts rank-1.
 * Allgather: ring allgather over the two ring sockets, raw blocking
 * write/read (TCP_NODELAY) for slots up to 64 KiB; larger slots send and
 * receive each step concurrently with poll() so that no rank blocks in
 * write with full socket buffers. Barrier: a 1-byte ring allgather.
 *
 * BENCH_TOPO=star (a diagnostic; the library uses a star for small
 * messages): allgather and barrier go through rank 0 instead, over the
 * connections of the init exchange, kept open: every rank writes its slot
 * to rank 0 and reads all slots back; rank 0 reads the slots in rank order,
 * then writes the whole table to each rank.
 *
 *   launch N boot_tcp proto
 *
 * A diagnostic of init: the library's init on one host, as a C program
 * would do it. Rank 0 sends every rank a 40-byte challenge first, the
 * registration is 128 bytes and the table carries 64 more (the library's
 * hello and MAC sizes, roughly; no MAC is computed: HMAC-SHA-256 of such a
 * message takes about a microsecond); then, instead of the ring, rank 0
 * creates an 836 KiB shared-memory segment (the size of the library's node
 * segment) and the others map it once it is sized and write their pid into
 * it; then every rank reports ready and rank 0, once all did, sends each a
 * 52-byte last word. What the library's protocol would cost written in C.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "boot.h"

typedef struct {
  int rank, n, next, prev;
  char* scratch;
  int* star; /* rank 0: the connection of each rank; others: star[0], to rank 0; NULL: ring */
} ring;

static void nodelay(int fd)
{
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int writeall(int fd, const void* p, size_t len)
{
  const char* c = p;
  while (len > 0) {
    ssize_t k = write(fd, c, len);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    c += k;
    len -= (size_t)k;
  }
  return 0;
}

static int readall(int fd, void* p, size_t len)
{
  char* c = p;
  while (len > 0) {
    ssize_t k = read(fd, c, len);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    c += k;
    len -= (size_t)k;
  }
  return 0;
}

/* Send slen bytes to sfd while receiving rlen bytes from rfd. */
static int duplex(int sfd, const char* s, size_t slen, int rfd, char* r, size_t rlen)
{
  while (slen > 0 || rlen > 0) {
    int progress = 0;
    if (slen > 0) {
      ssize_t k = send(sfd, s, slen, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k > 0) s += k, slen -= (size_t)k, progress = 1;
      else if (k < 0 && errno != EAGAIN && errno != EINTR) return -1;
    }
    if (rlen > 0) {
      ssize_t k = recv(rfd, r, rlen, MSG_DONTWAIT);
      if (k > 0) r += k, rlen -= (size_t)k, progress = 1;
      else if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) return -1;
    }
    if (!progress) {
      struct pollfd p[2];
      int np = 0;
      if (slen > 0) p[np].fd = sfd, p[np].events = POLLOUT, np++;
      if (rlen > 0) p[np].fd = rfd, p[np].events = POLLIN, np++;
      poll(p, (nfds_t)np, -1);
    }
  }
  return 0;
}

static int star_ag(ring* g, char* d, int size)
{
  size_t all = (size_t)g->n * (size_t)size;
  if (g->rank != 0)
    return writeall(g->star[0], d + (size_t)g->rank * size, (size_t)size) || readall(g->star[0], d, all);
  for (int r = 1; r < g->n; r++)
    if (readall(g->star[r], d + (size_t)r * size, (size_t)size)) return -1;
  for (int r = 1; r < g->n; r++)
    if (writeall(g->star[r], d, all)) return -1;
  return 0;
}

static int ag(void* ctx, void* data, int size)
{
  ring* g = ctx;
  char* d = data;
  int n = g->n, me = g->rank;
  if (g->star) return star_ag(g, d, size);
  for (int s = 0; s < n - 1; s++) {
    size_t so = (size_t)((me - s + n) % n) * size, ro = (size_t)((me - s - 1 + n) % n) * size;
    if (size <= 65536) {
      if (writeall(g->next, d + so, (size_t)size) || readall(g->prev, d + ro, (size_t)size)) return -1;
    } else if (duplex(g->next, d + so, (size_t)size, g->prev, d + ro, (size_t)size)) {
      return -1;
    }
  }
  return 0;
}

static int bar(void* ctx)
{
  ring* g = ctx;
  return ag(ctx, g->scratch, 1);
}

static int listener(struct sockaddr_in* a)
{
  int s = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s, (struct sockaddr*)a, sizeof(*a)) != 0 || listen(s, 1024) != 0) BENCH_DIE("listen: %s", strerror(errno));
  socklen_t l = sizeof(*a);
  getsockname(s, (struct sockaddr*)a, &l);
  return s;
}

static int dial(struct sockaddr_in* a)
{
  for (;;) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (struct sockaddr*)a, sizeof(*a)) == 0) {
      nodelay(s);
      return s;
    }
    if (errno != ECONNREFUSED) BENCH_DIE("connect: %s", strerror(errno));
    close(s);
    usleep(100);
  }
}

int main(int argc, char** argv)
{
  int rank = bench_env_int("BENCH_RANK", 0), n = bench_env_int("BENCH_NRANKS", 1);
  const char* addr = getenv("BENCH_ADDR");
  if (!addr) BENCH_DIE("run me through launch");
  int proto = argc > 1 && strcmp(argv[1], "proto") == 0;
  int initOnly = proto || (argc > 1 && strcmp(argv[1], "init") == 0);
  enum { chLen = 40, regLen = 128, macLen = 64, readyLen = 44, lastLen = 52, segLen = 856320 };
  char pbuf[256] = {0};
  struct sockaddr_in root = {0};
  root.sin_family = AF_INET;
  char rootIP[64];
  snprintf(rootIP, sizeof(rootIP), "%.*s", (int)(strchr(addr, ':') - addr), addr);
  if (inet_pton(AF_INET, rootIP, &root.sin_addr) != 1) BENCH_DIE("bad BENCH_ADDR %s", addr);
  root.sin_port = htons((uint16_t)atoi(strchr(addr, ':') + 1));
  bench_start();

  /* init */
  struct sockaddr_in mine = {0};
  mine.sin_family = AF_INET;
  mine.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const char* myIP = getenv("MSCCLPP_TEST_NODE_ADDR");
  if (myIP && *myIP && inet_pton(AF_INET, myIP, &mine.sin_addr) != 1) BENCH_DIE("bad MSCCLPP_TEST_NODE_ADDR %s", myIP);
  int lfd = listener(&mine);
  /* the table: rank r's listener at ips[r]:ports[r], network order, one message */
  int32_t* ports = calloc((size_t)n * 2, sizeof(int32_t));
  uint32_t* ips = (uint32_t*)ports + n;
  ports[rank] = ntohs(mine.sin_port);
  ips[rank] = mine.sin_addr.s_addr;
  const char* topo = getenv("BENCH_TOPO");
  int star = topo && !strcmp(topo, "star");
  int* c = NULL;
  if (rank == 0) {
    int rl = listener(&root);
    c = calloc((size_t)n, sizeof(int));
    for (int i = 1; i < n; i++) {
      int s = accept(rl, NULL, NULL);
      nodelay(s);
      int32_t msg[regLen / 4];
      if (s >= 0 && proto && writeall(s, pbuf, chLen)) BENCH_DIE("root: challenge");
      if (s < 0 || readall(s, msg, proto ? regLen : 12) || msg[0] < 1 || msg[0] >= n) BENCH_DIE("root: registration");
      c[msg[0]] = s;
      ports[msg[0]] = msg[1];
      ips[msg[0]] = (uint32_t)msg[2];
    }
    for (int i = 1; i < n; i++) {
      if (writeall(c[i], ports, (size_t)n * 2 * sizeof(int32_t)) || (proto && writeall(c[i], pbuf, macLen)))
        BENCH_DIE("root: reply");
      if (!star && !proto) close(c[i]);
    }
    close(rl);
  } else {
    int s = dial(&root);
    int32_t msg[regLen / 4] = {rank, ports[rank], (int32_t)ips[rank]};
    if (proto && readall(s, pbuf, chLen)) BENCH_DIE("rank %d: challenge", rank);
    if (writeall(s, msg, proto ? regLen : 12) || readall(s, ports, (size_t)n * 2 * sizeof(int32_t)) ||
        (proto && readall(s, pbuf, macLen)))
      BENCH_DIE("rank %d: root", rank);
    if (star || proto) c = calloc(1, sizeof(int)), c[0] = s;
    else close(s);
  }
  if (proto) {
    /* the node segment: rank 0 creates and sizes it, the others map it once sized */
    char name[64];
    snprintf(name, sizeof(name), "/boot_tcp_proto.%d", ntohs(root.sin_port));
    int fd;
    if (rank == 0) {
      fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
      if (fd < 0 || ftruncate(fd, segLen) != 0) BENCH_DIE("segment: %s", strerror(errno));
    } else {
      struct stat st;
      uint64_t tries = 0;
      while ((fd = shm_open(name, O_RDWR, 0)) < 0 || fstat(fd, &st) != 0 || st.st_size != segLen) {
        if (fd >= 0) close(fd);
        if (++tries > 500000) BENCH_DIE("rank %d: no segment", rank);
        usleep(20);
      }
    }
    int64_t* seg = mmap(NULL, segLen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (seg == MAP_FAILED) BENCH_DIE("mmap: %s", strerror(errno));
    close(fd);
    seg[rank] = getpid();
    /* ready, then the last word */
    if (rank != 0) {
      if (writeall(c[0], pbuf, readyLen) || readall(c[0], pbuf, lastLen)) BENCH_DIE("rank %d: last word", rank);
      close(c[0]);
    } else {
      for (int i = 1; i < n; i++)
        if (readall(c[i], pbuf, readyLen)) BENCH_DIE("root: ready");
      for (int i = 1; i < n; i++) {
        if (writeall(c[i], pbuf, lastLen)) BENCH_DIE("root: last word");
        close(c[i]);
      }
      shm_unlink(name);
    }
    close(lfd);
    bench_ready();
    return 0;
  }
  ring g = {rank, n, -1, -1, calloc((size_t)n, 1), star ? c : NULL};
  if (n > 1) {
    struct sockaddr_in nx = mine;
    nx.sin_port = htons((uint16_t)ports[(rank + 1) % n]);
    nx.sin_addr.s_addr = ips[(rank + 1) % n];
    g.next = dial(&nx);
    g.prev = accept(lfd, NULL, NULL);
    if (g.prev < 0) BENCH_DIE("accept: %s", strerror(errno));
    nodelay(g.prev);
  }
  close(lfd);
  bench_ready();

  if (!initOnly && n > 1) {
    boot_ops o = {&g, rank, n, ag, bar};
    boot_all(&o);
  }
  if (n > 1 && bar(&g)) BENCH_DIE("rank %d: final barrier", rank);
  return 0;
}
