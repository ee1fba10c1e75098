//go:build mscclpp_testhooks

package impl

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/shm"
)

// TestEagerNoStagingWhenCrowded: where the node's ranks outnumber its CPUs (one CPU counted for
// two ranks) a put larger than the eager threshold is not staged through the ring, whose two
// halves could not copy at once, but written with process_vm_writev; it arrives intact.
func TestEagerNoStagingWhenCrowded(t *testing.T) {
	defer shm.SetStageCPUs(1)()
	const (
		dst  = 5
		size = 100<<10 + 3
	)
	eagerPair(t, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		want := make([]byte, size)
		fill(want, 12)
		if c.Rank() == 0 {
			copy(buf[eagerBuf/2:], want)
			before := eagerOf(c).EagerQueued(0)
			if err := op(dev, opData|opFlag, dst, eagerBuf/2, size); err != nil {
				return err
			}
			if q := eagerOf(c).EagerQueued(0) - before; q != 0 {
				return fmt.Errorf("a %d-byte put with 2 ranks on 1 CPU queued %d ring slots: it was staged", size, q)
			}
			return waitNext(dev) // rank 1 checked
		}
		if err := waitNext(dev); err != nil {
			return err
		}
		if k := firstDiff(buf[dst:dst+size], want); k >= 0 {
			return fmt.Errorf("byte %d of the put is %d, want %d", k, buf[dst+k], want[k])
		}
		return op(dev, opFlag, 0, 0, 1)
	})
}
