package impl

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

const setupMagic = 0x32544553 // "SET2"

// Bounds of a setup message: a peer cannot make this rank allocate more than it expects.
const (
	maxSetupBlobs    = 1 << 16
	maxSetupBlobSize = 4096
	maxSetupMsg      = 24 + maxSetupBlobs*(4+256)
)

// setupMsg is what one side of a connection tells the other: its transport, its pid and one
// opaque blob per registration, made by the transport's Describe.
type setupMsg struct {
	transport Transport
	pid       int
	blobs     [][]byte
}

func (m setupMsg) encode() []byte {
	n := 24
	for _, b := range m.blobs {
		n += 4 + len(b)
	}
	out := make([]byte, 0, n)
	le := binary.LittleEndian
	out = le.AppendUint32(out, setupMagic)
	out = le.AppendUint32(out, uint32(m.transport))
	out = le.AppendUint64(out, uint64(m.pid))
	out = le.AppendUint64(out, uint64(len(m.blobs)))
	for _, b := range m.blobs {
		out = le.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out
}

func decodeSetup(b []byte) (setupMsg, error) {
	le := binary.LittleEndian
	bad := func(why string, args ...any) (setupMsg, error) {
		return setupMsg{}, status.Errorf(status.RemoteError, "malformed setup message (%d bytes): "+why, append([]any{len(b)}, args...)...)
	}
	if len(b) < 24 || le.Uint32(b) != setupMagic {
		return bad("no header")
	}
	m := setupMsg{transport: Transport(le.Uint32(b[4:])), pid: int(le.Uint64(b[8:]))}
	n := le.Uint64(b[16:])
	if n > maxSetupBlobs {
		return bad("%d registrations", n)
	}
	rest := b[24:]
	for i := uint64(0); i < n; i++ {
		if len(rest) < 4 {
			return bad("registration %d cut short", i)
		}
		l := le.Uint32(rest)
		if l > maxSetupBlobSize || int(l) > len(rest)-4 {
			return bad("registration %d announces %d bytes", i, l)
		}
		m.blobs = append(m.blobs, rest[4:4+l])
		rest = rest[4+l:]
	}
	if len(rest) != 0 {
		return bad("%d bytes after the registrations", len(rest))
	}
	return m, nil
}

// describe makes cn's setup message for handles hs of cn.bufs.
func (c *Comm) describe(cn *Conn, hs []int) (setupMsg, error) {
	m := setupMsg{transport: cn.entry.ID, pid: os.Getpid()}
	for _, h := range hs {
		blob, err := cn.tr.Describe(cn.idx, h, cn.bufs[h])
		if err != nil {
			return m, fmt.Errorf("handle %d: %w", h, err)
		}
		m.blobs = append(m.blobs, blob)
	}
	return m, nil
}

// ConnectionSetup sets up every connection declared since the last setup: it exchanges their
// registrations with their peers (whose new connections pair with these by rank and tag),
// leaves the connections already set up untouched, and ends with a barrier (with nothing new
// it is a barrier). Proxies already running serve the new connections at once: the proxy
// threads of contexts made since ProxyLaunch start here.
//
// Every rank reaches the closing barrier whatever failed here, and the barrier carries each
// rank's failures (setupfail.go): every rank returns an error naming them, a connection that
// failed on either side stays failed (waits on it end with RemoteError), the others work, and
// a connection whose peer had not declared its mirror is set up by a later setup once it has.
// Only a failure of the exchange itself (the bootstrap) leaves the communicator unusable.
func (c *Comm) ConnectionSetup() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := time.Now()
	var fresh []*Conn
	for _, cn := range c.conns {
		if cn.eng == nil && cn.failed == nil {
			fresh = append(fresh, cn)
		}
	}
	var fails setupFailures
	out := make([]outMsg, 0, len(fresh))
	for _, cn := range fresh {
		hs := make([]int, len(cn.bufs))
		for h := range hs {
			hs[h] = h
		}
		m, err := c.describe(cn, hs)
		if err != nil {
			fails.add(cn, fmt.Errorf("connection setup with rank %d tag %d: %w", cn.remoteRank, cn.tag, err), true)
			continue
		}
		out = append(out, outMsg{peer: cn.remoteRank, tag: cn.tag, msg: m.encode()})
	}
	reply, err := c.exchangeSetup(out)
	if err != nil {
		return err
	}
	for _, cn := range fresh {
		if cn.failed != nil {
			continue
		}
		raw, err := reply(cn)
		if err != nil {
			fails.add(cn, err, false) // not failed: the peer may declare its mirror later
			continue
		}
		if err := c.finishConn(cn, raw); err != nil {
			fails.add(cn, fmt.Errorf("connection setup with rank %d tag %d: %w", cn.remoteRank, cn.tag, err), true)
		}
	}
	if c.state == stateRunning {
		t0 := time.Now()
		n, err := c.startProxies()
		if err != nil {
			fails.add(nil, fmt.Errorf("connection setup: proxies for the new connections: %w", err), false)
		} else if n > 0 {
			c.logProxy(true, n, t0)
		}
		c.stopPeerWatch() // again, over the new connections too
		c.startPeerWatch()
	}
	c.watchUnlaunched() // launchwatch.go: until the proxies are launched
	err = c.closeSetup(&fails)
	c.logSetup(len(fresh), len(c.conns), start, err)
	for _, t := range c.trOrder {
		c.transports[t].SetUp()
	}
	return err
}

// finishConn sets up cn from the peer's setup message raw: decode, let the transport finish
// the connection, publish the result in the device connection.
func (c *Comm) finishConn(cn *Conn, raw []byte) error {
	m, err := decodeSetup(raw)
	if err != nil {
		return err
	}
	if m.transport != cn.entry.ID {
		return status.Errorf(status.InvalidUsage, "this rank declared %v, the peer declared %v", cn.entry.Name, transportName(m.transport))
	}
	if len(m.blobs) == 0 {
		return status.Errorf(status.RemoteError, "the peer sent no signal slot")
	}
	done, err := cn.tr.Finish(transport.Setup{Idx: cn.idx, Peer: cn.remoteRank, Tag: cn.tag, Ctx: cn.ctx, Local: cn.bufs, Pid: m.pid, Blobs: m.blobs})
	cn.eng = done.Eng // also after a failure past Wire: Destroy frees it
	if err != nil {
		return err
	}
	c.host.DevConns.SetRemote(cn.idx, done.RemoteEpoch, done.RemoteBuff)
	logx.Infof(logx.SHM|logx.P2P|logx.Net, "rank %d: connection %d to rank %d tag %d over %v: %s", c.rank, cn.idx,
		cn.remoteRank, cn.tag, cn.entry.Name, done.Path)
	return nil
}

// RegisteredPeer is one connection's entry of an mscclppRegisteredMemory.
type RegisteredPeer struct {
	RemoteBuff unsafe.Pointer // the peer's buffer when mapped here, else nil
	Record     unsafe.Pointer // an opaque record of the peer's registration (kept in IbMr for SHM)
}

// RegisterBuffer exchanges mem with every connection's peer (collective over the connections,
// set up or not yet: the exchange goes over the bootstrap, as upstream's).
func (c *Comm) RegisterBuffer(mem unsafe.Pointer, size uint64) ([]RegisteredPeer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if mem == nil || size == 0 {
		return nil, status.Errorf(status.InvalidArgument, "register buffer %p of %d bytes", mem, size)
	}
	if err := c.refuseUnshareable("mscclppRegisterBuffer", mem, size); err != nil {
		return nil, fmt.Errorf("register buffer: %w", err)
	}
	start := time.Now()
	for _, cn := range c.conns {
		blob, err := cn.tr.Describe(cn.idx, transport.Registered, transport.Buffer{Ptr: mem, Size: size})
		if err != nil {
			return nil, fmt.Errorf("register buffer for rank %d tag %d: %w", cn.remoteRank, cn.tag, err)
		}
		m := setupMsg{pid: os.Getpid(), transport: cn.entry.ID, blobs: [][]byte{blob}}
		if err := c.boot.Send(cn.remoteRank, cn.tag, m.encode()); err != nil {
			return nil, fmt.Errorf("register buffer: send to rank %d tag %d: %w", cn.remoteRank, cn.tag, err)
		}
	}
	out := make([]RegisteredPeer, 0, len(c.conns))
	for _, cn := range c.conns {
		raw, err := c.boot.RecvLimit(cn.remoteRank, cn.tag, 24+4+maxSetupBlobSize)
		if err != nil {
			return nil, fmt.Errorf("register buffer: rank %d tag %d: %w", cn.remoteRank, cn.tag, err)
		}
		pm, err := decodeSetup(raw)
		if err == nil && len(pm.blobs) != 1 {
			err = status.Errorf(status.RemoteError, "%d registrations, want 1", len(pm.blobs))
		}
		if err != nil {
			return nil, fmt.Errorf("register buffer: rank %d tag %d: bad registration: %w", cn.remoteRank, cn.tag, err)
		}
		r, app, err := cn.tr.ImportRegistered(cn.idx, pm.pid, pm.blobs[0])
		if err != nil {
			return nil, fmt.Errorf("register buffer: rank %d tag %d: %w", cn.remoteRank, cn.tag, err)
		}
		rec := engine.NewRegRecord(r)
		c.regRecords = append(c.regRecords, rec)
		out = append(out, RegisteredPeer{RemoteBuff: app, Record: rec.Ptr()})
	}
	c.logRegisterBuffer(mem, size, out, start)
	return out, nil
}

// RegisteredBufferWrite copies size bytes of src+srcOff to offset dstOff of every peer's registered
// buffer. Entry i is connection i's (mscclppRegisterBuffer appends them in Connect order), so a
// registration made before more connections were declared covers the connections it was made
// over; each of those must be set up.
func (c *Comm) RegisteredBufferWrite(peers []RegisteredPeer, src unsafe.Pointer, size uint64, srcOff, dstOff uint32, stream uintptr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if src == nil || size == 0 {
		return status.Errorf(status.InvalidArgument, "registered buffer write of %p, %d bytes", src, size)
	}
	if len(peers) > len(c.conns) {
		return status.Errorf(status.InvalidArgument, "registered memory has %d entries for %d connections (was it made by mscclppRegisterBuffer on this communicator?)", len(peers), len(c.conns))
	}
	for i, p := range peers {
		rec, ok := engine.Lookup(c.regRecords, p.Record)
		if !ok {
			return status.Errorf(status.InvalidArgument, "registered memory entry %d was not made by mscclppRegisterBuffer on this communicator", i)
		}
		if c.conns[i].eng == nil {
			return status.Errorf(status.InvalidUsage, "registered buffer write to rank %d tag %d: the connection is not set up yet (call mscclppConnectionSetup first)", c.conns[i].remoteRank, c.conns[i].tag)
		}
		if err := c.conns[i].tr.Write(i, rec, uint64(dstOff), unsafe.Add(src, srcOff), size, stream); err != nil {
			return fmt.Errorf("registered buffer write to rank %d: %w", c.conns[i].remoteRank, err)
		}
	}
	return nil
}

// logRegisterBuffer says that mscclppRegisterBuffer exchanged mem with every peer.
func (c *Comm) logRegisterBuffer(mem unsafe.Pointer, size uint64, peers []RegisteredPeer, start time.Time) {
	if !logx.Enabled(logx.LevelInfo, logx.P2P|logx.SHM|logx.Net) {
		return
	}
	for i, p := range peers {
		cn := c.conns[i]
		mapped := "not mapped here: written through the transport"
		if p.RemoteBuff != nil {
			mapped = fmt.Sprintf("mapped here at %p", p.RemoteBuff)
		}
		logx.Infof(cn.entry.Subsys, "rank %d: mscclppRegisterBuffer %p (%d bytes): the peer's buffer over connection %d to rank %d (%v) is %s",
			c.rank, mem, size, i, cn.remoteRank, cn.entry.Name, mapped)
	}
	logx.Infof(logx.Init, "rank %d: mscclppRegisterBuffer of %d bytes with %d connections in %v", c.rank, size, len(peers), time.Since(start))
}

// logSetup says how long mscclppConnectionSetup took.
func (c *Comm) logSetup(fresh, all int, start time.Time, err error) {
	if err == nil {
		logx.Infof(logx.Init, "rank %d: mscclppConnectionSetup of %d new connections (%d in all) done in %v", c.rank, fresh, all, time.Since(start))
	}
}
