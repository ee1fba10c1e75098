package impl

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/logx"
)

// The INFO lines of the stages a user debugs (NCCL's INFO sites): connections
// declared and set up, buffers registered, proxies started and stopped,
// bootstrap collectives, with timings. Each is one call at its site; the
// ones on a per-call path check the level before formatting anything.

// logConnect says that a connection was declared.
func (c *Comm) logConnect(cn *Conn, buff unsafe.Pointer, size uint64) {
	logx.Infof(logx.Init|cn.entry.Subsys, "rank %d: connection %d to rank %d tag %d declared over %v (buffer %p, %d bytes); it is set up by the next mscclppConnectionSetup",
		c.rank, cn.idx, cn.remoteRank, cn.tag, cn.entry.Name, buff, size)
}

// logRegisterForConn says that a buffer became handle h of connection cn.
func (c *Comm) logRegisterForConn(cn *Conn, h int, buff unsafe.Pointer, size uint64) {
	logx.Infof(cn.entry.Subsys, "rank %d: buffer %p (%d bytes) registered as handle %d of connection %d to rank %d over %v",
		c.rank, buff, size, h, cn.idx, cn.remoteRank, cn.entry.Name)
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
