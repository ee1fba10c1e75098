package nodeshm

import (
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// A leader killed (or stopped for good) after creating the segment leaves its name to the
// node's other ranks: the one that gives up waiting removes it (the fault suite counted such
// names as litter: a rank SIGKILLed 3 ms into init).
func TestGiveUpRemovesTheName(t *testing.T) {
	const nLocal, maxConns = 2, 4
	for _, tc := range []struct {
		what string
		size int // what the dead leader got to write
		want string
	}{
		{"created, not sized", 0, "was not created by the node's lowest rank in time"},
		{"sized, never ready", headerBytes + nLocal*(regionSize(maxConns)+collRegion(nLocal)), "never became ready"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			name := Name(0x7465737400000000|uint64(os.Getpid()), uint64(time.Now().UnixNano()), 0)
			path := shmDir + name
			if err := os.WriteFile(path, make([]byte, tc.size), 0o600); err != nil {
				t.Skipf("no %s: %v", shmDir, err)
			}
			defer os.Remove(path)
			start := time.Now()
			s, err := Open(name, false, nLocal, maxConns, start.Add(100*time.Millisecond), func() error { return nil })
			if err == nil {
				s.Close()
				t.Fatal("opened a segment no leader made ready")
			}
			if status.CodeOf(err) != status.RemoteError || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want RemoteError %q", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("gave up after %v", d)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("%s left behind (%v)", path, err)
			}
		})
	}
}

// A rank alone on its node maps a segment that never has a name: killed at any moment, it
// leaves none (a rank SIGKILLed between creating its /dev/shm file and unlinking it did).
func TestAloneHasNoName(t *testing.T) {
	name := Name(0x616c6f6e65000000|uint64(os.Getpid()), uint64(time.Now().UnixNano()), 0)
	s, err := Open(name, true, 1, 4, time.Now().Add(time.Second), func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// its mapping is backed by a memfd ("/memfd:NAME (deleted)"), never by a file of /dev/shm
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(maps), "/memfd:"+name) || strings.Contains(string(maps), shmDir+name) {
		t.Fatalf("the segment of a rank alone is not an unnamed memfd:\n%s", grepLines(string(maps), name))
	}
	if _, err := os.Stat(shmDir + name); !os.IsNotExist(err) {
		t.Fatalf("%s exists (%v)", shmDir+name, err)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// throttle asks nothing during its first period (a wait that ends quickly pays no liveness
// check), then passes the check's error on.
func TestThrottleWaitsOnePeriod(t *testing.T) {
	calls := 0
	never := throttle(func() error { calls++; return nil }, time.Hour)
	for i := 0; i < 1000; i++ {
		if err := never(); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 0 {
		t.Fatalf("check ran %d times within its first period", calls)
	}
	gone := status.Errorf(status.RemoteError, "gone")
	check := throttle(func() error { calls++; return gone }, time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for err == nil && time.Now().Before(deadline) {
		err = check()
	}
	if err != gone || calls != 1 {
		t.Fatalf("after the first period: error %v after %d checks, want %v after 1", err, calls, gone)
	}
}

// A full /dev/shm is an error with its text, not a SIGBUS at the first store to a page the
// filesystem cannot back, and leaves no segment behind. Each case runs in a child with a mount
// namespace of its own, where /dev/shm is a private tmpfs of one 4 KiB page: empty (4 KiB free,
// less than the segment) or filled (0 free).
func TestFullShmIsAnError(t *testing.T) {
	if fill := os.Getenv("MSCCLPP_TEST_FULL_SHM"); fill != "" {
		fullShmChild(t, fill == "full")
		return
	}
	for _, fill := range []string{"empty", "full"} {
		t.Run(fill, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestFullShmIsAnError$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "MSCCLPP_TEST_FULL_SHM="+fill)
			cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // Go makes / private in it
			if os.Geteuid() != 0 {
				cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
				cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
				cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
			}
			out, err := cmd.CombinedOutput()
			if err != nil && strings.Contains(err.Error(), "operation not permitted") {
				t.Skipf("no mount namespace here: %v", err)
			}
			if strings.Contains(string(out), "--- SKIP") {
				t.Skipf("child: %s", out)
			}
			if err != nil || !strings.Contains(string(out), "\nPASS\n") {
				t.Fatalf("child with a %s 4 KiB /dev/shm: %v\n%s", fill, err, out)
			}
			t.Logf("child: %s", out)
		})
	}
}

func fullShmChild(t *testing.T, full bool) {
	if err := syscall.Mount("mscclpp-test", "/dev/shm", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=4k,mode=1777"); err != nil {
		t.Skipf("cannot mount a tmpfs on /dev/shm: %v", err)
	}
	if full {
		if err := os.WriteFile("/dev/shm/filler", make([]byte, 4096), 0o600); err != nil {
			t.Fatalf("fill the 4 KiB tmpfs: %v", err)
		}
	}
	name := Name(0x7465737400000000|uint64(os.Getpid()), uint64(time.Now().UnixNano()), 0)
	s, err := joinNoFault(name)
	if err == nil {
		s.Close()
		t.Fatal("made a segment larger than the filesystem holds")
	}
	if status.CodeOf(err) != status.SystemError || !strings.Contains(err.Error(), "no space left on device") ||
		!strings.Contains(err.Error(), shmDir+name) {
		t.Fatalf("error %v, want SystemError naming %s and 'no space left on device'", err, shmDir+name)
	}
	t.Logf("the error: %v", err)
	ents, _ := os.ReadDir("/dev/shm")
	for _, e := range ents {
		if e.Name() != "filler" {
			t.Errorf("/dev/shm/%s left behind", e.Name())
		}
	}
}

// joinNoFault is Join as the node's leader of two local ranks, with a fault on the segment's
// memory (SIGBUS) turned into an error.
func joinNoFault(name string) (s *Segment, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("fault on the segment's memory: %v", r)
		}
	}()
	return Join(name, true, 2, 4, time.Now().Add(time.Second), func() error { return nil })
}
