// Package impl is the Go core of libmscclpp: communicators, their bootstrap,
// connection bookkeeping and setup, proxies, and node-local shared memory.
package impl

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/bootstrap"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/nodeshm"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// Comm is one rank's communicator.
type Comm struct {
	mu     sync.Mutex // serialises the control plane of this communicator
	rank   int
	nranks int
	boot   *bootstrap.Bootstrap
	host   transport.Host // who is where, the node segment, the engine: what transports see
	// timeout bounds every wait of this communicator: the bootstrap timeout it was formed
	// with, for its whole life (a later mscclppSetBootstrapConnTimeout or init does not change it)
	timeout time.Duration

	conns      []*Conn
	transports map[Transport]transport.Transport // made at the first connection over each
	trOrder    []Transport                       // in the order they were made
	state      commState
	waitCfg    engine.Backoff
	collMu     sync.Mutex // serialises the collectives of this communicator (threads would get each other's data)
	collSeq    uint64     // collectives done through the node segment
	regRecords []engine.RegRecord
	pins       []*hostmem.Pin // mscclppHostAlloc buffers of the connections: not freeable until Destroy
	hangAfter  time.Duration  // MSCCLPP_HANG_REPORT_S as read at init (report.go)
	deferred   []deferredFree // device memory peers may still map, freed after Destroy (teardown.go)
	watch      *peerWatch     // while the proxies run: notices lost P2P peers (peerwatch.go)
	unlaunched *peerWatch     // until the first ProxyLaunch: notices triggers nobody serves (launchwatch.go)
	// launchWatched: the watcher of unlaunched proxies has nothing more to tell (it warned, or the
	// proxies were launched)
	launchWatched atomic.Bool
}

// commState is where a communicator is in its life.
type commState int

const (
	stateIdle    commState = iota // proxies not running (connections may be declared and set up at any time)
	stateRunning                  // proxies launched
	stateClosed                   // destroyed
)

func bootOptions() bootstrap.Options {
	readTimeoutEnv()
	return bootstrap.Options{
		Timeout: BootstrapTimeout(),
		HostID:  hostID(),
		// a single-node communicator gathers through the node segment at every size
		// (shmCollectives): its bootstrap's collectives never need the star
		RingOnlyOnOneHost: true,
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
	if nranks <= 0 || nranks > bootstrap.MaxRanks {
		return status.Errorf(status.InvalidArgument, "nranks %d out of range 1..%d", nranks, bootstrap.MaxRanks)
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
	ap, err := bootstrap.ParseAddr(addr) // once: a host name is resolved once
	if err != nil {
		return nil, err
	}
	start := time.Now()
	node := &nodeJoin{start: start}
	b, err := runBootstrap(func() (*bootstrap.Bootstrap, error) {
		return bootstrap.InitAddrPort(ap, addr, rank, nranks, node.options())
	})
	if err != nil {
		node.drop()
		return nil, fmt.Errorf("rank %d of %d: bootstrap at %s: %w", rank, nranks, addr, err)
	}
	return newComm(b, start, node)
}

// InitRankFromID forms a communicator from an id made by NewUniqueID.
func InitRankFromID(nranks int, id bootstrap.ID, rank int) (*Comm, error) {
	if err := checkRanks(nranks, rank); err != nil {
		return nil, err
	}
	start := time.Now()
	node := &nodeJoin{start: start}
	b, err := runBootstrap(func() (*bootstrap.Bootstrap, error) { return bootstrap.Init(id, rank, nranks, node.options()) })
	if err != nil {
		node.drop()
		return nil, fmt.Errorf("rank %d of %d: bootstrap: %w", rank, nranks, err)
	}
	return newComm(b, start, node)
}

var versionOnce sync.Once

func newComm(b *bootstrap.Bootstrap, start time.Time, node *nodeJoin) (*Comm, error) {
	versionOnce.Do(func() { logx.Versionf("MSCCL++ version 0.1.0 (Go implementation)") })
	c := &Comm{rank: b.Rank(), nranks: b.Size(), boot: b, timeout: b.Timeout(), transports: map[Transport]transport.Transport{}}
	c.host = transport.Host{Rank: c.rank, Instance: b.InstanceID(), HostIDs: b.HostIDs(), ListenIP: listenIP(b.ListenAddr()), Timeout: c.timeout,
		Settings: transportSettings()}
	c.host.PeersClosed = c.peersClosed
	fail := func(err error) (*Comm, error) {
		b.Abort(err)
		b.Close()
		return nil, err
	}
	if err := c.initNode(start, node); err != nil {
		return fail(err)
	}
	c.waitCfg = waitBackoff(len(c.host.LocalOf))
	engine.SetMembarrier(membarrier()) // counts before the process's first proxy context only
	c.host.Eng = engine.NewComm(c.rank, c.waitCfg, proxyBackoff(len(c.host.LocalOf), 0))
	c.host.Eng.SetOpTimeout(c.timeout)
	copyBytes, copyMax, copyAuto := streamCopy()
	c.host.Eng.SetStreamBytes(copyBytes, copyMax)
	c.host.Eng.SetStreamAuto(copyAuto)
	c.registerReports()
	var err error
	if c.host.DevConns, err = engine.NewDevConns(engine.MaxConns); err != nil {
		c.unregisterReports()
		c.host.Eng.Free()
		c.host.Node.Close()
		return fail(err)
	}
	for _, e := range transports {
		if e.Init == nil {
			continue
		}
		if err := e.Init(&c.host); err != nil {
			c.host.DevConns.Free()
			c.unregisterReports()
			c.host.Eng.Free()
			c.host.Node.Close()
			return fail(fmt.Errorf("rank %d: %s transport: %w", c.rank, e.Name, err))
		}
	}
	// Peers write into this process with process_vm_writev where memory is not shared;
	// allow it under Yama's ptrace restrictions (EINVAL where Yama is absent is fine).
	_ = unix.Prctl(unix.PR_SET_PTRACER, uintptr(unix.PR_SET_PTRACER_ANY), 0, 0, 0)
	local, word := len(c.host.LocalOf), "ranks"
	if local == 1 {
		word = "rank"
	}
	logx.Infof(logx.Init, "rank %d of %d ready in %v (%d %s on this node)", c.rank, c.nranks, time.Since(start), local, word)
	return c, nil
}

// listenIP is the IP of a host:port listener address.
func listenIP(addr string) string {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap.Addr().String()
	}
	return addr
}

// initNode finds the ranks of this node and maps the node's shared-memory segment (unless
// the bootstrap did already: node).
func (c *Comm) initNode(start time.Time, node *nodeJoin) error {
	if node.seg != nil { // the bootstrap worked out the local ranks when it joined
		c.host.LocalOf, c.host.LocalIdx, c.host.Node = node.local, node.local[c.rank], node.seg
		return nil
	}
	var leader int
	c.host.LocalOf, leader = localRanks(c.host.HostIDs, c.rank)
	c.host.LocalIdx = c.host.LocalOf[c.rank]
	seg, err := openNode(c.boot, c.host.LocalOf, leader, start, nodeshm.Open, false)
	if err != nil {
		return fmt.Errorf("rank %d: %w", c.rank, err)
	}
	c.host.Node = seg
	return nil
}

// Rank is this rank.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.nranks }

// SetLastError makes msg the text mscclppGetLastError shows for this communicator.
func (c *Comm) SetLastError(msg string) { c.host.Eng.SetLast(msg) }

// LastErrorText is the address of the communicator's last-error text, a C string.
func (c *Comm) LastErrorText() unsafe.Pointer { return c.host.Eng.LastPtr() }

// AsyncErr is the first error found asynchronously (by a proxy or a host operation), or nil.
func (c *Comm) AsyncErr() error { return c.host.Eng.Err() }

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
	c.logColl("mscclppBootstrapAllGather", size, c.shmCollectives(size))
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

// remoteFailure records a failure of the communicator itself (its bootstrap: a collective
// failed with a remote error) as its asynchronous error and marks it lost, so that host waits
// on every connection stop waiting. A failure of one connection is that connection's only.
func (c *Comm) remoteFailure(err error) error {
	if status.CodeOf(err) == status.RemoteError {
		c.host.Eng.SetBroken(err)
	}
	return err
}

// Barrier returns once every rank has entered it.
func (c *Comm) Barrier() error {
	c.collMu.Lock()
	defer c.collMu.Unlock()
	c.logColl("mscclppBootstrapBarrier", 0, c.shmCollectives(0))
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

// Mode is the communicator's mode: "host mode", unless a transport (P2P) changed it.
func (c *Comm) Mode() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.trOrder {
		if m := c.transports[t].Mode(); m != "" {
			return m
		}
	}
	return "host mode"
}

// Destroy stops the proxies and frees everything the communicator holds. It is local, as
// upstream's: it waits for no peer (no fence, no flush of writes in flight, no barrier). The
// contexts are marked closing and the transports aborted before the proxies stop, so a send in
// progress to a busy or lost peer gives up at once; a peer still sending sees its connection
// end (RemoteError on it). An orderly drain is the application's: the peer's wait before this.
func (c *Comm) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateClosed {
		return status.Errorf(status.InvalidUsage, "communicator already destroyed")
	}
	c.stopPeerWatch()
	c.stopUnlaunchedWatch()
	for _, x := range c.contexts() {
		x.MarkClosing()
	}
	for _, t := range c.trOrder {
		c.transports[t].Abort()
	}
	for _, x := range c.contexts() {
		x.Stop() // prompt: every op the proxy still serves gives up at once
	}
	c.state = stateClosed
	for _, x := range c.contexts() {
		x.Close() // no host call is inside a context from here on
	}
	for _, cn := range c.conns {
		if cn.eng != nil {
			cn.ctx.FreeConn(cn.eng)
		}
	}
	for _, t := range c.trOrder {
		if err := c.transports[t].Close(); err != nil {
			logx.Warnf("rank %d: closing the %s transport: %v", c.rank, transportName(t), err)
		}
	}
	for _, r := range c.regRecords {
		r.Free()
	}
	for _, p := range c.pins {
		hostmem.Unpin(p)
	}
	c.host.DevConns.Free()
	c.releaseGPUs()
	c.unregisterReports()
	c.host.Eng.Free()
	c.host.Node.Unlink()
	c.host.Node.Close()
	return c.finishDestroy()
}

// stopProxies stops the proxy threads, then lets each transport wait for the work they left in flight.
func (c *Comm) stopProxies() error {
	for _, x := range c.contexts() {
		x.Stop()
	}
	var first error
	if c.state == stateRunning {
		c.state = stateIdle
		for _, t := range c.trOrder {
			if err := c.transports[t].Stopped(); err != nil && first == nil {
				first = fmt.Errorf("rank %d: %s transport: %w", c.rank, transportName(t), err)
			}
		}
	}
	return first
}

// contexts are the communicator's proxy contexts: those serving its connections, each once,
// in the order of the connections.
func (c *Comm) contexts() []*engine.Ctx {
	var out []*engine.Ctx
	seen := map[*engine.Ctx]bool{}
	for _, cn := range c.conns {
		if cn.ctx != nil && !seen[cn.ctx] {
			seen[cn.ctx] = true
			out = append(out, cn.ctx)
		}
	}
	return out
}

// ProxyLaunch starts one proxy thread per transport context. As upstream, it may come before
// mscclppConnectionSetup: contexts made later start with the setup that made them.
func (c *Comm) ProxyLaunch() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateRunning {
		return status.Errorf(status.InvalidUsage, "proxies already launched")
	}
	start := time.Now()
	c.stopUnlaunchedWatch()
	n, err := c.startProxies()
	if err != nil {
		c.watchUnlaunched()
		return err
	}
	c.launchWatched.Store(true)
	c.state = stateRunning
	c.startPeerWatch()
	c.logProxy(true, n, start)
	return nil
}

// startProxies starts the proxy thread of every context not running yet and returns how many
// it started; on failure it stops those it started.
func (c *Comm) startProxies() (int, error) {
	var started []*engine.Ctx
	all := c.contexts()
	c.host.Eng.SetProxyBackoff(proxyBackoff(len(c.host.LocalOf), len(all)))
	for _, x := range all {
		if x.Running() {
			continue
		}
		if err := x.Start(); err != nil {
			for _, y := range started {
				y.Stop()
			}
			return 0, err
		}
		started = append(started, x)
	}
	return len(started), nil
}

// ProxyStop waits for every rank (a barrier), then drains, stops and joins the proxies. After a
// reported remote failure it waits for no peer: no barrier, no fence, sends in progress give up.
func (c *Comm) ProxyStop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateRunning {
		return status.Errorf(status.InvalidUsage, "mscclppProxyStop without a running proxy (call mscclppProxyLaunch first)")
	}
	c.stopPeerWatch()
	if failed := c.AsyncErr(); status.CodeOf(failed) == status.RemoteError {
		start := time.Now()
		for _, x := range c.contexts() {
			x.Abandon(true)
			x.Stop()
			x.Abandon(false)
		}
		c.state = stateIdle
		c.logProxy(false, len(c.contexts()), start)
		return fmt.Errorf("rank %d: mscclppProxyStop after a failure (proxies stopped without waiting for the peers): %w", c.rank, failed)
	}
	err := c.Barrier()
	start := time.Now()
	if serr := c.stopProxies(); err == nil {
		err = serr
	}
	c.logProxy(false, len(c.contexts()), start)
	if err == nil {
		// Every rank has stopped its proxies and completed its own writes (an RDMA write
		// completes at the writer): after this barrier all of them have landed. Always,
		// so that every rank makes the same collectives whatever its transports.
		err = c.Barrier()
	}
	return err
}

// ProxyServed is the number of triggers the proxies have served (for tests and benchmarks).
func (c *Comm) ProxyServed() uint64 {
	var n uint64
	for _, x := range c.contexts() {
		n += x.Served()
	}
	return n
}

// logProxy says that the proxies started or stopped.
func (c *Comm) logProxy(started bool, n int, start time.Time) {
	if started {
		logx.Infof(logx.Init, "rank %d: %d proxy thread(s) started (one per transport context) in %v", c.rank, n, time.Since(start))
		return
	}
	logx.Infof(logx.Init, "rank %d: %d proxy thread(s) stopped in %v (%d triggers served)", c.rank, n, time.Since(start), c.ProxyServed())
}

// logColl says which path a bootstrap collective takes (size 0: a barrier).
func (c *Comm) logColl(what string, size int, shm bool) {
	if !logx.Enabled(logx.LevelInfo, logx.Coll) {
		return
	}
	path := "TCP (the bootstrap ring)"
	if shm {
		path = "the node's shared-memory segment"
	}
	if size == 0 {
		logx.Infof(logx.Coll, "rank %d: %s of %d ranks through %s", c.rank, what, c.nranks, path)
		return
	}
	logx.Infof(logx.Coll, "rank %d: %s of %d bytes per rank, %d ranks, through %s", c.rank, what, size, c.nranks, path)
}
