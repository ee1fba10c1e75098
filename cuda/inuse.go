package cuda

/*
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

// The loaded-library check of InUse. dlopen(name, RTLD_NOLOAD) answers it exactly, but when
// no loaded object matches by name glibc goes on to open the library's file (to compare
// inodes): file-system work on every mscclppCommInitRank of a process without CUDA. So
// first walk the loaded objects (dl_iterate_phdr, no system call) for one whose file name
// begins with the name's stem (its base name up to and including ".so": "libcuda.so" for
// "libcuda.so.1"); only when there is one does dlopen decide.

struct cuwStem { const char* stem; size_t len; int found; };

static int cuwVisit(struct dl_phdr_info* info, size_t size, void* data) {
	(void)size;
	struct cuwStem* s = data;
	const char* path = info->dlpi_name;
	if (path == NULL) return 0;
	const char* base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (strncmp(base, s->stem, s->len) == 0) {
		s->found = 1;
		return 1;
	}
	return 0;
}

// 1 when the library is already loaded in this process; loads nothing.
static int cuwLoaded(const char* name) {
	const char* base = strrchr(name, '/');
	base = base ? base + 1 : name;
	const char* so = strstr(base, ".so");
	struct cuwStem s = {base, so ? (size_t)(so - base) + 3 : strlen(base), 0};
	dl_iterate_phdr(cuwVisit, &s);
	if (!s.found) return 0;
	void* h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
	if (h == NULL) return 0;
	dlclose(h);
	return 1;
}
*/
import "C"

import "unsafe"

// InUse reports whether the driver library is already loaded in this process (the application
// used CUDA): without it no thread can have a current context, and probing would only cost
// cuInit's time. A driver counts as loaded when a loaded object's file name begins with the
// library's stem ("libcuda.so" for libcuda.so.1, see cuwLoaded) and dlopen(RTLD_NOLOAD)
// finds it.
func InUse() bool {
	name := C.CString(libraryName())
	defer C.free(unsafe.Pointer(name))
	return C.cuwLoaded(name) != 0
}
