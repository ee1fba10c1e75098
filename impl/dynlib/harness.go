//go:build mscclpp_testhooks

package dynlib

// A harness for this package's tests (cgo cannot be used in _test.go files): a one-entry table.

/*
#include <stdlib.h>
#include "dynlib.h"

typedef struct { double (*fn)(double); } testTable;
*/
import "C"

import "unsafe"

const testTableSize = C.sizeof_testTable

// testSyms is a NULL-terminated dynSym list of the one symbol name, filling testTable.fn (never freed).
func testSyms(name string) unsafe.Pointer {
	syms := (*[2]C.dynSym)(C.calloc(2, C.sizeof_dynSym))
	syms[0].name = C.CString(name)
	syms[0].offset = 0
	return unsafe.Pointer(&syms[0])
}

// testEntry is the table's one entry.
func testEntry(table unsafe.Pointer) unsafe.Pointer {
	if table == nil {
		return nil
	}
	return unsafe.Pointer((*C.testTable)(table).fn)
}
