//go:build mscclpp_testhooks

package impl

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/bootstrap"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// The proof of rank against a peer that holds the key and lies: it lends its proof to a forked
// child, replays a proof of this process's from another communicator, or has its pid taken by
// another process after it exited. The peer is the test binary again, in a child process.
const proofPeerEnv = "MSCCLPP_TEST_PROOF_PEER"

// startProofPeer runs test name's peer side in a child process with env; the function it
// returns waits for it and fails t unless the child's test passed.
func startProofPeer(t *testing.T, name string, env ...string) func() {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	child.Env = append(append(os.Environ(), env...), proofPeerEnv+"=1")
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := child.Wait(); err != nil || !strings.Contains(out.String(), "PEER PASS "+name) {
			t.Errorf("the peer: %v\n%s", err, out.String())
		}
	}
}

// peerPassed tells startProofPeer that the peer's side of test name worked.
func peerPassed(t *testing.T, name string) {
	if !t.Failed() {
		os.Stdout.WriteString("PEER PASS " + name + "\n")
	}
}

// forkPauser forks this process (raw: the child runs no Go code, it pauses until killed, and
// dies with this thread) and returns the child's pid.
func forkPauser() (int, error) {
	pid, _, e := syscall.RawSyscall(syscall.SYS_FORK, 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	if pid == 0 {
		syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0)
		for {
			syscall.RawSyscall(syscall.SYS_PAUSE, 0, 0, 0)
		}
	}
	return int(pid), nil
}

func killPauser(pid int) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, 0, nil)
}

// wantRefused fails t unless err is a RemoteError naming rank and saying want.
func wantRefused(t *testing.T, err error, rank, want string) {
	t.Helper()
	if status.CodeOf(err) != status.RemoteError || !strings.Contains(err.Error(), rank) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v; want RemoteError naming %s and saying %q", err, rank, want)
	}
}

// lendWays: how rank 0 lends its proof of rank in TestProofNotLent.
var lendWays = []string{"forked-child", "sent-to"}

// TestProofNotLent: rank 0 lends its proof of rank to another process and claims that process
// as its own: a child it forks after it made the proof (which holds all rank 0 held), or a
// process it hands the proof's descriptor to (as SCM_RIGHTS would; here when it starts it).
// Setup fails with RemoteError naming rank 0; before, it was accepted, and the put that
// followed landed in the forked child and returned 0.
func TestProofNotLent(t *testing.T) {
	const name = "TestProofNotLent"
	addrs := strings.Split(os.Getenv("MSCCLPP_TEST_ADDRS"), ",")
	if os.Getenv(proofPeerEnv) != "" {
		for i, way := range lendWays {
			proofLender(t, addrs[i], way)
		}
		peerPassed(t, name)
		return
	}
	addrs = []string{freeAddr(t), freeAddr(t)}
	t.Setenv("MSCCLPP_BOOTSTRAP_TIMEOUT", "10")
	setupPointToPoint.Store(true)
	defer setupPointToPoint.Store(false)
	wait := startProofPeer(t, name, "MSCCLPP_TEST_ADDRS="+strings.Join(addrs, ","))
	const size = 4096
	buf := make([]byte, size)
	for i, way := range lendWays {
		c, err := InitRank(2, addrs[i], 1)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Connect(0, 3, unsafe.Pointer(&buf[0]), size, TransportSHM, nil, true)
		if err == nil {
			err = c.ConnectionSetup()
		}
		if err == nil {
			err = op(c.host.DevConns.At(0), opData|opFlag, 0, 0, size) // into the other process, where accepted
		}
		t.Logf("%s: %v", way, err)
		wantRefused(t, err, "rank 0", "which holds no proof of rank 0")
		if serr := c.boot.Send(0, doneTag, []byte{1}); serr != nil {
			t.Error(serr)
		}
		_ = c.Destroy()
	}
	wait()
}

// proofFiles returns duplicates of this process's descriptors of a proof of rank: a memfd
// named for one, or a socket listening on one (/proc/net/unix).
func proofFiles(t *testing.T) []*os.File {
	names, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	proofSockets := map[string]bool{}
	for _, line := range strings.Split(string(names), "\n") {
		if f := strings.Fields(line); len(f) == 8 && strings.HasPrefix(f[7], "@mscclpp-proof.") {
			proofSockets["socket:["+f[6]+"]"] = true
		}
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []*os.File
	for _, e := range ents {
		fd, _ := strconv.Atoi(e.Name())
		link, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !(strings.HasPrefix(link, "/memfd:mscclpp-proof.") || proofSockets[link]) {
			continue
		}
		dup, err := syscall.Dup(fd)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, os.NewFile(uintptr(dup), link))
	}
	if len(out) == 0 {
		t.Fatal("no descriptor of a proof of rank in this process")
	}
	return out
}

// lendProof makes another process hold this rank's proof, by way, and returns its pid, the
// number the proof has there, and how to end it.
func lendProof(t *testing.T, way string) (int, uint64, func()) {
	if way == "forked-child" {
		child, err := forkPauser()
		if err != nil {
			t.Fatal(err)
		}
		return child, 0, func() { killPauser(child) }
	}
	files := proofFiles(t)
	holder := exec.Command("sleep", "60")
	holder.ExtraFiles = files // descriptors 3 on
	err := holder.Start()
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return holder.Process.Pid, 3, func() { _ = holder.Process.Kill(); _ = holder.Wait() }
}

// proofLender is rank 0 of one round of TestProofNotLent.
func proofLender(t *testing.T, addr, way string) {
	setupPointToPoint.Store(true)
	c, err := InitRank(2, addr, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	buf := make([]byte, 4096)
	if err := c.Connect(1, 3, unsafe.Pointer(&buf[0]), uint64(len(buf)), TransportSHM, nil, true); err != nil {
		t.Fatal(err)
	}
	m, err := c.describe(c.conns[0], []int{0, 1}) // this rank's proof exists from here on
	if err != nil {
		t.Fatal(err)
	}
	pid, fd, end := lendProof(t, way)
	defer end()
	m.pid = pid
	for _, w := range []int{shmWFd, shmWIno, shmWRegSize, shmWOffset} {
		setWord(&m, 1, w, 0) // no eager ring: a put is a process_vm_writev into the claimed pid
	}
	if fd != 0 {
		for h := range m.blobs {
			setWord(&m, h, shmWProof, fd) // where the holder has it (the old proof's word)
		}
	}
	sendForged(t, c, 1, m)
}

// sendForged is the lying rank's side of the victim's setup with rank victim over tag 3: it
// sends m as its setup message, reaches the setup's closing barrier and waits until the
// victim's round is over.
func sendForged(t *testing.T, c *Comm, victim int, m setupMsg) {
	if _, err := c.boot.RecvLimit(victim, 3, maxSetupMsg); err != nil { // the victim sends first
		t.Fatal(err)
	}
	if err := c.boot.Send(victim, 3, m.encode()); err != nil {
		t.Fatal(err)
	}
	_ = c.closeSetup(&setupFailures{})
	if _, err := c.boot.RecvLimit(victim, doneTag, 1); err != nil {
		t.Error(err)
	}
}

// TestProofNotReplayed: rank 1 of communicator A becomes the root of a communicator B at the
// same address, hands out A's nonce (so B's node segment has A's name), and this process joins
// B as rank 1 and sets up there. Rank 1 of A then claims this process, this rank's proof of rank
// 1 in B and a canary of this process's as its buffer. Setup fails with RemoteError naming rank 1
// and no byte of the canary changes; before, the put wrote into it and returned 0.
func TestProofNotReplayed(t *testing.T) {
	const name = "TestProofNotReplayed"
	if os.Getenv(proofPeerEnv) != "" {
		proofReplayer(t)
		peerPassed(t, name)
		return
	}
	const page = 4096
	mem := make([]byte, 3*page) // canary, this rank's buffer in A, canary
	before := bytes.Repeat([]byte{0x5a}, 3*page)
	copy(mem, before)
	addr := freeAddr(t)
	t.Setenv("MSCCLPP_BOOTSTRAP_TIMEOUT", "10")
	setupPointToPoint.Store(true)
	defer setupPointToPoint.Store(false)
	wait := startProofPeer(t, name, "MSCCLPP_TEST_ADDRS="+addr,
		"MSCCLPP_TEST_CANARY="+strconv.FormatUint(uint64(uintptr(unsafe.Pointer(&mem[0]))), 10))
	a, err := InitRank(2, addr, 0) // this process runs A's root
	if err != nil {
		t.Fatal(err)
	}
	b, err := InitRank(2, addr, 1) // the replayer runs B's
	if err != nil {
		t.Fatal(err)
	}
	bbuf := make([]byte, page)
	if err := b.Connect(0, 3, unsafe.Pointer(&bbuf[0]), page, TransportSHM, nil, true); err != nil {
		t.Fatal(err)
	}
	if err := b.ConnectionSetup(); err != nil { // this rank proves rank 1 of B from here on
		t.Fatal(err)
	}
	err = a.Connect(1, 3, unsafe.Pointer(&mem[page]), page, TransportSHM, nil, true)
	if err == nil {
		err = a.ConnectionSetup()
	}
	if err == nil {
		err = op(a.host.DevConns.At(0), opData|opFlag, 0, 0, page) // into the canary, where accepted
	}
	wantRefused(t, err, "rank 1", "this process, which holds no proof of rank 1")
	if changed := countChanged(mem, before); changed != 0 {
		t.Errorf("%d bytes of this process's canary and buffer changed", changed)
	}
	if serr := a.boot.Send(1, doneTag, []byte{1}); serr != nil {
		t.Error(serr)
	}
	_ = a.Destroy()
	_ = b.Destroy()
	wait()
}

func countChanged(mem, before []byte) int {
	n := 0
	for i := range mem {
		if mem[i] != before[i] {
			n++
		}
	}
	return n
}

// proofReplayer is rank 1 of A and rank 0 (the root) of B in TestProofNotReplayed.
func proofReplayer(t *testing.T) {
	setupPointToPoint.Store(true)
	addr := os.Getenv("MSCCLPP_TEST_ADDRS")
	canary, _ := strconv.ParseUint(os.Getenv("MSCCLPP_TEST_CANARY"), 10, 64)
	a, err := InitRank(2, addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Destroy()
	bootstrap.SetRootNonceForTest(a.boot.Nonce())
	b, err := InitRank(2, addr, 0)
	bootstrap.SetRootNonceForTest(0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy()
	// B: this rank's side by hand, to read the victim's setup message
	buf := make([]byte, 4096)
	if err := b.Connect(1, 3, unsafe.Pointer(&buf[0]), uint64(len(buf)), TransportSHM, nil, true); err != nil {
		t.Fatal(err)
	}
	mb, err := b.describe(b.conns[0], []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.boot.RecvLimit(1, 3, maxSetupMsg)
	if err != nil {
		t.Fatal(err)
	}
	victim, err := decodeSetup(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.boot.Send(1, 3, mb.encode()); err != nil {
		t.Fatal(err)
	}
	_ = b.closeSetup(&setupFailures{})
	// A: a setup message made by hand (this rank never proves its own rank in A), naming the
	// victim's process, its proof word of B and its canary
	proof := binary.LittleEndian.Uint64(victim.blobs[0][8*shmWProof:])
	if err := a.Connect(0, 3, unsafe.Pointer(&buf[0]), uint64(len(buf)), TransportSHM, nil, true); err != nil {
		t.Fatal(err)
	}
	blob := func(words ...uint64) []byte {
		out := make([]byte, 64)
		for i, w := range words {
			binary.LittleEndian.PutUint64(out[8*i:], w)
		}
		return out
	}
	sig := blob(1, 0, 0, 0, 0, 0, uint64(a.host.LocalIdx)<<32|uint64(a.conns[0].idx), proof)
	data := blob(3, canary, 3*4096, 0, 0, 0, 0, proof)
	sendForged(t, a, 0, setupMsg{transport: a.conns[0].entry.ID, pid: os.Getppid(), blobs: [][]byte{sig, data}})
}

// TestReusedPidIsPeerGone: rank 0 registers a malloc buffer, this rank writes it (the bytes
// arrive), then rank 0 exits and its pid is given to another process with memory at the
// registered address: simulated, as a real reuse takes the kernel a full turn of its pids, by
// pointing the registration and the connection at this process and a canary in it. The
// registered write fails with RemoteError saying "peer gone" and writes nothing, and a wait
// for rank 0's signal ends with RemoteError, not at its timeout; before, the write returned 0
// into the canary and the wait timed out.
func TestReusedPidIsPeerGone(t *testing.T) {
	const name = "TestReusedPidIsPeerGone"
	if os.Getenv(proofPeerEnv) != "" {
		exitingPeer(t)
		return
	}
	const page = 4096
	addr := freeAddr(t)
	t.Setenv("MSCCLPP_BOOTSTRAP_TIMEOUT", "10")
	wait := startProofPeer(t, name, "MSCCLPP_TEST_ADDRS="+addr)
	c, err := InitRank(2, addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Destroy() }()
	src := bytes.Repeat([]byte{0xc3}, page)
	if err := c.Connect(0, 3, unsafe.Pointer(&src[0]), page, TransportSHM, nil, true); err != nil {
		t.Fatal(err)
	}
	if err := c.ConnectionSetup(); err != nil {
		t.Fatal(err)
	}
	peers, err := c.RegisterBuffer(unsafe.Pointer(&src[0]), page)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisteredBufferWrite(peers, unsafe.Pointer(&src[0]), page, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err != nil { // rank 0 checks the bytes, says so, and exits
		t.Fatal(err)
	}
	if ok, err := c.boot.RecvLimit(0, doneTag, 1); err != nil || len(ok) != 1 || ok[0] != 1 {
		t.Fatalf("rank 0 did not receive the write: %v %v", ok, err)
	}
	wait()
	canary := bytes.Repeat([]byte{0x5a}, page)
	before := append([]byte(nil), canary...)
	engine.RetargetForTest(peers[0].Record, os.Getpid(), uint64(uintptr(unsafe.Pointer(&canary[0]))))
	err = c.RegisteredBufferWrite(peers, unsafe.Pointer(&src[0]), page, 0, 0, 0)
	wantRefused(t, err, "pid", "peer gone")
	if changed := countChanged(canary, before); changed != 0 {
		t.Errorf("the write after rank 0 exited changed %d bytes of the process that has its pid", changed)
	}
	c.conns[0].eng.RetargetPeerForTest(os.Getpid())
	t0 := time.Now()
	if rc := engine.ConnWaitNext(c.host.DevConns.At(0), 5000); rc != status.RemoteError {
		t.Errorf("the wait for rank 0's signal after it exited returned %v after %v; want RemoteError", rc, time.Since(t0))
	}
}

// exitingPeer is rank 0 of TestReusedPidIsPeerGone: it checks the write, says so, and exits
// without destroying anything (as a killed process would).
func exitingPeer(t *testing.T) {
	c, err := InitRank(2, os.Getenv("MSCCLPP_TEST_ADDRS"), 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if err := c.Connect(1, 3, unsafe.Pointer(&buf[0]), uint64(len(buf)), TransportSHM, nil, true); err != nil {
		t.Fatal(err)
	}
	if err := c.ConnectionSetup(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterBuffer(unsafe.Pointer(&buf[0]), uint64(len(buf))); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	ok := byte(1)
	if !bytes.Equal(buf, bytes.Repeat([]byte{0xc3}, len(buf))) {
		ok = 0
	}
	if err := c.boot.Send(1, doneTag, []byte{ok}); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("PEER PASS TestReusedPidIsPeerGone\n")
	syscall.Exit(0)
}
