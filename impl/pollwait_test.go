//go:build mscclpp_testhooks

package impl

import (
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// A loop of 10 ms timed waits (mscclppDevConnWaitTimeout) sees a signal sent 0.5 s later,
// exactly once: a wait that times out consumes nothing. Each timeout leaves a last error
// naming the connection, peer, tag, transport, both epochs and the time waited.
func TestTimedWaitPolling(t *testing.T) {
	hostAllocPair(t, 4096, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		if c.Rank() == 0 {
			time.Sleep(500 * time.Millisecond) // the scenario: the peer signals half a second late
			if err := op(dev, opFlag, 0, 0, 1); err != nil {
				return err
			}
			return c.Barrier() // rank 1 looked for a second signal
		}
		timeouts, deadline := 0, time.Now().Add(20*time.Second)
		for {
			rc := engine.ConnWaitNext(dev, 10)
			if rc == status.Success {
				break
			}
			if rc != status.InProgress {
				return fmt.Errorf("poll %d: %v", timeouts, rc)
			}
			if timeouts++; timeouts == 1 {
				want := `^mscclppConnWaitNext: no signal after \d+ ms on connection 0 to rank 0 \(SHM, tag 0\): ` +
					`rank 1 waited for epoch 1; rank 0 has signalled epoch 0 \(the wait is not counted`
				if last := c.host.Eng.LastText(); !regexp.MustCompile(want).MatchString(last) {
					return fmt.Errorf("the last error after a timed-out wait is %q, want it to match %q", last, want)
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d polls of 10 ms in 20 s never saw the signal sent after 0.5 s", timeouts)
			}
		}
		if timeouts < 10 {
			return fmt.Errorf("the signal sent after 0.5 s was seen after %d polls of 10 ms", timeouts)
		}
		for i := 0; i < 5; i++ { // seen once: no second signal was sent
			if rc := engine.ConnWaitNext(dev, 10); rc != status.InProgress {
				return fmt.Errorf("after the one signal, poll %d returned %v", i, rc)
			}
		}
		return c.Barrier()
	})
}

// N signals are consumed by N successful timed waits, whatever the number of timeouts between
// them; mscclppConnWait waits for the signals counted so far (none: success at once).
func TestTimedWaitNSignals(t *testing.T) {
	const n = 6
	hostAllocPair(t, 4096, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		if c.Rank() == 0 {
			for i := 0; i < n; i++ {
				if err := op(dev, opFlag, 0, 0, 1); err != nil {
					return err
				}
				if err := c.Barrier(); err != nil { // rank 1 consumed it and timed out i times
					return err
				}
			}
			return c.Barrier()
		}
		if rc := engine.ConnWait(dev, 20000); rc != status.Success {
			return errors.New("mscclppConnWait with nothing counted: " + rc.String())
		}
		for i := 0; i < n; i++ {
			if rc := engine.ConnWaitNext(dev, 20000); rc != status.Success {
				return fmt.Errorf("signal %d: %v", i, rc)
			}
			for k := 0; k < i; k++ { // i timeouts before the next signal is sent
				if rc := engine.ConnWaitNext(dev, int64(k%2)); rc != status.InProgress {
					return fmt.Errorf("after signal %d, timed wait %d returned %v", i, k, rc)
				}
			}
			if err := c.Barrier(); err != nil {
				return err
			}
		}
		if got := **(**uint64)(unsafe.Add(dev, 64)); got != n { // *waitEpochId

			return fmt.Errorf("after %d signals and their waits the wait count is %d", n, got)
		}
		return c.Barrier()
	})
}
