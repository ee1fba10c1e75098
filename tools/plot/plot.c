/*
 * plot.c: mscclpp-perf-plot, the perf tool's -J results as a bus-bandwidth
 * versus size plot in SVG, so that runs are compared by looking.
 *
 *   mscclpp-perf-plot [-o OUT.svg] [-t TITLE] [-i] [LABEL=]FILE.json...
 *
 * Each FILE is what `mscclpp_allgather_perf -J FILE` wrote; each becomes one
 * line: bus bandwidth (GB/s, the out-of-place column; -i: in-place) against
 * the message size on a log2 axis. LABEL names the line in the legend
 * (default: the file's name and its rank count). Writes OUT (default
 * stdout). Exit status 0, or 1 with a message naming the file it could not
 * read (not a -J file, no rows).
 *
 * It reads the -J layout perf_report.h writes (the header, then one row per
 * line with "size" and the "out_of_place" / "in_place" objects); in C, with
 * libc only, like the other commands that ship with the library.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/outfile.h"

#define MAX_RUNS 16
#define MAX_ROWS 256

struct run
{
  char label[256];
  int n;
  double size[MAX_ROWS], busbw[MAX_ROWS];
};

static struct run runs[MAX_RUNS];
static int nruns;

static void die(const char* f, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char* f, ...)
{
  va_list ap;
  va_start(ap, f);
  fprintf(stderr, "mscclpp-perf-plot: ");
  vfprintf(stderr, f, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

/* the number after `"key": ` at or after p, or NAN */
static double after(const char* p, const char* key)
{
  char pat[64];
  snprintf(pat, sizeof(pat), "\"%s\": ", key);
  const char* q = p != NULL ? strstr(p, pat) : NULL;
  if (q == NULL) return NAN;
  char* end;
  double v = strtod(q + strlen(pat), &end);
  return end == q + strlen(pat) ? NAN : v;
}

static void readRun(const char* arg, int inPlace)
{
  if (nruns == MAX_RUNS) die("at most %d files", MAX_RUNS);
  struct run* r = &runs[nruns];
  const char* path = arg;
  const char* eq = strchr(arg, '=');
  if (eq != NULL && eq != arg) {
    snprintf(r->label, sizeof(r->label), "%.*s", (int)(eq - arg), arg);
    path = eq + 1;
  }
  FILE* f = fopen(path, "r");
  if (f == NULL) die("cannot open %s: %s", path, strerror(errno));
  char* line = NULL;
  size_t cap = 0;
  int header = 0;
  double nranks = NAN;
  while (getline(&line, &cap, f) >= 0) {
    if (!header) {
      if (strstr(line, "\"tool\": \"mscclpp all_gather_perf\"") == NULL)
        die("%s: not a -J file of mscclpp_allgather_perf", path);
      header = 1;
      nranks = after(line, "nranks");
      continue;
    }
    if (strstr(line, "{\"size\": ") == NULL) continue;
    if (r->n == MAX_ROWS) die("%s: more than %d rows", path, MAX_ROWS);
    double size = after(line, "size");
    double bw = after(strstr(line, inPlace ? "\"in_place\"" : "\"out_of_place\""), "busbw");
    if (isnan(size) || size <= 0 || isnan(bw) || bw < 0) die("%s: a row without size or busbw: %s", path, line);
    r->size[r->n] = size;
    r->busbw[r->n] = bw;
    r->n++;
  }
  free(line);
  fclose(f);
  if (!header) die("%s: empty", path);
  if (r->n == 0) die("%s: no rows", path);
  if (r->label[0] == '\0') {
    const char* base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    if (!isnan(nranks))
      snprintf(r->label, sizeof(r->label), "%s (%d ranks)", base, (int)nranks);
    else
      snprintf(r->label, sizeof(r->label), "%s", base);
  }
  nruns++;
}

/* text with &, <, > and " escaped for XML */
static void xml(FILE* o, const char* s)
{
  for (; *s != '\0'; s++) {
    switch (*s) {
    case '&': fputs("&amp;", o); break;
    case '<': fputs("&lt;", o); break;
    case '>': fputs("&gt;", o); break;
    case '"': fputs("&quot;", o); break;
    default: fputc(*s, o);
    }
  }
}

static void sizeName(char* buf, size_t n, double bytes)
{
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    u++;
  }
  snprintf(buf, n, "%g %s", bytes, units[u]);
}

/* a round step (1, 2 or 5 times a power of ten) giving about 5 ticks up to top */
static double niceStep(double top)
{
  double raw = top / 5, p = pow(10, floor(log10(raw))), m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

int main(int argc, char** argv)
{
  const char* out = NULL;
  const char* title = "mscclpp all_gather_perf: bus bandwidth";
  int inPlace = 0, i = 1;
  for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
      out = argv[++i];
    else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
      title = argv[++i];
    else if (strcmp(argv[i], "-i") == 0)
      inPlace = 1;
    else
      break;
  }
  if (i >= argc) {
    fprintf(stderr, "usage: mscclpp-perf-plot [-o OUT.svg] [-t TITLE] [-i] [LABEL=]FILE.json...\n"
                    "plots the bus bandwidth of mscclpp_allgather_perf -J files against the size (SVG)\n");
    return 2;
  }
  for (; i < argc; i++) readRun(argv[i], inPlace);

  double lo = INFINITY, hi = -INFINITY, top = 0;
  for (int r = 0; r < nruns; r++)
    for (int k = 0; k < runs[r].n; k++) {
      double x = log2(runs[r].size[k]);
      lo = fmin(lo, x);
      hi = fmax(hi, x);
      top = fmax(top, runs[r].busbw[k]);
    }
  lo = floor(lo);
  hi = ceil(hi);
  if (hi <= lo) hi = lo + 1;
  double step = niceStep(top > 0 ? top : 1), ymax = step * ceil((top > 0 ? top : 1) / step);
  const double W = 900, H = 540, L = 80, R = 30, T = 50, B = 70;
  const double pw = W - L - R, ph = H - T - B;
#define X(v) (L + ((v)-lo) / (hi - lo) * pw)
#define Y(v) (T + ph - (v) / ymax * ph)
  FILE* o = out != NULL ? outCreate("mscclpp-perf-plot", out) : stdout;
  if (o == NULL) return 1;
  fprintf(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" "
             "font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
  fprintf(o, "<rect width=\"%g\" height=\"%g\" fill=\"white\"/>\n", W, H);
  fprintf(o, "<text x=\"%g\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">", W / 2);
  xml(o, title);
  fprintf(o, "%s</text>\n", inPlace ? " (in-place)" : " (out-of-place)");
  /* grid and ticks */
  int every = (int)ceil((hi - lo) / 12); /* at most about 12 size labels */
  for (int e = (int)lo; e <= (int)hi; e++) {
    fprintf(o, "<line class=\"grid\" x1=\"%.2f\" y1=\"%g\" x2=\"%.2f\" y2=\"%g\" stroke=\"#ddd\"/>\n", X(e), T, X(e), T + ph);
    if ((e - (int)lo) % every != 0) continue;
    char name[32];
    sizeName(name, sizeof(name), pow(2, e));
    fprintf(o, "<text class=\"xtick\" x=\"%.2f\" y=\"%g\" text-anchor=\"middle\">%s</text>\n", X(e), T + ph + 18, name);
  }
  for (double v = 0; v <= ymax * 1.0000001; v += step) {
    fprintf(o, "<line class=\"grid\" x1=\"%g\" y1=\"%.2f\" x2=\"%g\" y2=\"%.2f\" stroke=\"#ddd\"/>\n", L, Y(v), L + pw, Y(v));
    fprintf(o, "<text class=\"ytick\" x=\"%g\" y=\"%.2f\" text-anchor=\"end\">%g</text>\n", L - 6, Y(v) + 4, v);
  }
  fprintf(o, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"black\"/>\n", L, T, pw, ph);
  fprintf(o, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">message size (bytes, log scale)</text>\n", L + pw / 2, H - 20);
  fprintf(o, "<text x=\"20\" y=\"%g\" text-anchor=\"middle\" transform=\"rotate(-90 20 %g)\">bus bandwidth (GB/s)</text>\n",
          T + ph / 2, T + ph / 2);
  /* one line per run, and the legend */
  static const char* const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  for (int r = 0; r < nruns; r++) {
    const char* c = colors[r % 8];
    fprintf(o, "<polyline class=\"run\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c);
    for (int k = 0; k < runs[r].n; k++)
      fprintf(o, "%s%.2f,%.2f", k ? " " : "", X(log2(runs[r].size[k])), Y(runs[r].busbw[k]));
    fprintf(o, "\"/>\n");
    for (int k = 0; k < runs[r].n; k++)
      fprintf(o, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"><title>%g B: %g GB/s</title></circle>\n",
              X(log2(runs[r].size[k])), Y(runs[r].busbw[k]), c, runs[r].size[k], runs[r].busbw[k]);
    double ly = T + 16 + 18 * r;
    fprintf(o, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" stroke-width=\"2\"/>\n", L + 12, ly - 4, L + 36, ly - 4, c);
    fprintf(o, "<text class=\"legend\" x=\"%g\" y=\"%g\">", L + 42, ly);
    xml(o, runs[r].label);
    fprintf(o, "</text>\n");
  }
  fprintf(o, "</svg>\n");
  if (out != NULL) return outClose("mscclpp-perf-plot", o, out) != 0;
  if (fflush(o) != 0 || ferror(o)) die("cannot write stdout: %s", strerror(errno));
  return 0;
}
