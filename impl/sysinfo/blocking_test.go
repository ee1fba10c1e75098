package sysinfo

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A blocked call returns what the kernel returned once it unblocks, and other goroutines run
// meanwhile even with one P.
func TestBlockingSyscallReadsWhatArrives(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	go func() {
		time.Sleep(10 * time.Millisecond)
		unix.Write(p[1], []byte("hello"))
	}()
	buf := make([]byte, 16)
	n, e := BlockingSyscall6(unix.SYS_READ, uintptr(p[0]), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
	runtime.KeepAlive(buf)
	if e != 0 || string(buf[:n]) != "hello" {
		t.Fatalf("read %q, errno %v; want \"hello\", 0", buf[:n], e)
	}
}

func TestBlockingSyscallErrno(t *testing.T) {
	var b [1]byte
	if _, e := BlockingSyscall6(unix.SYS_READ, ^uintptr(0), uintptr(unsafe.Pointer(&b[0])), 1, 0, 0, 0); e != unix.EBADF {
		t.Fatalf("read of fd -1: errno %v, want EBADF", e)
	}
}

func TestNapSleepsAtLeastD(t *testing.T) {
	for _, d := range []time.Duration{50 * time.Microsecond, 300 * time.Microsecond} {
		start := time.Now()
		Nap(d)
		if el := time.Since(start); el < d {
			t.Errorf("Nap(%v) returned after %v", d, el)
		}
	}
}
