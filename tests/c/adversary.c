/*
 * adversary.c: a bounded adversary on 127.0.0.1 against a real ip:port job
 * (run with N = 3, MSCCLPP_DEBUG=WARN and a MSCCLPP_BOOTSTRAP_SECRET the
 * adversary does not know).
 *
 * Ranks 0 and 1 form a 2-rank communicator with mscclppCommInitRank; the
 * process of launch rank 2 is the adversary. While rank 0 waits at the root
 * (rank 1 starts only once the adversary is done), the adversary speaks the
 * bootstrap protocol without the key:
 *
 *   1. a hello with a wrong magic: the root's reject tells it the magic;
 *   2. a register hello for rank 1 with the right magic and a forged MAC;
 *   3. the very bytes of 2 again on a fresh connection (a replay: a fresh
 *      challenge makes them invalid);
 *   4. the same bytes sent blind, before reading the challenge;
 *   5. a hello announcing a 4 GiB payload, and one announcing 4 KiB that
 *      sends 10 bytes and holds the connection open;
 *   6. a forged rank-1 registration that stays connected (slot squatting).
 *
 * Every forged hello must get a reject (and nothing else: never a table) or
 * be dropped; then rank 1 joins, the job must form, AllGather must be right,
 * and rank 0's log handler must have seen the WARN lines. No rank crashes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>

#include "check.h"

#define WIRE_VERSION 4 /* impl/bootstrap/wire.go wireVersion */
#define CHALLENGE_LEN 40
#define HELLO_LEN 96
#define REPLY_HDR_LEN 52

static pthread_mutex_t logMu = PTHREAD_MUTEX_INITIALIZER;
static int warnDropped;

static void handler(const char* msg)
{
  if (msg && strstr(msg, "MSCCLPP WARN") && strstr(msg, "dropped a connection")) {
    pthread_mutex_lock(&logMu);
    warnDropped++;
    pthread_mutex_unlock(&logMu);
  }
}

static int dial(int port, double sec) { return test_dial_local(port, sec, 5); }

static int send_all(int s, const void* p, size_t n) { return test_send_all(s, p, n); }

/* Everything the peer sends until it closes (or 5 s pass); returns the count. */
static size_t read_all(int s, uint8_t* buf, size_t cap)
{
  size_t n = 0;
  while (n < cap) {
    ssize_t r = recv(s, buf + n, cap - n, 0);
    if (r <= 0)
      break;
    n += (size_t)r;
  }
  return n;
}

static int read_challenge(int s, uint8_t* ch)
{
  size_t n = 0;
  while (n < CHALLENGE_LEN) {
    ssize_t r = recv(s, ch + n, CHALLENGE_LEN - n, 0);
    if (r <= 0)
      return -1;
    n += (size_t)r;
  }
  return memcmp(ch, "MSCN", 4) == 0 && ch[4] == WIRE_VERSION ? 0 : -1;
}

static void put32(uint8_t* p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

/* A register hello with a made-up MAC (the adversary has no key). */
static size_t forge_hello(uint8_t* out, const uint8_t magic[8], int rank, int nranks, uint32_t announce,
                          unsigned* seed)
{
  static const char addr[] = "127.0.0.1:1";
  uint8_t payload[64];
  size_t pl = 0;
  payload[pl++] = (uint8_t)(sizeof addr - 1);
  payload[pl++] = 0;
  memcpy(payload + pl, addr, sizeof addr - 1);
  pl += sizeof addr - 1;
  payload[pl++] = 4;
  payload[pl++] = 0;
  memcpy(payload + pl, "evil", 4);
  pl += 4;
  memset(out, 0, HELLO_LEN);
  memcpy(out, "MSCB", 4);
  out[4] = WIRE_VERSION;
  out[5] = 1; /* kindRegister */
  memcpy(out + 8, magic, 8);
  for (int i = 16; i < 48; i++)
    out[i] = (uint8_t)rand_r(seed);
  put32(out + 48, (uint32_t)rank);
  put32(out + 52, (uint32_t)nranks);
  put32(out + 56, announce ? announce : (uint32_t)pl);
  for (int i = 64; i < 96; i++)
    out[i] = (uint8_t)rand_r(seed); /* the "MAC" */
  if (announce)
    return HELLO_LEN;
  memcpy(out + HELLO_LEN, payload, pl);
  return HELLO_LEN + pl;
}

/* The answer must be exactly one reject with reason (1: key, 2: magic). */
static int check_reject(const char* what, const uint8_t* got, size_t n, int reason)
{
  int ok = n == REPLY_HDR_LEN + 1 && memcmp(got, "MSCR", 4) == 0 && got[4] == 3 && got[REPLY_HDR_LEN] == reason;
  CHECK(ok, "%s: the root answered %zu bytes (status %d), want only a reject with reason %d", what, n,
        n > 4 ? got[4] : -1, reason);
  CHECK(!(n >= 5 && memcmp(got, "MSCR", 4) == 0 && got[4] == 0), "%s: the adversary got a table!", what);
  if (ok)
    printf("ok   %s: rejected (reason %d), nothing else sent\n", what, reason);
  return ok;
}

static int adversary(int port)
{
  unsigned seed = (unsigned)getpid();
  uint8_t ch[CHALLENGE_LEN], buf[1 << 16], hello[HELLO_LEN + 64], magic[8] = {0};
  size_t n;

  /* 1. learn the magic from a reject */
  int s = dial(port, 10);
  REQUIRE(s >= 0, "cannot reach the root at port %d", port);
  REQUIRE(read_challenge(s, ch) == 0, "no bootstrap challenge from the root");
  printf("ok   the root sent a challenge first\n");
  size_t hl = forge_hello(hello, magic, 1, 2, 0, &seed);
  REQUIRE(send_all(s, hello, hl) == 0, "send");
  n = read_all(s, buf, sizeof buf);
  if (check_reject("wrong magic", buf, n, 2))
    memcpy(magic, buf + 8, 8);
  close(s);

  /* 2. a forged register hello with the right magic */
  s = dial(port, 5);
  REQUIRE(s >= 0 && read_challenge(s, ch) == 0, "dial 2");
  hl = forge_hello(hello, magic, 1, 2, 0, &seed);
  uint8_t recorded[HELLO_LEN + 64];
  memcpy(recorded, hello, hl);
  size_t recordedLen = hl;
  send_all(s, hello, hl);
  n = read_all(s, buf, sizeof buf);
  check_reject("forged MAC", buf, n, 1);
  close(s);

  /* 3. replay of the recorded bytes on a fresh connection */
  s = dial(port, 5);
  REQUIRE(s >= 0 && read_challenge(s, ch) == 0, "dial 3");
  send_all(s, recorded, recordedLen);
  n = read_all(s, buf, sizeof buf);
  check_reject("replayed hello", buf, n, 1);
  close(s);

  /* 4. the same bytes, blind: the challenge comes first, then the reject */
  s = dial(port, 5);
  REQUIRE(s >= 0, "dial 4");
  send_all(s, recorded, recordedLen);
  n = read_all(s, buf, sizeof buf);
  CHECK(n >= CHALLENGE_LEN && memcmp(buf, "MSCN", 4) == 0, "blind hello: no challenge first (%zu bytes)", n);
  if (n >= CHALLENGE_LEN)
    check_reject("blind replay", buf + CHALLENGE_LEN, n - CHALLENGE_LEN, 1);
  close(s);

  /* 5a. a hello announcing a 4 GiB payload: dropped without an answer */
  s = dial(port, 5);
  REQUIRE(s >= 0 && read_challenge(s, ch) == 0, "dial 5a");
  hl = forge_hello(hello, magic, 1, 2, 0xffffffffu, &seed);
  send_all(s, hello, hl);
  double t0 = test_now();
  n = read_all(s, buf, sizeof buf);
  CHECK(n == 0, "huge length: the root answered %zu bytes", n);
  CHECK(test_now() - t0 < 3, "huge length: the root held the connection %.1f s", test_now() - t0);
  if (n == 0)
    printf("ok   a hello announcing 4 GiB was dropped after %.3f s\n", test_now() - t0);
  close(s);

  /* 5b. 4 KiB announced, 10 bytes sent, connection held (a slow liar) */
  int slow = dial(port, 5);
  REQUIRE(slow >= 0 && read_challenge(slow, ch) == 0, "dial 5b");
  hl = forge_hello(hello, magic, 1, 2, 4096, &seed);
  send_all(slow, hello, hl);
  send_all(slow, "0123456789", 10);

  /* 6. a forged rank-1 registration that stays connected */
  int squat = dial(port, 5);
  REQUIRE(squat >= 0 && read_challenge(squat, ch) == 0, "dial 6");
  hl = forge_hello(hello, magic, 1, 2, 0, &seed);
  send_all(squat, hello, hl);

  REQUIRE(test_publish("adversary.done", "", 0) == 0, "publish the marker");
  printf("adversary: done, rank 1 may join\n");

  n = read_all(squat, buf, sizeof buf);
  check_reject("squatting rank 1", buf, n, 1);
  close(squat);
  n = read_all(slow, buf, sizeof buf);
  CHECK(n == 0 || (n >= 5 && buf[4] != 0), "slow liar: got %zu bytes", n);
  close(slow);

  REQUIRE(test_wait_file("job.done", 20) == 0, "the real job did not finish in 20 s");
  /* The root is gone once the job formed. */
  s = dial(port, 0.2);
  CHECK(s < 0, "the root still listens after the job formed");
  if (s >= 0)
    close(s);
  return test_finish();
}

int main(void)
{
  test_init("adversary");
  signal(SIGPIPE, SIG_IGN);
  int rank = test_rank();
  REQUIRE(test_nranks() == 3, "run with N = 3 (ranks 0 and 1 form the job, rank 2 is the adversary)");
  const char* secret = getenv("MSCCLPP_BOOTSTRAP_SECRET");
  REQUIRE(secret && *secret, "run with MSCCLPP_BOOTSTRAP_SECRET set");
  if (rank == 2) {
    unsetenv("MSCCLPP_BOOTSTRAP_SECRET"); /* the adversary does not know it */
    return adversary(test_port());
  }
  const int nranks = 2;
  MCHECK(mscclppSetBootstrapConnTimeout(20));
  if (rank == 0)
    MCHECK(mscclppSetLogHandler(handler));
  else
    REQUIRE(test_wait_file("adversary.done", 20) == 0, "the adversary did not finish in 20 s");
  mscclppComm_t comm = NULL;
  double t0 = test_now();
  MCHECK(mscclppCommInitRank(&comm, nranks, test_addr(), rank));
  printf("ok   the communicator formed (%.3f s)\n", test_now() - t0);
  enum { SZ = 256 };
  uint8_t buf[2 * SZ];
  for (int i = 0; i < SZ; i++)
    buf[rank * SZ + i] = (uint8_t)(rank * 91 + i);
  MCHECK_COMM(comm, mscclppBootstrapAllGather(comm, buf, SZ));
  int wrong = 0;
  for (int r = 0; r < nranks; r++)
    for (int i = 0; i < SZ; i++)
      wrong += buf[r * SZ + i] != (uint8_t)(r * 91 + i);
  if (CHECK(wrong == 0, "AllGather: %d wrong bytes", wrong))
    printf("ok   AllGather is right\n");
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  if (rank == 0) {
    pthread_mutex_lock(&logMu);
    int w = warnDropped;
    pthread_mutex_unlock(&logMu);
    CHECK(w >= 5, "rank 0's log handler saw %d WARN lines about dropped connections, want >= 5", w);
    printf("ok   %d WARN lines about dropped connections\n", w);
    MCHECK(mscclppSetLogHandler(NULL));
    REQUIRE(test_publish("job.done", "", 0) == 0, "publish the marker");
  }
  MCHECK(mscclppCommDestroy(comm));
  return test_finish();
}
