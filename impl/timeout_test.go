package impl

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Two communicators of one process keep the timeouts they were formed with: one formed with
// 1 s gives up on a rank that never reaches its barrier after about 1 s, although a second
// communicator was formed with 30 s since (and the process-wide setting says 30 s).
func TestCommunicatorsKeepTheirOwnTimeouts(t *testing.T) {
	old := bootstrapTimeoutNs.Load()
	defer bootstrapTimeoutNs.Store(old)
	if err := SetBootstrapTimeout(1); err != nil {
		t.Fatal(err)
	}
	formed := make(chan struct{})
	release := make(chan struct{})
	var gaveUp time.Duration
	go func() { // after both ranks formed the 1 s communicator: another one with 30 s
		<-formed
		<-formed
		if err := SetBootstrapTimeout(30); err != nil {
			t.Error(err)
		}
		long, err := InitRank(1, freeAddr(t), 0)
		if err != nil {
			t.Error(err)
		} else {
			if long.timeout != 30*time.Second {
				t.Errorf("the second communicator's timeout is %v, want 30 s", long.timeout)
			}
			long.Destroy()
		}
		close(release)
	}()
	forRanks(t, 2, func(c *Comm) error {
		formed <- struct{}{}
		<-release
		if c.Rank() == 1 {
			return nil // never reaches the barrier (its destroy comes after rank 0 gave up)
		}
		start := time.Now()
		err := c.Barrier()
		gaveUp = time.Since(start)
		if status.CodeOf(err) != status.RemoteError || !strings.Contains(err.Error(), "within 1s") {
			return fmt.Errorf("barrier without rank 1: %v, want RemoteError after 1 s", err)
		}
		return nil
	})
	if gaveUp > 10*time.Second {
		t.Errorf("the 1 s communicator gave up after %v (the other one's 30 s?)", gaveUp)
	}
}
