package sysinfo

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestProcessGone(t *testing.T) {
	if ProcessGone(os.Getpid()) {
		t.Fatal("this process reads as gone")
	}
	if ProcessGone(0) || ProcessGone(-1) {
		t.Fatal("pid 0 or -1 reads as gone")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a child: %v", err)
	}
	pid := cmd.Process.Pid
	// not reaped yet: a zombie once it exits, which counts as gone
	for i := 0; i < 2000 && !ProcessGone(pid); i++ {
		Nap(time.Millisecond)
	}
	if !ProcessGone(pid) {
		t.Fatalf("child %d exited but does not read as gone (zombie)", pid)
	}
	_ = cmd.Wait()
	if !ProcessGone(pid) {
		t.Fatalf("child %d reaped but does not read as gone", pid)
	}
}
