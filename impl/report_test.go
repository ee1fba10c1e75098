package impl

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// reportLog sends the log lines to a slice, with when each came, for the test's duration.
type reportLog struct {
	mu    sync.Mutex
	lines []string
	at    []time.Time
}

func captureReports(t *testing.T, hangReportS string) *reportLog {
	t.Helper()
	t.Setenv("MSCCLPP_DEBUG", "WARN")
	t.Setenv("MSCCLPP_DEBUG_SUBSYS", "")
	t.Setenv("MSCCLPP_DEBUG_FILE", "")
	os.Unsetenv("MSCCLPP_DEBUG_SUBSYS")
	os.Unsetenv("MSCCLPP_DEBUG_FILE")
	t.Setenv(string(envHangReport), hangReportS)
	logx.Reset()
	l := &reportLog{}
	logx.SetHandler(func(line string) {
		l.mu.Lock()
		l.lines = append(l.lines, line)
		l.at = append(l.at, time.Now())
		l.mu.Unlock()
	})
	t.Cleanup(func() {
		logx.SetHandler(nil)
		logx.Reset()
	})
	return l
}

// matching returns the lines matching re and when the first came.
func (l *reportLog) matching(re string) ([]string, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	var first time.Time
	r := regexp.MustCompile(re)
	for i, s := range l.lines {
		if r.MatchString(strings.TrimSuffix(s, "\n")) {
			if out == nil {
				first = l.at[i]
			}
			out = append(out, s)
		}
	}
	return out, first
}

// eventually waits, at most 5 s, until a line matches re: the job view prints from a goroutine.
func (l *reportLog) eventually(re string) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got, _ := l.matching(re); len(got) > 0 {
			return
		}
	}
}

// stalledPair: on a 2-rank SHM pair, rank 1 signals 3 times and then stops; rank 0 takes the 3
// signals and waits (bounded by waitMs) for a 4th. It returns when rank 0's last wait began.
func stalledPair(t *testing.T, waitMs int64) time.Time {
	t.Helper()
	var began time.Time
	hostAllocPair(t, 4096, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		if c.Rank() == 1 {
			for i := 0; i < 3; i++ {
				if rc := engine.ConnSignalOp(dev, opFlag, 0, 0, 0); rc != status.Success {
					return fmt.Errorf("signal: %v", rc)
				}
			}
			return c.Barrier() // until rank 0 gave up waiting
		}
		for i := 0; i < 3; i++ {
			if err := waitNext(dev); err != nil {
				return err
			}
		}
		began = time.Now()
		if rc := engine.ConnWaitNext(dev, waitMs); rc != status.InProgress {
			return fmt.Errorf("the wait for a 4th signal returned %v, want InProgress (no signal came)", rc)
		}
		return c.Barrier()
	})
	return began
}

// A wait that makes no progress for MSCCLPP_HANG_REPORT_S reports once, within a second of that
// time, naming the rank behind, the connection and both epochs, then the connection table.
func TestHangReportNamesTheRankBehind(t *testing.T) {
	l := captureReports(t, "1")
	began := stalledPair(t, 3000)
	head, at := l.matching(`MSCCLPP WARN hang report: rank \d+ has waited`)
	if len(head) != 1 {
		t.Fatalf("%d hang report headers, want 1 (once per communicator):\n%s", len(head), strings.Join(head, ""))
	}
	want := regexp.MustCompile(`MSCCLPP WARN hang report: rank 0 has waited 1\.\d s without progress on connection 0 to rank 1 ` +
		`\(SHM, tag 0\) for epoch 4; rank 1 has signalled epoch 3 \(MSCCLPP_HANG_REPORT_S=1; reported once\)$`)
	if !want.MatchString(strings.TrimSuffix(head[0], "\n")) {
		t.Errorf("header %q does not match %v", head[0], want)
	}
	if d := at.Sub(began); d < time.Second || d > 2*time.Second {
		t.Errorf("reported %v after the wait began, want within [1 s, 2 s]", d)
	}
	rows, _ := l.matching(`MSCCLPP WARN hang report: +0 +1 SHM +0 +4 \(\d+\.\ds\) +3 +0 +0 +0/0/0 +stopped +alive \(pid \d+\)$`)
	if len(rows) != 1 {
		all, _ := l.matching(`hang report`)
		t.Errorf("no table row for connection 0 with epochs 4 and 3:\n%s", strings.Join(all, ""))
	}
	if last, _ := l.matching(`MSCCLPP WARN hang report: last error: `); len(last) != 1 {
		t.Errorf("%d last-error lines, want 1", len(last))
	}
}

// With MSCCLPP_HANG_REPORT_S=0 the same stall prints nothing.
func TestHangReportOff(t *testing.T) {
	l := captureReports(t, "0")
	stalledPair(t, 1500)
	if all, _ := l.matching(`hang report`); len(all) != 0 {
		t.Errorf("reports off, but:\n%s", strings.Join(all, ""))
	}
}

// A wait polled with short timeouts makes no progress either: the report counts across the calls.
func TestHangReportAcrossPolls(t *testing.T) {
	l := captureReports(t, "1")
	hostAllocPair(t, 4096, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		if c.Rank() == 1 {
			return c.Barrier()
		}
		deadline := time.Now().Add(5 * time.Second)
		if rc := engine.ConnWaitNext(dev, 10); rc != status.InProgress {
			return fmt.Errorf("first poll: %v", rc)
		}
		for time.Now().Before(deadline) {
			if head, _ := l.matching(`hang report: rank 0 has waited`); len(head) > 0 {
				break
			}
			if rc := engine.ConnWaitNext(dev, 10); rc != status.InProgress {
				return fmt.Errorf("poll: %v", rc)
			}
		}
		return c.Barrier()
	})
	if head, _ := l.matching(`hang report: rank 0 has waited 1\.\d s without progress on connection 0 to rank 1 \(SHM, tag 0\) for epoch 1; rank 1 has signalled epoch 0 `); len(head) != 1 {
		all, _ := l.matching(`hang report`)
		t.Errorf("polls of 10 ms for 5 s: want one report naming epochs 1 and 0, got:\n%s", strings.Join(all, ""))
	}
}

// Report (mscclppCommReport) writes the table on demand.
func TestCommReportOnDemand(t *testing.T) {
	captureReports(t, "0")
	hostAllocPair(t, 4096, func(c *Comm, buf []byte, dev unsafe.Pointer) error {
		if c.Rank() == 0 {
			if rc := engine.ConnSignalOp(dev, opData|opFlag, 0, 0, 64); rc != status.Success {
				return fmt.Errorf("put: %v", rc)
			}
		} else if err := waitNext(dev); err != nil {
			return err
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		var b bytes.Buffer
		if err := c.Report(&b); err != nil {
			return err
		}
		out := b.String()
		row := `(?m)^mscclpp report: +0 +1 SHM +0 +0 +0 +1 +64 +0/0/0 +stopped +alive \(pid \d+\)$`
		if c.Rank() == 1 {
			row = `(?m)^mscclpp report: +0 +0 SHM +0 +1 +1 +0 +0 +0/0/0 +stopped +alive \(pid \d+\)$`
		}
		if !strings.HasPrefix(out, fmt.Sprintf("mscclpp report: rank %d of 2\n", c.Rank())) || !regexp.MustCompile(row).MatchString(out) ||
			!strings.Contains(out, "mscclpp report: last error: none\n") {
			return fmt.Errorf("report:\n%s\nwant a row matching %s", out, row)
		}
		return nil
	})
}

// chainOf4 runs 4 ranks in a chain of waits: rank r (r < 3) waits for a signal of rank r+1 on
// an SHM connection (tag 0) that never comes, for waitMs; rank 3 waits on nothing. quiet ranks
// do not answer the job view's requests (as if their bootstrap were gone).
func chainOf4(t *testing.T, waitMs int64, quiet map[int]bool) {
	t.Helper()
	forRanks(t, 4, func(c *Comm) error {
		r := c.Rank()
		if quiet[r] {
			c.boot.SetTagHandler(viewRequestTag, 0, nil) // requests queue unanswered
		}
		next := -1
		for _, p := range []int{r - 1, r + 1} {
			if p < 0 || p > 3 {
				continue
			}
			if p == r+1 {
				next = len(c.conns)
			}
			if err := c.Connect(p, 0, nil, 0, TransportSHM, nil, false); err != nil {
				return err
			}
		}
		if err := c.ConnectionSetup(); err != nil {
			return err
		}
		if next >= 0 {
			if rc := engine.ConnWaitNext(c.host.DevConns.At(next), waitMs); rc != status.InProgress {
				return fmt.Errorf("rank %d: the wait on rank %d returned %v, want InProgress", r, r+1, rc)
			}
		}
		return c.Barrier()
	})
}

// The job's view: rank 0's report asks the others and names the rank at the end of the chain.
func TestHangReportJobViewChain(t *testing.T) {
	l := captureReports(t, "1")
	chainOf4(t, 3500, nil)
	l.eventually(`job view from rank 0: chain of waits`)
	want := []string{
		`job view from rank 0: 3 of 3 other ranks answered within 2s$`,
		`job view from rank 0: rank 1 waits on rank 2 \(tag 0\) for epoch 1 \(no progress for \d\.\d s\); rank 2 has signalled 0$`,
		`job view from rank 0: rank 2 waits on rank 3 \(tag 0\) for epoch 1 \(no progress for \d\.\d s\); rank 3 has signalled 0$`,
		`job view from rank 0: rank 3: no wait without progress$`,
		`job view from rank 0: chain of waits: rank 0 -> rank 1 -> rank 2 -> rank 3, which waits on nothing: rank 3 is behind$`,
	}
	for _, re := range want {
		if got, _ := l.matching(`MSCCLPP WARN hang report: ` + re); len(got) != 1 {
			all, _ := l.matching(`job view from rank 0`)
			t.Errorf("%d lines match %q; rank 0's job view:\n%s", len(got), re, strings.Join(all, ""))
		}
	}
}

// A rank that does not answer within the bound is named as missing, and the chain ends there.
func TestHangReportJobViewMissing(t *testing.T) {
	l := captureReports(t, "1")
	chainOf4(t, 3500, map[int]bool{2: true})
	l.eventually(`job view from rank 0: chain of waits`)
	want := []string{
		`job view from rank 0: 2 of 3 other ranks answered within 2s$`,
		`job view from rank 0: rank 2: missing \(no answer within 2s\)$`,
		`job view from rank 0: chain of waits: rank 0 -> rank 1 -> rank 2, which is missing: rank 2 is the one to look at$`,
	}
	for _, re := range want {
		if got, _ := l.matching(`MSCCLPP WARN hang report: ` + re); len(got) != 1 {
			all, _ := l.matching(`job view from rank 0`)
			t.Errorf("%d lines match %q; rank 0's job view:\n%s", len(got), re, strings.Join(all, ""))
		}
	}
}

const viewChildEnv = "MSCCLPP_TEST_VIEW_CHILD"

// A killed rank is named as missing in the job's view. Rank 3 runs in a child process (so that
// it can be killed): it connects to rank 2 and is killed; ranks 0 -> 1 -> 2 wait in a chain.
func TestHangReportJobViewKilled(t *testing.T) {
	if addr := os.Getenv(viewChildEnv); addr != "" {
		c, err := InitRank(4, addr, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Connect(2, 0, nil, 0, TransportSHM, nil, false); err != nil {
			t.Fatal(err)
		}
		if err := c.ConnectionSetup(); err != nil {
			t.Fatal(err)
		}
		fmt.Println("view child ready")
		select {} // until killed
	}
	l := captureReports(t, "1")
	t.Setenv("MSCCLPP_BOOTSTRAP_TIMEOUT", "5") // the survivors' teardown with a dead peer
	addr := freeAddr(t)
	child := exec.Command(os.Args[0], "-test.run=^TestHangReportJobViewKilled$", "-test.count=1")
	child.Env = append(os.Environ(), viewChildEnv+"="+addr, "MSCCLPP_DEBUG=")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	killed := make(chan error, 1)
	go func() { // once rank 3 set up its connection, kill it
		r := bufio.NewScanner(out)
		for r.Scan() {
			if r.Text() == "view child ready" {
				child.Process.Kill()
				child.Wait()
				killed <- nil
				return
			}
		}
		killed <- fmt.Errorf("rank 3 (child) ended without setting up: %v", child.Wait())
	}()
	// done: rank 3 is dead, ranks 0 and 1 may wait; doneWaiting: rank 0 has its report. Each is
	// closed once, also when its rank fails early, so that no rank waits for ever.
	done, doneWaiting := make(chan struct{}), make(chan struct{})
	var doneOnce, waitingOnce sync.Once
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = func() error {
				switch r {
				case 0:
					defer waitingOnce.Do(func() { close(doneWaiting) })
				case 2:
					defer doneOnce.Do(func() { close(done) })
				}
				c, err := InitRank(4, addr, r)
				if err != nil {
					return err
				}
				defer c.Destroy()
				next := -1
				for _, p := range []int{r - 1, r + 1} {
					if p < 0 {
						continue
					}
					if p == r+1 && r < 2 {
						next = len(c.conns)
					}
					if err := c.Connect(p, 0, nil, 0, TransportSHM, nil, false); err != nil {
						return err
					}
				}
				if err := c.ConnectionSetup(); err != nil {
					return err
				}
				if r == 2 {
					err := <-killed
					doneOnce.Do(func() { close(done) })
					<-doneWaiting
					return err
				}
				<-done
				if rc := engine.ConnWaitNext(c.host.DevConns.At(next), 3500); rc != status.InProgress {
					return fmt.Errorf("rank %d: the wait on rank %d returned %v, want InProgress", r, r+1, rc)
				}
				if r == 0 {
					l.eventually(`job view from rank 0: chain of waits`)
					waitingOnce.Do(func() { close(doneWaiting) }) // before Destroy, which rank 2 takes part in
				}
				return nil
			}()
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	want := []string{
		`job view from rank 0: 2 of 3 other ranks answered within 2s$`,
		`job view from rank 0: rank 3: missing \(unreachable: .*\)$`,
		`job view from rank 0: rank 1 waits on rank 2 \(tag 0\) for epoch 1 \(no progress for \d\.\d s\); rank 2 has signalled 0$`,
		`job view from rank 0: chain of waits: rank 0 -> rank 1 -> rank 2, which waits on nothing: rank 2 is behind$`,
	}
	for _, re := range want {
		if got, _ := l.matching(`MSCCLPP WARN hang report: ` + re); len(got) != 1 {
			all, _ := l.matching(`job view from rank 0`)
			t.Errorf("%d lines match %q; rank 0's job view:\n%s", len(got), re, strings.Join(all, ""))
		}
	}
}
