//go:build mscclpp_testhooks

package impl

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestEthWaitSleepsOverFrame: a wait on an Ethernet connection whose receive thread is reading a
// long put sleeps over the frame, instead of waking every millisecond on the rank's CPU while
// the stream flows, and returns with the put's data once its signal came. Rank 1 starts its
// wait once the put's first bytes landed, so that the receive thread, not the wait, reads it.
func TestEthWaitSleepsOverFrame(t *testing.T) {
	t.Parallel()
	const size = 64 << 20
	addr := freeAddr(t)
	bufs := [2][]byte{make([]byte, size), make([]byte, size)}
	fillBlocks(bufs[0], 4096, func(i int) byte { return byte(i*7 + i>>12 + 1) })
	ready := make(chan struct{}) // rank 1 is set up: rank 0 may put
	runRanks(t, 2, func(r int) error {
		c, err := InitRank(2, addr, r)
		if err == nil {
			if err = c.Connect(1-r, 0, unsafe.Pointer(&bufs[r][0]), size, TransportEthernet, nil, true); err == nil {
				err = c.ConnectionSetup()
			}
		}
		if err != nil {
			if r == 1 {
				close(ready)
			}
			if c != nil {
				err = errors.Join(err, c.Destroy())
			}
			return err
		}
		dev := c.host.DevConns.At(0)
		if r == 0 {
			<-ready
			if rc := engine.ConnSignalOp(dev, opData|opFlag, 0, 0, size); rc != status.Success {
				err = fmt.Errorf("putWithSignal of %d bytes: %v", size, rc)
			} else {
				err = waitNext(dev) // rank 1 checked the data
			}
			return errors.Join(err, c.Destroy())
		}
		eng := c.conns[0].eng
		before := eng.WaitRounds()
		close(ready)
		first := (*uint32)(unsafe.Pointer(&bufs[1][0]))
		for end := time.Now().Add(20 * time.Second); atomic.LoadUint32(first) == 0; runtime.Gosched() {
			if time.Now().After(end) {
				return errors.Join(errors.New("the put's first bytes did not land within 20 s"), c.Destroy())
			}
		}
		start := time.Now()
		err = waitNext(dev)
		took := time.Since(start)
		rounds := eng.WaitRounds() - before
		t.Logf("the wait over a %d MiB put: %v, %d rounds", size>>20, took, rounds)
		if err == nil && !bytes.Equal(bufs[1], bufs[0]) {
			err = errors.New("the put's data did not arrive before its signal")
		}
		// every round is a wake-up: one per 20 ms of the frame and one or two around it (limit:
		// twice that); a wait that looked every millisecond went through about one per ms
		if limit := 4 + uint64(took/(10*time.Millisecond)); err == nil && rounds > limit {
			err = fmt.Errorf("the wait went through %d rounds in %v: more than %d, it did not sleep over the frame", rounds, took, limit)
		}
		if err == nil {
			err = op(dev, opFlag, 0, 0, 1)
		}
		return errors.Join(err, c.Destroy())
	})
}
