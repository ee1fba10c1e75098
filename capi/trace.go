package main

import "github.com/mscclpp-go/mscclpp/impl/logx"

// tracing reports whether API calls are traced: MSCCLPP_DEBUG=TRACE with the
// CALL subsystem. Every export checks it before formatting its trace line,
// so a call costs two atomic loads when tracing is off.
func tracing() bool { return logx.Enabled(logx.LevelTrace, logx.Call) }

// trace logs one API call at TRACE under CALL, like NCCL's TRACE_CALL:
// "<fn> <key arguments>", shown with the func:line of the export.
func trace(fn, format string, args ...any) {
	logx.TracefDepth(1, logx.Call, "%s "+format, append([]any{fn}, args...)...)
}
