/*
 * logging.c: the log handler, line shapes, MSCCLPP_DEBUG levels,
 * MSCCLPP_DEBUG_FILE and the last error (N = 1). The runner sets the
 * environment per mode, before the process starts:
 *
 *   logging info   MSCCLPP_DEBUG=INFO: the handler gets INFO lines
 *                  "host:pid:tid [dev] MSCCLPP INFO ...\n" during init and
 *                  "host:pid:tid [dev] file:line MSCCLPP WARN ...\n" for a
 *                  failure, whose text holds mscclppGetLastError(NULL)
 *                  (the VERSION line "host:pid:tid [dev] MSCCLPP <msg>\n"
 *                  and TRACE lines are accepted too);
 *                  SetLogHandler(NULL) restores the default (stdout);
 *                  mscclppDefaultLogHandler writes a line to stdout as is.
 *   logging warn   MSCCLPP_DEBUG=warn (any case): WARN lines only, no INFO.
 *   logging subsys MSCCLPP_DEBUG=Info, MSCCLPP_DEBUG_SUBSYS=^INIT,ENV,COLL: the
 *                  INFO lines of init are masked out, WARN lines are not.
 *   logging off    MSCCLPP_DEBUG unset: the handler gets nothing, the last
 *                  error is still kept.
 *   logging file   MSCCLPP_DEBUG=INFO, MSCCLPP_DEBUG_FILE=$DIR/dbg-%h-%p-%%.log,
 *                  MSCCLPP_TEST_LOGDIR=$DIR: the file with the expanded
 *                  name gets the lines (and mscclppDefaultLogHandler's), not
 *                  stdout.
 *   logging symlink MSCCLPP_DEBUG_FILE names a symlink: refused (WARN on
 *                  stderr), the lines go to stderr, the target is untouched.
 *   logging setenv MSCCLPP_DEBUG unset at start: the program sets
 *                  MSCCLPP_DEBUG=INFO and MSCCLPP_DEBUG_SUBSYS=INIT,ENV with
 *                  setenv(3) after the library was loaded, before its first
 *                  call, and gets INFO lines (upstream reads them with getenv
 *                  at first use), among them "MSCCLPP_DEBUG set by
 *                  environment to INFO" once.
 *   logging trace  MSCCLPP_DEBUG=TRACE, MSCCLPP_DEBUG_SUBSYS=CALL,ALLOC: one
 *                  TRACE line per API call ("<ms> go_mscclppX:line MSCCLPP
 *                  TRACE mscclppX <arguments>"), and INFO lines for
 *                  mscclppHostAlloc/HostFree under ALLOC; no INIT lines.
 *   logging malformed MSCCLPP_DEBUG unset, MSCCLPP_BOOTSTRAP_TIMEOUT=abc: one
 *                  WARN line naming the variable on stderr (a malformed value
 *                  is reported even with logging off), init works.
 *   logging commid MSCCLPP_COMM_ID unset at start: the program sets it with
 *                  setenv(3) to MSCCLPP_TEST_ADDR's port + 1 before
 *                  mscclppGetUniqueId, whose root must then listen there
 *                  (binding it fails with EADDRINUSE); a 1-rank init works.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <strings.h>
#include <pthread.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "check.h"

#define MAX_LINES 4096
static pthread_mutex_t logMu = PTHREAD_MUTEX_INITIALIZER;
static char* lines[MAX_LINES];
static int nlines;
static char host[256];
static int pid;

static void handler(const char* msg)
{
  pthread_mutex_lock(&logMu);
  if (nlines < MAX_LINES)
    lines[nlines++] = strdup(msg ? msg : "(NULL)");
  pthread_mutex_unlock(&logMu);
}

static int line_count(void)
{
  pthread_mutex_lock(&logMu);
  int n = nlines;
  pthread_mutex_unlock(&logMu);
  return n;
}

/* Skip "host:pid:tid [dev] "; NULL when the line does not start so. */
static const char* skip_prefix(const char* s)
{
  size_t hl = strlen(host);
  if (strncmp(s, host, hl) != 0 || s[hl] != ':')
    return NULL;
  s += hl + 1;
  char* end;
  long p = strtol(s, &end, 10);
  if (end == s || p != pid || *end != ':')
    return NULL;
  s = end + 1;
  long tid = strtol(s, &end, 10);
  if (end == s || tid <= 0 || *end != ' ')
    return NULL;
  s = end + 1;
  if (*s != '[')
    return NULL;
  s++;
  if (*s == '-')
    s++;
  if (!isdigit((unsigned char)*s))
    return NULL;
  while (isdigit((unsigned char)*s))
    s++;
  if (s[0] != ']' || s[1] != ' ')
    return NULL;
  return s + 2;
}

enum kind { K_BAD, K_INFO, K_WARN, K_VERSION, K_TRACE };

/* Classify a line; *msg points at the text after "MSCCLPP LEVEL ". */
static enum kind classify(const char* line, const char** msg)
{
  size_t len = strlen(line);
  if (len == 0 || line[len - 1] != '\n')
    return K_BAD;
  const char* s = skip_prefix(line);
  if (s == NULL)
    return K_BAD;
  if (strncmp(s, "MSCCLPP INFO ", 13) == 0) {
    *msg = s + 13;
    return K_INFO;
  }
  /* file:line MSCCLPP WARN */
  const char* sp = strchr(s, ' ');
  if (sp && strncmp(sp, " MSCCLPP WARN ", 14) == 0) {
    const char* colon = NULL;
    for (const char* q = s; q < sp; q++)
      if (*q == ':')
        colon = q;
    if (colon == NULL || colon == s || colon + 1 == sp)
      return K_BAD;
    for (const char* q = colon + 1; q < sp; q++)
      if (!isdigit((unsigned char)*q))
        return K_BAD;
    *msg = sp + 14;
    return K_WARN;
  }
  /* <ms since init> func:line MSCCLPP TRACE */
  const char* tr = strstr(s, " MSCCLPP TRACE ");
  if (tr && isdigit((unsigned char)s[0])) {
    *msg = tr + 15;
    return K_TRACE;
  }
  /* the VERSION line: "MSCCLPP <msg>" (NCCL's shape for its version line) */
  if (strncmp(s, "MSCCLPP ", 8) == 0) {
    *msg = s + 8;
    return K_VERSION;
  }
  return K_BAD;
}

/* Check every captured line; count INFO and WARN lines; find a WARN line
 * holding text. */
static void check_lines(int from, int* nInfo, int* nWarn, const char* text, int* textFound)
{
  *nInfo = *nWarn = 0;
  if (textFound)
    *textFound = 0;
  pthread_mutex_lock(&logMu);
  for (int i = from; i < nlines; i++) {
    const char* msg = NULL;
    enum kind k = classify(lines[i], &msg);
    size_t len = strlen(lines[i]);
    printf("log: %s%s", lines[i], len && lines[i][len - 1] == '\n' ? "" : "<no newline>\n");
    CHECK(k != K_BAD, "log line %d has not the spec's shape (host \"%s\", pid %d): \"%s\"", i, host, pid, lines[i]);
    CHECK(strstr(lines[i], " 1 ranks") == NULL && strstr(lines[i], "(1 ranks") == NULL,
          "log line %d says \"1 ranks\": \"%s\"", i, lines[i]);
    if (k == K_INFO)
      (*nInfo)++;
    if (k == K_WARN) {
      (*nWarn)++;
      if (text && textFound && text[0] && strstr(msg, text))
        *textFound = 1;
    }
  }
  pthread_mutex_unlock(&logMu);
}

/* Run fn with fd `which` (1 or 2) sent to a file; return what was written (malloc'd). */
static char* capture_fd(int which, void (*fn)(void*), void* arg)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/fd%d.%d", test_dir(), which, pid);
  fflush(stdout);
  fflush(stderr);
  int saved = dup(which);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(saved >= 0 && fd >= 0, "cannot redirect fd %d to %s", which, path);
  dup2(fd, which);
  close(fd);
  fn(arg);
  fflush(stdout);
  fflush(stderr);
  dup2(saved, which);
  close(saved);
  FILE* f = fopen(path, "rb");
  REQUIRE(f != NULL, "cannot read %s", path);
  char* out = (char*)calloc(1, 1 << 20);
  size_t n = fread(out, 1, (1 << 20) - 1, f);
  out[n] = '\0';
  fclose(f);
  unlink(path);
  return out;
}

static char* capture_stdout(void (*fn)(void*), void* arg)
{
  return capture_fd(1, fn, arg);
}

static void call_default_handler(void* msg)
{
  mscclppDefaultLogHandler((const char*)msg);
}

static void call_failing(void* unused)
{
  (void)unused;
  int v;
  mscclppResult_t r = mscclppCommSize(NULL, &v);
  (void)r;
}

static mscclppComm_t init_one(void)
{
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRank(&comm, 1, test_addr(), 0));
  MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
  return comm;
}

/* A failure on purpose; returns its last error (static copy). */
static const char* fail_once(void)
{
  static char copy[4096];
  int v;
  EXPECT_RES(mscclppCommRank(NULL, &v), mscclppInvalidUsage);
  snprintf(copy, sizeof copy, "%s", test_last_error(NULL));
  return copy;
}

static void mode_handler(int wantInfo, int wantWarn)
{
  MCHECK(mscclppSetLogHandler(handler));
  mscclppComm_t comm = init_one();
  MCHECK(mscclppCommDestroy(comm));
  int nInfo, nWarn, found;
  check_lines(0, &nInfo, &nWarn, NULL, NULL);
  if (wantInfo)
    CHECK(nInfo > 0, "MSCCLPP_DEBUG=INFO but no INFO line during init/destroy");
  else
    CHECK(nInfo == 0, "%d INFO lines although MSCCLPP_DEBUG=%s", nInfo, getenv("MSCCLPP_DEBUG"));
  if (nInfo)
    printf("ok   %d INFO lines of the right shape during init\n", nInfo);

  int before = line_count();
  const char* last = fail_once();
  CHECK(last[0] != '\0', "mscclppGetLastError(NULL) empty after a failure");
  check_lines(before, &nInfo, &nWarn, last, &found);
  if (wantWarn) {
    CHECK(nWarn > 0, "no WARN line for a failing call");
    CHECK(found, "no WARN line holds the last error text \"%s\"", last);
    if (nWarn && found)
      printf("ok   the failure gave a WARN line of the right shape holding the last error \"%s\"\n", last);
  } else {
    CHECK(line_count() == before, "logging is off but the handler got %d lines", line_count() - before);
    printf("ok   logging off: the handler got nothing; last error \"%s\"\n", last);
  }

  /* back to the default: lines go to stdout, not to the handler */
  MCHECK(mscclppSetLogHandler(NULL));
  before = line_count();
  char* out = capture_stdout(call_failing, NULL);
  CHECK(line_count() == before, "the handler still got %d lines after SetLogHandler(NULL)", line_count() - before);
  if (wantWarn) {
    CHECK(strstr(out, "MSCCLPP WARN") != NULL, "after SetLogHandler(NULL) a failure wrote no WARN line to stdout: "
                                               "\"%s\"",
          out);
    if (strstr(out, "MSCCLPP WARN"))
      printf("ok   SetLogHandler(NULL): the WARN line went to stdout: %s", out);
  } else {
    CHECK(strstr(out, "MSCCLPP") == NULL, "logging is off but stdout got \"%s\"", out);
  }
  free(out);

  /* mscclppDefaultLogHandler writes what it is given to the stream */
  out = capture_stdout(call_default_handler, (void*)"a marker line from logging.c\n");
  if (CHECK(strcmp(out, "a marker line from logging.c\n") == 0, "mscclppDefaultLogHandler wrote \"%s\" to stdout",
            out))
    printf("ok   mscclppDefaultLogHandler wrote its line to stdout unchanged\n");
  free(out);
}

static void mode_file(void)
{
  const char* dir = getenv("MSCCLPP_TEST_LOGDIR");
  const char* pat = getenv("MSCCLPP_DEBUG_FILE");
  REQUIRE(dir && pat, "run with MSCCLPP_TEST_LOGDIR and MSCCLPP_DEBUG_FILE");
  char want[4096];
  snprintf(want, sizeof want, "%s/dbg-%s-%d-%%.log", dir, host, pid);
  printf("MSCCLPP_DEBUG_FILE=%s -> expecting %s\n", pat, want);

  mscclppComm_t comm = NULL;
  char* out;
  /* everything with stdout captured: nothing may go there */
  fflush(stdout);
  char path[4096];
  snprintf(path, sizeof path, "%s/stdout.%d", test_dir(), pid);
  int saved = dup(1);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(saved >= 0 && fd >= 0, "cannot redirect stdout");
  dup2(fd, 1);
  close(fd);
  mscclppResult_t r1 = mscclppCommInitRank(&comm, 1, test_addr(), 0);
  int v;
  mscclppResult_t r2 = mscclppCommRank(NULL, &v);
  mscclppDefaultLogHandler("a marker line from logging.c\n");
  mscclppResult_t r3 = comm ? mscclppCommDestroy(comm) : mscclppSuccess;
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  CHECK(r1 == mscclppSuccess, "InitRank: %s", mscclppGetErrorString(r1));
  CHECK(r2 == mscclppInvalidUsage, "CommRank(NULL): %s", mscclppGetErrorString(r2));
  CHECK(r3 == mscclppSuccess, "CommDestroy: %s", mscclppGetErrorString(r3));
  FILE* f = fopen(path, "rb");
  out = (char*)calloc(1, 1 << 20);
  if (f) {
    size_t n = fread(out, 1, (1 << 20) - 1, f);
    out[n] = '\0';
    fclose(f);
  }
  unlink(path);
  CHECK(strstr(out, "MSCCLPP") == NULL && strstr(out, "marker") == NULL,
        "with MSCCLPP_DEBUG_FILE set, stdout still got: \"%s\"", out);
  free(out);

  f = fopen(want, "rb");
  if (!CHECK(f != NULL, "the debug file %s does not exist (%s)", want, strerror(errno))) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls -la '%s'", dir);
    if (system(cmd) != 0) {
    }
    return;
  }
  char* text = (char*)calloc(1, 1 << 20);
  size_t n = fread(text, 1, (1 << 20) - 1, f);
  text[n] = '\0';
  fclose(f);
  printf("--- %s:\n%s---\n", want, text);
  CHECK(strstr(text, "MSCCLPP INFO") != NULL, "no INFO line in the debug file");
  CHECK(strstr(text, "MSCCLPP WARN") != NULL, "no WARN line in the debug file");
  CHECK(strstr(text, "a marker line from logging.c\n") != NULL,
        "mscclppDefaultLogHandler's line is not in the debug file");
  /* every library line has the spec's shape */
  char* save = NULL;
  int checked = 0;
  for (char* ln = strtok_r(text, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
    if (strcmp(ln, "a marker line from logging.c") == 0)
      continue;
    char buf[8192];
    snprintf(buf, sizeof buf, "%s\n", ln);
    const char* msg;
    enum kind k = classify(buf, &msg);
    CHECK(k == K_INFO || k == K_WARN || k == K_VERSION, "debug file line has not the spec's shape: \"%s\"", ln);
    checked++;
  }
  printf("ok   %d lines in %s, of the spec's shapes\n", checked, want);
  free(text);
}

/* MSCCLPP_DEBUG_FILE names a symlink (made by run.sh) to a file that must stay untouched:
 * the library refuses it with a WARN on stderr and logs there instead. */
static void mode_symlink(void)
{
  const char* link = getenv("MSCCLPP_DEBUG_FILE");
  const char* target = getenv("MSCCLPP_TEST_LINK_TARGET");
  REQUIRE(link && target, "run with MSCCLPP_DEBUG_FILE (a symlink) and MSCCLPP_TEST_LINK_TARGET");
  char path[4096];
  snprintf(path, sizeof path, "%s/stderr.%d", test_dir(), pid);
  fflush(stderr);
  int saved = dup(2);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(saved >= 0 && fd >= 0, "cannot redirect stderr");
  dup2(fd, 2);
  close(fd);
  mscclppComm_t comm = NULL;
  mscclppResult_t r = mscclppCommInitRank(&comm, 1, test_addr(), 0);
  if (comm) mscclppCommDestroy(comm);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  CHECK(r == mscclppSuccess, "InitRank with a refused debug file: %s", mscclppGetErrorString(r));
  FILE* f = fopen(path, "rb");
  char* err = (char*)calloc(1, 1 << 20);
  if (f) {
    size_t n = fread(err, 1, (1 << 20) - 1, f);
    err[n] = '\0';
    fclose(f);
  }
  unlink(path);
  CHECK(strstr(err, "MSCCLPP WARN") != NULL && strstr(err, "refusing MSCCLPP_DEBUG_FILE") != NULL,
        "no WARN refusing the symlinked debug file on stderr");
  CHECK(strstr(err, "MSCCLPP INFO") != NULL, "the INFO lines did not go to stderr instead");
  f = fopen(target, "rb");
  char buf[256] = {0};
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  CHECK(n == 10 && memcmp(buf, "untouched\n", 10) == 0, "the symlink's target changed: \"%s\"", buf);
  free(err);
}

/* How many captured lines contain text. */
static int count_lines(const char* text)
{
  int n = 0;
  pthread_mutex_lock(&logMu);
  for (int i = 0; i < nlines; i++)
    if (strstr(lines[i], text))
      n++;
  pthread_mutex_unlock(&logMu);
  return n;
}

/* MSCCLPP_DEBUG=TRACE with CALL and ALLOC: a TRACE line per call. */
static void mode_trace(void)
{
  MCHECK(mscclppSetLogHandler(handler));
  mscclppComm_t comm = init_one();
  int rank = -1;
  MCHECK_COMM(comm, mscclppCommRank(comm, &rank));
  void* p = NULL;
  MCHECK(mscclppHostAlloc(&p, 4096));
  MCHECK(mscclppHostFree(p));
  MCHECK(mscclppCommDestroy(comm));
  int nInfo, nWarn;
  check_lines(0, &nInfo, &nWarn, NULL, NULL);
  static const char* calls[] = {"go_mscclppCommInitRank:", "MSCCLPP TRACE mscclppCommInitRank comm ",
                                "go_mscclppBootstrapBarrier:", "MSCCLPP TRACE mscclppBootstrapBarrier comm ",
                                "go_mscclppCommRank:", "MSCCLPP TRACE mscclppCommRank comm ",
                                "go_mscclppHostAlloc:", "MSCCLPP TRACE mscclppHostAlloc ptr ",
                                "go_mscclppCommDestroy:", "MSCCLPP TRACE mscclppCommDestroy comm "};
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i += 2) {
    int n = 0;
    pthread_mutex_lock(&logMu);
    for (int k = 0; k < nlines; k++)
      if (strstr(lines[k], calls[i]) && strstr(lines[k], calls[i + 1]))
        n++;
    pthread_mutex_unlock(&logMu);
    if (CHECK(n == 1, "%d TRACE lines with \"%s\" and \"%s\", want 1", n, calls[i], calls[i + 1]))
      printf("ok   one TRACE line for %s\n", calls[i + 1] + strlen("MSCCLPP TRACE "));
  }
  CHECK(count_lines("nranks 1 ipPortPair ") == 1, "mscclppCommInitRank's TRACE line lacks its arguments");
  CHECK(count_lines("MSCCLPP INFO mscclppHostAlloc: 4096 bytes at ") == 1, "no ALLOC line for mscclppHostAlloc");
  CHECK(count_lines("MSCCLPP INFO mscclppHostFree: 4096 bytes at ") == 1, "no ALLOC line for mscclppHostFree");
  CHECK(count_lines(" ready in ") == 0, "an INIT line although MSCCLPP_DEBUG_SUBSYS=CALL,ALLOC");
  MCHECK(mscclppSetLogHandler(NULL));
}

static void init_and_destroy(void* unused)
{
  (void)unused;
  MCHECK(mscclppCommDestroy(init_one()));
}

/* A malformed variable is reported on stderr even with logging off. */
static void mode_malformed(void)
{
  REQUIRE(getenv("MSCCLPP_DEBUG") == NULL, "run without MSCCLPP_DEBUG");
  MCHECK(mscclppSetLogHandler(handler));
  char* err = capture_fd(2, init_and_destroy, NULL);
  printf("stderr: %s\n", err);
  int n = 0;
  for (const char* q = err; (q = strstr(q, "MSCCLPP WARN ")) != NULL; q++)
    n++;
  if (CHECK(n == 1 && strstr(err, "MSCCLPP_BOOTSTRAP_TIMEOUT=\"abc\"") != NULL,
            "want one WARN line about MSCCLPP_BOOTSTRAP_TIMEOUT=\"abc\" on stderr, got %d: \"%s\"", n, err))
    printf("ok   the malformed MSCCLPP_BOOTSTRAP_TIMEOUT was reported once on stderr with logging off\n");
  CHECK(line_count() == 0, "logging is off but the handler got %d lines", line_count());
  free(err);
  MCHECK(mscclppSetLogHandler(NULL));
}

/* MSCCLPP_DEBUG set with setenv(3) after load, before the first call. */
static void mode_setenv(void)
{
  REQUIRE(getenv("MSCCLPP_DEBUG") == NULL, "run without MSCCLPP_DEBUG");
  REQUIRE(setenv("MSCCLPP_DEBUG", "INFO", 1) == 0 && setenv("MSCCLPP_DEBUG_SUBSYS", "INIT,ENV", 1) == 0, "setenv");
  MCHECK(mscclppSetLogHandler(handler));
  mscclppComm_t comm = init_one();
  MCHECK(mscclppCommDestroy(comm));
  int nInfo, nWarn;
  check_lines(0, &nInfo, &nWarn, NULL, NULL);
  if (CHECK(nInfo > 0, "MSCCLPP_DEBUG=INFO set with setenv after load gave no INFO line"))
    printf("ok   %d INFO lines after setenv(\"MSCCLPP_DEBUG\", \"INFO\") at run time\n", nInfo);
  int envLines = 0;
  pthread_mutex_lock(&logMu);
  for (int i = 0; i < nlines; i++)
    if (strstr(lines[i], "MSCCLPP INFO MSCCLPP_DEBUG set by environment to INFO\n"))
      envLines++;
  pthread_mutex_unlock(&logMu);
  if (CHECK(envLines == 1, "%d lines \"MSCCLPP_DEBUG set by environment to INFO\", want 1", envLines))
    printf("ok   one \"MSCCLPP_DEBUG set by environment to INFO\" line\n");
  MCHECK(mscclppSetLogHandler(NULL));
}

/* MSCCLPP_COMM_ID set with setenv(3) after load, before mscclppGetUniqueId. */
static void mode_commid(void)
{
  REQUIRE(getenv("MSCCLPP_COMM_ID") == NULL, "run without MSCCLPP_COMM_ID");
  const char* addr = test_addr_plus(1);
  REQUIRE(setenv("MSCCLPP_COMM_ID", addr, 1) == 0, "setenv");
  mscclppUniqueId id;
  MCHECK(mscclppGetUniqueId(&id));
  /* the root of the id listens at MSCCLPP_COMM_ID: that port is taken */
  int s = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(s >= 0, "socket: %s", strerror(errno));
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)(test_port() + 1));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = bind(s, (struct sockaddr*)&sa, sizeof sa);
  int err = errno;
  close(s);
  if (CHECK(rc != 0 && err == EADDRINUSE,
            "after setenv(\"MSCCLPP_COMM_ID\", \"%s\"), mscclppGetUniqueId's root does not listen there "
            "(bind: %s)",
            addr, rc == 0 ? "succeeded" : strerror(err)))
    printf("ok   mscclppGetUniqueId's root listens at MSCCLPP_COMM_ID=%s set with setenv at run time\n", addr);
  mscclppComm_t comm = NULL;
  MCHECK(mscclppCommInitRankFromId(&comm, 1, id, 0));
  if (comm) {
    MCHECK_COMM(comm, mscclppBootstrapBarrier(comm));
    MCHECK(mscclppCommDestroy(comm));
  }
}

int main(int argc, char** argv)
{
  test_init("logging");
  REQUIRE(argc == 2, "usage: logging info|warn|subsys|off|file|symlink|setenv|commid|trace|malformed");
  pid = (int)getpid();
  REQUIRE(gethostname(host, sizeof host) == 0, "gethostname");
  host[sizeof host - 1] = '\0';
  char* dot = strchr(host, '.');
  if (dot)
    *dot = '\0';
  const char* dbg = getenv("MSCCLPP_DEBUG");
  printf("mode %s, MSCCLPP_DEBUG=%s, host %s, pid %d\n", argv[1], dbg ? dbg : "(unset)", host, pid);

  if (strcmp(argv[1], "info") == 0) {
    REQUIRE(dbg && strcasecmp(dbg, "INFO") == 0, "run with MSCCLPP_DEBUG=INFO");
    mode_handler(1, 1);
  } else if (strcmp(argv[1], "warn") == 0) {
    REQUIRE(dbg && strcasecmp(dbg, "WARN") == 0, "run with MSCCLPP_DEBUG=WARN");
    mode_handler(0, 1);
  } else if (strcmp(argv[1], "subsys") == 0) {
    const char* sub = getenv("MSCCLPP_DEBUG_SUBSYS");
    REQUIRE(dbg && strcasecmp(dbg, "INFO") == 0 && sub && strcmp(sub, "^INIT,ENV,COLL") == 0,
            "run with MSCCLPP_DEBUG=INFO and MSCCLPP_DEBUG_SUBSYS=^INIT,ENV,COLL");
    mode_handler(0, 1);
  } else if (strcmp(argv[1], "off") == 0) {
    REQUIRE(dbg == NULL, "run without MSCCLPP_DEBUG");
    mode_handler(0, 0);
  } else if (strcmp(argv[1], "trace") == 0) {
    mode_trace();
  } else if (strcmp(argv[1], "malformed") == 0) {
    mode_malformed();
  } else if (strcmp(argv[1], "setenv") == 0) {
    mode_setenv();
  } else if (strcmp(argv[1], "commid") == 0) {
    mode_commid();
  } else if (strcmp(argv[1], "symlink") == 0) {
    mode_symlink();
  } else if (strcmp(argv[1], "file") == 0) {
    REQUIRE(dbg && strcmp(dbg, "INFO") == 0, "run with MSCCLPP_DEBUG=INFO");
    mode_file();
  } else {
    REQUIRE(0, "unknown mode %s", argv[1]);
  }
  return test_finish();
}
