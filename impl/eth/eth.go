// Package eth is the Ethernet transport (mscclppTransportEthernet, an
// extension): host-mode puts and signals to a rank on any node over one TCP
// connection per mscclpp connection, driven by the proxy or the calling
// thread, received by a thread per connection straight into the registered
// buffers (eth.h says why that part is in C).
package eth

/*
#cgo CFLAGS: -O2 -Wall
#include <stdlib.h>
#include "eth.h"
static const void* ethOpsPtr(void) { return &ethOps; }
*/
import "C"

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/bootstrap"
	"github.com/mscclpp-go/mscclpp/impl/cudaproxy"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// ID is mscclppTransportEthernet, the first value after upstream's IB.
const ID transport.ID = 3

// Entry registers the transport.
var Entry = transport.Entry{ID: ID, Name: "Ethernet", Subsys: logx.Net, New: newEth}

const (
	tokenBytes = 16
	helloBytes = 8 + tokenBytes // "MSEH", connection index, the acceptor's token
	kindSignal = 1
	kindData   = 2
	kindReg    = 3 // a buffer of mscclppRegisterBuffer: kind, its index at the receiver (4 bytes), size
)

// A registration on the wire. Handle 0 (the signal slot): kind, the address and port this
// rank accepts the connection's socket at, and a one-time token the dialer must present;
// a data handle: kind and size (the bytes travel over the socket, never by address).
func signalBlob(ap netip.AddrPort, token [tokenBytes]byte) []byte {
	b := []byte{kindSignal}
	a := ap.Addr().As16()
	b = append(b, a[:]...)
	b = binary.LittleEndian.AppendUint16(b, ap.Port())
	return append(b, token[:]...)
}

func dataBlob(size uint64) []byte {
	return binary.LittleEndian.AppendUint64([]byte{kindData}, size)
}

type eth struct {
	transport.Defaults
	h       *transport.Host
	state   *C.struct_ethCtx
	ctx     *engine.Ctx
	ln      *net.TCPListener
	addr    netip.AddrPort
	timeout time.Duration

	mu          sync.Mutex
	tokens      map[[tokenBytes]byte]int // my tokens -> connection index
	arrived     map[int]*net.TCPConn     // accepted, authenticated sockets by connection index
	cond        *sync.Cond               // signalled when arrived grows or the listener fails
	wg          sync.WaitGroup
	closed      bool
	quit        chan struct{} // closed by Close: ends the accept loop's back-off
	kick        chan struct{} // ends the accept loop's back-off at once: a join started waiting (one buffered)
	acceptErr   error         // the accept loop's last error while it persists (cleared by an accept)
	acceptFails uint64        // accepts that failed with acceptErr, ever
	fences      uint64        // fences sent (one per mscclppProxyStop)
	drops       dropLog       // the WARN lines about strangers, rate-limited

	// CUDA mode: connections whose buffer is device memory go through a CUDA-mode proxy
	// (counters and FIFO head in device memory) and pinned staging buffers
	cu       cudaproxy.OnDemand
	cudaConn map[int]bool
	stages   []stage // pinned, freed at Close

	engConns map[int]*engine.Conn // set-up connections by index (mscclppRegisteredBufferWrite sends on them)
}

// stage is a pinned staging buffer and the GPU whose proxy uses it.
type stage struct {
	dev cuda.Device
	p   unsafe.Pointer
}

// StageBytes is the size of each CUDA-mode connection's two pinned staging buffers.
const StageBytes = 4 << 20

// newEth listens at the address of this rank's bootstrap listener (the interface
// MSCCLPP_SOCKET_IFNAME chose), where peers reach it.
func newEth(h *transport.Host) (transport.Transport, error) {
	ip, err := netip.ParseAddr(h.ListenIP)
	if err != nil {
		return nil, status.Errorf(status.InternalError, "Ethernet transport: this rank's address %q: %v", h.ListenIP, err)
	}
	ln, err := bootstrap.ListenTCP(netip.AddrPortFrom(ip, 0), true)
	if err != nil {
		return nil, status.Errorf(status.SystemError, "Ethernet transport: listen at %s: %v", ip, err)
	}
	st := C.ethCtxNew(nil)
	ctx, err := engine.NewCtxOps(h.Eng, C.ethOpsPtr(), unsafe.Pointer(st))
	if err != nil {
		ln.Close()
		C.free(unsafe.Pointer(st))
		return nil, err
	}
	e := &eth{h: h, state: st, ctx: ctx, ln: ln, addr: netip.AddrPortFrom(ip, uint16(ln.Addr().(*net.TCPAddr).Port)),
		timeout: h.Timeout, quit: make(chan struct{}), kick: make(chan struct{}, 1), tokens: map[[tokenBytes]byte]int{}, arrived: map[int]*net.TCPConn{},
		cudaConn: map[int]bool{}, engConns: map[int]*engine.Conn{}}
	e.cu = cudaproxy.OnDemand{Name: "Ethernet", Means: "device memory travels through pinned staging buffers",
		Ops: C.ethOpsPtr(), State: e.cudaState}
	e.drops.rank = h.Rank
	e.cond = sync.NewCond(&e.mu)
	e.wg.Add(1)
	go e.acceptLoop()
	logx.Infof(logx.Net, "rank %d: Ethernet transport listening at %s", h.Rank, e.addr)
	return e, nil
}

// Declare serves any peer: in CUDA mode when the buffer is device memory, else with its signal
// slot in the node segment, as for SHM (waits work the same way).
func (e *eth) Declare(d transport.Decl) (transport.Endpoint, error) {
	if dev, ok := e.cu.Serves(d.Local); ok {
		ep, err := e.cu.Declare(e.h, d, dev)
		if err == nil {
			e.cudaConn[d.Idx] = true
		}
		return ep, err
	}
	return e.h.HostSlot(d.Idx, d.Peer, d.Tag, d.Local, e.ctx), nil
}

// cudaState makes the Ethernet state of a CUDA-mode proxy's context over cuda's proxy state.
func (e *eth) cudaState(state unsafe.Pointer) unsafe.Pointer {
	return unsafe.Pointer(C.ethCtxNew((*C.struct_cudaProxyState)(state)))
}

// states returns the Ethernet state of every context: the host-mode one, then each proxy's.
func (e *eth) states() []*C.struct_ethCtx {
	out := []*C.struct_ethCtx{e.state}
	for _, px := range e.cu.Proxies() {
		out = append(out, (*C.struct_ethCtx)(px.Transport))
	}
	return out
}

// Mode says whether device buffers put the transport in CUDA mode.
func (e *eth) Mode() string { return e.cu.Mode() }

func (e *eth) Describe(idx, h int, b transport.Buffer) ([]byte, error) {
	if h == 0 {
		var tok [tokenBytes]byte
		if _, err := rand.Read(tok[:]); err != nil {
			return nil, status.Errorf(status.SystemError, "Ethernet transport: no random token: %v", err)
		}
		e.mu.Lock()
		e.tokens[tok] = idx
		e.mu.Unlock()
		return signalBlob(e.addr, tok), nil
	}
	if h == transport.Registered {
		return e.describeRegistered(idx, b)
	}
	if !e.cudaConn[idx] {
		if err := hostReadable(b); err != nil {
			return nil, err
		}
	}
	return dataBlob(b.Size), nil
}

// hostReadable refuses memory this process cannot read (device memory): the receive thread
// writes registrations with recv and the sender reads them with send.
func hostReadable(b transport.Buffer) error {
	var one [1]byte
	local := []unix.Iovec{{Base: &one[0], Len: 1}}
	remote := []unix.RemoteIovec{{Base: uintptr(b.Ptr), Len: 1}}
	if _, err := unix.ProcessVMReadv(unix.Getpid(), local, remote, 0); err != nil && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOSYS) {
		return status.Errorf(status.InvalidUsage, "Ethernet transport: buffer %p is not host memory (%v): neither host memory nor device memory of a CUDA context this process uses", b.Ptr, err)
	}
	return nil
}

// Finish wires the connection from the sizes the peer registered (nothing of the peer is
// addressable here) and joins its socket.
func (e *eth) Finish(s transport.Setup) (transport.Connected, error) {
	remote, err := transport.ImportAll(s, func(_ int, blob []byte) (engine.Reg, error) { return importReg(blob) })
	if err != nil {
		return transport.Connected{}, err
	}
	conn := e.h.Wire(s, transport.LocalRegs(s, localReg), remote, nil)
	out := transport.Connected{Eng: conn, Path: "TCP, sent from the source buffer and received into the peer's buffer by its receive thread"}
	return out, e.join(s.Idx, conn, s.Blobs)
}

// ImportRegistered: a peer's buffer of mscclppRegisterBuffer, named by its index there.
func (e *eth) ImportRegistered(_, _ int, blob []byte) (engine.Reg, unsafe.Pointer, error) {
	r, err := importReg(blob)
	return r, nil, err
}

func importReg(blob []byte) (engine.Reg, error) {
	switch {
	case len(blob) == 13 && blob[0] == kindReg:
		return engine.Reg{Addr: uint64(binary.LittleEndian.Uint32(blob[1:])), Size: binary.LittleEndian.Uint64(blob[5:])}, nil
	case len(blob) == 1+16+2+tokenBytes && blob[0] == kindSignal:
		return engine.Reg{Size: 16}, nil
	case len(blob) == 9 && blob[0] == kindData:
		return engine.Reg{Size: binary.LittleEndian.Uint64(blob[1:])}, nil
	}
	return engine.Reg{}, status.Errorf(status.RemoteError, "malformed Ethernet registration (%d bytes)", len(blob))
}

// join joins connection idx's socket: the lower rank dials the peer with the peer's token,
// the higher one waits for it; then the C side takes the socket over.
func (e *eth) join(idx int, conn *engine.Conn, remoteBlobs [][]byte) error {
	b := remoteBlobs[0]
	if len(b) != 1+16+2+tokenBytes || b[0] != kindSignal {
		return status.Errorf(status.RemoteError, "the peer's handle 0 is not an Ethernet signal slot")
	}
	peerAddr := netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[1:17])).Unmap(), binary.LittleEndian.Uint16(b[17:19]))
	var tok [tokenBytes]byte
	copy(tok[:], b[19:])
	peer := conn.PeerRank()
	var c *net.TCPConn
	var err error
	if e.h.Rank < peer {
		c, err = e.dial(peerAddr, tok)
	} else {
		c, err = e.await(idx, peer, peerAddr)
	}
	if err != nil {
		return err
	}
	f, err := c.File() // a blocking duplicate the C side owns
	c.Close()
	if err != nil {
		return status.Errorf(status.SystemError, "Ethernet transport: socket to rank %d: %v", peer, err)
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0) // close-on-exec: an exec'd child must not hold the peer's socket open
	f.Close()
	if err != nil {
		return status.Errorf(status.SystemError, "Ethernet transport: socket to rank %d: %v", peer, err)
	}
	_ = unix.SetNonblock(fd, false)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	conn.SetPeerPid(0) // the peer may be on another node: its end of the socket tells when it is gone
	var send, recv unsafe.Pointer
	if e.cudaConn[idx] {
		dev := e.cu.Of(idx).Dev // the proxy's GPU: its FIFO, streams and staging stay near it
		if send, err = dev.HostAlloc(StageBytes); err == nil {
			e.stages = append(e.stages, stage{dev, send})
			if recv, err = dev.HostAlloc(StageBytes); err == nil {
				e.stages = append(e.stages, stage{dev, recv})
			}
		}
		if err != nil {
			unix.Close(fd)
			return fmt.Errorf("Ethernet transport: pinned staging buffers of connection %d: %w", idx, err)
		}
	} else {
		conn.SetSleepers(e.h.Node.Sleepers(e.h.LocalIdx, idx), nil)
	}
	if rc := C.ethConnStart((*C.engConn)(conn.Ptr()), C.int(fd), send, recv, C.uint64_t(StageBytes), C.int64_t(e.timeout.Milliseconds())); rc != C.mscclppSuccess {
		unix.Close(fd)
		return status.Errorf(status.Code(rc), "Ethernet transport: cannot start the receive thread of connection %d", idx)
	}
	e.engConns[idx] = conn
	return nil
}

func (e *eth) dial(addr netip.AddrPort, tok [tokenBytes]byte) (*net.TCPConn, error) {
	d := net.Dialer{Timeout: e.timeout}
	nc, err := d.Dial("tcp", addr.String())
	if err != nil {
		return nil, status.Errorf(status.RemoteError, "Ethernet transport: connect to %s: %v", addr, err)
	}
	c := nc.(*net.TCPConn)
	hello := append([]byte("MSEH\x00\x00\x00\x00"), tok[:]...)
	if _, err := c.Write(hello); err != nil {
		c.Close()
		return nil, status.Errorf(status.RemoteError, "Ethernet transport: hello to %s: %v", addr, err)
	}
	return c, nil
}

func localReg(b transport.Buffer) engine.Reg {
	if _, dev := cudaproxy.DeviceOf(b.Ptr); dev {
		return engine.Reg{Addr: uint64(uintptr(b.Ptr)), Size: b.Size} // device memory: staged, never touched
	}
	return engine.Reg{Mapped: b.Ptr, Addr: uint64(uintptr(b.Ptr)), Size: b.Size}
}

// describeRegistered adds host memory b as the next mscclppRegisterBuffer registration of
// connection idx, which the peer's writes name by its index.
func (e *eth) describeRegistered(idx int, b transport.Buffer) ([]byte, error) {
	if err := hostReadable(b); err != nil {
		return nil, err
	}
	st := e.state
	if px := e.cu.Of(idx); px != nil {
		st = (*C.struct_ethCtx)(px.Transport)
	}
	k := C.ethAddReg(st, C.int(idx), b.Ptr, C.uint64_t(b.Size))
	if k < 0 {
		return nil, status.Errorf(status.InvalidUsage, "Ethernet transport: connection %d has %d registered buffers, the most it holds", idx, C.ETH_MAX_REGS)
	}
	out := binary.LittleEndian.AppendUint32([]byte{kindReg}, uint32(k))
	return binary.LittleEndian.AppendUint64(out, b.Size), nil
}

// Write sends size bytes of host memory src to offset off of the peer's registration over
// connection idx's socket. It returns once the kernel took the bytes; the peer's receive
// thread lands them before anything sent later on the connection (a signal, ProxyStop's fence).
func (e *eth) Write(idx int, rec engine.RegRecord, off uint64, src unsafe.Pointer, size uint64, _ uintptr) error {
	if off > rec.Size() || size > rec.Size()-off {
		return status.Errorf(status.InvalidArgument, "write of %d bytes at offset %d exceeds the peer's registered %d bytes", size, off, rec.Size())
	}
	conn := e.engConns[idx]
	if conn == nil {
		return status.Errorf(status.InvalidUsage, "Ethernet connection %d is not set up", idx)
	}
	if err := hostReadable(transport.Buffer{Ptr: src, Size: size}); err != nil {
		return fmt.Errorf("registered buffer write source: %w", err)
	}
	if rc := C.ethWriteReg((*C.engConn)(conn.Ptr()), C.uint64_t(rec.Addr()), C.uint64_t(off), src, C.uint64_t(size)); rc != C.mscclppSuccess {
		return status.Errorf(status.Code(rc), "Ethernet registered buffer write of %d bytes to rank %d failed (see the communicator's last error)", size, conn.PeerRank())
	}
	return nil
}

// Stopped fences every connection: once it returns, the data every peer sent before its
// proxies stopped has landed here, as a put by SHM has when mscclppProxyStop returns.
func (e *eth) Stopped() error {
	if err := e.cu.Sync(); err != nil {
		return err
	}
	e.fences++
	var buf [256]C.char
	for _, st := range e.states() {
		if st == nil {
			continue
		}
		if rc := C.ethFence(st, C.uint64_t(e.fences), C.int64_t(e.timeout.Milliseconds()), &buf[0], C.int(len(buf))); rc != C.mscclppSuccess {
			return status.Errorf(status.Code(rc), "Ethernet transport: %s", C.GoString(&buf[0]))
		}
	}
	return nil
}

// Abort ends every connection's sending side for the destroy (eth.h, ethAbort): a send in
// progress to a busy or lost peer gives up at once.
func (e *eth) Abort() {
	for _, st := range e.states() {
		if st != nil {
			C.ethAbort(st)
		}
	}
}

// Close stops accepting, closes the sockets (the context's close op joins the receive threads).
func (e *eth) Close() error {
	e.mu.Lock()
	e.closed = true
	for _, c := range e.arrived {
		c.Close()
	}
	e.cond.Broadcast()
	e.mu.Unlock()
	close(e.quit)
	e.ln.Close()
	e.wg.Wait()
	e.drops.close()
	if e.ctx != nil {
		e.ctx.Free()
		e.ctx = nil
	}
	e.cu.CloseContexts() // joins the receive threads, which use the staging buffers and streams
	for _, s := range e.stages {
		if err := s.dev.HostFree(s.p); err != nil {
			logx.Warnf("rank %d: Ethernet transport: freeing a staging buffer: %v", e.h.Rank, err)
		}
	}
	e.cu.Free()
	e.stages = nil
	return nil
}
