package ib

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spinEnv makes the re-executed test binary spinMain: rank 1 of TestDoubleStoppedPeer.
const spinEnv = "MSCCLPP_IB_TEST_SPIN"

// spinMain connects like childMain, then writes its whole buffer into rank 0's for ever
// (until killed): at any moment it is likely inside a post.
func spinMain() int {
	fail := func(err error) int { fmt.Printf("ERR %v\n", err); return 1 }
	e, peer, in, err := childConnect(os.Getenv(spinEnv))
	if err != nil {
		return fail(err)
	}
	if !in.Scan() { // rank 0 connected its side too: a write before that finds no QP to answer it
		return fail(fmt.Errorf("no go from rank 0"))
	}
	for {
		if err := e.qp.Write(e.dMR, 0, peer.data, 0, childSize, true); err != nil {
			return fail(err)
		}
		if err := e.qp.Flush(10 * time.Second); err != nil {
			return fail(err)
		}
	}
}

// TestDoubleStoppedPeer: a peer SIGSTOPped at a random moment of its posts must not stall
// this process's posts (on a real fabric nothing is shared with the peer's CPU: the NIC
// writes a stopped process's memory). The double once guarded its tables with one flock
// that a process stopped inside a post kept: its peer's next post (the IB heartbeat's
// included) then waited for ever, the ib-stop hang of `make faults`.
func TestDoubleStoppedPeer(t *testing.T) {
	lib := withDouble(t)
	t.Setenv(EnvLibrary, doubleLib)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spinEnv+"=double_0")
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill() // a SIGKILL ends a stopped process too
		_ = cmd.Wait()
	}()
	out := bufio.NewScanner(stdout)
	readLine := func() string {
		if !out.Scan() {
			t.Fatalf("rank 1 said nothing: %v", out.Err())
		}
		if s := out.Text(); !strings.HasPrefix(s, "ERR ") {
			return s
		}
		t.Fatalf("rank 1: %s", out.Text())
		return ""
	}
	e, err := newEndpoint(lib, "double_0", "rank 1", childSize)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := parsePeer(readLine())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, e.info().line())
	if err := e.qp.Connect(peer.qp); err != nil {
		t.Fatal(err)
	}
	if s := readLine(); s != "CONNECTED" {
		t.Fatalf("rank 1: %q", s)
	}
	fmt.Fprintln(stdin, "GO")
	pid := cmd.Process.Pid
	quit := make(chan string, 1)
	go func() { // rank 1 says "ERR ..." when it gives up; its output ends when it exits
		msg := "exited without a word"
		for out.Scan() {
			msg = out.Text()
		}
		quit <- msg
	}()
	for i := 0; i < 40; i++ {
		time.Sleep(time.Duration(rand.Intn(3000)) * time.Microsecond) // a random moment of rank 1's posts
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if !waitStopped(pid) {
			select {
			case msg := <-quit:
				t.Fatalf("stop %d: rank 1 quit: %s", i, msg)
			case <-time.After(time.Second):
				t.Fatalf("stop %d: rank 1 (pid %d) not stopped after 5 s", i, pid)
			}
		}
		done := make(chan error, 1)
		go func() {
			if err := e.qp.Write(e.dMR, 0, peer.data, 0, 4096, true); err != nil {
				done <- err
				return
			}
			done <- e.qp.Flush(5 * time.Second)
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("stop %d: a write to the stopped rank 1: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("stop %d: a write to the stopped rank 1 still not posted and completed after 5 s", i)
		}
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
}

// waitStopped waits (at most 5 s) until process pid is in the stopped state; false if it never is.
func waitStopped(pid int) bool {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		s := string(b)
		if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 && f[0] == "T" {
			return true
		}
	}
	return false
}
