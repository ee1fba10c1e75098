/*
 * check.h: tiny helpers shared by the C/C++ conformance programs.
 *
 * Include it after mscclpp.h (abi_layout.c needs mscclpp.h to be its very
 * first include) or on its own; it works from C11 and C++11..C++20. Programs
 * that use POSIX calls define _GNU_SOURCE before any include.
 *
 * CHECK(cond, fmt, ...)      record a failure (file:line) and go on
 * REQUIRE(cond, fmt, ...)    record a failure and exit(1) at once
 * MCHECK(call)               call must return mscclppSuccess, else exit(1)
 * EXPECT_RES(call, want)     call must return want; when want is an error,
 *                            mscclppGetLastError(NULL) must be non-empty
 * EXPECT_RES_COMM(c, call, want)  the same, also mscclppGetLastError(c)
 * test_finish()              print the summary line; the exit status
 *
 * Every failure prints file:line, the result code, its
 * mscclppGetErrorString and the library's last-error text.
 */
#ifndef MSCCLPP_TEST_CHECK_H_
#define MSCCLPP_TEST_CHECK_H_

#include "mscclpp.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* POSIX pieces only when the program asked for them (_GNU_SOURCE first). */
#if defined(__unix__) && defined(_POSIX_C_SOURCE)
#define TEST_POSIX 1
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#else
#define TEST_POSIX 0
#endif

#if defined(__GNUC__)
#define TEST_UNUSED __attribute__((unused))
#define TEST_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TEST_UNUSED
#define TEST_PRINTF(a, b)
#endif

static int g_test_failures TEST_UNUSED = 0;
static int g_test_checks TEST_UNUSED = 0;
static int g_test_rank TEST_UNUSED = 0;
static const char* g_test_name TEST_UNUSED = "test";

/* ---- environment set by launch ---- */

static TEST_UNUSED int test_env_int(const char* name, int dflt)
{
  const char* s = getenv(name);
  if (s == NULL || *s == '\0')
    return dflt;
  return atoi(s);
}

static TEST_UNUSED int test_rank(void)
{
  return test_env_int("MSCCLPP_TEST_RANK", 0);
}

static TEST_UNUSED int test_nranks(void)
{
  return test_env_int("MSCCLPP_TEST_NRANKS", 1);
}

static TEST_UNUSED const char* test_addr(void)
{
  const char* s = getenv("MSCCLPP_TEST_ADDR");
  return s ? s : "127.0.0.1:29500";
}

static TEST_UNUSED const char* test_dir(void)
{
  const char* s = getenv("MSCCLPP_TEST_DIR");
  return s ? s : "/tmp";
}

/* The port of MSCCLPP_TEST_ADDR. */
static TEST_UNUSED int test_port(void)
{
  const char* a = test_addr();
  const char* colon = strrchr(a, ':');
  return colon ? atoi(colon + 1) : 0;
}

/* MSCCLPP_TEST_ADDR with its port plus k, in a static buffer per slot (the
 * launcher checked that ports port..port+15 were free). */
static TEST_UNUSED const char* test_addr_plus(int k)
{
  static char bufs[16][64];
  char* b = bufs[k & 15];
  const char* a = test_addr();
  const char* colon = strrchr(a, ':');
  int hostlen = colon ? (int)(colon - a) : (int)strlen(a);
  snprintf(b, 64, "%.*s:%d", hostlen, a, test_port() + k);
  return b;
}

/* ---- time ---- */

static TEST_UNUSED double test_now(void)
{
  struct timespec ts;
#if TEST_POSIX
  clock_gettime(CLOCK_MONOTONIC, &ts);
#else
  timespec_get(&ts, TIME_UTC);
#endif
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A short pause inside a polling loop that has its own deadline. */
static TEST_UNUSED void test_pause_ms(int ms)
{
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
#if TEST_POSIX
  nanosleep(&ts, NULL);
#else
  (void)ts;
#endif
}

/* ---- reporting ---- */

static TEST_UNUSED const char* test_last_error(mscclppComm_t comm)
{
  const char* s = mscclppGetLastError(comm);
  return s ? s : "(NULL)";
}

static TEST_UNUSED void test_init(const char* name)
{
  setvbuf(stdout, NULL, _IOLBF, 0);
  setvbuf(stderr, NULL, _IOLBF, 0);
  g_test_name = name;
  g_test_rank = test_rank();
}

static TEST_PRINTF(1, 2) TEST_UNUSED void test_note(const char* fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stdout, fmt, ap);
  va_end(ap);
  fputc('\n', stdout);
  fflush(stdout);
}

static TEST_PRINTF(5, 6) TEST_UNUSED int test_check_impl(int ok, const char* file, int line, const char* expr,
                                                         const char* fmt, ...)
{
  g_test_checks++;
  if (ok)
    return 1;
  g_test_failures++;
  fprintf(stdout, "%s:%d: CHECK FAILED: %s: ", file, line, expr);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stdout, fmt, ap);
  va_end(ap);
  fprintf(stdout, " (last error: \"%s\")\n", test_last_error(NULL));
  fflush(stdout);
  return 0;
}

#define CHECK(cond, ...) test_check_impl(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)

#define REQUIRE(cond, ...)                                                  \
  do {                                                                      \
    if (!test_check_impl(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)) \
      test_abort();                                                         \
  } while (0)

static TEST_UNUSED void test_abort(void)
{
  fprintf(stdout, "%s rank %d: aborting after %d failed check(s)\n", g_test_name, g_test_rank, g_test_failures);
  fflush(stdout);
  exit(1);
}

static TEST_UNUSED void test_report_res(const char* file, int line, const char* expr, mscclppResult_t got,
                                        mscclppResult_t want, mscclppComm_t comm, int useComm)
{
  fprintf(stdout, "%s:%d: %s returned %d (%s), expected %d (%s); last error: \"%s\"", file, line, expr, (int)got,
          mscclppGetErrorString(got), (int)want, mscclppGetErrorString(want), test_last_error(NULL));
  if (useComm)
    fprintf(stdout, "; comm last error: \"%s\"", test_last_error(comm));
  fputc('\n', stdout);
  fflush(stdout);
}

#define MCHECK(call)                                                                 \
  do {                                                                               \
    mscclppResult_t res_ = (call);                                                   \
    g_test_checks++;                                                                 \
    if (res_ != mscclppSuccess) {                                                    \
      g_test_failures++;                                                             \
      test_report_res(__FILE__, __LINE__, #call, res_, mscclppSuccess, NULL, 0);     \
      test_abort();                                                                  \
    }                                                                                \
  } while (0)

#define MCHECK_COMM(comm, call)                                                      \
  do {                                                                               \
    mscclppResult_t res_ = (call);                                                   \
    g_test_checks++;                                                                 \
    if (res_ != mscclppSuccess) {                                                    \
      g_test_failures++;                                                             \
      test_report_res(__FILE__, __LINE__, #call, res_, mscclppSuccess, (comm), 1);   \
      test_abort();                                                                  \
    }                                                                                \
  } while (0)

/* Before a call that must fail, the last-error texts are "primed" with a
 * known message from a harmless failing call, so that a call which fails
 * without setting its own message is caught (instead of passing on a stale
 * one): process-wide with mscclppSetBootstrapConnTimeout(-12345), and for a
 * live comm with mscclppConnectWithoutBuffer(comm, -12345, ...). */
static char g_test_prime_msg[2048];
static char g_test_prime_comm_msg[2048];

static TEST_UNUSED int test_prime(mscclppComm_t comm, int useComm)
{
  g_test_prime_comm_msg[0] = '\0';
  if (useComm && comm != NULL) {
    (void)mscclppConnectWithoutBuffer(comm, -12345, -54321, mscclppTransportSHM, NULL);
    snprintf(g_test_prime_comm_msg, sizeof g_test_prime_comm_msg, "%s", test_last_error(comm));
  }
  (void)mscclppSetBootstrapConnTimeout(-12345);
  snprintf(g_test_prime_msg, sizeof g_test_prime_msg, "%s", test_last_error(NULL));
  return 0;
}

/* Returns 1 when call returned want (and, for an error, left its own
 * message); call test_prime first (the EXPECT_ macros do). */
static TEST_UNUSED int test_expect_res(const char* file, int line, const char* expr, mscclppResult_t got,
                                       mscclppResult_t want, mscclppComm_t comm, int useComm)
{
  g_test_checks++;
  if (got != want) {
    g_test_failures++;
    test_report_res(file, line, expr, got, want, comm, useComm);
    return 0;
  }
  if (want != mscclppSuccess) {
    const char* msg = test_last_error(NULL);
    if (msg[0] == '\0') {
      g_test_failures++;
      fprintf(stdout, "%s:%d: %s returned %s as expected but mscclppGetLastError(NULL) is empty\n", file, line, expr,
              mscclppGetErrorString(got));
      return 0;
    }
    if (g_test_prime_msg[0] != '\0' && strcmp(msg, g_test_prime_msg) == 0) {
      g_test_failures++;
      fprintf(stdout,
              "%s:%d: %s returned %s as expected but set no last error: mscclppGetLastError(NULL) is still the "
              "previous failure's \"%s\"\n",
              file, line, expr, mscclppGetErrorString(got), msg);
      return 0;
    }
    if (useComm) {
      const char* cmsg = test_last_error(comm);
      if (cmsg[0] == '\0') {
        g_test_failures++;
        fprintf(stdout, "%s:%d: %s returned %s as expected but mscclppGetLastError(comm) is empty\n", file, line,
                expr, mscclppGetErrorString(got));
        return 0;
      }
      if (g_test_prime_comm_msg[0] != '\0' && strcmp(cmsg, g_test_prime_comm_msg) == 0) {
        g_test_failures++;
        fprintf(stdout,
                "%s:%d: %s returned %s as expected but set no last error on comm: mscclppGetLastError(comm) is "
                "still the previous failure's \"%s\"\n",
                file, line, expr, mscclppGetErrorString(got), cmsg);
        return 0;
      }
    }
    fprintf(stdout, "ok   %s -> %s: \"%s\"\n", expr, mscclppGetErrorString(got), msg);
  } else {
    fprintf(stdout, "ok   %s -> %s\n", expr, mscclppGetErrorString(got));
  }
  return 1;
}

#define EXPECT_RES(call, want) \
  (test_prime(NULL, 0), test_expect_res(__FILE__, __LINE__, #call, (call), (want), NULL, 0))
#define EXPECT_RES_COMM(comm, call, want) \
  (test_prime((comm), 1), test_expect_res(__FILE__, __LINE__, #call, (call), (want), (comm), 1))

/* Case-insensitive strstr. */
static TEST_UNUSED const char* test_stristr(const char* hay, const char* needle)
{
  size_t n = strlen(needle);
  if (n == 0)
    return hay;
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && hay[i]) {
      char a = hay[i], b = needle[i];
      if (a >= 'A' && a <= 'Z')
        a = (char)(a - 'A' + 'a');
      if (b >= 'A' && b <= 'Z')
        b = (char)(b - 'A' + 'a');
      if (a != b)
        break;
      i++;
    }
    if (i == n)
      return hay;
  }
  return NULL;
}

/* Whether msg names rank r: "rank 2", "rank=2", "rank: 2", "peer 2",
 * "ranks 0,2" ... (a "rank"/"peer" word followed, within a short list of
 * separators and other numbers, by the number r as a whole number). */
static TEST_UNUSED int test_mentions_rank(const char* msg, int r)
{
  const char* words[] = {"rank", "peer"};
  for (int w = 0; w < 2; w++) {
    const char* p = msg;
    while ((p = test_stristr(p, words[w])) != NULL) {
      p += strlen(words[w]);
      const char* q = p;
      if (*q == 's' || *q == 'S')
        q++;
      /* scan up to 64 chars of separators and numbers */
      for (int steps = 0; *q && steps < 64; steps++) {
        if (*q >= '0' && *q <= '9') {
          char* end;
          long v = strtol(q, &end, 10);
          if (v == r)
            return 1;
          q = end;
        } else if (*q == ' ' || *q == '=' || *q == ':' || *q == ',' || *q == '[' || *q == ']' || *q == '(' ||
                   *q == ')' || *q == '#' || *q == '{' || *q == '}') {
          q++;
        } else {
          break;
        }
      }
    }
  }
  return 0;
}

static TEST_UNUSED int test_finish(void)
{
  if (g_test_failures == 0) {
    fprintf(stdout, "%s rank %d: all %d checks passed\n", g_test_name, g_test_rank, g_test_checks);
    fflush(stdout);
    return 0;
  }
  fprintf(stdout, "%s rank %d: %d of %d checks FAILED\n", g_test_name, g_test_rank, g_test_failures, g_test_checks);
  fflush(stdout);
  return 1;
}

/* ---- passing a mscclppUniqueId out of band through MSCCLPP_TEST_DIR ---- */
#if TEST_POSIX
/* Write size bytes atomically as $MSCCLPP_TEST_DIR/name (tmp file + rename). */
static TEST_UNUSED int test_publish(const char* name, const void* data, size_t size)
{
  char tmp[4096], path[4096];
  snprintf(path, sizeof path, "%s/%s", test_dir(), name);
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%d", test_dir(), name, (int)getpid());
  FILE* f = fopen(tmp, "wb");
  if (f == NULL)
    return -1;
  if (size && fwrite(data, 1, size, f) != size) {
    fclose(f);
    return -1;
  }
  if (fclose(f) != 0)
    return -1;
  return rename(tmp, path);
}

/* Poll for $MSCCLPP_TEST_DIR/name until it exists with size bytes, at most
 * timeoutSec seconds. Returns 0 when read. */
static TEST_UNUSED int test_fetch(const char* name, void* data, size_t size, double timeoutSec)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", test_dir(), name);
  double deadline = test_now() + timeoutSec;
  int ms = 1;
  for (;;) {
    FILE* f = fopen(path, "rb");
    if (f != NULL) {
      size_t got = size ? fread(data, 1, size, f) : 0;
      fclose(f);
      if (got == size)
        return 0;
    }
    if (test_now() > deadline)
      return -1;
    test_pause_ms(ms);
    if (ms < 20)
      ms *= 2;
  }
}

/* Wait for a marker file published with test_publish(name, "", 0). */
static TEST_UNUSED int test_wait_file(const char* name, double timeoutSec)
{
  return test_fetch(name, NULL, 0, timeoutSec);
}

static TEST_UNUSED int test_publish_id(const char* name, const mscclppUniqueId* id)
{
  return test_publish(name, id, sizeof *id);
}

static TEST_UNUSED int test_fetch_id(const char* name, mscclppUniqueId* id, double timeoutSec)
{
  return test_fetch(name, id, sizeof *id, timeoutSec);
}

/* A TCP connection to 127.0.0.1:port, retried while nothing listens there yet (up to sec
 * seconds), with send and receive timeouts of ioSec seconds; -1 when none came. */
static TEST_UNUSED int test_dial_local(int port, double sec, int ioSec)
{
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  double deadline = test_now() + sec;
  int ms = 1;
  while (test_now() < deadline) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
      return -1;
    if (connect(s, (struct sockaddr*)&a, sizeof a) == 0) {
      struct timeval tv = {ioSec, 0};
      setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      return s;
    }
    close(s);
    test_pause_ms(ms);
    if (ms < 20)
      ms *= 2;
  }
  return -1;
}

/* Sends every byte of p; 0, or -1 once the peer closed or a send timed out. */
static TEST_UNUSED int test_send_all(int s, const void* p, size_t n)
{
  const char* c = (const char*)p;
  while (n > 0) {
    ssize_t w = send(s, c, n, MSG_NOSIGNAL);
    if (w <= 0)
      return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}
#endif /* TEST_POSIX */

#endif /* MSCCLPP_TEST_CHECK_H_ */
