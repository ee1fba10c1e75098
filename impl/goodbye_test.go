package impl

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestGoodbyeKeepsFailureText: over Ethernet, a peer that destroys its communicator says
// goodbye, which becomes the last error of a communicator that has recorded no failure; one
// that has keeps the text of its failed call (a rank reading why its call failed must not find
// another rank's orderly exit there instead).
func TestGoodbyeKeepsFailureText(t *testing.T) {
	const size = 4096
	for _, failed := range []bool{false, true} {
		t.Run(map[bool]string{false: "no failure", true: "after a failed put"}[failed], func(t *testing.T) {
			addr := freeAddr(t)
			bufs := [2][]byte{make([]byte, size), make([]byte, size)}
			called := make(chan struct{}) // rank 0 made its call: rank 1 may destroy
			runRanks(t, 2, func(r int) error {
				c, err := InitRank(2, addr, r)
				if err != nil {
					if r == 0 {
						close(called)
					}
					return err
				}
				if err = c.Connect(1-r, 0, unsafe.Pointer(&bufs[r][0]), size, TransportEthernet, nil, true); err == nil {
					err = c.ConnectionSetup()
				}
				if r == 1 {
					<-called
					return errors.Join(err, c.Destroy())
				}
				err = goodbyeSurvivor(c, err, failed, size)
				close(called)
				if err == nil {
					err = waitPeerClosed(c)
				}
				if err == nil {
					err = checkGoodbyeText(c, failed)
				}
				return errors.Join(err, c.Destroy())
			})
		})
	}
}

// goodbyeSurvivor is rank 0's call before rank 1 destroys: with failed, a put past the end of
// the peer's buffer, refused with InvalidArgument (an asynchronous error of the communicator).
func goodbyeSurvivor(c *Comm, setupErr error, failed bool, size uint64) error {
	if setupErr != nil || !failed {
		return setupErr
	}
	if rc := engine.ConnOp(c.host.DevConns.At(0), opData, 0, 0, size+1); rc != status.InvalidArgument {
		return fmt.Errorf("put of %d bytes into a %d-byte buffer returned %v, want invalid argument", size+1, size, rc)
	}
	if c.host.Eng.Err() == nil {
		return fmt.Errorf("the refused put recorded no asynchronous error")
	}
	return nil
}

// waitPeerClosed waits (10 s at most) until rank 0's connection saw rank 1's side close.
func waitPeerClosed(c *Comm) error {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if c.conns[0].eng.Stat().PeerClosed {
			return nil
		}
	}
	return fmt.Errorf("rank 1's close was not seen within 10 s")
}

// checkGoodbyeText: rank 0's last error names rank 1's destroy only when nothing failed before.
func checkGoodbyeText(c *Comm, failed bool) error {
	last := c.host.Eng.LastText()
	bye := strings.Contains(last, "rank 1 destroyed its communicator")
	if failed && (bye || !strings.Contains(last, "put reads 4097 bytes")) {
		return fmt.Errorf("last error after a failed put and rank 1's goodbye: %q, want the put's refusal", last)
	}
	if !failed && !bye {
		return fmt.Errorf("last error after rank 1's goodbye: %q, want it named", last)
	}
	return nil
}
