package impl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// A connection declared by one rank only fails that setup on both ranks (each says so), but
// leaves the communicator usable: a wait on the intact connection still gets its signal and
// data, declaring the missing side and setting up again sets the connection up, and
// mscclppProxyStop is a plain, prompt collective afterwards. Over SHM and Ethernet.
func TestOneSidedConnectionRecovers(t *testing.T) {
	for _, tr := range []struct {
		name string
		id   Transport
	}{{"shm", TransportSHM}, {"ethernet", TransportEthernet}} {
		t.Run(tr.name, func(t *testing.T) {
			const size = 4096
			forRanks(t, 2, func(c *Comm) error {
				peer := 1 - c.Rank()
				bufs := [2][]byte{make([]byte, size), make([]byte, size)} // tag 1, tag 2
				if err := c.Connect(peer, 1, unsafe.Pointer(&bufs[0][0]), size, tr.id, nil, true); err != nil {
					return err
				}
				if c.Rank() == 0 { // rank 1 declares tag 2 only after the first setup
					if err := c.Connect(peer, 2, unsafe.Pointer(&bufs[1][0]), size, tr.id, nil, true); err != nil {
						return err
					}
				}
				if err := c.ProxyLaunch(); err != nil {
					return err
				}
				err := c.ConnectionSetup()
				want := map[int]string{0: "rank 1 declared no connection to rank 0 with tag 2", 1: "connection setup failed on rank 0"}[c.Rank()]
				if err == nil || !strings.Contains(err.Error(), want) {
					return fmt.Errorf("first setup: %v; want an error saying %q", err, want)
				}
				// a tag no peer declared is the program's mistake, not a remote failure (whose
				// generic text would lead the reader away)
				if c.Rank() == 0 && status.CodeOf(err) != status.InvalidUsage {
					return fmt.Errorf("first setup: %v is %v, want InvalidUsage", err, status.CodeOf(err))
				}
				// the intact connection (index 0 on both ranks) works
				if err := putAndWait(c, 0, bufs[0], 1); err != nil {
					return fmt.Errorf("tag 1 after the failed setup: %w", err)
				}
				if c.Rank() == 1 {
					if err := c.Connect(peer, 2, unsafe.Pointer(&bufs[1][0]), size, tr.id, nil, true); err != nil {
						return err
					}
				}
				if err := c.ConnectionSetup(); err != nil {
					return fmt.Errorf("second setup, both sides declared: %w", err)
				}
				if err := putAndWait(c, 1, bufs[1], 2); err != nil {
					return fmt.Errorf("tag 2 after the second setup: %w", err)
				}
				start := time.Now()
				if err := c.ProxyStop(); err != nil {
					return fmt.Errorf("ProxyStop: %w", err)
				}
				if dt := time.Since(start); dt > 5*time.Second {
					return fmt.Errorf("ProxyStop took %v", dt)
				}
				return nil
			})
		})
	}
}

// putAndWait: rank 1 puts 64 bytes of a pattern (seed) with a signal over connection idx,
// rank 0 waits for it and checks the bytes.
func putAndWait(c *Comm, idx int, buf []byte, seed int) error {
	dev := c.host.DevConns.At(idx)
	if c.Rank() == 1 {
		fill(buf[:64], seed)
		return op(dev, opData|opFlag, 64, 0, 64)
	}
	if err := waitNext(dev); err != nil {
		return err
	}
	want := make([]byte, 64)
	fill(want, seed)
	if !bytes.Equal(buf[64:128], want) {
		return fmt.Errorf("the put's bytes did not arrive")
	}
	return nil
}

// A remote failure is the failing connection's: after one connection's peer was found gone (its
// pid names an exited process here), a wait on it ends with RemoteError, and a wait on another,
// intact connection still gets its signal (it used to end with the first one's RemoteError).
func TestRemoteErrorStickyPerConnection(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	const size = 4096
	forRanks(t, 2, func(c *Comm) error {
		peer := 1 - c.Rank()
		bufs := [2][]byte{make([]byte, size), make([]byte, size)}
		for i := range bufs {
			if err := c.Connect(peer, i, unsafe.Pointer(&bufs[i][0]), size, TransportSHM, nil, true); err != nil {
				return err
			}
		}
		if err := c.ConnectionSetup(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			c.conns[1].eng.SetPeerPid(dead.Process.Pid)
			if rc := engine.ConnWaitNext(c.host.DevConns.At(1), 20000); rc != status.RemoteError {
				return fmt.Errorf("wait on the connection whose peer is gone: %v, want RemoteError", rc)
			}
			if rc := engine.ConnWaitNext(c.host.DevConns.At(1), 20000); rc != status.RemoteError {
				return fmt.Errorf("second wait on the connection whose peer is gone: %v, want RemoteError (sticky)", rc)
			}
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		return putAndWait(c, 0, bufs[0], 3)
	})
}

// TestSetupReportCodes: a peer's setup report reaches this rank with its code when the code is
// one of the API's results, as InternalError when it says Success, and is refused as malformed
// (RemoteError) when the code is none of them, so no caller sees a result outside the enum.
func TestSetupReportCodes(t *testing.T) {
	report := func(code uint32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, code)
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint16(b, 4)
		return append(b, "oops"...)
	}
	for _, tc := range []struct {
		code uint32
		want status.Code
		bad  bool
	}{
		{uint32(status.RemoteError), status.RemoteError, false},
		{uint32(status.SystemError), status.SystemError, false},
		{uint32(status.Success), status.InternalError, false},
		{uint32(status.NumResults), 0, true},
		{0xffffffff, 0, true},
	} {
		r, err := decodeReport(report(tc.code))
		if tc.bad {
			var se *status.Error
			if err == nil || !errors.As(err, &se) || se.Code != status.RemoteError || !strings.Contains(err.Error(), "malformed setup report") {
				t.Errorf("code %d: got %v, %v; want a malformed report (RemoteError)", tc.code, r, err)
			}
			continue
		}
		if err != nil || r.code != tc.want || r.text != logx.PeerText("oops") {
			t.Errorf("code %d: got %+v, %v; want code %d and the text, quoted", tc.code, r, err, tc.want)
		}
	}
}
