package bootstrap

import "testing"

// TestInstanceIDBindsEveryToken: two instances whose root handed out the same magic, address
// and nonce, and the same rows, differ by one rank's token, and so does their InstanceID; the
// same table gives the same ID on every rank.
func TestInstanceIDBindsEveryToken(t *testing.T) {
	rows := func(tok0, tok1 byte) []peerEntry {
		return []peerEntry{{"10.0.0.1:1", "a", 11, nonce{tok0}}, {"10.0.0.1:2", "a", 12, nonce{tok1}}}
	}
	a0 := &Bootstrap{rank: 0, magic: 7, nonce: 9, rootAddr: "10.0.0.1:5000", table: rows(1, 2)}
	a1 := &Bootstrap{rank: 1, magic: 7, nonce: 9, rootAddr: "10.0.0.1:5000", table: rows(1, 2)}
	if a0.InstanceID() != a1.InstanceID() {
		t.Errorf("ranks of one instance: %s and %s", a0.InstanceID(), a1.InstanceID())
	}
	for _, b := range []*Bootstrap{
		{magic: 7, nonce: 9, rootAddr: "10.0.0.1:5000", table: rows(1, 3)},
		{magic: 7, nonce: 9, rootAddr: "10.0.0.1:5000", table: rows(3, 2)},
		{magic: 7, nonce: 9, rootAddr: "10.0.0.2:5000", table: rows(1, 2)},
	} {
		if b.InstanceID() == a0.InstanceID() {
			t.Errorf("another instance (root %s, tokens %d %d) has the ID %s", b.rootAddr, b.table[0].token[0], b.table[1].token[0], a0.InstanceID())
		}
	}
}
