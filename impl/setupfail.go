package impl

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// The closing barrier of mscclppConnectionSetup carries every rank's failures, so that a
// failure on one rank never leaves the ranks out of step (each reaches the barrier whatever
// failed) and every rank learns it: the ranks gather the length of their report (0: nothing
// failed, and the barrier costs what a barrier costs), then, only when one is not 0, the reports.
// A report: its code (uint32), the number of failed connections (uint32), each as the peer
// (uint32) and the tag (int64), then the first failure's text (uint16 length, the bytes).

// maxReportText bounds the text of a rank's report.
const maxReportText = 512

// maxReportConns bounds the connections a report names (a rank has at most engine.MaxConns).
const maxReportConns = 1 << 16

// setupFailures is what failed in one rank's setup.
type setupFailures struct {
	first error
	conns []*Conn // connections that failed for good or had no answer (named in the report)
}

// add records err for cn (nil: not a connection's failure); failed: cn stays failed (else it
// is tried again by the next setup).
func (f *setupFailures) add(cn *Conn, err error, failed bool) {
	if f.first == nil {
		f.first = err
	}
	if cn != nil {
		f.conns = append(f.conns, cn)
		if failed {
			cn.failed = err
		}
	}
}

func (f *setupFailures) report() []byte {
	if f.first == nil {
		return nil
	}
	le := binary.LittleEndian
	b := le.AppendUint32(nil, uint32(status.CodeOf(f.first)))
	b = le.AppendUint32(b, uint32(len(f.conns)))
	for _, cn := range f.conns {
		b = le.AppendUint32(b, uint32(cn.remoteRank))
		b = le.AppendUint64(b, uint64(int64(cn.tag)))
	}
	text := f.first.Error()
	if len(text) > maxReportText {
		text = text[:maxReportText]
	}
	b = le.AppendUint16(b, uint16(len(text)))
	return append(b, text...)
}

// peerReport is one rank's report as read by another: its code one of the API's results (a
// report with any other is malformed), never Success.
type peerReport struct {
	code  status.Code
	conns [][2]int // (peer, tag)
	text  string
}

func decodeReport(b []byte) (peerReport, error) {
	le := binary.LittleEndian
	bad := status.Errorf(status.RemoteError, "malformed setup report (%d bytes)", len(b))
	if len(b) < 8 {
		return peerReport{}, bad
	}
	code := le.Uint32(b)
	r := peerReport{code: status.Code(code)}
	n := le.Uint32(b[4:])
	if code >= uint32(status.NumResults) || n > maxReportConns || uint64(len(b)-8) < uint64(n)*12+2 {
		return peerReport{}, bad
	}
	b = b[8:]
	for i := uint32(0); i < n; i++ {
		r.conns = append(r.conns, [2]int{int(le.Uint32(b)), int(int64(le.Uint64(b[4:])))})
		b = b[12:]
	}
	l := int(le.Uint16(b))
	if l > maxReportText || len(b)-2 != l {
		return peerReport{}, bad
	}
	r.text = logx.PeerText(string(b[2:])) // the peer's text: printed quoted, as printable ASCII
	if r.code == status.Success {
		r.code = status.InternalError
	}
	return r, nil
}

// closeSetup is setup's closing barrier with every rank's failures in its payload: a connection
// of this rank whose peer reports it failed is marked failed here too (its waits end with
// RemoteError). It returns this rank's first failure, else the first other rank's, naming it.
func (c *Comm) closeSetup(f *setupFailures) error {
	mine := f.report()
	lens := make([]uint64, c.nranks)
	lens[c.rank] = uint64(len(mine))
	if err := c.AllGather(unsafe.Pointer(&lens[0]), 8); err != nil {
		if f.first != nil {
			return fmt.Errorf("%w (and the closing barrier failed: %v)", f.first, err)
		}
		return fmt.Errorf("connection setup: closing barrier: %w", err)
	}
	slot := uint64(0)
	for _, l := range lens {
		slot = max(slot, l)
	}
	if slot == 0 {
		return nil
	}
	if slot > 8+maxReportConns*12+2+maxReportText {
		return c.remoteFailure(status.Errorf(status.RemoteError, "connection setup: a setup report of %d bytes", slot))
	}
	all := make([]byte, int(slot)*c.nranks)
	copy(all[c.rank*int(slot):], mine)
	if err := c.AllGather(unsafe.Pointer(&all[0]), int(slot)); err != nil {
		return fmt.Errorf("connection setup: gathering the ranks' failures: %w", err)
	}
	var other error
	failedRanks := 0
	for p := range c.nranks {
		if p == c.rank || lens[p] == 0 {
			continue
		}
		failedRanks++
		r, err := decodeReport(all[p*int(slot) : p*int(slot)+int(lens[p])])
		if err != nil {
			return c.remoteFailure(fmt.Errorf("connection setup: rank %d: %w", p, err))
		}
		if other == nil {
			other = status.Errorf(r.code, "connection setup failed on rank %d: %s", p, r.text)
		}
		for _, pt := range r.conns {
			if pt[0] == c.rank {
				c.peerSideFailed(p, pt[1], r.text)
			}
		}
	}
	if f.first != nil {
		return f.first
	}
	if failedRanks > 1 {
		return fmt.Errorf("%w (and on %d more ranks)", other, failedRanks-1)
	}
	return other
}

// peerSideFailed marks this rank's connection to peer with tag failed: the peer's side of it
// failed to set up (text says why), so nothing will come over it.
func (c *Comm) peerSideFailed(peer, tag int, text string) {
	for _, cn := range c.conns {
		if cn.remoteRank != peer || cn.tag != tag || cn.failed != nil {
			continue
		}
		err := status.Errorf(status.RemoteError, "connection %d (rank %d, tag %d): rank %d's side of it failed to set up: %s", cn.idx, peer, tag, peer, text)
		if cn.eng != nil { // set up here: it stays failed (its waits end)
			cn.failed = err
			c.host.Eng.FailConn(cn.idx, err)
		}
		return
	}
}
