package impl

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// The forger of TestForgedPidClaims: a child process (the test binary again) that is rank 0.
const forgerEnv = "MSCCLPP_TEST_FORGER"

// doneTag: the victim tells the forger that its round is over.
const doneTag = 99

// Words of an SHM registration blob (see shm's desc).
const (
	shmWAddr, shmWSize, shmWFd, shmWIno, shmWRegSize, shmWOffset, shmWProof = 1, 2, 3, 4, 5, 6, 7
)

// forgedPidCase is one forgery: what rank 0 claims, and what rank 1 must answer.
type forgedPidCase struct {
	name     string
	register bool // through mscclppRegisterBuffer (else mscclppConnectionSetup)
	want     string
}

// forgedPidCases; the forger's side of each is forgePid. victim and third are the pids of the
// victim and of an unrelated process of the same user.
func forgedPidCases(victim, third int) []forgedPidCase {
	self := fmt.Sprintf("the peer claims pid %d, this process, which holds no proof of rank 0", victim)
	return []forgedPidCase{
		{"victim-pid", false, self},
		{"third-pid", false, fmt.Sprintf("the peer claims pid %d, which holds no proof of rank 0", third)},
		{"victim-proof", false, self},
		{"register-victim-pid", true, self},
		{"register-victim-proof", true, self},
		{"genuine", false, ""},
		{"register-genuine", true, ""},
	}
}

// TestForgedPidClaims: a peer in another process, which holds the communicator's key (a
// genuine rank 0 that lies), claims memory in the victim's own process or in a third process
// of the same user: it names that pid and the victim's own canary as its buffer (without an
// eager ring, so that a put would be a process_vm_writev), also with the last word of its
// registrations copied from the victim's (once the descriptor of a proof, now reserved). Each is refused with RemoteError naming rank 0, over
// mscclppConnectionSetup and mscclppRegisterBuffer, and not one byte of the victim's memory
// around its buffer changes even when it then puts (where a forgery was accepted, the put is
// what would overwrite the canary). The genuine setup and registration work.
func TestForgedPidClaims(t *testing.T) {
	if os.Getenv(forgerEnv) != "" {
		forgerChild(t)
		return
	}
	third := exec.Command("sleep", "60")
	if err := third.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = third.Process.Kill(); _ = third.Wait() }()
	const page = 4096
	mem := make([]byte, 3*page) // canary, this rank's buffer, canary
	before := bytes.Repeat([]byte{0x5a}, 3*page)
	copy(before[page:2*page], bytes.Repeat([]byte{0xc3}, page)) // what this rank puts
	copy(mem, before)
	cases := forgedPidCases(os.Getpid(), third.Process.Pid)
	addrs := make([]string, len(cases))
	for i := range addrs {
		addrs[i] = freeAddr(t)
	}
	t.Setenv("MSCCLPP_BOOTSTRAP_TIMEOUT", "10")
	setupPointToPoint.Store(true)
	defer setupPointToPoint.Store(false)
	child := exec.Command(os.Args[0], "-test.run=^TestForgedPidClaims$", "-test.count=1", "-test.v")
	child.Env = append(os.Environ(), forgerEnv+"=1", "MSCCLPP_TEST_ADDRS="+strings.Join(addrs, ","),
		"MSCCLPP_TEST_CANARY="+strconv.FormatUint(uint64(uintptr(unsafe.Pointer(&mem[0]))), 10),
		"MSCCLPP_TEST_THIRD="+strconv.Itoa(third.Process.Pid))
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		t0 := time.Now()
		err := victimComm(addrs[i], tc, unsafe.Pointer(&mem[page]), page)
		t.Logf("%s: %v after %v", tc.name, err, time.Since(t0))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (status.CodeOf(err) != status.RemoteError || !strings.Contains(err.Error(), "rank 0") || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v; want RemoteError naming rank 0 and saying %q", tc.name, err, tc.want)
		}
		changed := 0
		for j := range mem {
			if mem[j] != before[j] {
				changed++
			}
		}
		if changed != 0 {
			t.Errorf("%s: %d bytes of this rank's memory changed (canaries and its own buffer)", tc.name, changed)
			copy(mem, before)
		}
	}
	if err := child.Wait(); err != nil || !strings.Contains(out.String(), "--- PASS: TestForgedPidClaims") {
		t.Errorf("the forger: %v\n%s", err, out.String())
	}
}

// victimRound is rank 1 of one case: it sets up, or sets up then registers, buf and, where
// that worked, puts its whole buffer to the peer; it returns the first error.
func victimRound(c *Comm, tc forgedPidCase, buf unsafe.Pointer, size uint64) error {
	if err := c.Connect(0, 3, buf, size, TransportSHM, nil, true); err != nil {
		return err
	}
	if tc.register {
		if err := c.ConnectionSetup(); err != nil {
			return err
		}
		peers, err := c.RegisterBuffer(buf, size)
		if err != nil {
			return err
		}
		if err := c.RegisteredBufferWrite(peers, buf, size, 0, 0, 0); err != nil {
			return err
		}
		return c.Barrier() // the forger checks the write after it
	}
	if err := c.ConnectionSetup(); err != nil { // it reached the closing barrier whatever failed
		return err
	}
	return op(c.host.DevConns.At(0), opData|opFlag, 0, 0, size)
}

// victimComm runs victimRound on a communicator of its own, then tells the forger that the
// round is over (point to point: whether a collective pairs with the forger's depends on
// where the round failed).
func victimComm(addr string, tc forgedPidCase, buf unsafe.Pointer, size uint64) error {
	c, err := InitRank(2, addr, 1)
	if err != nil {
		return err
	}
	err = victimRound(c, tc, buf, size)
	if serr := c.boot.Send(0, doneTag, []byte{1}); err == nil {
		err = serr
	}
	if derr := c.Destroy(); err == nil {
		err = derr
	}
	return err
}

// forgerChild is rank 0 of every case, in its own process.
func forgerChild(t *testing.T) {
	addrs := strings.Split(os.Getenv("MSCCLPP_TEST_ADDRS"), ",")
	canary, _ := strconv.ParseUint(os.Getenv("MSCCLPP_TEST_CANARY"), 10, 64)
	third, _ := strconv.Atoi(os.Getenv("MSCCLPP_TEST_THIRD"))
	setupPointToPoint.Store(true)
	defer setupPointToPoint.Store(false)
	for i, tc := range forgedPidCases(os.Getppid(), third) {
		c, err := InitRank(2, addrs[i], 0)
		if err == nil {
			err = forgerRound(c, tc, canary, third)
			if _, rerr := c.boot.RecvLimit(1, doneTag, 1); err == nil {
				err = rerr
			}
			if derr := c.Destroy(); err == nil {
				err = derr
			}
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// forgerRound is rank 0 of one case: genuine, or it sends a forged setup message (then joins
// the victim's barrier) or, after a genuine setup, a forged registration.
func forgerRound(c *Comm, tc forgedPidCase, canary uint64, third int) error {
	const size = 4096
	buf := make([]byte, size)
	if err := c.Connect(1, 3, unsafe.Pointer(&buf[0]), size, TransportSHM, nil, true); err != nil {
		return err
	}
	cn := c.conns[0]
	if tc.register {
		if err := c.ConnectionSetup(); err != nil {
			return err
		}
	}
	if strings.Contains(tc.name, "genuine") {
		if tc.register {
			if _, err := c.RegisterBuffer(unsafe.Pointer(&buf[0]), size); err != nil {
				return err
			}
			if err := c.Barrier(); err != nil { // after the victim's write
				return err
			}
		} else {
			if err := c.ConnectionSetup(); err != nil {
				return err
			}
			if err := waitNext(c.host.DevConns.At(0)); err != nil {
				return err
			}
		}
		for _, b := range buf {
			if b != 0xc3 {
				return fmt.Errorf("the victim's put did not arrive (byte %#x)", b)
			}
		}
		return nil
	}
	var m setupMsg
	var err error
	if tc.register {
		blob, err := cn.tr.Describe(cn.idx, transport.Registered, transport.Buffer{Ptr: unsafe.Pointer(&buf[0]), Size: size})
		if err != nil {
			return err
		}
		m = setupMsg{transport: cn.entry.ID, pid: os.Getpid(), blobs: [][]byte{blob}}
	} else if m, err = c.describe(cn, []int{0, 1}); err != nil {
		return err
	}
	victimRaw, err := c.boot.RecvLimit(1, 3, maxSetupMsg) // the victim sends first
	if err != nil {
		return err
	}
	victim, err := decodeSetup(victimRaw)
	if err != nil {
		return err
	}
	data := len(m.blobs) - 1 // the buffer's registration
	noRing := func() {
		for _, w := range []int{shmWFd, shmWIno, shmWRegSize, shmWOffset} {
			setWord(&m, data, w, 0)
		}
	}
	switch strings.TrimPrefix(tc.name, "register-") {
	case "victim-pid":
		m.pid = os.Getppid()
		setWord(&m, data, shmWAddr, canary)
		noRing()
	case "third-pid":
		m.pid = third
		setWord(&m, data, shmWAddr, canary)
		noRing()
	case "victim-proof":
		m.pid = os.Getppid()
		victimProof := binary.LittleEndian.Uint64(victim.blobs[0][8*shmWProof:])
		for h := range m.blobs {
			setWord(&m, h, shmWProof, victimProof)
		}
		setWord(&m, data, shmWAddr, canary)
		noRing()
	}
	if err := c.boot.Send(1, 3, m.encode()); err != nil {
		return err
	}
	if !tc.register {
		_ = c.closeSetup(&setupFailures{}) // the forger reaches setup's closing barrier, as every rank does
	}
	return nil
}
