/*
 * perf_report.h: perf's result rows on stdout in nccl-tests' layout, and in
 * a CSV (-F FILE) or JSON (-J FILE) file; for perf.c (included once there;
 * static functions; rank 0 only).
 *
 * stdout, one row per size: size count type redop root, then time algbw
 * busbw #wrong out of place and the same in place, then iters (the timed
 * iterations that row ran). The CSV file: one header row
 *   size,count,type,redop,root,time_us,algbw,busbw,wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong,iters
 * then one row per size (wrong empty without -c). The JSON file: one object
 *   {"tool", "nranks", "params": {...}, "rows": [{"size", "count", "type",
 *   "redop", "root", "iters", "out_of_place": {"time_us", "algbw", "busbw",
 *   "wrong"}, "in_place": {...}}], "out_of_bounds", "avg_busbw", "ok"}
 * with "wrong": null without -c. Both files are written whole at the end, to a
 * temporary file renamed over FILE.
 */
#ifndef PERF_REPORT_H_
#define PERF_REPORT_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/outfile.h"

struct perf_half {
  double timeUs, algbw, busbw;
  long long wrong; /* -1: not checked */
};

struct perf_row {
  const char* type;
  size_t size, count;
  int iters;
  struct perf_half h[2]; /* [0] out of place, [1] in place */
};

struct perf_report {
  const char *timeName, *csvPath, *jsonPath;
  struct perf_row* rows;
  int nrows, cap;
};

static void report_header(const struct perf_report* r)
{
  printf("#\n");
  printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "",
         "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s  %6s\n", "size", "count", "type", "redop",
         "root", r->timeName, "algbw", "busbw", "#wrong", r->timeName, "algbw", "busbw", "#wrong", "iters");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "", "",
         "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

/* nccl-tests' time format: 2 decimals below 100 us, 1 below 10 ms, none above */
static void report_time(char* out, size_t len, double us)
{
  snprintf(out, len, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
}

static void report_row(struct perf_report* r, const struct perf_row* row)
{
  if (r->nrows == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 32;
    r->rows = realloc(r->rows, (size_t)r->cap * sizeof *r->rows);
    if (r->rows == NULL) {
      fprintf(stderr, "perf: out of memory\n");
      exit(1);
    }
  }
  r->rows[r->nrows++] = *row;
  printf("%12zu  %12zu  %8s  %6s  %6d", row->size, row->count, row->type, "none", -1);
  for (int k = 0; k < 2; k++) {
    char t[32], w[32];
    report_time(t, sizeof t, row->h[k].timeUs);
    if (row->h[k].wrong < 0)
      snprintf(w, sizeof w, "%5s", "N/A");
    else
      snprintf(w, sizeof w, "%5lld", row->h[k].wrong);
    printf("  %7s  %6.2f  %6.2f  %s", t, row->h[k].algbw, row->h[k].busbw, w);
  }
  printf("  %6d\n", row->iters);
}

static FILE* report_open(const char* path, char* tmp, size_t len)
{
  snprintf(tmp, len, "%s.tmp.%d", path, (int)getpid());
  return outCreate("perf", tmp);
}

static int report_close(FILE* f, const char* tmp, const char* path)
{
  if (outClose("perf", f, tmp) != 0) return -1;
  if (rename(tmp, path) != 0) {
    fprintf(stderr, "perf: writing %s: ", path);
    perror(NULL);
    unlink(tmp);
    return -1;
  }
  return 0;
}

static int report_csv(const struct perf_report* r)
{
  char tmp[4200];
  FILE* f = report_open(r->csvPath, tmp, sizeof tmp);
  if (f == NULL) return -1;
  fprintf(f, "size,count,type,redop,root,time_us,algbw,busbw,wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong,iters\n");
  for (int i = 0; i < r->nrows; i++) {
    const struct perf_row* row = &r->rows[i];
    fprintf(f, "%zu,%zu,%s,none,-1", row->size, row->count, row->type);
    for (int k = 0; k < 2; k++) {
      fprintf(f, ",%.3f,%.6f,%.6f,", row->h[k].timeUs, row->h[k].algbw, row->h[k].busbw);
      if (row->h[k].wrong >= 0) fprintf(f, "%lld", row->h[k].wrong);
    }
    fprintf(f, ",%d\n", row->iters);
  }
  return report_close(f, tmp, r->csvPath);
}

/* params: a JSON object's members, already formatted ("\"a\": 1, ...") */
static int report_json(const struct perf_report* r, int n, const char* params, long long oob, double avgBus)
{
  char tmp[4200];
  FILE* f = report_open(r->jsonPath, tmp, sizeof tmp);
  if (f == NULL) return -1;
  fprintf(f, "{\"tool\": \"mscclpp all_gather_perf\", \"nranks\": %d, \"params\": {%s},\n \"rows\": [", n, params);
  for (int i = 0; i < r->nrows; i++) {
    const struct perf_row* row = &r->rows[i];
    fprintf(f, "%s\n  {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"none\", \"root\": -1, \"iters\": %d",
            i ? "," : "", row->size, row->count, row->type, row->iters);
    for (int k = 0; k < 2; k++) {
      fprintf(f, ", \"%s\": {\"time_us\": %.3f, \"algbw\": %.6f, \"busbw\": %.6f, \"wrong\": ",
              k ? "in_place" : "out_of_place", row->h[k].timeUs, row->h[k].algbw, row->h[k].busbw);
      if (row->h[k].wrong >= 0)
        fprintf(f, "%lld}", row->h[k].wrong);
      else
        fprintf(f, "null}");
    }
    fprintf(f, "}");
  }
  fprintf(f, "\n ],\n \"out_of_bounds\": %lld, \"avg_busbw\": %.6f, \"ok\": %s}\n", oob, avgBus, oob ? "false" : "true");
  return report_close(f, tmp, r->jsonPath);
}

#endif
