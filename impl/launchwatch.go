package impl

import (
	"fmt"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/logx"
)

// launchWatchEvery is how often the watcher of a communicator whose proxies were never launched
// looks at its FIFOs: a forgotten mscclppProxyLaunch is told within two periods of the first push.
const launchWatchEvery = 200 * time.Millisecond

// The watcher of unlaunched proxies (a peerWatch's channels, c.unlaunched) runs from the first
// mscclppConnectionSetup with CUDA-mode connections until mscclppProxyLaunch: a kernel's trigger
// that nobody will serve makes its flush and waits spin for ever with no message, so it says once
// (on stderr even with logging off, and in mscclppGetLastError) that a trigger waits and no proxy
// runs. A stopped proxy needs no such watcher: it leaves a failed tail, which ends the kernel's
// waits.

// fifoWatched is one proxy context the watcher looks at, with the connections it serves by id.
type fifoWatched struct {
	ctx   *engine.Ctx
	conns map[int]*Conn
	seen  uint64 // the tail at which a trigger waited at the last look, +1 (0: none)
}

// watchUnlaunched (re)starts the watcher over the CUDA-mode connections set up so far, unless the
// proxies run, were launched once, or it has warned already; c.mu is held.
func (c *Comm) watchUnlaunched() {
	c.stopUnlaunchedWatch()
	if c.state != stateIdle || c.launchWatched.Load() {
		return
	}
	byCtx := map[*engine.Ctx]*fifoWatched{}
	var ws []*fifoWatched
	for _, cn := range c.conns {
		if cn.eng == nil || cn.ctx == nil || cn.ctx.Running() || !cn.eng.Stat().Device {
			continue
		}
		w := byCtx[cn.ctx]
		if w == nil {
			w = &fifoWatched{ctx: cn.ctx, conns: map[int]*Conn{}}
			byCtx[cn.ctx] = w
			ws = append(ws, w)
		}
		w.conns[cn.idx] = cn
	}
	if len(ws) == 0 {
		return
	}
	lw := newWatch()
	c.unlaunched = lw
	go c.runUnlaunchedWatch(lw, ws)
}

// stopUnlaunchedWatch stops the watcher and waits until it no longer looks at the FIFOs; c.mu is
// held.
func (c *Comm) stopUnlaunchedWatch() { stopWatch(&c.unlaunched) }

func (c *Comm) runUnlaunchedWatch(lw *peerWatch, ws []*fifoWatched) {
	defer close(lw.done)
	tick := time.NewTicker(launchWatchEvery)
	defer tick.Stop()
	for {
		select {
		case <-lw.stop:
			return
		case <-tick.C:
		}
		for _, w := range ws {
			id, tail := w.ctx.Waiting()
			if id < 0 {
				w.seen = 0
				continue
			}
			if w.seen != tail+1 { // first seen now: it may be served by a launch racing this look
				w.seen = tail + 1
				continue
			}
			c.warnUnlaunched(w.conns[id], id)
			return
		}
	}
}

// warnUnlaunched says, once for the communicator, that a trigger of connection id (cn, nil when
// the trigger names no connection this communicator set up) waits with no proxy to serve it.
func (c *Comm) warnUnlaunched(cn *Conn, id int) {
	if c.launchWatched.Swap(true) {
		return
	}
	who := fmt.Sprintf("connection %d", id)
	if cn != nil {
		who = fmt.Sprintf("connection %d (rank %d, tag %d, %s)", id, cn.remoteRank, cn.tag, cn.entry.Name)
	}
	msg := fmt.Sprintf("rank %d: %s: a kernel's trigger has waited in the FIFO for over %v and no proxy runs "+
		"(call mscclppProxyLaunch): its flush and waits spin until a proxy serves it", c.rank, who, launchWatchEvery)
	logx.Alertf("%s", msg)
	c.host.Eng.SetLast(msg)
}
