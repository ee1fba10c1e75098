package bootstrap

// The table: every rank's row (listening address, host id, pid, token), how it
// reaches the ranks, and what they answer from it.
//
// The root does not send every rank every row: that would be N rows to each of
// N ranks, O(N²) bytes out of one process. A rank needs before its ring forms
// only its ring and star neighbours' rows (to dial them) and its own host's
// (Options.Joined maps the node's shared memory with them). So the root sends
// each rank those (tableAnswers: O(ranks per host) rows a rank), and once the
// ring and star are up the ranks gather the others over them (gatherTable), each
// contributing its own row: O(N) bytes a rank, the root included. When every
// rank shares one host its rows are all the table, and the root sends it whole.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// unknownHost is what HostIDs reports for a rank whose row this rank has not got yet
// (while Options.Joined runs): no rank's host id has a NUL byte (hostIDOK).
const unknownHost = "\x00"

// tableAnswers returns the root's answer to each rank (by rank) once every rank of rows
// registered: the whole table when every rank is on one host, else the rank's own
// host's rows and its ring and star neighbours' (neededRanks) and the slot of the
// gather every rank then runs (even one those rows happen to be all of).
func tableAnswers(nonce uint64, rows []peerEntry) func(rank int) []byte {
	t := rootTable{nonce: nonce, rows: rows}
	byHost := make(map[string][]int)
	for r, e := range rows {
		byHost[e.hostID] = append(byHost[e.hostID], r)
	}
	if len(byHost) == 1 {
		whole := encodeTable(t, byHost[rows[0].hostID]) // slot 0: nobody gathers
		return func(int) []byte { return whole }
	}
	for _, e := range rows {
		t.slot = max(t.slot, rowLen(e))
	}
	return func(rank int) []byte {
		return encodeTable(t, neededRanks(rank, len(rows), byHost[rows[rank].hostID]))
	}
}

// neededRanks lists, ascending, the ranks whose rows rank (of n) needs before its ring
// forms: those of its host (onHost, ascending, rank among them), its ring neighbours
// and rank 0 (the star's hub).
func neededRanks(rank, n int, onHost []int) []int {
	out := append(make([]int, 0, len(onHost)+3), onHost...)
	for _, r := range []int{0, (rank + n - 1) % n, (rank + 1) % n} {
		if i := sort.SearchInts(out, r); i == len(out) || out[i] != r {
			out = append(out, r)
			sort.Ints(out)
		}
	}
	return out
}

// gatherTable completes a table the root sent in part: every rank puts its own row in its
// slot of an AllGather (over the ring and star, up since connect), and each row the root
// did send must be the one its rank sends. It runs on every rank of a communicator that
// spans hosts, after Options.Joined and before the rank reports ready; its failure (that
// of the collective too: collKeep) is reported through the root, which tells every rank
// the first failure it saw (a peer that closed is most often the consequence).
func (b *Bootstrap) gatherTable() error {
	if b.gatherSlot == 0 {
		return nil // the root sent the whole table
	}
	n, slot := b.nranks, b.gatherSlot
	data := make([]byte, n*slot)
	copy(data[b.rank*slot:], encodeRow(nil, b.table[b.rank]))
	b.collMu.Lock()
	b.collKeep = true // a failure here goes to the root, which tells every rank the first it saw
	b.collMu.Unlock()
	err := b.AllGather(data, slot)
	b.collMu.Lock()
	b.collKeep = false
	b.collMu.Unlock()
	if err != nil {
		return err
	}
	rows := make([]peerEntry, n)
	for r := range rows {
		e, rest, ok := decodeRow(data[r*slot : (r+1)*slot])
		if !ok || !zero(rest) {
			return b.errorf(status.RemoteError, "rank %d sent a malformed row of the table in the gather of init", r)
		}
		if known := b.table[r]; known.addr != "" && known != e {
			return b.errorf(status.RemoteError, "rank %d's row of the table (listening at %s) is not the one the root at %s sent (%s)",
				r, e.addr, b.rootAddr, known.addr)
		}
		rows[r] = e
	}
	b.table, b.gatherSlot = rows, 0
	return nil
}

// zero reports whether every byte of p is 0 (a slot's padding).
func zero(p []byte) bool {
	for _, c := range p {
		if c != 0 {
			return false
		}
	}
	return true
}

// HostIDs returns every rank's Options.HostID, indexed by rank. While Options.Joined
// runs on a communicator that spans hosts, only this rank's host's ids and its ring
// neighbours' are known; the others read unknownHost (equal to no rank's id).
func (b *Bootstrap) HostIDs() []string {
	ids := make([]string, len(b.table))
	for i, e := range b.table {
		ids[i] = e.hostID
		if e.addr == "" && b.nranks > 1 {
			ids[i] = unknownHost
		}
	}
	return ids
}

// Pids returns every rank's process id, as registered with the root (0 for a rank whose
// row is not known yet: see HostIDs).
func (b *Bootstrap) Pids() []int {
	pids := make([]int, len(b.table))
	for i, e := range b.table {
		pids[i] = int(e.pid)
	}
	return pids
}

// InstanceID names this instance of the communicator as this rank formed it: a hash of its
// magic, the root's address and nonce and every rank's row, each with a fresh token of that
// rank's (its own checked against what it sent). The root picks its nonce, but not the other
// ranks' tokens, so no other instance (one re-formed at the same address, or one a rank of this
// one forms with this one's nonce) has the same ID, as this rank or any other honest one sees it.
func (b *Bootstrap) InstanceID() string {
	h := sha256.New()
	fmt.Fprintf(h, "mscclpp instance\x00%d\x00%d\x00%s\x00%d\x00", b.magic, b.nonce, b.rootAddr, len(b.table))
	for _, e := range b.table {
		fmt.Fprintf(h, "%q %q %d ", e.addr, e.hostID, e.pid)
		h.Write(e.token[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
