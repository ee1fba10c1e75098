/*
 * merge.c: mscclpp-trace-merge, joins the per-rank files of the trace tool
 * (trace.c) into one Chrome trace-event JSON file for the whole job.
 *
 *   mscclpp-trace-merge [-o OUT] FILE...
 *
 * Each FILE is one rank's file as trace.c writes it ("otherData" on the
 * first line, then one event per line). Clocks: each rank's "ts" are its
 * CLOCK_MONOTONIC microseconds; its "otherData" holds that clock and
 * CLOCK_REALTIME read together when its first init call entered. Every
 * event is moved by (realtime - monotonic) of its own rank, so the ranks
 * share the real-time clock's time line (exact on one host; across hosts as
 * good as their clocks' synchronisation, e.g. NTP), then the whole job by
 * the earliest event, so the merged file starts at 0. Events are written
 * sorted by time (metadata first): ranks are processes ("pid" = rank, named
 * "rank R (pid P)"), threads are tracks. Writes to OUT (default stdout).
 * Exit status 0, or 1 with a message naming the file and line it refused.
 *
 * In C: it ships with the library and needs nothing but libc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/outfile.h"

struct line
{
  char* text; /* the event without its trailing comma */
  double ts;
  int meta; /* a "ph":"M" record: written first */
  size_t order;
};

static struct line* lines;
static size_t nlines, caplines;

static void die(const char* f, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char* f, ...)
{
  va_list ap;
  va_start(ap, f);
  fprintf(stderr, "mscclpp-trace-merge: ");
  vfprintf(stderr, f, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

/* the number after "key": in s, or die */
static double number(const char* s, const char* key, const char* file, long lineNo)
{
  char pat[64];
  snprintf(pat, sizeof(pat), "\"%s\":", key);
  const char* p = strstr(s, pat);
  if (p == NULL) die("%s:%ld: no \"%s\"", file, lineNo, key);
  char* end;
  errno = 0;
  double v = strtod(p + strlen(pat), &end);
  if (end == p + strlen(pat) || errno != 0) die("%s:%ld: \"%s\" is not a number", file, lineNo, key);
  return v;
}

static void add(char* text, double ts, int meta)
{
  if (nlines == caplines) {
    caplines = caplines ? caplines * 2 : 1024;
    lines = realloc(lines, caplines * sizeof(*lines));
    if (lines == NULL) die("out of memory");
  }
  lines[nlines] = (struct line){text, ts, meta, nlines};
  nlines++;
}

static int byTime(const void* a, const void* b)
{
  const struct line* x = a;
  const struct line* y = b;
  if (x->meta != y->meta) return x->meta ? -1 : 1;
  if (!x->meta && x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return x->order < y->order ? -1 : (x->order > y->order ? 1 : 0);
}

/* reads one rank's file; returns its rank */
static int readFile(const char* file)
{
  FILE* f = fopen(file, "r");
  if (f == NULL) die("cannot open %s: %s", file, strerror(errno));
  char* buf = NULL;
  size_t cap = 0;
  ssize_t len;
  long lineNo = 0;
  double offset = 0;
  int rank = -1, sawHeader = 0, sawEnd = 0;
  while ((len = getline(&buf, &cap, f)) >= 0) {
    lineNo++;
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ')) buf[--len] = '\0';
    if (lineNo == 1) {
      if (strncmp(buf, "{\"otherData\":{\"tool\":\"mscclpp-trace\",\"format\":1,", 48) != 0)
        die("%s: not a file of the mscclpp trace tool (format 1)", file);
      rank = (int)number(buf, "rank", file, lineNo);
      offset = number(buf, "realtime_us", file, lineNo) - number(buf, "monotonic_us", file, lineNo);
      sawHeader = 1;
      continue;
    }
    if (strcmp(buf, "]}") == 0) {
      sawEnd = 1;
      continue;
    }
    if (strncmp(buf, "{\"name\":", 8) != 0) continue; /* "displayTimeUnit", "traceEvents" */
    if (len > 0 && buf[len - 1] == ',') buf[--len] = '\0';
    if (strstr(buf, "\"ph\":\"M\"") != NULL) {
      add(strdup(buf), 0, 1);
      continue;
    }
    char* p = strstr(buf, "\"ts\":");
    if (p == NULL) die("%s:%ld: an event without \"ts\"", file, lineNo);
    char* end;
    double ts = strtod(p + 5, &end);
    if (end == p + 5) die("%s:%ld: \"ts\" is not a number", file, lineNo);
    ts += offset;
    /* the text with the moved ts; the base is subtracted when writing */
    char* text;
    if (asprintf(&text, "%.*s\"ts\":%%TS%%%s", (int)(p - buf), buf, end) < 0) die("out of memory");
    add(text, ts, 0);
  }
  if (!sawHeader) die("%s: empty", file);
  if (!sawEnd) die("%s: truncated (no closing \"]}\"; did the rank exit normally?)", file);
  free(buf);
  fclose(f);
  return rank;
}

int main(int argc, char** argv)
{
  const char* out = NULL;
  int first = 1;
  if (argc > 2 && strcmp(argv[1], "-o") == 0) {
    out = argv[2];
    first = 3;
  }
  if (first >= argc || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    fprintf(stderr, "usage: mscclpp-trace-merge [-o OUT] FILE...\n"
                    "joins the per-rank files of the trace tool (libmscclpp_trace.so) into one trace for the job\n");
    return first >= argc ? 2 : 0;
  }
  int nfiles = argc - first;
  int* ranks = calloc((size_t)nfiles, sizeof(int));
  if (ranks == NULL) die("out of memory");
  for (int i = 0; i < nfiles; i++) {
    ranks[i] = readFile(argv[first + i]);
    for (int j = 0; j < i; j++)
      if (ranks[j] == ranks[i] && ranks[i] >= 0)
        die("%s and %s are both rank %d", argv[first + j], argv[first + i], ranks[i]);
  }
  double base = 0;
  int any = 0;
  for (size_t i = 0; i < nlines; i++)
    if (!lines[i].meta && (!any || lines[i].ts < base)) {
      base = lines[i].ts;
      any = 1;
    }
  qsort(lines, nlines, sizeof(*lines), byTime);
  FILE* f = out != NULL ? outCreate("mscclpp-trace-merge", out) : stdout;
  if (f == NULL) return 1;
  fprintf(f, "{\"otherData\":{\"tool\":\"mscclpp-trace-merge\",\"files\":%d,\"clock\":\"realtime, 0 = the first event\"},\n",
          nfiles);
  fprintf(f, "\"displayTimeUnit\":\"ns\",\n\"traceEvents\":[\n");
  for (size_t i = 0; i < nlines; i++) {
    const char* sep = i + 1 < nlines ? "," : "";
    if (lines[i].meta) {
      fprintf(f, "%s%s\n", lines[i].text, sep);
      continue;
    }
    char* mark = strstr(lines[i].text, "%TS%");
    fprintf(f, "%.*s%.3f%s%s\n", (int)(mark - lines[i].text), lines[i].text, lines[i].ts - base, mark + 4, sep);
  }
  fprintf(f, "]}\n");
  if (out != NULL) return outClose("mscclpp-trace-merge", f, out) != 0;
  if (fflush(f) != 0 || ferror(f)) die("cannot write stdout: %s", strerror(errno));
  return 0;
}
