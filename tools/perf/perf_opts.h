/*
 * perf_opts.h: perf's command line, nccl-tests' flags and perf's own, for
 * perf.c (included once there; static functions). parse_opts() exits 2 with
 * the usage on anything it does not take; -h/--help prints the meaning of
 * every flag (help(), which tests/c/run.sh checks against the option table).
 */
#ifndef PERF_OPTS_H_
#define PERF_OPTS_H_

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct perf_opts {
  size_t minBytes, maxBytes, stepBytes;
  double factor, timeout;
  int iters, warmup, check, itersGiven, warmupGiven, agg, average, blocking, graph, parallel, cputime, streamNull;
  int root, rootGiven, nlocal, useMalloc, ntypes, types[16];
  const char *op, *idFile, *jobId, *csv, *json, *transport;
};

/* nccl-tests' type names (and a few aliases) with their element size */
static const struct {
  const char* name;
  int bytes;
} perf_types[] = {{"int8", 1},  {"uint8", 1}, {"int32", 4}, {"uint32", 4},  {"int64", 8},
                  {"uint64", 8}, {"half", 2},  {"float", 4}, {"double", 8}, {"bfloat16", 2}};
static const struct {
  const char *alias, *name;
} perf_type_aliases[] = {{"char", "int8"},      {"int", "int32"},     {"float16", "half"}, {"float32", "float"},
                         {"float64", "double"}, {"bf16", "bfloat16"}, {"fp16", "half"},    {"fp32", "float"}};
static const char* const perf_ops[] = {"sum", "prod", "max", "min", "avg", "mulsum", "all"};

static void usage(void)
{
  fprintf(stderr,
          "usage: perf [-b minbytes] [-e maxbytes] [-f stepfactor | -i stepbytes] [-n iters] [-w warmup_iters]\n"
          "            [-m agg_iters] [-c 0|1] [-d datatype|all] [-o op] [-r root] [-a 0|1|2|3] [-z 0|1] [-G graph_launches]\n"
          "            [-p 0|1] [-C 0|1] [-y 0|1] [-T timeout_s] [-t 1] [-g 1] [-F csv_file] [-J json_file]\n"
          "            [--nranks N] [--malloc] [--id-file PATH] [--job-id ID] [--transport ethernet|ib|shm|p2p|NUMBER]\n"
          "  the flags of nccl-tests' all_gather_perf, long forms too (--minbytes --maxbytes --stepfactor --stepbytes\n"
          "  --iters --warmup_iters --agg_iters --check --datatype --op --root --average --blocking --cudagraph\n"
          "  --parallel_init --report_cputime --stream_null --timeout --nthreads --ngpus --output_file; -J: --json);\n"
          "  sizes accept K/M/G suffixes; defaults: -b 8 -e 256M -f 2 -i 1M -n 20 -w 5 -m 1 -c 1 -d float -a 1\n"
          "  -T 600 --nranks 4 --transport ethernet; --help for what each flag means\n");
  exit(2);
}

/* The manual: every flag of parse_opts(), on stdout, exit 0. */
static void help(void)
{
  fputs(
    "mscclpp_allgather_perf: allgather bandwidth over libmscclpp connections, in the manner of\n"
    "nccl-tests' all_gather_perf. Each rank puts its chunk into every peer's buffer with\n"
    "putWithSignal and waits for every peer's signal; rows report time, algbw and busbw\n"
    "(algbw * (N-1)/N) out of place and in place, as nccl-tests does.\n"
    "\n"
    "Sizes and iterations (nccl-tests' flags and meanings):\n"
    "  -b, --minbytes N       smallest size: bytes gathered in all (K/M/G = powers of 1024; 8)\n"
    "  -e, --maxbytes N       largest size (256M)\n"
    "  -f, --stepfactor F     each size is the last times F (2); F <= 1 steps by -i instead\n"
    "  -i, --stepbytes N      the step in bytes when -f is 1 (1M)\n"
    "  -n, --iters N          timed iterations per size (20; without -n, sizes above 25 MiB\n"
    "                         run fewer: about 512 MiB per size; the iters column says how many)\n"
    "  -w, --warmup_iters N   warm-up iterations per size (5; without -w, 1 above 25 MiB)\n"
    "  -m, --agg_iters N      allgathers per timed iteration (1); time is per allgather\n"
    "  -c, --check N          1: check every element after each size (default); 0: no check\n"
    "  -d, --datatype T       int8 uint8 int32 uint32 int64 uint64 half float double bfloat16\n"
    "                         (float), or all: one pass per type\n"
    "  -o, --op OP            sum prod max min avg mulsum all: accepted; an allgather has no\n"
    "                         reduction (rows read \"none\")\n"
    "  -r, --root R           accepted; an allgather has no root (rows read -1)\n"
    "  -a, --average 0|1|2|3  the time a row reports: rank 0's, the ranks' average (default),\n"
    "                         minimum, maximum\n"
    "  -z, --blocking 0|1     1: a bootstrap barrier after each collective\n"
    "  -G, --cudagraph N      host mode has no CUDA graph: the timed loop runs N times over\n"
    "  -p, --parallel_init 0|1  accepted; one rank per process, so it changes nothing\n"
    "  -C, --report_cputime 0|1 the time column reads \"cputime\" (the same figure)\n"
    "  -y, --stream_null 0|1  accepted; host mode has no streams\n"
    "  -t, --nthreads 1       threads per process: only 1\n"
    "  -g, --ngpus 1          GPUs per thread: only 1\n"
    "  -T, --timeout S        seconds before perf kills the local ranks it started (600)\n"
    "  -F, --output_file F    also write the rows to F as CSV (rank 0)\n"
    "  -J, --json F           also write the run as one JSON object to F (rank 0)\n"
    "\n"
    "Ranks and transports (perf's own):\n"
    "  --nranks N             local ranks perf starts itself when no launcher gave a rank (4)\n"
    "  --malloc               plain malloc buffers instead of mscclppHostAlloc\n"
    "  --transport T          to ranks on other nodes: ethernet (default), ib, shm, p2p or a\n"
    "                         number (also MSCCLPP_PERF_TRANSPORT; ib uses the device in\n"
    "                         MSCCLPP_PERF_IB_DEV, default mlx5_0); ranks of one node use SHM,\n"
    "                         unless all ranks share one node: then T links every pair\n"
    "  --id-file PATH         pass the unique id through PATH.JOB on a file system every rank\n"
    "                         sees (also MSCCLPP_PERF_ID_FILE), for launchers without PMIx/PMI-2\n"
    "  --job-id ID            the JOB of --id-file (also MSCCLPP_PERF_JOB_ID; default the\n"
    "                         launcher's: Slurm job.step, PMIX_NAMESPACE, Open MPI's job id)\n"
    "  -h, --help             this text\n"
    "\n"
    "Launchers: mpirun -np N (Open MPI, PMIx) and srun -n N (Slurm, --mpi=pmix or pmi2) give each\n"
    "rank its rank, size and rank 0's unique id; libpmix/libpmi2 are loaded at run time. Other\n"
    "launchers: rank and size from OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE or SLURM_PROCID/\n"
    "SLURM_NTASKS, the id from --id-file or MSCCLPP_COMM_ID=ip:port (rank 0's address).\n"
    "Exit status: 0 no wrong element and no failure; 1 a failure or a wrong element; 2 bad\n"
    "options or no way to learn the unique id; 3 the cross-node transport cannot connect.\n",
    stdout);
  exit(0);
}

static void bad_option(const char* opt, const char* value, const char* want)
{
  fprintf(stderr, "perf: %s %s: %s\n", opt, value, want);
  usage();
}

/* A byte count: a non-negative number with an optional K, M or G (powers of 1024). */
static size_t parse_size(const char* opt, const char* s)
{
  char* end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno != 0 || v < 0) bad_option(opt, s, "want a byte count such as 8, 64K, 1M or 2G");
  switch (*end) {
  case 'k': case 'K': v *= 1024; end++; break;
  case 'm': case 'M': v *= 1024.0 * 1024; end++; break;
  case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
  default: break;
  }
  if (*end != '\0' || v >= 18446744073709551615.0) bad_option(opt, s, "want a byte count such as 8, 64K, 1M or 2G");
  return (size_t)v;
}

static int parse_int(const char* opt, const char* s, int min, int max)
{
  char* end;
  errno = 0;
  long v = strtol(s, &end, 0);
  if (end == s || *end != '\0' || errno != 0 || v < min || v > max) {
    char want[80];
    snprintf(want, sizeof want, "want an integer from %d to %d", min, max);
    bad_option(opt, s, want);
  }
  return (int)v;
}

static void parse_type(struct perf_opts* o, const char* s)
{
  const int n = (int)(sizeof perf_types / sizeof perf_types[0]);
  o->ntypes = 0;
  if (strcasecmp(s, "all") == 0) {
    for (int i = 0; i < n; i++) o->types[o->ntypes++] = i;
    return;
  }
  for (size_t a = 0; a < sizeof perf_type_aliases / sizeof perf_type_aliases[0]; a++)
    if (strcasecmp(s, perf_type_aliases[a].alias) == 0) s = perf_type_aliases[a].name;
  for (int i = 0; i < n; i++)
    if (strcasecmp(s, perf_types[i].name) == 0) {
      o->types[o->ntypes++] = i;
      return;
    }
  bad_option("-d", s, "want int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16 or all");
}

static void parse_op(struct perf_opts* o, const char* s)
{
  for (size_t i = 0; i < sizeof perf_ops / sizeof perf_ops[0]; i++)
    if (strcasecmp(s, perf_ops[i]) == 0) {
      o->op = perf_ops[i];
      return;
    }
  bad_option("-o", s, "want sum, prod, max, min, avg, mulsum or all");
}

static void parse_one(struct perf_opts* o, int c, const char* arg)
{
  switch (c) {
  case 'b': o->minBytes = parse_size("-b", arg); break;
  case 'e': o->maxBytes = parse_size("-e", arg); break;
  case 'f': {
    char* end;
    o->factor = strtod(arg, &end);
    if (end == arg || *end != '\0' || o->factor < 0) bad_option("-f", arg, "want a factor such as 2");
    break;
  }
  case 'i': o->stepBytes = parse_size("-i", arg); break;
  case 'n': o->iters = parse_int("-n", arg, 1, INT_MAX); o->itersGiven = 1; break;
  case 'w': o->warmup = parse_int("-w", arg, 0, INT_MAX); o->warmupGiven = 1; break;
  case 'm': o->agg = parse_int("-m", arg, 1, 1 << 20); break;
  case 'c': o->check = parse_int("-c", arg, 0, INT_MAX) != 0; break;
  case 'd': parse_type(o, arg); break;
  case 'o': parse_op(o, arg); break;
  case 'r': o->root = parse_int("-r", arg, 0, INT_MAX); o->rootGiven = 1; break;
  case 'a': o->average = parse_int("-a", arg, 0, 3); break;
  case 'z': o->blocking = parse_int("-z", arg, 0, 1); break;
  case 'G': o->graph = parse_int("-G", arg, 0, 1 << 20); break;
  case 'p': o->parallel = parse_int("-p", arg, 0, 1); break;
  case 'C': o->cputime = parse_int("-C", arg, 0, 1); break;
  case 'y': o->streamNull = parse_int("-y", arg, 0, 1); break;
  case 'T': o->timeout = parse_int("-T", arg, 1, INT_MAX); break;
  case 't':
  case 'g':
    if (parse_int(c == 't' ? "-t" : "-g", arg, 1, INT_MAX) != 1)
      bad_option(c == 't' ? "-t" : "-g", arg, "perf runs one rank per process: only 1 is supported");
    break;
  case 'F': o->csv = arg; break;
  case 'J': o->json = arg; break;
  case 256: o->nlocal = parse_int("--nranks", arg, 1, 4096); break;
  case 257: o->useMalloc = 1; break;
  case 258: o->idFile = arg; break;
  case 259: o->jobId = arg; break;
  case 260: o->transport = arg; break;
  case 'h': help(); break;
  default: usage();
  }
}

static void parse_opts(struct perf_opts* o, int argc, char** argv)
{
  static const struct option longopts[] = {
    {"minbytes", required_argument, 0, 'b'},     {"maxbytes", required_argument, 0, 'e'},
    {"stepfactor", required_argument, 0, 'f'},   {"stepbytes", required_argument, 0, 'i'},
    {"iters", required_argument, 0, 'n'},        {"warmup_iters", required_argument, 0, 'w'},
    {"agg_iters", required_argument, 0, 'm'},    {"check", required_argument, 0, 'c'},
    {"datatype", required_argument, 0, 'd'},     {"op", required_argument, 0, 'o'},
    {"root", required_argument, 0, 'r'},         {"average", required_argument, 0, 'a'},
    {"blocking", required_argument, 0, 'z'},     {"cudagraph", required_argument, 0, 'G'},
    {"parallel_init", required_argument, 0, 'p'}, {"report_cputime", required_argument, 0, 'C'},
    {"stream_null", required_argument, 0, 'y'},  {"timeout", required_argument, 0, 'T'},
    {"nthreads", required_argument, 0, 't'},     {"ngpus", required_argument, 0, 'g'},
    {"output_file", required_argument, 0, 'F'},  {"json", required_argument, 0, 'J'},
    {"nranks", required_argument, 0, 256},       {"malloc", no_argument, 0, 257},
    {"id-file", required_argument, 0, 258},      {"job-id", required_argument, 0, 259},
    {"transport", required_argument, 0, 260},    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  o->minBytes = 8;
  o->maxBytes = (size_t)256 << 20;
  o->stepBytes = (size_t)1 << 20;
  o->factor = 2;
  o->timeout = 600;
  o->iters = 20;
  o->warmup = 5;
  o->agg = 1;
  o->check = 1;
  o->average = 1;
  o->nlocal = 4;
  o->op = "sum";
  parse_type(o, "float");
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:m:c:d:o:r:a:z:G:p:C:y:T:t:g:F:J:h", longopts, NULL)) != -1)
    parse_one(o, c, optarg);
  if (optind < argc) {
    fprintf(stderr, "perf: unexpected argument '%s'\n", argv[optind]);
    usage();
  }
  if (o->maxBytes < 1 || o->minBytes > o->maxBytes) {
    fprintf(stderr, "perf: invalid sizes: -b %zu -e %zu (want 1 <= maxbytes, minbytes <= maxbytes)\n", o->minBytes,
            o->maxBytes);
    usage();
  }
  if (o->factor <= 1 && o->stepBytes == 0) {
    fprintf(stderr, "perf: -f %g needs -i stepbytes > 0\n", o->factor);
    usage();
  }
}

#endif
