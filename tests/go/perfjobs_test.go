package sotest

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// perfRank is one rank of a perf job started by hand: its launcher gives its rank, the rank
// count and a job nonce (MSCCLPP_PERF_JOB_NONCE) through the environment.
type perfRank struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

func startPerfRank(t *testing.T, ctx context.Context, perf string, base []string, rank int, nonce string, env []string, args ...string) *perfRank {
	t.Helper()
	r := &perfRank{cmd: exec.CommandContext(ctx, perf, append([]string{"-b", "8", "-e", "8", "-n", "1", "-w", "0"}, args...)...)}
	r.cmd.Env = append(append(append([]string(nil), base...), "MSCCLPP_TEST_RANK="+string(rune('0'+rank)), "MSCCLPP_TEST_NRANKS=2",
		"MSCCLPP_PERF_JOB_NONCE="+nonce, "MSCCLPP_BOOTSTRAP_TIMEOUT=10"), env...)
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return r
}

// wait returns the rank's exit status (-1: killed).
func (r *perfRank) wait() int {
	err := r.cmd.Wait()
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// TestPerfJobsGivenOneJobIDDoNotPair: two perf jobs given the same --id-file and --job-id by
// launchers with different nonces: job B's rank 1, started while job A's rank 0 waits, refuses
// A's id file at once and fails saying so, and job A's own rank 1 then completes job A.
func TestPerfJobsGivenOneJobIDDoNotPair(t *testing.T) {
	perf, base := buildPerf(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"--id-file", filepath.Join(dir, "id"), "--job-id", "same"}
	a0 := startPerfRank(t, ctx, perf, base, 0, "jobA", nil, args...)
	for { // until A's rank 0 has published its id
		if _, err := os.Stat(filepath.Join(dir, "id.same")); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("job A's rank 0 wrote no id file:\n%s", a0.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	b1 := startPerfRank(t, ctx, perf, base, 1, "jobB", nil, args...)
	if rc := b1.wait(); rc != 1 || !strings.Contains(b1.out.String(), "it is another job's (launcher token njobA; this rank's is njobB): two jobs were given one job id") {
		a0.cmd.Process.Kill()
		a0.wait()
		t.Fatalf("job B's rank 1: exit %d, want 1 and why; job A's rank 0 said:\n%s\njob B's rank 1 said:\n%s", rc, a0.out.String(), b1.out.String())
	}
	a1 := startPerfRank(t, ctx, perf, base, 1, "jobA", nil, args...)
	for i, r := range []*perfRank{a0, a1} {
		if rc := r.wait(); rc != 0 {
			t.Errorf("job A's rank %d: exit %d, want 0:\n%s", i, rc, r.out.String())
		}
	}
}

// TestPerfJobsMetAtOneAddressFailBoth: two jobs given one rank-0 address (MSCCLPP_TEST_ADDR) meet in
// one communicator; the launcher tokens are checked both ways once it exists, and both ranks fail
// naming the other job's rank instead of benchmarking across two jobs.
func TestPerfJobsMetAtOneAddressFailBoth(t *testing.T) {
	perf, base := buildPerf(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env := []string{"MSCCLPP_TEST_ADDR=" + addr}
	a0 := startPerfRank(t, ctx, perf, base, 0, "jobA", env)
	b1 := startPerfRank(t, ctx, perf, base, 1, "jobB", env)
	for _, c := range []struct {
		r          *perfRank
		who, other string
	}{{a0, "job A's rank 0", "perf rank 0: rank 1 of this communicator is another job's (launcher token njobB; this rank's is njobA)"},
		{b1, "job B's rank 1", "perf rank 1: rank 0 of this communicator is another job's (launcher token njobA; this rank's is njobB)"}} {
		if rc := c.r.wait(); rc != 1 || !strings.Contains(c.r.out.String(), c.other) {
			t.Errorf("%s: exit %d, want 1 and %q:\n%s", c.who, rc, c.other, c.r.out.String())
		}
	}
}
