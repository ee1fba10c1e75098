package impl

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// The setup messages of one mscclppConnectionSetup travel in two allgathers instead of one
// bootstrap point-to-point message per connection: every rank contributes a table of its
// outgoing messages, (peer, tag, message) entries, and picks out the entries addressed to it.
// A first point-to-point message to a peer opens a bootstrap connection with a three-way
// authenticated handshake; an all-to-all setup of N ranks opened N*(N-1) of them, which at
// N=64 on two CPUs took more than a second. The two allgathers take the node segment where
// the ranks share one node, else the bootstrap ring, whose connections are already open.
//
// The gathered tables cost every rank N * (the longest table) bytes: past maxGatheredSetup
// the messages go point to point as before (the ranks decide alike: on the gathered lengths).
// A variable for the tests.
var maxGatheredSetup atomic.Uint64

func init() { maxGatheredSetup.Store(32 << 20) }

// A table entry: peer (uint32), tag (int64), message length (uint32), the message.
const setupEntryHdr = 16

// outMsg is one connection's setup message, for peer with tag.
type outMsg struct {
	peer, tag int
	msg       []byte
}

func encodeTable(out []outMsg) []byte {
	n := 0
	for _, o := range out {
		n += setupEntryHdr + len(o.msg)
	}
	b := make([]byte, 0, n)
	le := binary.LittleEndian
	for _, o := range out {
		b = le.AppendUint32(b, uint32(o.peer))
		b = le.AppendUint64(b, uint64(int64(o.tag)))
		b = le.AppendUint32(b, uint32(len(o.msg)))
		b = append(b, o.msg...)
	}
	return b
}

// tableFor returns the messages of peer p's table b addressed to rank me, by tag.
func tableFor(b []byte, p, me int) (map[int][]byte, error) {
	le := binary.LittleEndian
	got := map[int][]byte{}
	for len(b) > 0 {
		if len(b) < setupEntryHdr {
			return nil, status.Errorf(status.RemoteError, "connection setup: rank %d's table of setup messages is cut short", p)
		}
		to, tag, l := le.Uint32(b), int(int64(le.Uint64(b[4:]))), le.Uint32(b[12:])
		if uint64(l) > uint64(len(b)-setupEntryHdr) || l > maxSetupMsg {
			return nil, status.Errorf(status.RemoteError, "connection setup: rank %d's table announces a %d-byte message, %d bytes left", p, l, len(b)-setupEntryHdr)
		}
		if int(to) == me {
			if _, dup := got[tag]; dup {
				return nil, status.Errorf(status.RemoteError, "connection setup: rank %d sent two setup messages for tag %d", p, tag)
			}
			got[tag] = append([]byte{}, b[setupEntryHdr:setupEntryHdr+int(l)]...) // not the whole gathered buffer
		}
		b = b[setupEntryHdr+int(l):]
	}
	return got, nil
}

// gatherSetup gathers every rank's table (mine: out). It returns, for each rank, its messages
// addressed to this rank by tag; ok false (and no error) when the tables are too large to
// gather, and the messages must go point to point.
func (c *Comm) gatherSetup(out []outMsg) (in []map[int][]byte, ok bool, err error) {
	mine := encodeTable(out)
	lens := make([]uint64, c.nranks)
	lens[c.rank] = uint64(len(mine))
	if err := c.AllGather(unsafe.Pointer(&lens[0]), 8); err != nil {
		return nil, false, fmt.Errorf("connection setup: gathering the sizes of the setup messages: %w", err)
	}
	slot := uint64(0)
	for _, l := range lens {
		slot = max(slot, l)
	}
	if slot == 0 { // nothing new anywhere
		return make([]map[int][]byte, c.nranks), true, nil
	}
	if slot*uint64(c.nranks) > maxGatheredSetup.Load() {
		return nil, false, nil
	}
	all := make([]byte, int(slot)*c.nranks)
	copy(all[c.rank*int(slot):], mine)
	if err := c.AllGather(unsafe.Pointer(&all[0]), int(slot)); err != nil {
		return nil, false, fmt.Errorf("connection setup: gathering the setup messages: %w", err)
	}
	in = make([]map[int][]byte, c.nranks)
	for p := range c.nranks {
		if p == c.rank {
			continue
		}
		if in[p], err = tableFor(all[p*int(slot):p*int(slot)+int(lens[p])], p, c.rank); err != nil {
			return nil, false, err
		}
	}
	return in, true, nil
}

// setupPointToPoint makes every setup send its messages point to point (tests: a forged
// message is sent by hand to a rank that sets up).
var setupPointToPoint atomic.Bool

// exchangeSetup sends this rank's setup messages out and returns the function that gives the
// peer's message for each fresh connection.
func (c *Comm) exchangeSetup(out []outMsg) (func(cn *Conn) ([]byte, error), error) {
	if !setupPointToPoint.Load() {
		in, ok, err := c.gatherSetup(out)
		if err != nil {
			return nil, err
		}
		if ok {
			return func(cn *Conn) ([]byte, error) {
				raw, found := in[cn.remoteRank][cn.tag]
				if !found {
					return nil, status.Errorf(status.InvalidUsage, "connection setup: rank %d declared no connection to rank %d with tag %d before this mscclppConnectionSetup (did it declare the mirror connection?)", cn.remoteRank, c.rank, cn.tag)
				}
				return raw, nil
			}, nil
		}
	}
	for _, o := range out {
		if err := c.boot.Send(o.peer, o.tag, o.msg); err != nil {
			return nil, fmt.Errorf("connection setup: send to rank %d tag %d: %w", o.peer, o.tag, err)
		}
	}
	return func(cn *Conn) ([]byte, error) {
		raw, err := c.boot.RecvLimit(cn.remoteRank, cn.tag, maxSetupMsg)
		if err != nil {
			return nil, fmt.Errorf("connection setup: rank %d never answered for tag %d (did it declare the mirror connection before this mscclppConnectionSetup?): %w", cn.remoteRank, cn.tag, err)
		}
		return raw, nil
	}, nil
}
