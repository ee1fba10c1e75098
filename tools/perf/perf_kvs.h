/*
 * perf_kvs.h: the unique id through the launcher's own key-value store, for
 * perf.c (included once there; static functions).
 *
 * Open MPI's mpirun (its PMIx server) and Slurm's `srun --mpi=pmix` give each
 * rank PMIX_NAMESPACE and PMIX_RANK; `srun --mpi=pmi2` gives PMI_FD,
 * PMI_RANK and PMI_SIZE. perf loads the client library of that store at run
 * time with dlopen, never linking it (perf runs where neither exists):
 * libpmix.so.2 (or $PERF_PMIX_LIBRARY) or libpmi2.so.0 (or
 * $PERF_PMI2_LIBRARY). Rank 0 puts the mscclppUniqueId (hex) under one key
 * and commits, every rank fences, the others get it from rank 0.
 *
 * The PMIx types below are the few members perf touches, laid out as in
 * pmix_common.h (PMIx 3, 4 and 5 alike): pmix_proc_t is a 256-byte
 * namespace and a uint32 rank; pmix_value_t a uint16 type and an 8-aligned
 * union whose string and uint32 members start at offset 8.
 *
 *   kvs_detect()                          which store the environment offers
 *   kvs_open(kind, &rank, &size, err)     init: rank and size from the store
 *   kvs_job(buf, len)                     the store's job name (namespace or PMI-2 job id)
 *   kvs_share_id(rank, id, err)           rank 0 puts, all fence, the others get
 *   kvs_close()                           finalize
 * Each returns 0 on success, else -1 with a sentence in err.
 */
#ifndef PERF_KVS_H_
#define PERF_KVS_H_

#include <mscclpp.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kvs_kind { KVS_NONE, KVS_PMIX, KVS_PMI2 };

#define PERF_KVS_KEY "mscclpp.perf.uniqueid"
#define PERF_PMIX_STRING 3
#define PERF_PMIX_UINT32 14
#define PERF_PMIX_GLOBAL 3
#define PERF_PMIX_RANK_WILDCARD (UINT32_MAX - 1)

typedef struct {
  char nspace[256];
  uint32_t rank;
} perf_pmix_proc_t;

typedef struct {
  uint16_t type;
  union {
    char* string;
    uint32_t uint32;
    unsigned char space[32];
  } data;
} perf_pmix_value_t;

static struct {
  enum kvs_kind kind;
  void* lib;
  perf_pmix_proc_t me;
  char pmi2Job[256];
  int (*pmixInit)(perf_pmix_proc_t*, void*, size_t);
  int (*pmixFinalize)(const void*, size_t);
  int (*pmixPut)(uint8_t, const char*, perf_pmix_value_t*);
  int (*pmixCommit)(void);
  int (*pmixFence)(const perf_pmix_proc_t*, size_t, const void*, size_t);
  int (*pmixGet)(const perf_pmix_proc_t*, const char*, const void*, size_t, perf_pmix_value_t**);
  int (*pmi2Init)(int*, int*, int*, int*);
  int (*pmi2Finalize)(void);
  int (*pmi2JobGetId)(char*, int);
  int (*pmi2Put)(const char*, const char*);
  int (*pmi2Fence)(void);
  int (*pmi2Get)(const char*, int, const char*, char*, int, int*);
} kvs;

static int kvs_set(const char* name)
{
  const char* v = getenv(name);
  return v != NULL && *v != '\0';
}

static enum kvs_kind kvs_detect(void)
{
  if (kvs_set("PMIX_NAMESPACE") && kvs_set("PMIX_RANK")) return KVS_PMIX;
  if (kvs_set("PMI_FD") && kvs_set("PMI_RANK") && kvs_set("PMI_SIZE")) return KVS_PMI2;
  return KVS_NONE;
}

static const char* kvs_name(enum kvs_kind k) { return k == KVS_PMIX ? "PMIx" : k == KVS_PMI2 ? "PMI-2" : "none"; }

/* dlopen the library (env override first) and look up every symbol. */
static int kvs_load(const char* envName, const char* soname, const char* const* syms, void** fns, size_t n,
                    char* err, size_t errLen)
{
  const char* path = getenv(envName);
  if (path == NULL || *path == '\0') path = soname;
  kvs.lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (kvs.lib == NULL) {
    snprintf(err, errLen, "cannot load %s (set %s to its path): %s", path, envName, dlerror());
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    fns[i] = dlsym(kvs.lib, syms[i]);
    if (fns[i] == NULL) {
      snprintf(err, errLen, "%s has no %s: %s", path, syms[i], dlerror());
      return -1;
    }
  }
  return 0;
}

static int kvs_open_pmix(int* rank, int* size, char* err, size_t errLen)
{
  static const char* const syms[] = {"PMIx_Init", "PMIx_Finalize", "PMIx_Put", "PMIx_Commit", "PMIx_Fence", "PMIx_Get"};
  void* fns[6];
  if (kvs_load("PERF_PMIX_LIBRARY", "libpmix.so.2", syms, fns, 6, err, errLen) != 0) return -1;
  memcpy(&kvs.pmixInit, &fns[0], sizeof fns[0]);
  memcpy(&kvs.pmixFinalize, &fns[1], sizeof fns[1]);
  memcpy(&kvs.pmixPut, &fns[2], sizeof fns[2]);
  memcpy(&kvs.pmixCommit, &fns[3], sizeof fns[3]);
  memcpy(&kvs.pmixFence, &fns[4], sizeof fns[4]);
  memcpy(&kvs.pmixGet, &fns[5], sizeof fns[5]);
  int rc = kvs.pmixInit(&kvs.me, NULL, 0);
  if (rc != 0) {
    snprintf(err, errLen, "PMIx_Init failed (status %d): is the launcher's PMIx server reachable?", rc);
    return -1;
  }
  *rank = (int)kvs.me.rank;
  perf_pmix_proc_t job = kvs.me;
  job.rank = PERF_PMIX_RANK_WILDCARD;
  perf_pmix_value_t* v = NULL;
  rc = kvs.pmixGet(&job, "pmix.job.size", NULL, 0, &v);
  if (rc != 0 || v == NULL || v->type != PERF_PMIX_UINT32) {
    snprintf(err, errLen, "PMIx_Get(pmix.job.size) failed (status %d)", rc);
    return -1;
  }
  *size = (int)v->data.uint32;
  free(v);
  return 0;
}

static int kvs_open_pmi2(int* rank, int* size, char* err, size_t errLen)
{
  static const char* const syms[] = {"PMI2_Init", "PMI2_Finalize", "PMI2_Job_GetId", "PMI2_KVS_Put", "PMI2_KVS_Fence",
                                     "PMI2_KVS_Get"};
  void* fns[6];
  if (kvs_load("PERF_PMI2_LIBRARY", "libpmi2.so.0", syms, fns, 6, err, errLen) != 0) return -1;
  memcpy(&kvs.pmi2Init, &fns[0], sizeof fns[0]);
  memcpy(&kvs.pmi2Finalize, &fns[1], sizeof fns[1]);
  memcpy(&kvs.pmi2JobGetId, &fns[2], sizeof fns[2]);
  memcpy(&kvs.pmi2Put, &fns[3], sizeof fns[3]);
  memcpy(&kvs.pmi2Fence, &fns[4], sizeof fns[4]);
  memcpy(&kvs.pmi2Get, &fns[5], sizeof fns[5]);
  int spawned = 0, appnum = 0;
  int rc = kvs.pmi2Init(&spawned, size, rank, &appnum);
  if (rc != 0) {
    snprintf(err, errLen, "PMI2_Init failed (status %d)", rc);
    return -1;
  }
  rc = kvs.pmi2JobGetId(kvs.pmi2Job, (int)sizeof kvs.pmi2Job);
  if (rc != 0) {
    snprintf(err, errLen, "PMI2_Job_GetId failed (status %d)", rc);
    return -1;
  }
  return 0;
}

static int kvs_open(enum kvs_kind kind, int* rank, int* size, char* err, size_t errLen)
{
  kvs.kind = kind;
  int rc = kind == KVS_PMIX ? kvs_open_pmix(rank, size, err, errLen)
           : kind == KVS_PMI2 ? kvs_open_pmi2(rank, size, err, errLen)
                              : (snprintf(err, errLen, "no key-value store"), -1);
  if (rc == 0 && (*rank < 0 || *size < 1 || *rank >= *size)) {
    snprintf(err, errLen, "%s gave rank %d of %d", kvs_name(kind), *rank, *size);
    rc = -1;
  }
  return rc;
}

static void kvs_job(char* buf, size_t len)
{
  snprintf(buf, len, "%s", kvs.kind == KVS_PMIX ? kvs.me.nspace : kvs.kind == KVS_PMI2 ? kvs.pmi2Job : "");
}

static void kvs_hex(const mscclppUniqueId* id, char* out)
{
  const unsigned char* p = (const unsigned char*)id;
  for (size_t i = 0; i < sizeof *id; i++) sprintf(out + 2 * i, "%02x", p[i]);
}

static int kvs_unhex(const char* s, mscclppUniqueId* id)
{
  unsigned char* p = (unsigned char*)id;
  if (strlen(s) != 2 * sizeof *id) return -1;
  for (size_t i = 0; i < sizeof *id; i++) {
    unsigned v;
    if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
    p[i] = (unsigned char)v;
  }
  return 0;
}

static int kvs_share_pmix(int rank, mscclppUniqueId* id, char* hex, char* err, size_t errLen)
{
  int rc;
  if (rank == 0) {
    perf_pmix_value_t v;
    memset(&v, 0, sizeof v);
    v.type = PERF_PMIX_STRING;
    v.data.string = hex;
    if ((rc = kvs.pmixPut(PERF_PMIX_GLOBAL, PERF_KVS_KEY, &v)) != 0 || (rc = kvs.pmixCommit()) != 0) {
      snprintf(err, errLen, "PMIx_Put/PMIx_Commit of the unique id failed (status %d)", rc);
      return -1;
    }
  }
  if ((rc = kvs.pmixFence(NULL, 0, NULL, 0)) != 0) {
    snprintf(err, errLen, "PMIx_Fence failed (status %d)", rc);
    return -1;
  }
  if (rank == 0) return 0;
  perf_pmix_proc_t root = kvs.me;
  root.rank = 0;
  perf_pmix_value_t* v = NULL;
  rc = kvs.pmixGet(&root, PERF_KVS_KEY, NULL, 0, &v);
  if (rc != 0 || v == NULL || v->type != PERF_PMIX_STRING || v->data.string == NULL ||
      kvs_unhex(v->data.string, id) != 0) {
    snprintf(err, errLen, "PMIx_Get of rank 0's unique id failed (status %d)", rc);
    return -1;
  }
  free(v->data.string);
  free(v);
  return 0;
}

static int kvs_share_pmi2(int rank, mscclppUniqueId* id, char* hex, char* err, size_t errLen)
{
  int rc;
  if (rank == 0 && (rc = kvs.pmi2Put(PERF_KVS_KEY, hex)) != 0) {
    snprintf(err, errLen, "PMI2_KVS_Put of the unique id failed (status %d)", rc);
    return -1;
  }
  if ((rc = kvs.pmi2Fence()) != 0) {
    snprintf(err, errLen, "PMI2_KVS_Fence failed (status %d)", rc);
    return -1;
  }
  if (rank == 0) return 0;
  char got[2 * sizeof(mscclppUniqueId) + 16];
  int len = 0;
  rc = kvs.pmi2Get(kvs.pmi2Job, 0, PERF_KVS_KEY, got, (int)sizeof got, &len);
  if (rc != 0 || kvs_unhex(got, id) != 0) {
    snprintf(err, errLen, "PMI2_KVS_Get of rank 0's unique id failed (status %d)", rc);
    return -1;
  }
  return 0;
}

/* rank 0's *id reaches every rank's *id */
static int kvs_share_id(int rank, mscclppUniqueId* id, char* err, size_t errLen)
{
  char hex[2 * sizeof(mscclppUniqueId) + 1];
  kvs_hex(id, hex);
  return kvs.kind == KVS_PMIX ? kvs_share_pmix(rank, id, hex, err, errLen) : kvs_share_pmi2(rank, id, hex, err, errLen);
}

static void kvs_close(void)
{
  if (kvs.kind == KVS_PMIX && kvs.pmixFinalize != NULL) kvs.pmixFinalize(NULL, 0);
  if (kvs.kind == KVS_PMI2 && kvs.pmi2Finalize != NULL) kvs.pmi2Finalize();
  kvs.kind = KVS_NONE;
}

#endif
