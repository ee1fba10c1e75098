//go:build mscclpp_testhooks

package impl

import (
	"errors"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// A wait with timeout 0 polls: nothing signalled, it returns mscclppInProgress at once (it does
// not spin), and consumes nothing: the next wait waits for the same signal; a wait whose signal is already there
// is answered by mscclppConnWaitNext's inline spin, without entering the back-off loop.
func TestHostWaitPollAndSpin(t *testing.T) {
	const spun = 100
	hostAllocPair(t, 4096, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		if c.Rank() == 1 {
			start := time.Now()
			if rc := engine.ConnWaitNext(dev, 0); rc != status.InProgress {
				return errors.New("a poll with nothing signalled returned " + rc.String())
			}
			if d := time.Since(start); d > 100*time.Millisecond {
				return fmt.Errorf("a poll took %v", d)
			}
			if err := op(dev, opFlag, 0, 0, 1); err != nil { // rank 0 may signal now
				return err
			}
			if rc := engine.ConnWaitNext(dev, 20000); rc != status.Success {
				return errors.New("the wait after the poll did not see the signal: " + rc.String())
			}
			// the spin: a wait whose signal is already there when it starts is answered by the
			// inline spin, every time (rank 0 signalled before the barrier)
			if err := c.boot.Barrier(); err != nil {
				return err
			}
			before := c.conns[0].eng.SpinAnswered()
			for i := 0; i < spun; i++ {
				if rc := engine.ConnWaitNext(dev, 20000); rc != status.Success {
					return errors.New("a signalled wait failed: " + rc.String())
				}
			}
			if got := c.conns[0].eng.SpinAnswered() - before; got != spun {
				return fmt.Errorf("the inline spin answered %d of %d signalled waits", got, spun)
			}
			return nil
		}
		if err := waitNext(dev); err != nil {
			return err
		}
		for i := 0; i <= spun; i++ { // the counted wait's signal, then one per spun wait
			if err := op(dev, opFlag, 0, 0, 1); err != nil {
				return err
			}
		}
		return c.boot.Barrier()
	})
}
