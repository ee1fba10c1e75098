//go:build mscclpp_testhooks

package impl

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// pidNSRoleEnv names the part a process plays in TestRealReusedPidIsPeerGone.
const pidNSRoleEnv = "MSCCLPP_TEST_PIDNS_ROLE"

// pidNSBuf is where rank 0 and the squatter both map their page, so that a write meant for
// rank 0 would land in the squatter.
const pidNSBuf = 0x6f0000000000

// mapPidNSPage maps one page at pidNSBuf, filled with b.
func mapPidNSPage(t *testing.T, b byte) []byte {
	t.Helper()
	const mapFixedNoReplace = 0x100000
	p, _, e := syscall.Syscall6(syscall.SYS_MMAP, pidNSBuf, 4096, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|mapFixedNoReplace, ^uintptr(0), 0)
	if e != 0 || p != pidNSBuf {
		t.Fatalf("mmap at %#x: %v (got %#x)", pidNSBuf, e, p)
	}
	// the mapping is not Go memory: reinterpreting the word is what vet allows for it
	page := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), 4096)
	for i := range page {
		page[i] = b
	}
	return page
}

// TestRealReusedPidIsPeerGone: as TestReusedPidIsPeerGone, with a real reused pid. In a new
// pid namespace rank 0 registers a page, this rank writes it, rank 0 is SIGKILLed and a
// squatter is started with exactly its pid (ns_last_pid) and a page at the same address. The
// registered write fails with RemoteError saying "peer gone", the squatter's page is unchanged,
// and a wait for rank 0's signal ends with RemoteError, not at its timeout.
func TestRealReusedPidIsPeerGone(t *testing.T) {
	switch os.Getenv(pidNSRoleEnv) {
	case "peer":
		pidNSPeer(t)
		return
	case "squatter":
		page := mapPidNSPage(t, 0x5a)
		os.Stdout.WriteString("SQUATTER READY\n")
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Stdout.WriteString("SQUATTER CHANGED " + strconv.Itoa(countChanged(page, bytes.Repeat([]byte{0x5a}, 4096))) + "\n")
		return
	case "survivor":
		pidNSSurvivor(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: a new pid namespace and /proc/sys/kernel/ns_last_pid")
	}
	c := exec.Command("unshare", "-p", "--fork", "--mount-proc", os.Args[0],
		"-test.run=^TestRealReusedPidIsPeerGone$", "-test.count=1", "-test.v")
	c.Env = append(os.Environ(), pidNSRoleEnv+"=survivor")
	out, err := c.CombinedOutput()
	if err != nil && bytes.Contains(out, []byte("unshare failed")) {
		t.Skipf("no pid namespace here: %s", out)
	}
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestRealReusedPidIsPeerGone")) {
		t.Errorf("in a new pid namespace: %v\n%s", err, out)
	}
}

// pidNSPeer is rank 0: it registers its page and waits to be killed.
func pidNSPeer(t *testing.T) {
	c, err := InitRank(2, os.Getenv("MSCCLPP_TEST_ADDRS"), 0)
	if err != nil {
		t.Fatal(err)
	}
	page := mapPidNSPage(t, 0)
	if err := c.Connect(1, 3, unsafe.Pointer(&page[0]), 4096, TransportSHM, nil, true); err != nil {
		t.Fatal(err)
	}
	if err := c.ConnectionSetup(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterBuffer(unsafe.Pointer(&page[0]), 4096); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	ok := byte(1)
	if !bytes.Equal(page, bytes.Repeat([]byte{0xc3}, 4096)) {
		ok = 0
	}
	if err := c.boot.Send(1, doneTag, []byte{ok}); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed
}

// pidNSSurvivor is rank 1, in the new pid namespace.
func pidNSSurvivor(t *testing.T) {
	addr := freeAddr(t)
	t.Setenv("MSCCLPP_BOOTSTRAP_TIMEOUT", "10")
	peer := exec.Command(os.Args[0], "-test.run=^TestRealReusedPidIsPeerGone$", "-test.count=1", "-test.v")
	peer.Env = append(os.Environ(), pidNSRoleEnv+"=peer", "MSCCLPP_TEST_ADDRS="+addr)
	var pout bytes.Buffer
	peer.Stdout, peer.Stderr = &pout, &pout
	hold, err := peer.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := InitRank(2, addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Destroy() }()
	src := bytes.Repeat([]byte{0xc3}, 4096)
	if err := c.Connect(0, 3, unsafe.Pointer(&src[0]), 4096, TransportSHM, nil, true); err != nil {
		t.Fatal(err)
	}
	if err := c.ConnectionSetup(); err != nil {
		t.Fatal(err)
	}
	peers, err := c.RegisterBuffer(unsafe.Pointer(&src[0]), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisteredBufferWrite(peers, unsafe.Pointer(&src[0]), 4096, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.boot.RecvLimit(0, doneTag, 1); err != nil || len(ok) != 1 || ok[0] != 1 {
		t.Fatalf("rank 0 did not receive the write: %v %v\n%s", ok, err, pout.String())
	}
	dead := peer.Process.Pid
	_ = peer.Process.Kill()
	_ = peer.Wait()
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(dead-1)), 0); err != nil {
		t.Fatalf("setting the namespace's last pid: %v", err)
	}
	sq := exec.Command(os.Args[0], "-test.run=^TestRealReusedPidIsPeerGone$", "-test.count=1")
	sq.Env = append(os.Environ(), pidNSRoleEnv+"=squatter")
	sqIn, _ := sq.StdinPipe()
	sqOut, _ := sq.StdoutPipe()
	if err := sq.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sq.Process.Kill(); _ = sq.Wait() }()
	if sq.Process.Pid != dead {
		t.Fatalf("the squatter has pid %d, not rank 0's %d", sq.Process.Pid, dead)
	}
	rd := bufio.NewReader(sqOut)
	if line, err := rd.ReadString('\n'); err != nil || line != "SQUATTER READY\n" {
		t.Fatalf("the squatter: %q %v", line, err)
	}
	err = c.RegisteredBufferWrite(peers, unsafe.Pointer(&src[0]), 4096, 0, 0, 0)
	wantRefused(t, err, "pid", "peer gone")
	t0 := time.Now()
	if rc := engine.ConnWaitNext(c.host.DevConns.At(0), 5000); rc != status.RemoteError {
		t.Errorf("the wait for rank 0's signal after it was killed returned %v after %v; want RemoteError", rc, time.Since(t0))
	}
	sqIn.Close()
	rest, _ := io.ReadAll(rd)
	if !strings.Contains(string(rest), "SQUATTER CHANGED 0\n") {
		t.Errorf("the squatter with rank 0's pid: %q", rest)
	}
}
