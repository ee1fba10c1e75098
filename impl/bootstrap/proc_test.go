package bootstrap

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Multi-process tests: the test binary re-executes itself as one rank per
// process (TestHelperProcess), steered by environment variables and by
// lines on its stdin.
const (
	envHelper = "MSCCLPP_BOOTSTRAP_TEST_HELPER" // the helper's mode: "bench" or "kill"
	envAddr   = "MSCCLPP_BOOTSTRAP_TEST_ADDR"
	envRank   = "MSCCLPP_BOOTSTRAP_TEST_RANK"
	envNRanks = "MSCCLPP_BOOTSTRAP_TEST_NRANKS"
	envIters  = "MSCCLPP_BOOTSTRAP_TEST_ITERS"
	envVictim = "MSCCLPP_BOOTSTRAP_TEST_VICTIM"
)

func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(envHelper)
	if mode == "" {
		t.Skip("only run as a helper process")
	}
	os.Exit(helperMain(mode))
}

func helperMain(mode string) int {
	atoi := func(k string) int { v, _ := strconv.Atoi(os.Getenv(k)); return v }
	rank, n, iters := atoi(envRank), atoi(envNRanks), atoi(envIters)
	in := bufio.NewReader(os.Stdin)
	fmt.Println("started")
	if _, err := in.ReadString('\n'); err != nil { // "go": every rank's process is up
		return 2
	}
	start := time.Now()
	opts := Options{Timeout: 30 * time.Second}
	if mode == "lazykill" { // one host, ring only: no ring until the first collective
		opts.HostID, opts.RingOnlyOnOneHost = "h", true
	}
	if mode == "gatherdie" { // two hosts: the ranks gather the table before they report ready
		opts.HostID, opts.Timeout = "h"+strconv.Itoa(rank%2), 10*time.Second
		opts.Joined = func(b *Bootstrap) error {
			if rank == atoi(envVictim) {
				awaitConns(b, 4) // the root's, the ring's two and the star's: then the others gather
				os.Exit(3)
			}
			return nil
		}
	}
	b, err := InitAddr(os.Getenv(envAddr), rank, n, opts)
	initTime := time.Since(start)
	if err != nil {
		fmt.Printf("err %d %s\n", status.CodeOf(err), err)
		return 1
	}
	defer b.Close()
	data := make([]byte, 4*n)
	check := func(it int) error {
		for r := range n {
			if data[4*r] != byte(r+it) {
				return fmt.Errorf("iteration %d: slot %d holds %d", it, r, data[4*r])
			}
		}
		return nil
	}
	switch mode {
	case "bench":
		for it := range 200 { // warm up and check
			data[4*rank] = byte(rank + it)
			if err := b.AllGather(data, 4); err != nil {
				fmt.Printf("err %d %s\n", status.CodeOf(err), err)
				return 1
			}
			if err := check(it); err != nil {
				fmt.Printf("err 3 %s\n", err)
				return 1
			}
		}
		b.Barrier()
		t0 := time.Now()
		for range iters {
			if err := b.AllGather(data, 4); err != nil {
				fmt.Printf("err %d %s\n", status.CodeOf(err), err)
				return 1
			}
		}
		ag := time.Since(t0)
		b.Barrier()
		t0 = time.Now()
		for range iters {
			if err := b.Barrier(); err != nil {
				fmt.Printf("err %d %s\n", status.CodeOf(err), err)
				return 1
			}
		}
		bar := time.Since(t0)
		fmt.Printf("result %d %d %d\n", initTime.Nanoseconds(), ag.Nanoseconds()/int64(iters), bar.Nanoseconds()/int64(iters))
		b.Barrier()
		return 0
	case "kill", "lazykill":
		for it := range 20 {
			if mode == "lazykill" {
				break // the collective after the kill is the first
			}
			data[4*rank] = byte(rank + it)
			if err := b.AllGather(data, 4); err != nil {
				fmt.Printf("err %d %s\n", status.CodeOf(err), err)
				return 1
			}
			if err := check(it); err != nil {
				fmt.Printf("err 3 %s\n", err)
				return 1
			}
		}
		fmt.Println("formed")
		if rank == atoi(envVictim) {
			io.Copy(io.Discard, in) // until killed
			return 0
		}
		err := b.Barrier() // blocks until the victim dies
		fmt.Printf("err %d %s\n", status.CodeOf(err), err)
		return 0
	}
	return 2
}

// awaitConns waits (up to 20 s) until b has at least n connections open.
func awaitConns(b *Bootstrap, n int) {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b.mu.Lock()
		open := len(b.conns)
		b.mu.Unlock()
		if open >= n {
			return
		}
	}
}

// procs is a set of helper processes, one per rank.
type procs struct {
	cmds  []*exec.Cmd
	stdin []io.WriteCloser
	lines []chan string
}

func startProcs(t testing.TB, mode string, n int, env ...string) *procs {
	t.Helper()
	addr := loopbackAddr(t)
	p := &procs{}
	for r := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), envHelper+"="+mode, envAddr+"="+addr,
			envRank+"="+strconv.Itoa(r), envNRanks+"="+strconv.Itoa(n))
		cmd.Env = append(cmd.Env, env...)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ch := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				ch <- sc.Text()
			}
			close(ch)
		}()
		p.cmds = append(p.cmds, cmd)
		p.stdin = append(p.stdin, stdin)
		p.lines = append(p.lines, ch)
	}
	t.Cleanup(func() {
		for i, c := range p.cmds {
			p.stdin[i].Close()
			c.Process.Kill()
			c.Wait()
		}
	})
	return p
}

// expect waits for rank r's next line and checks its prefix.
func (p *procs) expect(t testing.TB, r int, prefix string) string {
	t.Helper()
	select {
	case line, ok := <-p.lines[r]:
		if !ok || !strings.HasPrefix(line, prefix) {
			t.Fatalf("rank %d: got %q (open %v), want %q...", r, line, ok, prefix)
		}
		return line
	case <-time.After(60 * time.Second):
		t.Fatalf("rank %d: no %q line", r, prefix)
	}
	return ""
}

// eachSurvivor waits, for every rank but victim at once, for its "err " line and hands it
// to check.
func (p *procs) eachSurvivor(t testing.TB, victim int, check func(r int, line string)) {
	var wg sync.WaitGroup
	for r := range p.cmds {
		if r != victim {
			wg.Go(func() { check(r, p.expect(t, r, "err ")) })
		}
	}
	wg.Wait()
}

// begin waits until every process started and tells them all to go.
func (p *procs) begin(t testing.TB) {
	for r := range p.cmds {
		p.expect(t, r, "started")
	}
	for r := range p.cmds {
		io.WriteString(p.stdin[r], "go\n")
	}
}

func TestMultiProcessKill(t *testing.T) { testMultiProcessKill(t, "kill") }

// A rank killed before the first collective of a one-host, ring-only communicator,
// whose ring connects at that collective: the others fail at once, not after the
// timeout, and the dead rank's successor names it.
func TestMultiProcessKillLazyRing(t *testing.T) { testMultiProcessKill(t, "lazykill") }

func testMultiProcessKill(t *testing.T, mode string) {
	const n, victim = 4, 2
	p := startProcs(t, mode, n, envVictim+"="+strconv.Itoa(victim))
	p.begin(t)
	for r := range n {
		p.expect(t, r, "formed")
	}
	killed := time.Now()
	p.cmds[victim].Process.Kill()
	var named atomic.Bool // some survivor names the dead rank
	p.eachSurvivor(t, victim, func(r int, line string) {
		took := time.Since(killed)
		if !strings.HasPrefix(line, fmt.Sprintf("err %d ", status.RemoteError)) {
			t.Errorf("rank %d: %s", r, line)
		}
		if took > 5*time.Second {
			t.Errorf("rank %d noticed the death after %v", r, took)
		}
		if strings.Contains(line, "rank 2") {
			named.Store(true)
		}
		// Where the ring formed before the death, its successor reads the
		// end of its connection; where it forms after, the rank that meets
		// the dead one first may be any neighbour.
		if mode == "kill" && r == victim+1 && !strings.Contains(line, "rank 2") {
			t.Errorf("rank %d does not name the dead rank: %s", r, line)
		}
	})
	if !named.Load() {
		t.Error("no rank names the dead rank")
	}
}

// A rank of a communicator across hosts whose process exits once its ring and star are up,
// before the ranks gather the table: every other rank's Init fails with RemoteError naming
// it, within the timeout (10 s).
func TestMultiProcessDiesBeforeGather(t *testing.T) {
	const n, victim = 4, 2
	p := startProcs(t, "gatherdie", n, envVictim+"="+strconv.Itoa(victim))
	start := time.Now()
	p.begin(t)
	p.eachSurvivor(t, victim, func(r int, line string) {
		t.Logf("rank %d: %s", r, line)
		if !strings.HasPrefix(line, fmt.Sprintf("err %d ", status.RemoteError)) || !strings.Contains(line, "rank 2") {
			t.Errorf("rank %d: %s (want RemoteError naming rank 2)", r, line)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("rank %d failed after %v, past the timeout", r, took)
		}
	})
}

// TestMultiProcessBench measures init, 4-byte AllGather and Barrier with one
// process per rank; it runs only with MSCCLPP_BOOTSTRAP_BENCH=1 (and is
// meaningless under -race).
func TestMultiProcessBench(t *testing.T) {
	if os.Getenv("MSCCLPP_BOOTSTRAP_BENCH") == "" {
		t.Skip("set MSCCLPP_BOOTSTRAP_BENCH=1 to run")
	}
	sizes := []int{2, 4, 8, 16}
	if s := os.Getenv("MSCCLPP_BOOTSTRAP_BENCH_N"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			v, _ := strconv.Atoi(f)
			sizes = append(sizes, v)
		}
	}
	for _, n := range sizes {
		iters := 20000 / n
		p := startProcs(t, "bench", n, envIters+"="+strconv.Itoa(iters))
		p.begin(t)
		var inits, ags, bars []time.Duration
		for r := range n {
			var it, ag, bar int64
			line := p.expect(t, r, "result ")
			fmt.Sscanf(line, "result %d %d %d", &it, &ag, &bar)
			inits = append(inits, time.Duration(it))
			ags = append(ags, time.Duration(ag))
			bars = append(bars, time.Duration(bar))
		}
		t.Logf("N=%2d  init max %8v  allgather(4B) %8v  barrier %8v  (spin %s=%q)",
			n, slices.Max(inits), slices.Max(ags), slices.Max(bars), EnvSpinUS, os.Getenv(EnvSpinUS))
		for r := range n {
			p.cmds[r].Wait()
		}
	}
}

// BenchmarkAllGather4B measures a 4-byte AllGather with the ranks as
// goroutines of one process.
func BenchmarkAllGather4B(b *testing.B) {
	for _, n := range []int{2, 4, 8} {
		b.Run("N="+strconv.Itoa(n), func(b *testing.B) {
			bs := formAddr(b, n, Options{})
			b.ResetTimer()
			noErrs(b, "allgather", each(bs, func(bb *Bootstrap) error {
				data := make([]byte, 4*n)
				for range b.N {
					if err := bb.AllGather(data, 4); err != nil {
						return err
					}
				}
				return nil
			}))
		})
	}
}

// BenchmarkBarrier measures Barrier with the ranks as goroutines.
func BenchmarkBarrier(b *testing.B) {
	for _, n := range []int{2, 8} {
		b.Run("N="+strconv.Itoa(n), func(b *testing.B) {
			bs := formAddr(b, n, Options{})
			b.ResetTimer()
			noErrs(b, "barrier", each(bs, func(bb *Bootstrap) error {
				for range b.N {
					if err := bb.Barrier(); err != nil {
						return err
					}
				}
				return nil
			}))
		})
	}
}

// BenchmarkInit measures forming a communicator of goroutine ranks, with the
// default options, with the library's on one host (RingOnlyOnOneHost), and
// with the library's over 4 hosts (the root sends each rank part of the table,
// and the ranks gather the rest).
func BenchmarkInit(b *testing.B) {
	for _, n := range []int{4, 16} {
		b.Run("N="+strconv.Itoa(n), func(b *testing.B) { benchInit(b, n, Options{}, 1) })
		b.Run("N="+strconv.Itoa(n)+"/onehost", func(b *testing.B) { benchInit(b, n, Options{HostID: "h", RingOnlyOnOneHost: true}, 1) })
		b.Run("N="+strconv.Itoa(n)+"/4hosts", func(b *testing.B) { benchInit(b, n, Options{RingOnlyOnOneHost: true}, 4) })
	}
}

// benchInit forms communicators of n ranks with opts, rank r with host id "h"+r%hosts
// when hosts > 1.
func benchInit(b *testing.B, n int, opts Options, hosts int) {
	for range b.N {
		addr := loopbackAddr(b)
		bs := make([]*Bootstrap, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			o := opts
			if hosts > 1 {
				o.HostID = "h" + strconv.Itoa(r%hosts)
			}
			wg.Go(func() { bs[r], errs[r] = InitAddr(addr, r, n, o) })
		}
		wg.Wait()
		for r := range n {
			if errs[r] != nil {
				b.Fatal(errs[r])
			}
			bs[r].Close()
		}
	}
}
