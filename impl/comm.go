// Package impl is the Go core of libmscclpp: communicators, their bootstrap,
// connection bookkeeping and setup, proxies, and node-local shared memory.
package impl

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/bootstrap"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/nodeshm"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Mode says who initiates transfers: host threads, or GPU threads.
type Mode int

// The modes.
const (
	HostMode Mode = iota
	CUDAMode
)

func (m Mode) String() string {
	if m == CUDAMode {
		return "CUDA mode"
	}
	return "host mode"
}

// Comm is one rank's communicator.
type Comm struct {
	mu     sync.Mutex // serialises the control plane of this communicator
	rank   int
	nranks int
	boot   *bootstrap.Bootstrap
	mode   Mode

	hostIDs    []string
	localIdx   int         // my index among the ranks of my node
	localOf    map[int]int // rank -> index on my node, for ranks on my node
	node       *nodeshm.Segment
	eng        *engine.Comm
	devConns   engine.DevConns
	conns      []*Conn
	shmCtx     *engine.Ctx
	setupDone  bool
	proxyOn    bool
	device     int        // MSCCLPP_DEVICE (deviceAuto, deviceHost, deviceCUDA)
	cuda       *cudaState // CUDA mode only (entered at the first P2P connection)
	waitCfg    engine.Backoff
	collMu     sync.Mutex // serialises the collectives of this communicator (threads would get each other's data)
	collSeq    uint64     // collectives done through the node segment
	regRecords []engine.RegRecord
	mappings   []hostmem.Mapping // peers' mscclppHostAlloc regions this communicator mapped
	closed     bool
}

func bootOptions() bootstrap.Options {
	return bootstrap.Options{
		Timeout: BootstrapTimeout(),
		HostID:  hostID(),
		Logf: func(warn bool, format string, args ...any) {
			if warn {
				logx.WarnfDepth(1, format, args...)
			} else {
				logx.Infof(logx.Init, format, args...)
			}
		},
	}
}

// NewUniqueID creates an id and starts its root listener in this process.
func NewUniqueID() (bootstrap.ID, error) {
	return bootstrap.NewID(bootOptions())
}

func checkRanks(nranks, rank int) error {
	if nranks <= 0 || nranks > 1024 {
		return status.Errorf(status.InvalidArgument, "nranks %d out of range 1..1024", nranks)
	}
	if rank < 0 || rank >= nranks {
		return status.Errorf(status.InvalidArgument, "rank %d out of range 0..%d", rank, nranks-1)
	}
	return nil
}

// InitRank forms a communicator whose rank 0 listens at addr.
func InitRank(nranks int, addr string, rank int) (*Comm, error) {
	if err := checkRanks(nranks, rank); err != nil {
		return nil, err
	}
	if _, err := bootstrap.ParseAddr(addr); err != nil {
		return nil, err
	}
	start := time.Now()
	b, err := bootstrap.InitAddr(addr, rank, nranks, bootOptions())
	if err != nil {
		return nil, fmt.Errorf("rank %d of %d: bootstrap at %s: %w", rank, nranks, addr, err)
	}
	return newComm(b, start)
}

// InitRankFromID forms a communicator from an id made by NewUniqueID.
func InitRankFromID(nranks int, id bootstrap.ID, rank int) (*Comm, error) {
	if err := checkRanks(nranks, rank); err != nil {
		return nil, err
	}
	start := time.Now()
	b, err := bootstrap.Init(id, rank, nranks, bootOptions())
	if err != nil {
		return nil, fmt.Errorf("rank %d of %d: bootstrap: %w", rank, nranks, err)
	}
	return newComm(b, start)
}

var versionOnce sync.Once

func newComm(b *bootstrap.Bootstrap, start time.Time) (*Comm, error) {
	versionOnce.Do(func() { logx.Versionf("MSCCL++ version 0.1.0 (Go implementation)") })
	c := &Comm{rank: b.Rank(), nranks: b.Size(), boot: b, mode: HostMode, hostIDs: b.HostIDs()}
	fail := func(err error) (*Comm, error) {
		b.Abort(err)
		b.Close()
		return nil, err
	}
	policy, err := devicePolicy()
	if err != nil {
		return fail(fmt.Errorf("rank %d: %w", c.rank, err))
	}
	c.device = policy
	if err := c.initNode(start); err != nil {
		return fail(err)
	}
	c.waitCfg = waitBackoff(len(c.localOf))
	c.eng = engine.NewComm(c.rank, c.waitCfg, proxyBackoff())
	c.eng.SetStreamBytes(uint64(envUint("MSCCLPP_STREAM_COPY_BYTES", 8<<20)), uint64(envUint("MSCCLPP_STREAM_COPY_MAX_BYTES", 128<<20)))
	c.devConns = engine.NewDevConns(engine.MaxConns)
	// Peers write into this process with process_vm_writev where memory is not shared;
	// allow it under Yama's ptrace restrictions (EINVAL where Yama is absent is fine).
	_ = unix.Prctl(unix.PR_SET_PTRACER, uintptr(unix.PR_SET_PTRACER_ANY), 0, 0, 0)
	logx.Infof(logx.Init, "rank %d of %d ready in %v (%v for now, %d ranks on this node)", c.rank, c.nranks, time.Since(start), c.mode, len(c.localOf))
	return c, nil
}

// initNode finds the ranks of this node and maps the node's shared-memory segment.
func (c *Comm) initNode(start time.Time) error {
	c.localOf = map[int]int{}
	leader := -1
	for r, h := range c.hostIDs {
		if h == c.hostIDs[c.rank] {
			if leader < 0 {
				leader = r
			}
			c.localOf[r] = len(c.localOf)
		}
	}
	c.localIdx = c.localOf[c.rank]
	// A per-instance nonce from rank 0 names the segment, so a communicator re-formed
	// at the same address never meets a stale segment of an earlier one; every rank's
	// pid lets local ranks notice one that exits while they wait for it.
	buf := make([]byte, 16*c.nranks)
	if c.rank == 0 {
		if _, err := rand.Read(buf[:8]); err != nil {
			return status.Errorf(status.SystemError, "random nonce: %w", err)
		}
	}
	binary.LittleEndian.PutUint64(buf[16*c.rank+8:], uint64(os.Getpid()))
	if err := c.boot.AllGather(buf, 16); err != nil {
		return fmt.Errorf("rank %d: exchange node nonce: %w", c.rank, err)
	}
	nonce := binary.LittleEndian.Uint64(buf[:8])
	alive := func() error {
		for r := range c.localOf {
			if pid := int(binary.LittleEndian.Uint64(buf[16*r+8:])); r != c.rank && engine.ProcessGone(pid) {
				return status.Errorf(status.RemoteError, "rank %d (pid %d) on this node exited during mscclppCommInitRank", r, pid)
			}
		}
		return nil
	}
	name := nodeshm.Name(c.boot.Magic(), nonce, leader)
	seg, err := nodeshm.Open(name, leader == c.rank, len(c.localOf), engine.MaxConns, start.Add(BootstrapTimeout()), alive)
	if err != nil {
		return fmt.Errorf("rank %d: %w", c.rank, err)
	}
	seg.SetPid(c.localIdx, os.Getpid())
	c.node = seg
	return nil
}

// Rank is this rank.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.nranks }

// SetLastError makes msg the text mscclppGetLastError shows for this communicator.
func (c *Comm) SetLastError(msg string) { c.eng.SetLast(msg) }

// LastErrorText is the address of the communicator's last-error text, a C string.
func (c *Comm) LastErrorText() unsafe.Pointer { return c.eng.LastPtr() }

// AsyncErr is the first error found asynchronously (by a proxy or a host operation), or nil.
func (c *Comm) AsyncErr() error { return c.eng.Err() }

// AllGather gathers size bytes from every rank into data (nranks slots of size bytes).
func (c *Comm) AllGather(data unsafe.Pointer, size int) error {
	if data == nil {
		return status.Errorf(status.InvalidArgument, "allgather: data is NULL")
	}
	if size <= 0 {
		return status.Errorf(status.InvalidArgument, "allgather: size %d must be positive", size)
	}
	buf := unsafe.Slice((*byte)(data), size*c.nranks)
	c.collMu.Lock()
	defer c.collMu.Unlock()
	if c.shmCollectives(size) {
		if err := c.allGatherShm(buf, size); err != nil {
			return fmt.Errorf("rank %d: allgather of %d bytes: %w", c.rank, size, err)
		}
		return nil
	}
	if err := c.boot.AllGather(buf, size); err != nil {
		return c.remoteFailure(fmt.Errorf("rank %d: allgather of %d bytes: %w", c.rank, size, err))
	}
	return nil
}

// remoteFailure records a peer's failure as the communicator's asynchronous error too, so
// that host waits on connections stop waiting for a peer that is gone.
func (c *Comm) remoteFailure(err error) error {
	if status.CodeOf(err) == status.RemoteError {
		c.eng.SetErr(err)
	}
	return err
}

// Barrier returns once every rank has entered it.
func (c *Comm) Barrier() error {
	c.collMu.Lock()
	defer c.collMu.Unlock()
	if c.shmCollectives(0) {
		var none []byte
		if err := c.allGatherShm(none, 0); err != nil {
			return fmt.Errorf("rank %d: barrier: %w", c.rank, err)
		}
		return nil
	}
	if err := c.boot.Barrier(); err != nil {
		return c.remoteFailure(fmt.Errorf("rank %d: barrier: %w", c.rank, err))
	}
	return nil
}

// Destroy stops the proxies and frees everything the communicator holds.
func (c *Comm) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return status.Errorf(status.InvalidUsage, "communicator already destroyed")
	}
	c.closed = true
	_ = c.stopProxies() // freeCUDA waits for the streams again and logs what fails
	for _, x := range c.contexts() {
		x.Close() // no host call is inside a context from here on
	}
	for _, cn := range c.conns {
		if cn.eng != nil {
			cn.ctx.FreeConn(cn.eng)
		}
	}
	if c.shmCtx != nil {
		c.shmCtx.Free()
	}
	c.freeCUDA()
	for _, r := range c.regRecords {
		r.Free()
	}
	for _, m := range c.mappings {
		hostmem.Release(m)
	}
	c.devConns.Free()
	c.eng.Free()
	c.node.Unlink()
	c.node.Close()
	return c.boot.Close()
}

// stopProxies stops the proxy threads, then waits for the copies they enqueued.
func (c *Comm) stopProxies() error {
	for _, x := range c.contexts() {
		x.Stop()
	}
	if c.proxyOn {
		c.logBinding()
	}
	c.proxyOn = false
	return c.syncCUDA()
}

// contexts are the communicator's proxy contexts.
func (c *Comm) contexts() []*engine.Ctx {
	var out []*engine.Ctx
	if c.shmCtx != nil {
		out = append(out, c.shmCtx)
	}
	if c.cuda != nil && c.cuda.p2p != nil {
		out = append(out, c.cuda.p2p)
	}
	return out
}

// ProxyLaunch starts one proxy thread per transport context.
func (c *Comm) ProxyLaunch() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.setupDone {
		return status.Errorf(status.InvalidUsage, "mscclppProxyLaunch before mscclppConnectionSetup")
	}
	if c.proxyOn {
		return status.Errorf(status.InvalidUsage, "proxies already launched")
	}
	for i, x := range c.contexts() {
		if err := x.Start(); err != nil {
			for _, y := range c.contexts()[:i] {
				y.Stop()
			}
			return err
		}
	}
	c.proxyOn = true
	return nil
}

// ProxyStop waits for every rank (a barrier), then drains, stops and joins the proxies.
func (c *Comm) ProxyStop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.proxyOn {
		return status.Errorf(status.InvalidUsage, "mscclppProxyStop without a running proxy (call mscclppProxyLaunch first)")
	}
	err := c.Barrier()
	if serr := c.stopProxies(); err == nil {
		err = serr
	}
	return err
}

// ProxyServed is the number of triggers the proxies have served (for tests and benchmarks).
func (c *Comm) ProxyServed() uint64 {
	if c.shmCtx == nil {
		return 0
	}
	return c.shmCtx.Served()
}
