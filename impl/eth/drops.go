package eth

import (
	"sync"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/logx"
)

// dropLogEvery is the shortest time between two WARN lines about dropped connections.
const dropLogEvery = 10 * time.Second

// dropLog rate-limits the WARN about connections to the data port that are dropped (a silent
// or garbled hello, an unknown token): the first one at once, then at most one line per
// dropLogEvery saying how many more were dropped, and the count still untold at close.
type dropLog struct {
	rank    int
	mu      sync.Mutex
	last    time.Time   // when the last line was written
	untold  int         // drops since then, not yet in a line
	example string      // the latest of them
	timer   *time.Timer // writes the summary line when armed
	closed  bool
}

// dropped records one dropped connection: why it was dropped and from where.
func (d *dropLog) dropped(why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	if d.last.IsZero() || (time.Since(d.last) >= dropLogEvery && d.timer == nil) {
		d.last = time.Now()
		logx.Warnf("rank %d: Ethernet transport: dropped a connection %s (further drops: one line per %v)", d.rank, why, dropLogEvery)
		return
	}
	d.untold++
	d.example = why
	if d.timer == nil {
		d.timer = time.AfterFunc(time.Until(d.last.Add(dropLogEvery)), d.flush)
	}
}

// flush writes the summary line of the drops not yet told.
func (d *dropLog) flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer = nil
	d.tell()
}

func (d *dropLog) tell() {
	if d.untold == 0 {
		return
	}
	logx.Warnf("rank %d: Ethernet transport: dropped %d more connection(s) in %v, the latest %s", d.rank, d.untold,
		time.Since(d.last).Round(time.Millisecond), d.example)
	d.last, d.untold = time.Now(), 0
}

// close tells what is untold and stops the timer.
func (d *dropLog) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.tell()
	d.closed = true
}
