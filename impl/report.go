package impl

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/logx"
)

// The hang report: a signal wait that made no progress for MSCCLPP_HANG_REPORT_S seconds
// prints, once per communicator, at WARN, a table of the communicator's connections; Report
// writes the same table on demand (mscclppCommReport).

// envHangReport names the seconds without progress before a wait reports (0: never).
const envHangReport = env.HangReportS

// defaultHangReportS is MSCCLPP_HANG_REPORT_S when unset.
const defaultHangReportS = 60

// reportComms maps a communicator's engine state (engine.Comm.Ptr) to it, for the engine's hang
// callback; entries live from newComm to Destroy.
var reportComms sync.Map

func init() { engine.SetHangFunc(onHang) }

// registerReports turns on c's hang report as MSCCLPP_HANG_REPORT_S says.
func (c *Comm) registerReports() {
	after := hangReportAfter()
	c.hangAfter = after
	c.host.Eng.SetHangReport(after)
	reportComms.Store(c.host.Eng.Ptr(), c)
	c.serveJobViews()
}

// unregisterReports is registerReports undone, before the engine state is freed.
func (c *Comm) unregisterReports() { reportComms.Delete(c.host.Eng.Ptr()) }

// onHang is the engine's hang callback: it runs on the waiting thread.
func onHang(eng unsafe.Pointer, conn *engine.Conn, want uint64, waited time.Duration) {
	v, ok := reportComms.Load(eng)
	if !ok {
		return
	}
	c := v.(*Comm)
	s := conn.Stat()
	logx.Alertf("hang report: rank %d has waited %.1f s without progress on connection %d to rank %d (%s, tag %d) "+
		"for epoch %d; rank %d has signalled epoch %d (%s=%d; reported once)",
		c.rank, waited.Seconds(), s.ConnID, s.Peer, s.Transport, s.Tag, want, s.Peer, s.Signalled, envHangReport,
		int(c.hangAfter/time.Second))
	for _, l := range c.reportLines() {
		logx.Alertf("hang report: %s", l)
	}
	go func() { // the other ranks' answers take up to jobViewBound: not on the waiting thread
		for _, l := range c.jobView(jobViewBound) {
			logx.Alertf("hang report: job view from rank %d: %s", c.rank, l)
		}
	}()
}

// Report writes the table of c's connections to w.
func (c *Comm) Report(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "mscclpp report: rank %d of %d\n", c.rank, c.nranks)
	for _, l := range c.reportLines() {
		b.WriteString("mscclpp report: " + l + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// lockWithin takes c.mu if it comes free within d: a report must not hang behind a control call
// that is itself stuck.
func (c *Comm) lockWithin(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !c.mu.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// reportLines is the table of c's connections and its last error, one line each.
func (c *Comm) reportLines() []string {
	if !c.lockWithin(200 * time.Millisecond) {
		return []string{"connections: not shown (a control call on this communicator holds it)"}
	}
	var stats []engine.ConnStat
	closed := c.state == stateClosed
	if !closed {
		for _, cn := range c.conns {
			if cn.eng != nil {
				stats = append(stats, cn.eng.Stat())
			}
		}
	}
	last := ""
	if !closed {
		last = c.host.Eng.LastText()
	}
	declared := len(c.conns)
	c.mu.Unlock()
	if closed {
		return []string{"communicator destroyed"}
	}
	lines := []string{fmt.Sprintf("connections set up: %d (declared: %d); epochs: the one this side waits for, the one the peer signalled",
		len(stats), declared)}
	lines = append(lines, fmt.Sprintf("%4s %5s %-9s %4s %12s %12s %10s %14s %22s %-7s %s",
		"conn", "peer", "transport", "tag", "waiting-for", "signalled", "sent", "bytes-put",
		"fifo head/tail/served", "proxy", "peer state"))
	for _, s := range stats {
		want, got := fmt.Sprint(s.WaitingFor), fmt.Sprint(s.Signalled)
		if s.Device {
			want, got = "device", "device"
		}
		if s.Stalled > 0 {
			want = fmt.Sprintf("%s (%.1fs)", want, s.Stalled.Seconds())
		}
		fifo := fmt.Sprintf("%d/%d/%d", s.Head, s.Tail, s.Served)
		if s.Device {
			fifo = fmt.Sprintf("device/%d/%d", s.Tail, s.Served)
		}
		proxy := "stopped"
		if s.ProxyRunning {
			proxy = "running"
		}
		lines = append(lines, fmt.Sprintf("%4d %5d %-9s %4d %12s %12s %10d %14d %22s %-7s %s",
			s.ConnID, s.Peer, s.Transport, s.Tag, want, got, s.SignalsSent, s.BytesPut, fifo, proxy, peerState(s)))
	}
	if last == "" {
		last = "none"
	}
	return append(lines, "last error: "+last)
}

// peerState says what this rank knows of the peer's liveness.
func peerState(s engine.ConnStat) string {
	switch {
	case s.PeerGone:
		return fmt.Sprintf("exited (pid %d)", s.PeerPid)
	case s.PeerClosed:
		return "closed its side"
	case s.PeerPid > 0:
		return fmt.Sprintf("alive (pid %d)", s.PeerPid)
	default:
		return "open (another node: liveness by its transport)"
	}
}
