package ib

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

func atomicLoad64(p *uint64) uint64 { return atomic.LoadUint64(p) }

func codeOf(err error) status.Code {
	var e *status.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return -1
}

// TestLayoutAgainstVerbsH compiles testdata/layout_check.c: _Static_asserts of
// ibvapi.h against the real <infiniband/verbs.h>.
func TestLayoutAgainstVerbsH(t *testing.T) {
	hdr := "/usr/include/infiniband/verbs.h"
	if _, err := os.Stat(hdr); err != nil {
		t.Skipf("libibverbs-dev not installed (%s missing): layout of ibvapi.h not checked against verbs.h", hdr)
	}
	out, err := exec.Command("gcc", "-fsyntax-only", "-Wall", "-Werror",
		filepath.Join("testdata", "layout_check.c")).CombinedOutput() // go test runs in the package's directory
	if err != nil {
		t.Fatalf("ibvapi.h does not match verbs.h: %v\n%s", err, out)
	}
}

// TestRealLibibverbs: the distribution's libibverbs on a host without the
// device asked for gives a clear error, never a crash.
func TestRealLibibverbs(t *testing.T) {
	lib, err := LoadPath(DefaultLibrary)
	if err != nil {
		if strings.Contains(err.Error(), "cannot open shared object") || strings.Contains(err.Error(), "No such file") {
			t.Skipf("libibverbs1 not installed: %v", err)
		}
		t.Fatal(err)
	}
	names, err := lib.DeviceNames()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("real libibverbs sees devices %v", names)
	for _, dev := range []string{"mlx5_0", "no_such_device_9"} {
		if dev == "mlx5_0" && len(names) > 0 {
			continue // a real RDMA host: tests/ib/run.sh covers it
		}
		ctx, err := Open(lib, dev, Options{GIDIndex: -1})
		if err == nil {
			ctx.Close()
			t.Fatalf("Open(%q) succeeded", dev)
		}
		msg := err.Error()
		if !strings.Contains(msg, `"`+dev+`" not found`) || codeOf(err) != status.InvalidArgument {
			t.Errorf("Open(%q): %v (code %v)", dev, err, codeOf(err))
		}
		if len(names) == 0 && !strings.Contains(msg, "no RDMA devices") {
			t.Errorf("Open(%q) without devices: %q does not say so", dev, msg)
		}
		t.Logf("Open(%q): %v", dev, err)
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := LoadPath("/nonexistent/libibverbs.so.1")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/libibverbs.so.1") {
		t.Fatalf("missing library: %v", err)
	}
	// a library without the verbs: the error names the first symbol missing
	_, err = LoadPath("libc.so.6")
	if err == nil || !strings.Contains(err.Error(), "ibv_get_device_list@IBVERBS_1.1 not found") {
		t.Fatalf("library without verbs: %v", err)
	}
	if _, err := ParseGIDIndex("x"); err == nil || !strings.Contains(err.Error(), EnvGIDIndex) {
		t.Fatalf("bad %s: %v", EnvGIDIndex, err)
	}
}

type fakeDiscovery struct{ netdev map[string]string }

func (f fakeDiscovery) RdmaDevices() []string { return []string{"double_0"} }
func (f fakeDiscovery) ForNetdev(n string) (string, error) {
	if d, ok := f.netdev[n]; ok {
		return d, nil
	}
	return "", fmt.Errorf("no netdev %s", n)
}
func (f fakeDiscovery) ForPCI(a string) []string {
	if a == "0000:3b:00.0" {
		return []string{"double_0"}
	}
	return nil
}

func TestDoubleDevices(t *testing.T) {
	lib := withDouble(t)
	names, err := lib.DeviceNames()
	if err != nil || len(names) != 1 || names[0] != "double_0" {
		t.Fatalf("DeviceNames: %v %v", names, err)
	}
	d := fakeDiscovery{map[string]string{"ib0": "double_0", "eth9": "mlx5_7"}}
	for in, want := range map[string]string{"double_0": "double_0", "ib0": "double_0", "0000:3b:00.0": "double_0"} {
		got, err := ResolveDevice(lib, d, in)
		if err != nil || got != want {
			t.Errorf("ResolveDevice(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ResolveDevice(lib, d, "eth9"); err == nil || !strings.Contains(err.Error(), `"mlx5_7"`) {
		t.Errorf("eth9: %v", err)
	}
	if _, err := ResolveDevice(lib, d, "mlx5_0"); err == nil || !strings.Contains(err.Error(), "(devices: double_0)") {
		t.Errorf("mlx5_0: %v", err)
	}
	if _, err := ResolveDevice(lib, d, ""); err == nil {
		t.Error("empty ibDev accepted")
	}

	ctx, err := Open(lib, "double_0", Options{Discovery: d, GIDIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Port() != 1 || ctx.RoCE() || ctx.Name() != "double_0" {
		t.Errorf("port %d roce %v name %s", ctx.Port(), ctx.RoCE(), ctx.Name())
	}
	ctx.Close()
	ctx.Close()

	// MSCCLPP_IB_HCA="^double_0:1": port 1 only is excluded; the other ACTIVE port is taken
	t.Setenv("MSCCLPP_IBV_DOUBLE_PORTS", "2")
	if ctx, err := Open(lib, "double_0", Options{Discovery: d, GIDIndex: -1, SkipPorts: 1 << 1}); err != nil || ctx.Port() != 2 {
		t.Errorf("port 1 excluded on a two-port device: %v", err)
		if err == nil {
			t.Errorf("port %d in use, want 2", ctx.Port())
		}
	} else {
		ctx.Close()
	}
	t.Setenv("MSCCLPP_IBV_DOUBLE_PORTS", "1")
	if _, err := Open(lib, "double_0", Options{Discovery: d, GIDIndex: -1, SkipPorts: 1 << 1}); err == nil ||
		!strings.Contains(err.Error(), "no ACTIVE port (port 1: excluded)") {
		t.Errorf("the only port excluded: %v", err)
	}

	t.Setenv("MSCCLPP_IBV_DOUBLE_PORT_DOWN", "1")
	if _, err := Open(lib, "double_0", Options{Discovery: d, GIDIndex: -1}); err == nil ||
		!strings.Contains(err.Error(), "no ACTIVE port (port 1: DOWN)") {
		t.Errorf("port down: %v", err)
	}
	t.Setenv("MSCCLPP_IBV_DOUBLE_PORT_DOWN", "0")
	if _, err := Open(lib, "double_0", Options{Discovery: d, GIDIndex: 9}); err == nil ||
		!strings.Contains(err.Error(), "GID index 9 out of range") {
		t.Errorf("GID index 9: %v", err)
	}
	t.Setenv("MSCCLPP_IBV_DOUBLE_LINK", "eth")
	if _, err := Open(lib, "double_0", Options{Discovery: d, GIDIndex: 1}); err == nil ||
		!strings.Contains(err.Error(), "RoCE and GID index 1 is empty") {
		t.Errorf("RoCE, empty GID: %v", err)
	}
	ctx, err = Open(lib, "double_0", Options{Discovery: d, GIDIndex: 0})
	if err != nil || !ctx.RoCE() {
		t.Fatalf("RoCE: %v", err)
	}
	ctx.Close()
}

// loopback is two connected QPs in one process, each with a 64 KiB MR.
type loopback struct {
	ctx        *Context
	cq         *CQ
	a, b       *QP
	bufA, bufB *buffer
	mrA, mrB   *MR
}

func newLoopback(t *testing.T, lib *Lib, maxSendWr int) *loopback {
	t.Helper()
	ctx, err := Open(lib, "double_0", Options{GIDIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	l := &loopback{ctx: ctx}
	if l.cq, err = ctx.NewCQ(2 * maxSendWr); err != nil {
		t.Fatal(err)
	}
	if l.a, err = ctx.NewQP(l.cq, maxSendWr, "rank 1"); err != nil {
		t.Fatal(err)
	}
	if l.b, err = ctx.NewQP(l.cq, maxSendWr, "rank 0"); err != nil {
		t.Fatal(err)
	}
	l.bufA, l.bufB = newBuffer(t, 1<<16), newBuffer(t, 1<<16)
	if l.mrA, err = ctx.RegisterMR(l.bufA.addr(), 1<<16); err != nil {
		t.Fatal(err)
	}
	if l.mrB, err = ctx.RegisterMR(l.bufB.addr(), 1<<16); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, e := range []error{l.mrA.Close(), l.mrB.Close(), l.a.Close(), l.b.Close(), l.cq.Close()} {
			if e != nil {
				t.Error(e)
			}
		}
		ctx.Close()
		l.bufA.free()
		l.bufB.free()
	})
	return l
}

func (l *loopback) connect(t *testing.T) {
	t.Helper()
	ia, ib := l.a.Info(), l.b.Info()
	if err := l.a.Connect(ib); err != nil {
		t.Fatal(err)
	}
	if err := l.b.Connect(ia); err != nil {
		t.Fatal(err)
	}
}

func TestDoubleStateMachine(t *testing.T) {
	lib := withDouble(t)
	l := newLoopback(t, lib, 8)
	// posting in RESET fails, and says in which state
	err := l.a.Write(l.mrA, 0, l.mrB.Info(), 0, 8, true)
	if err == nil || !strings.Contains(err.Error(), "state 0") || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("post in RESET: %v", err)
	}
	if l.a.Err() != nil {
		t.Fatalf("a refused post is not sticky: %v", l.a.Err())
	}
	// RTR straight from RESET and RTS from INIT are refused
	if err := l.a.RTR(l.b.Info()); err == nil {
		t.Fatal("RESET -> RTR accepted")
	}
	if err := l.a.Init(); err != nil {
		t.Fatal(err)
	}
	if err := l.a.RTS(); err == nil {
		t.Fatal("INIT -> RTS accepted")
	}
	if err := l.a.Write(l.mrA, 0, l.mrB.Info(), 0, 8, true); err == nil {
		t.Fatal("post in INIT accepted")
	}
	bad := l.b.Info()
	bad.LID = 77
	if err := l.a.RTR(bad); err == nil || !strings.Contains(err.Error(), "lid 77") {
		t.Fatalf("RTR to an unknown LID: %v", err)
	}
	if err := l.a.RTR(l.b.Info()); err != nil {
		t.Fatal(err)
	}
	if err := l.a.Write(l.mrA, 0, l.mrB.Info(), 0, 8, true); err == nil {
		t.Fatal("post in RTR accepted")
	}
	if err := l.a.RTS(); err != nil {
		t.Fatal(err)
	}
	// the peer QP is still in RESET: the write is not answered
	if err := l.a.Write(l.mrA, 0, l.mrB.Info(), 0, 8, true); err != nil {
		t.Fatal(err)
	}
	err = l.a.Flush(5 * time.Second)
	if err == nil || codeOf(err) != status.RemoteError || !strings.Contains(err.Error(), "rank 1") ||
		!strings.Contains(err.Error(), "retry counter exceeded") {
		t.Fatalf("write to an unconnected peer: %v", err)
	}
}

func TestDoubleLoopbackWritesAndFlush(t *testing.T) {
	lib := withDouble(t)
	const maxWR = 4
	l := newLoopback(t, lib, maxWR)
	l.connect(t)
	for i := range l.bufA.b {
		l.bufA.b[i] = byte(i*7 + 1)
	}
	// 100 unsignaled writes through a send queue of 4: the QP must signal on its own
	for i := 0; i < 100; i++ {
		if err := l.a.Write(l.mrA, uint64(i*64), l.mrB.Info(), uint64(4096+i*64), 64, false); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := l.a.WriteSignal(42, l.mrB.Info(), 8, false); err != nil {
		t.Fatal(err)
	}
	if err := l.a.Flush(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if l.a.Completed() != l.a.Posted() || l.a.Posted() < 101 {
		t.Fatalf("after flush: completed %d, posted %d", l.a.Completed(), l.a.Posted())
	}
	for i := 0; i < 100*64; i++ {
		if l.bufB.b[4096+i] != l.bufA.b[i] {
			t.Fatalf("byte %d: %d, want %d", i, l.bufB.b[4096+i], l.bufA.b[i])
		}
	}
	if v := l.bufB.load64(8); v != 42 {
		t.Fatalf("signal slot: %d", v)
	}
	// flush with nothing outstanding; zero-byte write
	if err := l.a.Flush(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.a.Write(l.mrA, 0, l.mrB.Info(), 0, 0, true); err != nil {
		t.Fatal(err)
	}
	if err := l.a.Flush(time.Second); err != nil {
		t.Fatal(err)
	}
	// a local range outside the MR is refused before posting
	if err := l.a.Write(l.mrA, 1<<16-4, l.mrB.Info(), 0, 8, true); err == nil {
		t.Fatal("local out of bounds accepted")
	}
	// a CQ has room for the WRs of the QPs it serves only
	if _, err := l.ctx.NewQP(l.cq, 1, "rank 9"); err == nil || !strings.Contains(err.Error(), "room for 0") {
		t.Fatalf("QP beyond the CQ: %v", err)
	}
}

func TestDoubleRemoteErrors(t *testing.T) {
	lib := withDouble(t)
	for _, tc := range []struct {
		name string
		mut  func(*MRInfo) uint64
	}{
		{"out of bounds", func(*MRInfo) uint64 { return 1<<16 - 4 }},
		{"bad rkey", func(m *MRInfo) uint64 { m.Rkey += 1000; return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoopback(t, lib, 8)
			l.connect(t)
			remote := l.mrB.Info()
			off := tc.mut(&remote)
			if err := l.a.Write(l.mrA, 0, remote, off, 8, false); err != nil {
				t.Fatal(err) // posted; the error comes back as a completion
			}
			err := l.a.Flush(5 * time.Second)
			if err == nil || codeOf(err) != status.RemoteError || !strings.Contains(err.Error(), "RDMA to rank 1 failed: remote access error") {
				t.Fatalf("flush: %v", err)
			}
			if l.a.Err() == nil {
				t.Fatal("QP not failed")
			}
			// the QP is in ERR: everything after fails, with the first error
			if err := l.a.Write(l.mrA, 0, l.mrB.Info(), 0, 8, true); err == nil || !strings.Contains(err.Error(), "remote access error") {
				t.Fatalf("write after the error: %v", err)
			}
			if l.bufB.load64(0) != 0 {
				t.Fatal("a refused write landed")
			}
		})
	}
}

// The two-process test: this process is rank 0, a re-executed test binary rank 1.

const childEnv = "MSCCLPP_IB_TEST_CHILD"

type peerInfo struct {
	qp         QPInfo
	data, flag MRInfo
}

func (p peerInfo) line() string {
	return hex.EncodeToString(p.qp.Marshal()) + " " + hex.EncodeToString(p.data.Marshal()) + " " +
		hex.EncodeToString(p.flag.Marshal())
}

func parsePeer(s string) (peerInfo, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return peerInfo{}, fmt.Errorf("bad peer line %q", s)
	}
	var p peerInfo
	var bs [3][]byte
	for i := range f {
		b, err := hex.DecodeString(f[i])
		if err != nil {
			return p, err
		}
		bs[i] = b
	}
	var err error
	if p.qp, err = UnmarshalQPInfo(bs[0]); err != nil {
		return p, err
	}
	if p.data, err = UnmarshalMRInfo(bs[1]); err != nil {
		return p, err
	}
	p.flag, err = UnmarshalMRInfo(bs[2])
	return p, err
}

// endpoint is one rank's side: a QP, a data MR and a 16-byte signal slot MR.
type endpoint struct {
	ctx        *Context
	cq         *CQ
	qp         *QP
	data, flag *buffer
	dMR, fMR   *MR
}

func newEndpoint(lib *Lib, dev, peer string, size int) (*endpoint, error) {
	e := &endpoint{}
	var err error
	if e.ctx, err = Open(lib, dev, Options{GIDIndex: -1}); err != nil {
		return nil, err
	}
	if e.cq, err = e.ctx.NewCQ(64); err != nil {
		return nil, err
	}
	if e.qp, err = e.ctx.NewQP(e.cq, 64, peer); err != nil {
		return nil, err
	}
	e.data, e.flag = newBuffer(nopTB{}, size), newBuffer(nopTB{}, 4096)
	if e.dMR, err = e.ctx.RegisterMR(e.data.addr(), uint64(size)); err != nil {
		return nil, err
	}
	if e.fMR, err = e.ctx.RegisterMR(e.flag.addr(), 16); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *endpoint) info() peerInfo { return peerInfo{e.qp.Info(), e.dMR.Info(), e.fMR.Info()} }

// waitFlag waits until the signal slot's proxy word reaches v.
func (e *endpoint) waitFlag(v uint64, d time.Duration) error {
	end := time.Now().Add(d)
	for e.flag.load64(8) < v {
		if time.Now().After(end) {
			return fmt.Errorf("signal slot %d, want %d after %v", e.flag.load64(8), v, d)
		}
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// nopTB lets newBuffer run in the child, where there is no testing.T.
type nopTB struct{ testing.TB }

func (nopTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

const childSize = 1 << 20

// childConnect is a re-executed rank 1's side of the handshake over stdin and stdout: an
// endpoint on dev, its info out, rank 0's in, connected, "CONNECTED" out. It returns the
// endpoint, rank 0's info and stdin for what follows.
func childConnect(dev string) (*endpoint, peerInfo, *bufio.Scanner, error) {
	lib, err := Load(os.Getenv(EnvLibrary)) // MSCCLPP_IBV_SO names the double
	if err != nil {
		return nil, peerInfo{}, nil, err
	}
	e, err := newEndpoint(lib, dev, "rank 0", childSize)
	if err != nil {
		return nil, peerInfo{}, nil, err
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 4096), 4096)
	fmt.Println(e.info().line())
	if !in.Scan() {
		return nil, peerInfo{}, nil, fmt.Errorf("no peer info")
	}
	peer, err := parsePeer(in.Text())
	if err != nil {
		return nil, peerInfo{}, nil, err
	}
	if err := e.qp.Connect(peer.qp); err != nil {
		return nil, peerInfo{}, nil, err
	}
	fmt.Println("CONNECTED")
	return e, peer, in, nil
}

// childMain is rank 1: connect, wait for rank 0's writes, check them, write back.
func childMain() int {
	fail := func(err error) int { fmt.Printf("ERR %v\n", err); return 1 }
	e, peer, in, err := childConnect(os.Getenv(childEnv))
	if err != nil {
		return fail(err)
	}
	// rank 0 writes 3 blocks at offsets, then signals 3
	if err := e.waitFlag(3, 20*time.Second); err != nil {
		return fail(err)
	}
	for blk := 0; blk < 3; blk++ {
		for i := 0; i < 4096; i++ {
			off := blk*65536 + 100 + i
			if e.data.b[off] != byte(blk+1+i) {
				return fail(fmt.Errorf("block %d byte %d: %d", blk, i, e.data.b[off]))
			}
		}
	}
	// write back: the block at 100 goes to rank 0's buffer at 7, then signal 1
	if err := e.qp.Write(e.dMR, 100, peer.data, 7, 4096, false); err != nil {
		return fail(err)
	}
	if err := e.qp.WriteSignal(1, peer.flag, 8, true); err != nil {
		return fail(err)
	}
	if err := e.qp.Flush(10 * time.Second); err != nil {
		return fail(err)
	}
	fmt.Println("OK")
	// stay until rank 0 is done (its error tests write into our memory)
	in.Scan()
	return 0
}

func TestDoubleTwoProcesses(t *testing.T) {
	lib := withDouble(t)
	t.Setenv(EnvLibrary, doubleLib)
	twoProcesses(t, lib, "double_0")
}

// TestRealHardware runs the two-process test over a real device named by
// MSCCLPP_IB_TEST_DEVICE (tests/ib/run.sh sets it).
func TestRealHardware(t *testing.T) {
	dev := os.Getenv("MSCCLPP_IB_TEST_DEVICE")
	if dev == "" {
		t.Skip("MSCCLPP_IB_TEST_DEVICE not set: no real RDMA device test (tests/ib/run.sh)")
	}
	lib, err := Load(os.Getenv(EnvLibrary))
	if err != nil {
		t.Fatal(err)
	}
	twoProcesses(t, lib, dev)
}

// twoProcesses: this process is rank 0, a re-executed test binary rank 1.
func twoProcesses(t *testing.T, lib *Lib, dev string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dev)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("rank 1: %v", err)
		}
	}()
	out := bufio.NewScanner(stdout)
	readLine := func() string {
		if !out.Scan() {
			t.Fatalf("rank 1 said nothing: %v", out.Err())
		}
		s := out.Text()
		if strings.HasPrefix(s, "ERR ") {
			t.Fatalf("rank 1: %s", s)
		}
		return s
	}
	e, err := newEndpoint(lib, dev, "rank 1", childSize)
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
	// three 4 KiB blocks to offsets 100, 65636, 131172 of rank 1's buffer, from the same offsets here
	for blk := 0; blk < 3; blk++ {
		for i := 0; i < 4096; i++ {
			e.data.b[blk*65536+100+i] = byte(blk + 1 + i)
		}
		off := uint64(blk*65536 + 100)
		if err := e.qp.Write(e.dMR, off, peer.data, off, 4096, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.qp.WriteSignal(3, peer.flag, 8, false); err != nil {
		t.Fatal(err)
	}
	if err := e.qp.Flush(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if e.qp.Completed() != e.qp.Posted() {
		t.Fatalf("flushed with %d of %d completed", e.qp.Completed(), e.qp.Posted())
	}
	if s := readLine(); s != "OK" {
		t.Fatalf("rank 1: %q", s)
	}
	if err := e.waitFlag(1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4096; i++ {
		if e.data.b[7+i] != byte(1+i) {
			t.Fatalf("written back: byte %d is %d", i, e.data.b[7+i])
		}
	}
	// a write past the end of rank 1's buffer: an error completion naming rank 1
	if err := e.qp.Write(e.dMR, 0, peer.data, childSize-8, 16, true); err != nil {
		t.Fatal(err)
	}
	err = e.qp.Flush(10 * time.Second)
	if err == nil || codeOf(err) != status.RemoteError || !strings.Contains(err.Error(), "RDMA to rank 1 failed: remote access error") {
		t.Fatalf("out-of-bounds write: %v", err)
	}
	t.Logf("out-of-bounds write: %v", err)
}
