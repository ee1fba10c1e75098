package bootstrap

// The root's verdict on a forming communicator, read inline: on a blocking
// root socket (fdConn) a goroutine blocked in read(2) holds a thread, and
// while it waits the runtime may start another (measured: 0.2–0.3 new
// threads per rank at N=8). A rank whose ring is not formed at init
// (Options.RingOnlyOnOneHost on one host) does nothing but the node join
// between its registration and its ready, so it reads the verdict on its
// own thread once ready, and checks the socket without waiting whenever
// the join asks whether the communicator failed (Failed): a failure the
// root reports while this rank waits for its node's leader still ends the
// wait at once.

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// verdictSource returns the root's verdict; with wait > 0 it gives up after
// wait (false: no verdict came), with 0 it waits until the session's deadline.
type verdictSource func(wait time.Duration) (rootVerdict, bool)

// readVerdict reads the root's last word from rs; err != nil is this rank's
// error (not yet recorded with fail).
func (b *Bootstrap) readVerdict(rs *rootSession) rootVerdict {
	st, payload, err := readReply(rs.c, b.magic, &b.key, labelDone, &rs.hello.nonce, maxErrorText)
	v := rootVerdict{fromRoot: err == nil}
	if err == nil {
		err = b.replyErr(rs.addr, st, payload)
	} else if b.failed() == nil {
		err = b.rootErr(rs.addr, rs.wait, err)
	}
	v.err = err
	return v
}

// goVerdict is the verdict read by watchVerdict's goroutine.
func goVerdict(ch <-chan rootVerdict) verdictSource {
	return func(wait time.Duration) (rootVerdict, bool) {
		if wait <= 0 {
			return <-ch, true
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case v := <-ch:
			return v, true
		case <-t.C:
			return rootVerdict{}, false
		}
	}
}

// inlineVerdict reads the verdict from a blocking root socket on the caller's thread.
type inlineVerdict struct {
	b     *Bootstrap
	rs    *rootSession
	fc    *fdConn
	mu    sync.Mutex
	early *rootVerdict // a verdict that came before this rank was ready (a failure)
}

// poll reads the verdict if the root sent one; it never waits for one.
// Failed calls it while the join runs (from any goroutine: one reads).
func (iv *inlineVerdict) poll() {
	if !iv.mu.TryLock() {
		return
	}
	defer iv.mu.Unlock()
	if iv.early != nil || !iv.fc.readable() {
		return
	}
	v := iv.b.readVerdict(iv.rs)
	if v.err != nil {
		v.err = iv.b.fail(v.err)
	}
	iv.early = &v
}

// get is the verdictSource of iv. A verdict that did not come within wait
// (> 0) fails nothing: the caller has its own error.
func (iv *inlineVerdict) get(wait time.Duration) (rootVerdict, bool) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if iv.early != nil {
		return *iv.early, true
	}
	if wait > 0 {
		iv.rs.c.SetReadDeadline(deadlineIn(wait))
	}
	v := iv.b.readVerdict(iv.rs)
	if wait > 0 && !v.fromRoot {
		return v, false
	}
	if v.err != nil {
		v.err = iv.b.fail(v.err)
	}
	iv.early = &v
	return v, true
}

// readable reports whether a read of c would not wait (data, or the peer closed).
func (c *fdConn) readable() bool {
	if !c.acquire() {
		return true // closed: a read fails at once
	}
	defer c.release()
	fds := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}
