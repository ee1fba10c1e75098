package main

/*
#include "../include/mscclpp.h"
*/
import "C"

import (
	"strings"

	"github.com/mscclpp-go/mscclpp/impl"
)

// capiCommReportText is mscclppCommReport's Go half (capi/report.c): the report of comm as a
// malloc'ed C string in *out, which report.c writes to the caller's FILE* and frees.
//
//export capiCommReportText
func capiCommReportText(comm C.mscclppComm_t, hasFile C.int, out **C.char) (res C.mscclppResult_t) {
	const fn = "mscclppCommReport"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p", comm)
	}
	call(fn, comm, &res, func(c *impl.Comm) error {
		if hasFile == 0 {
			return nullArg("f")
		}
		var b strings.Builder
		if err := c.Report(&b); err != nil {
			return err
		}
		*out = C.CString(b.String())
		return nil
	})
	return
}
