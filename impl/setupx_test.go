package impl

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// allToAll connects c to every other rank over SHM (tag 2, a 64-byte mscclppHostAlloc buffer
// each) and sets the connections up; it returns the buffers' release.
func allToAll(c *Comm) (func(), error) {
	var bufs []unsafe.Pointer
	release := func() {
		for _, b := range bufs {
			hostmem.Free(b)
		}
	}
	for p := range c.nranks {
		if p == c.Rank() {
			continue
		}
		b, err := hostmem.Alloc(64)
		if err != nil {
			return release, err
		}
		bufs = append(bufs, b)
		*(*byte)(b) = byte(c.Rank())
		if err := c.Connect(p, 2, b, 64, TransportSHM, nil, true); err != nil {
			return release, err
		}
	}
	return release, c.ConnectionSetup()
}

// checkPeers: every connection's remoteBuff is the peer's buffer (its first byte the peer's rank).
func checkPeers(c *Comm) error {
	for _, cn := range c.conns {
		rb := c.host.DevConns.RemoteBuff(cn.idx)
		if rb == nil || *(*byte)(rb) != byte(cn.remoteRank) {
			return fmt.Errorf("connection to rank %d: remoteBuff %p does not hold that rank's buffer", cn.remoteRank, rb)
		}
	}
	return nil
}

// TestAllToAllSetupGathered: an all-to-all setup of 8 ranks pairs every connection with the
// right peer's buffer and opens no bootstrap point-to-point connection (it opened one per peer,
// with a handshake each: more than a second at 64 ranks on two CPUs).
func TestAllToAllSetupGathered(t *testing.T) {
	forRanks(t, 8, func(c *Comm) error {
		release, err := allToAll(c)
		defer release()
		if err != nil {
			return err
		}
		if n := c.boot.PeerConns(); n != 0 {
			return fmt.Errorf("the setup opened %d point-to-point connections, want 0", n)
		}
		if err := checkPeers(c); err != nil {
			return err
		}
		return c.Barrier()
	})
}

// TestAllToAllSetupPointToPoint: where the tables are too large to gather, every rank sends its
// messages point to point (one connection per peer) and sets up the same all-to-all.
func TestAllToAllSetupPointToPoint(t *testing.T) {
	old := maxGatheredSetup.Load()
	maxGatheredSetup.Store(64) // 4 ranks' tables of 3 messages are larger
	defer maxGatheredSetup.Store(old)
	forRanks(t, 4, func(c *Comm) error {
		release, err := allToAll(c)
		defer release()
		if err != nil {
			return err
		}
		if n := c.boot.PeerConns(); n != 3 {
			return fmt.Errorf("%d point-to-point connections, want 3 (one per peer)", n)
		}
		if err := checkPeers(c); err != nil {
			return err
		}
		return c.Barrier()
	})
}

// TestSetupTable: a table round-trips, and a malformed one is RemoteError naming its rank.
func TestSetupTable(t *testing.T) {
	out := []outMsg{{peer: 1, tag: 5, msg: []byte("a")}, {peer: 2, tag: -1, msg: []byte("bb")}, {peer: 1, tag: 6, msg: nil}}
	b := encodeTable(out)
	got, err := tableFor(b, 3, 1)
	if err != nil || len(got) != 2 || !bytes.Equal(got[5], []byte("a")) || got[6] == nil || len(got[6]) != 0 {
		t.Fatalf("rank 1's messages: %v, %v", got, err)
	}
	if got, err := tableFor(b, 3, 2); err != nil || len(got) != 1 || string(got[-1]) != "bb" {
		t.Fatalf("rank 2's messages: %v, %v", got, err)
	}
	dup := encodeTable([]outMsg{{peer: 1, tag: 5}, {peer: 1, tag: 5}})
	for name, bad := range map[string][]byte{"cut": b[:len(b)-1], "header": b[:7], "duplicate": dup} {
		if _, err := tableFor(bad, 3, 1); status.CodeOf(err) != status.RemoteError || !bytes.Contains([]byte(err.Error()), []byte("rank 3")) {
			t.Errorf("%s: %v, want RemoteError naming rank 3", name, err)
		}
	}
}

// TestSetupSomeRanksIdle: ranks with nothing new take part in the gathered exchange: a setup
// where only ranks 0 and 1 connect, then one where only 2 and 3 do (0 and 1 keep theirs).
func TestSetupSomeRanksIdle(t *testing.T) {
	forRanks(t, 4, func(c *Comm) error {
		var bufs []unsafe.Pointer
		defer func() {
			for _, b := range bufs {
				hostmem.Free(b)
			}
		}()
		for round, pair := range [][2]int{{0, 1}, {2, 3}} {
			me := c.Rank()
			if me == pair[0] || me == pair[1] {
				b, err := hostmem.Alloc(64)
				if err != nil {
					return err
				}
				bufs = append(bufs, b)
				*(*byte)(b) = byte(me)
				if err := c.Connect(pair[0]+pair[1]-me, round, b, 64, TransportSHM, nil, true); err != nil {
					return err
				}
			}
			if err := c.ConnectionSetup(); err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
			if err := checkPeers(c); err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
		}
		if _, n := c.DeviceConnections(); n != 1 {
			return fmt.Errorf("%d connections, want 1", n)
		}
		return c.Barrier()
	})
}
