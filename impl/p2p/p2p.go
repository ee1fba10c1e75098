// Package p2p is the P2P transport of CUDA mode between GPUs of one node:
// registrations exchanged as CUDA IPC handles, puts and signals as
// asynchronous copies on the proxy's streams (p2p.c, its engOps table, over
// cuda's proxy state), the trigger FIFO
// in pinned host memory with its head in device memory. The first P2P
// connection puts the communicator in CUDA mode, or, in host mode (no CUDA
// driver in use, or MSCCLPP_DEVICE=host), makes P2P carry host memory
// exactly as SHM does (hostmode.go), so that programs written for GPUs run
// unchanged on a machine without one.
package p2p

/*
#cgo CFLAGS: -O2 -Wall
#include "p2p.h"

static const void* p2pOpsPtr(void) { return &p2pOps; }
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"strings"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/cudaproxy"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// ID is mscclppTransportP2P.
const ID transport.ID = 0

// EnvDevice chooses host or CUDA mode (devicePolicy).
const EnvDevice = string(env.Device)

// Entry registers the transport; its Init checks MSCCLPP_DEVICE at every mscclppCommInitRank.
var Entry = transport.Entry{ID: ID, Name: "P2P", Subsys: logx.P2P, New: newP2P, Settings: []string{EnvDevice},
	Init: func(h *transport.Host) error {
		_, err := devicePolicy(h.Setting(EnvDevice), true)
		return err
	}}

// cudaState is what a communicator holds in CUDA mode: the proxy and the peers' IPC mappings.
type cudaState struct {
	dev   cuda.Device
	proxy *cudaproxy.Proxy
	ipc   map[cuda.IpcHandle]uint64
	peers map[int]bool // ranks whose memory this rank mapped: they map this rank's (setup is symmetric)
	// peerOn: the GPUs (ordinals) this context may access, for peers in this process (sameproc.go)
	peerOn map[int]bool
}

// p2p is the transport's instance for one communicator.
type p2p struct {
	transport.Defaults
	h      *transport.Host
	policy int
	cuda   *cudaState          // CUDA mode only (entered at the first P2P connection)
	host   transport.Transport // host mode only: the SHM transport that carries P2P
}

func newP2P(h *transport.Host) (transport.Transport, error) {
	policy, err := devicePolicy(h.Setting(EnvDevice), false)
	if err != nil {
		return nil, err
	}
	return &p2p{h: h, policy: policy}, nil
}

// Mode says whether the communicator entered CUDA mode.
func (c *p2p) Mode() string {
	if c.cuda != nil {
		return "CUDA mode"
	}
	return ""
}

// Declare sets up connection d's device-side fields over P2P (entering CUDA mode first), or
// in host mode as SHM does.
func (c *p2p) Declare(d transport.Decl) (transport.Endpoint, error) {
	if !c.h.OnMyNode(d.Peer) {
		return transport.Endpoint{}, status.Errorf(status.InvalidUsage, "P2P transport to rank %d: that rank is on another host (P2P works within a node)", d.Peer)
	}
	if c.cuda == nil && c.host == nil && c.hostMode() {
		if err := c.enterHost(); err != nil {
			return transport.Endpoint{}, err
		}
	}
	if c.host != nil {
		return c.host.Declare(d)
	}
	if err := c.enterCUDA(d.Local); err != nil {
		return transport.Endpoint{}, err
	}
	if err := c.deviceMemory(d.Local); err != nil {
		return transport.Endpoint{}, err
	}
	ctx, err := c.cuda.proxy.Start(c.h.Eng, ops(), func(state unsafe.Pointer) unsafe.Pointer { return state })
	if err != nil {
		return transport.Endpoint{}, fmt.Errorf("P2P %w", err)
	}
	epoch := c.cuda.proxy.Attach(c.h.DevConns, d.Idx, d.Peer, d.Tag, d.Local)
	return transport.Endpoint{Ctx: ctx, Epoch: epoch}, nil
}

// ipcDesc is device memory on the wire: the IPC handle of its allocation, the offset and size,
// and for a peer in the same process (which the driver refuses an IPC import of the process's
// own handle) the exporter's process nonce and the allocation's address.
type ipcDesc struct {
	size, offset uint64
	ipc          [64]byte
	nonce, base  uint64
}

const ipcDescBytes = 16 + 64 + 16

// Describe describes device memory for a peer: the IPC handle of its allocation and the offset.
func (c *p2p) Describe(idx, hd int, b transport.Buffer) ([]byte, error) {
	if c.host != nil {
		return c.host.Describe(idx, hd, b)
	}
	if hd != 0 { // handle 0 is the connection's counters, which CUDA mode allocated
		if err := c.deviceMemory(b.Ptr); err != nil {
			return nil, err
		}
	}
	ptr := uint64(uintptr(b.Ptr))
	h, off, err := c.cuda.dev.IpcHandleOf(ptr)
	if err != nil {
		return nil, err
	}
	return ipcDesc{size: b.Size, offset: off, ipc: h, nonce: describedNonce(), base: ptr - off}.marshal(), nil
}

// marshal encodes d in ipcDescBytes (little-endian).
func (d ipcDesc) marshal() []byte {
	out := binary.LittleEndian.AppendUint64(nil, d.size)
	out = binary.LittleEndian.AppendUint64(out, d.offset)
	out = append(out, d.ipc[:]...)
	out = binary.LittleEndian.AppendUint64(out, d.nonce)
	return binary.LittleEndian.AppendUint64(out, d.base)
}

// hostBlob refuses, in host mode, a registration the peer made in CUDA mode.
func (c *p2p) hostBlob(blob []byte) error {
	if len(blob) == ipcDescBytes {
		return status.Errorf(status.InvalidUsage, "the peer runs P2P in CUDA mode (device memory), this rank in host mode")
	}
	return nil
}

// decodeIpcDesc decodes a peer's registration blob.
func decodeIpcDesc(blob []byte) (ipcDesc, error) {
	if len(blob) != ipcDescBytes {
		return ipcDesc{}, status.Errorf(status.RemoteError, "malformed P2P registration (%d bytes, want %d)", len(blob), ipcDescBytes)
	}
	d := ipcDesc{size: binary.LittleEndian.Uint64(blob), offset: binary.LittleEndian.Uint64(blob[8:])}
	copy(d.ipc[:], blob[16:80])
	d.nonce = binary.LittleEndian.Uint64(blob[80:])
	d.base = binary.LittleEndian.Uint64(blob[88:])
	return d, nil
}

// importReg maps a peer's device memory: through CUDA IPC, or for a peer in this process (peerPid
// and its nonce say so) at its own address.
func (c *p2p) importReg(blob []byte, peerPid int) (engine.Reg, error) {
	d, err := decodeIpcDesc(blob)
	if err != nil {
		return engine.Reg{}, err
	}
	open := c.openIpc
	if sameProcess(d, peerPid) {
		open = c.openDirect
	}
	a, err := open(d)
	if err != nil {
		return engine.Reg{}, err
	}
	return engine.Reg{Addr: a, Size: d.size}, nil
}

// Finish opens the peer's registrations and wires the connection (in host mode: as SHM).
func (c *p2p) Finish(s transport.Setup) (transport.Connected, error) {
	if c.host != nil {
		for h, blob := range s.Blobs {
			if err := c.hostBlob(blob); err != nil {
				return transport.Connected{}, fmt.Errorf("handle %d: %w", h, err)
			}
		}
		out, err := c.host.Finish(s)
		out.Path = "host mode, as SHM: " + out.Path
		return out, err
	}
	remote, err := transport.ImportAll(s, func(_ int, blob []byte) (engine.Reg, error) { return c.importReg(blob, s.Pid) })
	if err != nil {
		return transport.Connected{}, err
	}
	c.cuda.peers[s.Peer] = true // it maps this rank's memory as this rank maps its (setup is symmetric)
	// device memory, never touched by the host
	local := transport.LocalRegs(s, func(b transport.Buffer) engine.Reg {
		return engine.Reg{Addr: uint64(uintptr(b.Ptr)), Size: b.Size, Pid: os.Getpid()}
	})
	epoch := engine.DevPtr(remote[0].Addr)
	path := "cuMemcpyDtoDAsync into the peer's buffer opened through CUDA IPC"
	if len(s.Blobs) > 0 && len(s.Blobs[0]) == ipcDescBytes {
		if d, err := decodeIpcDesc(s.Blobs[0]); err == nil && sameProcess(d, s.Pid) {
			path = "cuMemcpyDtoDAsync into the peer's buffer at its own address (same process)"
		}
	}
	out := transport.Connected{Eng: c.h.Wire(s, local, remote, epoch), RemoteEpoch: epoch, Path: path}
	if len(remote) > 1 {
		out.RemoteBuff = engine.DevPtr(remote[1].Addr)
	}
	return out, nil
}

// ImportRegistered opens a peer's buffer of mscclppRegisterBuffer (in host mode: as SHM).
func (c *p2p) ImportRegistered(idx, pid int, blob []byte) (engine.Reg, unsafe.Pointer, error) {
	if c.host != nil {
		if err := c.hostBlob(blob); err != nil {
			return engine.Reg{}, nil, err
		}
		return c.host.ImportRegistered(idx, pid, blob)
	}
	r, err := c.importReg(blob, pid)
	return r, engine.DevPtr(r.Addr), err
}

// Write copies size bytes from device memory src to offset off of a peer's registration, on
// stream (in host mode: host memory, as SHM, done on return).
func (c *p2p) Write(idx int, rec engine.RegRecord, off uint64, src unsafe.Pointer, size uint64, stream uintptr) error {
	if c.host != nil {
		return c.host.Write(idx, rec, off, src, size, stream)
	}
	if off > rec.Size() || size > rec.Size()-off {
		return status.Errorf(status.InvalidArgument, "write of %d bytes at offset %d exceeds the peer's registered %d bytes", size, off, rec.Size())
	}
	return c.cuda.dev.CopyAsync(rec.Addr()+off, uint64(uintptr(src)), size, stream)
}

// Stopped reports the proxy's CPU binding and waits for the copies it enqueued.
func (c *p2p) Stopped() error {
	if c.cuda == nil {
		return nil
	}
	c.cuda.proxy.LogBinding()
	return c.cuda.proxy.Sync()
}

func (c *p2p) Close() error {
	c.freeCUDA()
	if c.host != nil {
		return c.host.Close()
	}
	return nil
}

// The MSCCLPP_DEVICE settings.
const (
	deviceAuto = iota // CUDA mode at the first P2P connection, which needs a GPU
	deviceHost        // host mode only: P2P is refused
	deviceCUDA        // as auto, but the driver must load and initialise at init
)

// devicePolicy parses MSCCLPP_DEVICE's value v; atInit also says in an INFO line what it means now and
// checks that the driver works where the setting demands it. The mode itself is decided at the
// first P2P connection (enterCUDA), not at init: CUDA 11 runtimes create the context lazily, so
// at mscclppCommInitRank the thread may have none yet even after cudaSetDevice.
func devicePolicy(v string, atInit bool) (int, error) {
	v = strings.ToLower(v)
	if !atInit {
		switch v {
		case "host":
			return deviceHost, nil
		case "cuda":
			return deviceCUDA, nil
		}
		return deviceAuto, nil
	}
	switch v {
	case "host":
		logx.Infof(logx.Init, "host mode: MSCCLPP_DEVICE=host")
		return deviceHost, nil
	case "", "auto":
		switch {
		case !cuda.InUse():
			logx.Infof(logx.Init, "host mode: the application has not loaded the CUDA driver (a P2P connection would look for a GPU)")
		default:
			if err := cuda.Init(); err != nil {
				logx.Infof(logx.Init, "host mode: %v", err)
			} else {
				logx.Infof(logx.Init, "host mode until the first P2P connection, which enters CUDA mode on its buffer's GPU")
			}
		}
		return deviceAuto, nil
	case "cuda":
		if err := cuda.Init(); err != nil {
			code := status.CodeOf(err)
			if code == status.InternalError {
				code = status.InvalidUsage
			}
			return deviceCUDA, status.Errorf(code, "MSCCLPP_DEVICE=cuda, but CUDA is unavailable: %w", err)
		}
		return deviceCUDA, nil
	default:
		return deviceAuto, status.Errorf(status.InvalidArgument, "MSCCLPP_DEVICE=%q: want host, cuda or auto", v)
	}
}

// enterCUDA switches the communicator to CUDA mode on its first P2P connection: the GPU is the
// one whose context allocated buf (device memory), else the context current on the calling thread.
func (c *p2p) enterCUDA(buf unsafe.Pointer) error {
	if c.cuda != nil {
		return nil
	}
	var dev cuda.Device
	var err error
	if buf != nil {
		var perr error
		if dev, perr = cuda.ProbePointer(uint64(uintptr(buf))); perr != nil {
			dev, err = cuda.Probe()
			if err != nil {
				err = fmt.Errorf("%w; nor does the buffer %p tell (%v)", err, buf, perr)
			}
		}
	} else {
		dev, err = cuda.Probe()
	}
	if err != nil {
		return status.Errorf(status.InvalidUsage, "P2P needs CUDA mode, and no GPU was found: %w", err)
	}
	return c.initCUDA(dev)
}

// initCUDA allocates the device memory every connection's counters live in.
func (c *p2p) initCUDA(dev cuda.Device) error {
	px, err := cudaproxy.New(dev, c.h.Rank)
	if err != nil {
		return err
	}
	c.cuda = &cudaState{dev: dev, proxy: px, ipc: map[cuda.IpcHandle]uint64{}, peers: map[int]bool{}, peerOn: map[int]bool{}}
	logx.SetDevice(dev.Ordinal)
	logx.Infof(logx.Init, "rank %d: CUDA mode on device %d (%s)", c.h.Rank, dev.Ordinal, dev.BusID)
	return nil
}

// openIpc maps a peer's device allocation (once per allocation) and returns the described address.
func (c *p2p) openIpc(d ipcDesc) (uint64, error) {
	if c.cuda == nil {
		return 0, status.Errorf(status.InvalidUsage, "the peer registered device memory, but this rank runs in host mode")
	}
	h := cuda.IpcHandle(d.ipc)
	base, ok := c.cuda.ipc[h]
	if !ok {
		var err error
		if base, err = c.cuda.dev.IpcOpen(h); err != nil {
			return 0, err
		}
		c.cuda.ipc[h] = base
	}
	return c.inAllocation(d, base)
}

// inAllocation checks what the peer claims against the allocation at base and returns the
// described address: a copy past its end would be an illegal address, which poisons the whole
// CUDA context.
func (c *p2p) inAllocation(d ipcDesc, base uint64) (uint64, error) {
	n, err := c.cuda.dev.AllocSize(base)
	if err != nil {
		return 0, err
	}
	if d.offset > n || d.size > n-d.offset {
		return 0, status.Errorf(status.RemoteError, "the peer's buffer of %d bytes at offset %d lies outside its %d-byte device allocation", d.size, d.offset, n)
	}
	return base + d.offset, nil
}

// freeCUDA releases everything CUDA mode allocated; proxies must be stopped. The proxy's streams
// are synchronized and freed first: their copies write into the peers' IPC mappings, which are
// closed only after that. The device memory peers mapped (the signal epochs) is freed only once
// every peer has said it closed its mappings (freeing it earlier is undefined behaviour for the
// driver): after the destroy returned, where a peer has not yet (a destroy waits for no peer).
func (c *p2p) freeCUDA() {
	st := c.cuda
	if st == nil {
		return
	}
	st.proxy.FreeContext()
	for _, base := range st.ipc {
		if err := st.dev.IpcClose(base); err != nil {
			logx.Warnf("rank %d: CUDA teardown: closing a peer's IPC mapping: %v", c.h.Rank, err)
		}
	}
	c.cuda = nil
	if c.h.PeersClosed != nil && len(st.peers) > 0 {
		peers := make([]int, 0, len(st.peers))
		for r := range st.peers {
			peers = append(peers, r)
		}
		sort.Ints(peers)
		c.h.PeersClosed(peers, st.proxy.Free) // freeing memory a peer still maps is undefined behaviour
		return
	}
	st.proxy.Free()
}

// ops is the transport's operations (p2p.c), a const engOps* for engCtx.ops and engConn.ops.
func ops() unsafe.Pointer { return unsafe.Pointer(C.p2pOpsPtr()) }
