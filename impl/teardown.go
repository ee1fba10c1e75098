package impl

import (
	"time"

	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// ipcClosedTag is the bootstrap tag of the teardown handshake: outside the int range of
// application tags (mscclppConnect's tag), so it never meets a connection's setup messages.
const ipcClosedTag = 1 << 40

// ipcClosedSendBound bounds how long a destroy spends telling its peers it closed its mappings.
const ipcClosedSendBound = 50 * time.Millisecond

// deferredFree is memory peers may still map: free once every one of peers said it closed
// its mappings.
type deferredFree struct {
	peers []int
	free  func()
}

// peersClosed is transport.Host.PeersClosed: this rank has closed its mappings of each peer's
// memory; it tells them (for at most ipcClosedSendBound: a destroy waits for no peer, and the
// bootstrap's close cancels a send still dialling), then frees at once if every peer has said
// the same, else leaves free to finishDestroy.
func (c *Comm) peersClosed(peers []int, free func()) {
	sent := make(chan struct{}, len(peers))
	for _, p := range peers {
		go func(p int) {
			if err := c.boot.Send(p, ipcClosedTag, []byte{1}); err != nil {
				logx.Infof(logx.Init, "rank %d: could not tell rank %d that this rank closed its mappings: %v", c.rank, p, err)
			}
			sent <- struct{}{}
		}(p)
	}
	bound := time.NewTimer(ipcClosedSendBound)
	defer bound.Stop()
wait:
	for range peers {
		select {
		case <-sent:
		case <-bound.C:
			break wait
		}
	}
	var still []int
	for _, p := range peers {
		if !c.boot.Arrived(p, ipcClosedTag) {
			still = append(still, p)
		}
	}
	if len(still) == 0 {
		free()
		return
	}
	c.deferred = append(c.deferred, deferredFree{peers: still, free: free})
}

// finishDestroy closes the bootstrap, at once when no memory waits for its importers; else in
// the background, once every importer said it closed its mappings (each within the timeout;
// one that does not leaves the memory to the process's exit) and the memory is freed.
func (c *Comm) finishDestroy() error {
	if len(c.deferred) == 0 {
		return c.boot.Close()
	}
	deferred, boot, rank := c.deferred, c.boot, c.rank
	c.deferred = nil
	go func() {
		defer boot.Close()
		for _, d := range deferred {
			closed := true
			for _, p := range d.peers {
				if _, err := boot.RecvLimit(p, ipcClosedTag, 1); err != nil {
					logx.Infof(logx.P2P, "rank %d: CUDA teardown: rank %d did not say it closed its mappings of this rank's memory (%v): the memory is kept until the process exits", rank, p, err)
					closed = false
					break
				}
			}
			if closed {
				d.free()
			}
		}
	}()
	return nil
}

// DestroyFromInside is the error of a destroy called on a thread whose data-path call is inside
// one of c's contexts (a signal handler that interrupted mscclppConnWait): the destroy would
// wait for that call to leave, i.e. for itself. nil when the calling OS thread (locked to its
// goroutine: a cgo callback) is inside none, or when a control call holds c (its destroy waits
// for that call, as any destroy does).
func (c *Comm) DestroyFromInside() error {
	if !c.mu.TryLock() {
		return nil
	}
	defer c.mu.Unlock()
	for _, x := range c.contexts() {
		if x.EnteredByThisThread() {
			return status.Errorf(status.InvalidUsage, "called on a thread that is inside a data-path call on this communicator "+
				"(mscclppConnWait, a put or a flush interrupted by a signal handler?): it would wait for that call to return, "+
				"i.e. for itself; no mscclpp call is async-signal-safe: destroy once the call returned; the communicator is not destroyed")
		}
	}
	return nil
}
