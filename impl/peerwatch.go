package impl

import (
	"time"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/p2p"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// peerWatchEvery is how often the watcher looks at its peers: a kernel waiting on a peer that
// died returns about this long after (well within the bootstrap timeout).
const peerWatchEvery = 100 * time.Millisecond

// peerWatch is the watcher the running proxies own: it notices a same-node P2P peer in CUDA
// mode that died or destroyed its communicator and fails the connections to it, so that the
// proxy publishes the failed FIFO tail. No other check reaches a kernel there: the proxy's
// copies into a dead peer's IPC mapping still succeed, and only host waits look at the peer's
// process.
type peerWatch struct {
	stop, done chan struct{}
}

// watched is one connection the watcher looks after.
type watched struct {
	idx, peer int
	eng       *engine.Conn
}

// startPeerWatch starts the watcher over the P2P connections in CUDA mode, if there are any and
// none runs; c.mu is held.
func (c *Comm) startPeerWatch() {
	if c.watch != nil {
		return
	}
	var ws []watched
	for _, cn := range c.conns {
		if cn.eng == nil || cn.entry.ID != p2p.ID {
			continue
		}
		if st := cn.eng.Stat(); st.Device && st.PeerPid > 0 {
			ws = append(ws, watched{idx: cn.idx, peer: cn.remoteRank, eng: cn.eng})
		}
	}
	if len(ws) == 0 {
		return
	}
	w := newWatch()
	c.watch = w
	go c.runPeerWatch(w, ws)
}

// stopPeerWatch stops the watcher and waits until it no longer looks at the connections; c.mu
// is held.
func (c *Comm) stopPeerWatch() { stopWatch(&c.watch) }

// newWatch makes the stop and done channels of a watcher goroutine.
func newWatch() *peerWatch { return &peerWatch{stop: make(chan struct{}), done: make(chan struct{})} }

// stopWatch stops the watcher goroutine *w, if any, waits until it has returned, and clears *w.
func stopWatch(w **peerWatch) {
	if *w == nil {
		return
	}
	close((*w).stop)
	<-(*w).done
	*w = nil
}

func (c *Comm) runPeerWatch(w *peerWatch, ws []watched) {
	defer close(w.done)
	tick := time.NewTicker(peerWatchEvery)
	defer tick.Stop()
	for len(ws) > 0 {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		live := ws[:0]
		for _, x := range ws {
			if c.host.Eng.ConnFailed(x.idx) {
				continue // failed otherwise: nothing more to tell
			}
			if why := c.peerLost(x); why != "" {
				err := status.Errorf(status.RemoteError, "rank %d %s while rank %d's P2P connection %d to it was in use", x.peer, why, c.rank, x.idx)
				logx.Infof(logx.P2P, "%v: its kernels' waits end (failed())", err)
				c.host.Eng.SetErr(err)
				c.host.Eng.FailConn(x.idx, err)
				continue
			}
			live = append(live, x)
		}
		ws = live
	}
}

// peerLost says why x's peer is gone ("exited", "destroyed its communicator"), or "".
func (c *Comm) peerLost(x watched) string {
	if st := x.eng.Stat(); st.PeerGone {
		return "exited"
	}
	if c.boot.Arrived(x.peer, ipcClosedTag) {
		return "destroyed its communicator"
	}
	return ""
}
