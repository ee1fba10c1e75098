//go:build mscclpp_testhooks

package impl

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/cuda"
)

// TestDeviceThreadsProxyNotLaunched: a kernel (CUDA mode, P2P, the device methods on CPU threads)
// that flushes on a communicator whose proxies were never launched makes the communicator say so
// once within 1 s, and not again while the trigger waits: one WARN line on stderr with logging
// off, and mscclppGetLastError, naming the connection, its peer and tag and saying to call
// mscclppProxyLaunch. mscclppProxyLaunch then serves the flush. With the proxies launched first,
// a kernel's flush brings no such line.
func TestDeviceThreadsProxyNotLaunched(t *testing.T) {
	if mode := os.Getenv(fakeChildEnv); mode == "not-launched" || mode == "launched" {
		notLaunchedChild(t, mode == "launched")
		return
	}
	lib := buildDevThreadsDriver(t)
	const warn = "no proxy runs (call mscclppProxyLaunch)"
	for _, mode := range []string{"not-launched", "launched"} {
		out := string(runFakeChildWith(t, lib, t.Name(), mode, "MSCCLPP_DEBUG=", "MSCCLPP_DEBUG_FILE="))
		t.Logf("%s child:\n%s", mode, out)
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "MSCCLPP WARN") && strings.Contains(l, warn) {
				lines = append(lines, l)
			}
		}
		want := 1
		if mode == "launched" {
			want = 0
		}
		if len(lines) != want {
			t.Errorf("%s: %d WARN lines say %q, want %d", mode, len(lines), warn, want)
		}
		for _, l := range lines {
			if !strings.Contains(l, "rank 0: connection 0 (rank 1, tag 0") {
				t.Errorf("%s: the line does not name the connection, its peer and tag: %s", mode, l)
			}
		}
	}
}

func notLaunchedChild(t *testing.T, launched bool) {
	const n = 1 << 16
	comms := devThreadsRanksSetUp(t, TransportP2P, n, launched)
	defer destroyAll(comms)
	spec := fmt.Sprintf("conn=%#x size=%d", uintptr(comms[0].host.DevConns.At(0)), n)
	if launched {
		if rc := cuda.TestDriverCall("devFlushOK", spec); rc != 0 {
			t.Errorf("a flush with the proxies launched: rc %d (see the devthreads lines above)", rc)
		}
		if last := lastErrorOf(comms[0]); strings.Contains(last, "mscclppProxyLaunch") {
			t.Errorf("mscclppGetLastError with the proxies launched: %s", last)
		}
		proxyStopAll(t, comms)
		return
	}
	done := make(chan int)
	start := time.Now()
	go func() { done <- cuda.TestDriverCall("devFlushOK", spec) }()
	var last string
	deadline := start.Add(5 * time.Second)
	for ; !strings.Contains(last, "call mscclppProxyLaunch") && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		last = lastErrorOf(comms[0])
	}
	// the proxies are launched whatever was told: the kernel must end before the destroy
	switch took := time.Since(start); {
	case !strings.Contains(last, "call mscclppProxyLaunch"):
		t.Errorf("nothing said within 5 s that no proxy serves the kernel's flush (mscclppGetLastError: %q)", last)
	case took > time.Second:
		t.Errorf("told after %v, want <= 1 s", took)
	case !strings.Contains(last, "connection 0 (rank 1, tag 0"):
		t.Errorf("mscclppGetLastError does not name the connection, its peer and tag: %s", last)
	default:
		t.Logf("told after %v", took.Round(time.Millisecond))
	}
	// a few more looks of the watcher, with the trigger still waiting: it must not tell again
	time.Sleep(3 * launchWatchEvery)
	for r := range comms {
		if err := comms[r].ProxyLaunch(); err != nil {
			t.Fatalf("rank %d: ProxyLaunch: %v", r, err)
		}
	}
	if rc := <-done; rc != 0 {
		t.Errorf("the flush once the proxies were launched: rc %d (see the devthreads lines above)", rc)
	}
	proxyStopAll(t, comms)
}

// lastErrorOf is c's mscclppGetLastError text.
func lastErrorOf(c *Comm) string {
	p := (*byte)(c.LastErrorText())
	var b []byte
	for i := 0; ; i++ {
		ch := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if ch == 0 {
			return string(b)
		}
		b = append(b, ch)
	}
}
