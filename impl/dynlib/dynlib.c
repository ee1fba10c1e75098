/*
 * dynlib.c: dynResolve (see dynlib.h).
 */
#define _GNU_SOURCE
#include "dynlib.h"

#include <dlfcn.h>
#include <stdio.h>

void* dynOpen(const char* name, char* err, int errLen)
{
  dlerror();
  void* h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
  if (h == NULL) {
    const char* why = dlerror();
    snprintf(err, (size_t)errLen, "%s", why ? why : "dlopen failed");
  }
  return h;
}

int dynResolve(void* h, const char* name, const dynSym* syms, void* table, char* err, int errLen)
{
  for (const dynSym* s = syms; s->name != NULL; s++) {
    void* p = s->version != NULL ? dlvsym(h, s->name, s->version) : dlsym(h, s->name);
    if (p == NULL && s->fallback != NULL)
      p = s->version != NULL ? dlvsym(h, s->fallback, s->version) : dlsym(h, s->fallback);
    if (p == NULL) {
      if (s->version != NULL)
        snprintf(err, (size_t)errLen, "%s: symbol %s@%s not found", name, s->name, s->version);
      else
        snprintf(err, (size_t)errLen, "%s: symbol \"%s\" not found", name, s->name);
      return -1;
    }
    *(void**)((char*)table + s->offset) = p;
  }
  return 0;
}
