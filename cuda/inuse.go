package cuda

/*
#include <dlfcn.h>
#include <stdlib.h>

// 1 when the library is already loaded in this process; loads nothing.
static int cuwLoaded(const char* name) {
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
// cuInit's time.
func InUse() bool {
	name := C.CString(libraryName())
	defer C.free(unsafe.Pointer(name))
	return C.cuwLoaded(name) != 0
}
