package impl

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// A flood of job-view requests from one rank, while a control call holds the victim's
// communicator (each answer waits for it), leaves the victim's goroutines bounded, and the
// victim still answers another rank's request.
func TestJobViewFloodIsBounded(t *testing.T) {
	const requests = 5000
	locked, flooded := make(chan struct{}), make(chan struct{})
	var peak, base int
	forRanks(t, 3, func(c *Comm) error {
		switch c.Rank() {
		case 0: // the victim
			c.mu.Lock()
			close(locked)
			<-flooded
			c.mu.Unlock()
		case 1: // the attacker
			<-locked
			base = runtime.NumGoroutine()
			var req [8]byte
			for i := range requests {
				binary.LittleEndian.PutUint64(req[:], uint64(i)+1<<32)
				if err := c.boot.Send(0, viewRequestTag, req[:]); err != nil {
					close(flooded)
					return fmt.Errorf("request %d: %w", i, err)
				}
				if i%50 == 0 {
					peak = max(peak, runtime.NumGoroutine())
				}
			}
			peak = max(peak, runtime.NumGoroutine())
			close(flooded)
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 2 {
			lines := c.jobView(jobViewBound)
			if !strings.Contains(lines[0], "2 of 2 other ranks answered") || !strings.Contains(strings.Join(lines, "\n"), "rank 0: no wait without progress") {
				return fmt.Errorf("after the flood, rank 2's job view:\n%s", strings.Join(lines, "\n"))
			}
		}
		return c.Barrier()
	})
	t.Logf("goroutines: %d before the flood of %d requests, at most %d during it", base, requests, peak)
	if peak-base > 64 {
		t.Errorf("%d requests raised the goroutines from %d to %d", requests, base, peak)
	}
}

// A 16 MiB answer is refused without being held in memory: the connection goes on.
func TestJobViewRefusesLongAnswer(t *testing.T) {
	big := make([]byte, 16<<20)
	forRanks(t, 2, func(c *Comm) error {
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 1 {
			if err := c.boot.Send(0, viewAnswerTag, big); err != nil {
				return err
			}
			if err := c.boot.Send(0, 77, []byte("after")); err != nil {
				return err
			}
			return c.Barrier()
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		msg, err := c.boot.Recv(1, 77) // the same connection: the answer was read before it
		if err != nil || string(msg) != "after" {
			return fmt.Errorf("the message after the long answer: %q, %v", msg, err)
		}
		runtime.ReadMemStats(&m1)
		if grew := m1.TotalAlloc - m0.TotalAlloc; grew > 4<<20 {
			return fmt.Errorf("a %d-byte answer allocated %d bytes here", len(big), grew)
		}
		if n := c.boot.Refused(); n != 1 {
			return fmt.Errorf("%d messages refused, want 1", n)
		}
		return c.Barrier()
	})
}

// A forged answer's text reaches the job view quoted, as printable ASCII on one line; a wait on
// a rank the communicator does not have is named as such, and the chain blames no such rank.
func TestJobViewForgedAnswerSanitised(t *testing.T) {
	const forged = "\x1b[2J\x1b]0;owned\x07\nhost:1:1 [0] MSCCLPP WARN forged"
	for _, tc := range []struct {
		what   string
		answer rankView
		want   string
	}{
		{"note", rankView{Rank: 1, Waits: []waitView{}, Note: forged}, `rank 1: answered with a note of its own: "\x1b[2J\x1b]0;owned\a\nhost:1:1 [0] MSCCLPP WARN forged"`},
		{"rank -7", rankView{Rank: 1, Waits: []waitView{{Peer: -7, Want: 1}}}, "rank 1: answered with a wait on rank -7, not one of the 2 ranks"},
		{"waits", rankView{Rank: 1, Waits: make([]waitView, 1000)}, "rank 1: answered with 1000 waits, more than the 16 an answer names"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			b, err := json.Marshal(tc.answer)
			if err != nil {
				t.Fatal(err)
			}
			v := checkedView(1, 2, b)
			views := map[int]rankView{0: {Rank: 0, Waits: []waitView{{Peer: 1, Want: 1}}}, 1: v}
			lines := viewLines(0, 2, views, 1, jobViewBound)
			all := strings.Join(lines, "\n")
			for _, l := range lines {
				for i := 0; i < len(l); i++ {
					if l[i] < 0x20 || l[i] > 0x7e {
						t.Fatalf("line %q has byte %#x", l, l[i])
					}
				}
			}
			if !strings.Contains(all, tc.want) {
				t.Errorf("job view:\n%s\nwant a line with %s", all, tc.want)
			}
			if strings.Contains(all, "rank -7 is") || len(lines) > 8 {
				t.Errorf("job view (%d lines):\n%.2000s", len(lines), all)
			}
		})
	}
}

// A rank's setup report reaches the others' errors quoted, as printable ASCII on one line.
func TestSetupReportTextSanitised(t *testing.T) {
	const forged = "\x1b[2J\x1b]0;owned\x07\nhost:1:1 [0] MSCCLPP WARN forged"
	forRanks(t, 2, func(c *Comm) error {
		f := &setupFailures{}
		if c.Rank() == 1 {
			f.first = errors.New(forged)
		}
		err := c.closeSetup(f)
		if c.Rank() == 1 {
			return nil
		}
		if err == nil {
			return errors.New("rank 1's failure was not reported")
		}
		msg := err.Error()
		for i := 0; i < len(msg); i++ {
			if msg[i] < 0x20 || msg[i] > 0x7e {
				return fmt.Errorf("the error %q has byte %#x", msg, msg[i])
			}
		}
		if !strings.Contains(msg, `failed on rank 1: "\x1b[2J`) {
			return fmt.Errorf("the error %q does not quote rank 1's text", msg)
		}
		return nil
	})
}
