package bootstrap

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// The large ring (ringLarge) at slot sizes around the socket buffers and not multiples of
// anything, at 2 and 4 ranks: every byte arrives.
func TestRingLargeData(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 4} {
		bs := formAddr(t, n, Options{Timeout: 30 * time.Second})
		for _, size := range []int{inlineMax + 1, 100003, 1<<20 + 7} {
			errs := each(bs, func(b *Bootstrap) error {
				data := make([]byte, n*size)
				for i := 0; i < size; i++ {
					data[b.Rank()*size+i] = byte(b.Rank()*37 + i*11 + size)
				}
				if err := b.AllGather(data, size); err != nil {
					return err
				}
				for r := 0; r < n; r++ {
					want := make([]byte, size)
					for i := range want {
						want[i] = byte(r*37 + i*11 + size)
					}
					if !bytes.Equal(data[r*size:(r+1)*size], want) {
						return status.Errorf(status.InternalError, "n=%d size %d: slot %d is wrong", n, size, r)
					}
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("n=%d size %d rank %d: %v", n, size, r, err)
				}
			}
		}
	}
}

// A large gather whose peer never joins ends at the timeout, naming the peer.
func TestRingLargeTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	underStallsFormed(t, 2, timeout, func(bs []*Bootstrap) error {
		start := time.Now()
		err := bs[0].AllGather(make([]byte, 2<<20), 1<<20)
		if d := time.Since(start); d < timeout-deadlineSlack || d > timeout+2*time.Second {
			return fmt.Errorf("the gather failed after %v", d)
		}
		return codeErr(err, status.RemoteError, "rank 1", "within 300ms")
	})
}

// An abort while a large gather waits ends the gather promptly with the abort's error.
func TestRingLargeAbort(t *testing.T) {
	bs := formAddr(t, 2, Options{Timeout: 30 * time.Second})
	myErr := status.Errorf(status.InternalError, "test abort")
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- bs[0].AllGather(make([]byte, 2<<20), 1<<20) }()
	time.Sleep(50 * time.Millisecond) // let it reach its wait (the result does not depend on it)
	bs[0].Abort(myErr)
	select {
	case err := <-done:
		if err != myErr {
			t.Fatalf("aborted gather: %v, want %v", err, myErr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an aborted gather did not return")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("an aborted gather took %v", d)
	}
}

// Ranks that gather different large sizes fail (InvalidUsage on at least one) and do not hang.
func TestRingLargeMismatch(t *testing.T) {
	checkMismatchedGather(t, func(rank int) int { return 100000 + 50000*rank })
}
