package main

/*
#include <stdlib.h>
#include "../include/mscclpp.h"
#include "forward.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl"
	"github.com/mscclpp-go/mscclpp/impl/bootstrap"
	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Each export checks its arguments, converts them, and calls one function of impl.
// The public names are C forwarders in forward.c.

//export go_mscclppGetUniqueId
func go_mscclppGetUniqueId(out *C.mscclppUniqueId) (res C.mscclppResult_t) {
	const fn = "mscclppGetUniqueId"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "uniqueId %p", out)
	}
	if out == nil {
		return fail(nil, fn, nullArg("uniqueId"))
	}
	id, err := impl.NewUniqueID()
	if err != nil {
		return fail(nil, fn, err)
	}
	*(*bootstrap.ID)(unsafe.Pointer(out)) = id
	return C.mscclppSuccess
}

func initCommon(fn string, out *C.mscclppComm_t, mk func() (*impl.Comm, error)) C.mscclppResult_t {
	if out == nil {
		return fail(nil, fn, nullArg("comm"))
	}
	*out = nil
	c, err := mk()
	if err != nil {
		return fail(nil, fn, err)
	}
	newHandle(c, out)
	return C.mscclppSuccess
}

//export go_mscclppCommInitRank
func go_mscclppCommInitRank(out *C.mscclppComm_t, nranks C.int, addr *C.char, rank C.int) (res C.mscclppResult_t) {
	const fn = "mscclppCommInitRank"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p nranks %d ipPortPair %s rank %d", out, int(nranks), optText(addr), int(rank))
	}
	if addr == nil {
		if out != nil {
			*out = nil
		}
		return fail(nil, fn, nullArg("ipPortPair"))
	}
	a := C.GoString(addr)
	return initCommon(fn, out, func() (*impl.Comm, error) { return impl.InitRank(int(nranks), a, int(rank)) })
}

//export go_mscclppCommInitRankFromId
func go_mscclppCommInitRankFromId(out *C.mscclppComm_t, nranks C.int, id C.mscclppUniqueId, rank C.int) (res C.mscclppResult_t) {
	const fn = "mscclppCommInitRankFromId"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p nranks %d rank %d", out, int(nranks), int(rank))
	}
	bid := *(*bootstrap.ID)(unsafe.Pointer(&id))
	return initCommon(fn, out, func() (*impl.Comm, error) { return impl.InitRankFromID(int(nranks), bid, int(rank)) })
}

//export go_mscclppBootstrapAllGather
func go_mscclppBootstrapAllGather(comm C.mscclppComm_t, data unsafe.Pointer, size C.int) (res C.mscclppResult_t) {
	const fn = "mscclppBootstrapAllGather"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p data %p size %d", comm, data, int(size))
	}
	call(fn, comm, &res, func(c *impl.Comm) error { return c.AllGather(data, int(size)) })
	return
}

//export go_mscclppBootstrapBarrier
func go_mscclppBootstrapBarrier(comm C.mscclppComm_t) (res C.mscclppResult_t) {
	const fn = "mscclppBootstrapBarrier"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p", comm)
	}
	call(fn, comm, &res, (*impl.Comm).Barrier)
	return
}

//export go_mscclppCommDestroy
func go_mscclppCommDestroy(comm C.mscclppComm_t) (res C.mscclppResult_t) {
	const fn = "mscclppCommDestroy"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p", comm)
	}
	if comm == nil {
		return C.mscclppSuccess
	}
	if st, err := enter(comm); err == nil { // before release: a refused destroy leaves the handle live
		err = st.comm.DestroyFromInside()
		st.leave()
		if err != nil {
			return fail(st, fn, err)
		}
	}
	st, ok := release(comm)
	if !ok {
		return fail(nil, fn, invalidHandle(uintptr(unsafe.Pointer(comm))))
	}
	return result(nil, fn, st.comm.Destroy())
}

// optText is s for a trace line: "(null)" for NULL.
func optText(s *C.char) string {
	if s == nil {
		return "(null)"
	}
	return C.GoString(s)
}

func optString(s *C.char) *string {
	if s == nil {
		return nil
	}
	v := C.GoString(s)
	return &v
}

//export go_mscclppConnect
func go_mscclppConnect(comm C.mscclppComm_t, remoteRank, tag C.int, buff unsafe.Pointer, size C.uint64_t, t C.mscclppTransport_t, ibDev *C.char) (res C.mscclppResult_t) {
	const fn = "mscclppConnect"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p remoteRank %d tag %d buff %p size %d transport %d ibDev %s", comm, int(remoteRank), int(tag), buff, uint64(size), int(t), optText(ibDev))
	}
	call(fn, comm, &res, func(c *impl.Comm) error {
		return c.Connect(int(remoteRank), int(tag), buff, uint64(size), impl.Transport(t), optString(ibDev), true)
	})
	return
}

//export go_mscclppConnectWithoutBuffer
func go_mscclppConnectWithoutBuffer(comm C.mscclppComm_t, remoteRank, tag C.int, t C.mscclppTransport_t, ibDev *C.char) (res C.mscclppResult_t) {
	const fn = "mscclppConnectWithoutBuffer"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p remoteRank %d tag %d transport %d ibDev %s", comm, int(remoteRank), int(tag), int(t), optText(ibDev))
	}
	call(fn, comm, &res, func(c *impl.Comm) error {
		return c.Connect(int(remoteRank), int(tag), nil, 0, impl.Transport(t), optString(ibDev), false)
	})
	return
}

//export go_mscclppRegisterBufferForConnection
func go_mscclppRegisterBufferForConnection(comm C.mscclppComm_t, connIdx C.int, buff unsafe.Pointer, size C.uint64_t, handle *C.mscclppBufferHandle_t) (res C.mscclppResult_t) {
	const fn = "mscclppRegisterBufferForConnection"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p connIdx %d buff %p size %d", comm, int(connIdx), buff, uint64(size))
	}
	call(fn, comm, &res, func(c *impl.Comm) error {
		if handle == nil {
			return nullArg("handle")
		}
		h, err := c.RegisterBufferForConnection(int(connIdx), buff, uint64(size))
		if err == nil {
			*handle = C.mscclppBufferHandle_t(h)
		}
		return err
	})
	return
}

//export go_mscclppConnectionSetup
func go_mscclppConnectionSetup(comm C.mscclppComm_t) (res C.mscclppResult_t) {
	const fn = "mscclppConnectionSetup"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p", comm)
	}
	call(fn, comm, &res, (*impl.Comm).ConnectionSetup)
	return
}

//export go_mscclppGetAllDeviceConnections
func go_mscclppGetAllDeviceConnections(comm C.mscclppComm_t, out *unsafe.Pointer, n *C.int) (res C.mscclppResult_t) {
	const fn = "mscclppGetAllDeviceConnections"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p", comm)
	}
	call(fn, comm, &res, func(c *impl.Comm) error {
		if out == nil || n == nil {
			return nullArg("devConns or nConns")
		}
		p, cnt := c.DeviceConnections()
		*out, *n = p, C.int(cnt)
		return nil
	})
	return
}

//export go_mscclppGetDeviceConnection
func go_mscclppGetDeviceConnection(comm C.mscclppComm_t, remoteRank, tag C.int, out *unsafe.Pointer) (res C.mscclppResult_t) {
	const fn = "mscclppGetDeviceConnection"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p remoteRank %d tag %d", comm, int(remoteRank), int(tag))
	}
	call(fn, comm, &res, func(c *impl.Comm) error {
		if out == nil {
			return nullArg("devConn")
		}
		p, err := c.DeviceConnection(int(remoteRank), int(tag))
		if err == nil {
			*out = p
		}
		return err
	})
	return
}

//export go_mscclppProxyLaunch
func go_mscclppProxyLaunch(comm C.mscclppComm_t) (res C.mscclppResult_t) {
	const fn = "mscclppProxyLaunch"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p", comm)
	}
	call(fn, comm, &res, (*impl.Comm).ProxyLaunch)
	return
}

//export go_mscclppProxyStop
func go_mscclppProxyStop(comm C.mscclppComm_t) (res C.mscclppResult_t) {
	const fn = "mscclppProxyStop"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p", comm)
	}
	call(fn, comm, &res, (*impl.Comm).ProxyStop)
	return
}

func commRankOrSize(fn string, comm C.mscclppComm_t, out *C.int, get func(*impl.Comm) int) (res C.mscclppResult_t) {
	defer guard(fn, &res)
	if tracing() {
		logx.TracefDepth(1, logx.Call, "%s comm %p", fn, comm) // the func:line of the export
	}
	st, err := enter(comm)
	if err != nil {
		return fail(nil, fn, err)
	}
	defer st.leave()
	if out == nil {
		return fail(st, fn, status.Errorf(status.InvalidUsage, "output pointer is NULL"))
	}
	*out = C.int(get(st.comm))
	return C.mscclppSuccess
}

//export go_mscclppCommRank
func go_mscclppCommRank(comm C.mscclppComm_t, rank *C.int) C.mscclppResult_t {
	return commRankOrSize("mscclppCommRank", comm, rank, (*impl.Comm).Rank)
}

//export go_mscclppCommSize
func go_mscclppCommSize(comm C.mscclppComm_t, size *C.int) C.mscclppResult_t {
	return commRankOrSize("mscclppCommSize", comm, size, (*impl.Comm).Size)
}

//export go_mscclppSetBootstrapConnTimeout
func go_mscclppSetBootstrapConnTimeout(seconds C.int) (res C.mscclppResult_t) {
	const fn = "mscclppSetBootstrapConnTimeout"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "seconds %d", int(seconds))
	}
	return result(nil, fn, impl.SetBootstrapTimeout(int(seconds)))
}

var logHandlerMu sync.Mutex

//export go_mscclppSetLogHandler
func go_mscclppSetLogHandler(h C.mscclppLogHandler_t) (res C.mscclppResult_t) {
	const fn = "mscclppSetLogHandler"
	defer guard(fn, &res)
	defer func() { // after the handler is in place: loading the log configuration logs its ENV lines
		if tracing() {
			trace(fn, "handler %p", unsafe.Pointer(h))
		}
	}()
	logHandlerMu.Lock()
	defer logHandlerMu.Unlock()
	if h == nil {
		logx.SetHandler(nil)
		return C.mscclppSuccess
	}
	logx.SetHandler(func(line string) {
		s := C.CString(line)
		C.capiCallLogHandler(h, s)
		C.free(unsafe.Pointer(s))
	})
	return C.mscclppSuccess
}

//export go_mscclppDefaultLogHandler
func go_mscclppDefaultLogHandler(msg *C.char) {
	defer func() { _ = recover() }()
	logx.DefaultHandler(C.GoString(msg))
}

//export go_mscclppGetLastError
func go_mscclppGetLastError(comm C.mscclppComm_t) (s *C.char) {
	defer func() {
		if recover() != nil {
			s = nil
		}
	}()
	st, err := enter(comm)
	if err != nil {
		return nil
	}
	defer st.leave()
	return (*C.char)(st.comm.LastErrorText())
}

//export go_mscclppGetVersion
func go_mscclppGetVersion(v *C.int) (res C.mscclppResult_t) {
	const fn = "mscclppGetVersion"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "version %p", v)
	}
	if v == nil {
		return fail(nil, fn, nullArg("version"))
	}
	*v = C.MSCCLPP_VERSION
	return C.mscclppSuccess
}

//export go_mscclppCommGetAsyncError
func go_mscclppCommGetAsyncError(comm C.mscclppComm_t, out *C.int) (res C.mscclppResult_t) {
	const fn = "mscclppCommGetAsyncError"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p", comm)
	}
	call(fn, comm, &res, func(c *impl.Comm) error {
		if out == nil {
			return nullArg("asyncError")
		}
		*out = C.int(status.CodeOf(c.AsyncErr()))
		return nil
	})
	return
}

//export go_mscclppHostAlloc
func go_mscclppHostAlloc(out *unsafe.Pointer, size C.size_t) (res C.mscclppResult_t) {
	const fn = "mscclppHostAlloc"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "ptr %p size %d", out, uint64(size))
	}
	if out == nil {
		return fail(nil, fn, nullArg("ptr"))
	}
	p, err := hostmem.Alloc(uint64(size))
	if err != nil {
		return fail(nil, fn, err)
	}
	*out = p
	return C.mscclppSuccess
}

//export go_mscclppHostFree
func go_mscclppHostFree(p unsafe.Pointer) (res C.mscclppResult_t) {
	const fn = "mscclppHostFree"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "ptr %p", p)
	}
	if p == nil {
		return C.mscclppSuccess
	}
	return result(nil, fn, hostmem.Free(p))
}

// regEntry mirrors mscclppRegisteredMemoryP2P (a C++-only type).
type regEntry struct{ remoteBuff, ibMr unsafe.Pointer }

//export go_mscclppRegisterBuffer
func go_mscclppRegisterBuffer(comm C.mscclppComm_t, mem unsafe.Pointer, size C.size_t, haveReg C.int, out unsafe.Pointer, max C.int, n *C.int) (res C.mscclppResult_t) {
	const fn = "mscclppRegisterBuffer"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p mem %p size %d", comm, mem, uint64(size))
	}
	call(fn, comm, &res, func(c *impl.Comm) error {
		if haveReg == 0 {
			return nullArg("regMem")
		}
		peers, err := c.RegisterBuffer(mem, uint64(size))
		if err != nil {
			return err
		}
		if len(peers) > int(max) {
			return status.Errorf(status.InternalError, "%d registrations for room for %d", len(peers), int(max))
		}
		dst := unsafe.Slice((*regEntry)(out), int(max))
		for i, p := range peers {
			dst[i] = regEntry{p.RemoteBuff, p.Record}
		}
		*n = C.int(len(peers))
		return nil
	})
	return
}

//export go_mscclppRegisteredBufferWrite
func go_mscclppRegisteredBufferWrite(comm C.mscclppComm_t, entries unsafe.Pointer, n C.int, src unsafe.Pointer, size C.size_t, srcOff, dstOff C.uint32_t, stream C.int64_t) (res C.mscclppResult_t) {
	const fn = "mscclppRegisteredBufferWrite"
	defer guard(fn, &res)
	if tracing() {
		trace(fn, "comm %p entries %d src %p size %d srcOff %d dstOff %d stream %#x", comm, int(n), src, uint64(size), uint32(srcOff), uint32(dstOff), int64(stream))
	}
	call(fn, comm, &res, func(c *impl.Comm) error {
		if entries == nil && n > 0 {
			return nullArg("regMem")
		}
		var peers []impl.RegisteredPeer
		if n > 0 {
			for _, e := range unsafe.Slice((*regEntry)(entries), int(n)) {
				peers = append(peers, impl.RegisteredPeer{RemoteBuff: e.remoteBuff, Record: e.ibMr})
			}
		}
		return c.RegisteredBufferWrite(peers, src, uint64(size), uint32(srcOff), uint32(dstOff), uintptr(stream))
	})
	return
}
