/*
 * dynlib.h: the one run-time loader of the vendor libraries libmscclpp uses
 * but never links (libcuda.so.1, libnvidia-ml.so.1, libibverbs.so.1): a
 * provider describes its function table as a list of dynSym, and
 * dynResolve fills the table from the loaded library, every symbol checked.
 * In C because the table's function pointers are called from C.
 */
#ifndef MSCCLPP_DYNLIB_H_
#define MSCCLPP_DYNLIB_H_

#include <stddef.h>

/* One entry point of a table: its exported name, an older name to use when
 * the library lacks it (or NULL), the symbol version to ask dlvsym for (or
 * NULL: plain dlsym), and where its pointer goes in the table. A list ends
 * with a NULL name. */
typedef struct dynSym {
  const char* name;
  const char* fallback;
  const char* version;
  size_t offset;
} dynSym;

/* Opens the library `name` (RTLD_LAZY | RTLD_LOCAL): its handle, or NULL
 * with dlerror's reason in err. dynlib.go calls it once per library and
 * never closes the handle: every table filled from it points into it. */
void* dynOpen(const char* name, char* err, int errLen);

/* Fills table from the library `name` opened as h. Returns 0, or -1 with a
 * one-line reason naming the missing symbol in err. */
int dynResolve(void* h, const char* name, const dynSym* syms, void* table, char* err, int errLen);

#endif
