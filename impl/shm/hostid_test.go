package shm

import (
	"strings"
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// TestOtherHostIDQuoted: a connection to a rank on another host names both host ids, and the
// peer's (what it registered, up to 4 KiB) shows quoted, as printable ASCII, bounded.
func TestOtherHostIDQuoted(t *testing.T) {
	evil := "\x1b[2J\x1b]0;x\x07\nhost:1:1 [0] MSCCLPP WARN forged" + strings.Repeat("\u00e9", 1500)
	tr, err := newSHM(&transport.Host{Rank: 0, HostIDs: []string{"node-a", evil}, LocalOf: map[int]int{0: 0}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Declare(transport.Decl{Idx: 0, Peer: 1})
	if status.CodeOf(err) != status.InvalidUsage || !strings.Contains(err.Error(), "on another host") {
		t.Fatalf("declare to a rank on another host: %v", err)
	}
	msg := err.Error()
	if len(msg) > 1024 || !strings.Contains(msg, `"\x1b[2J`) || !strings.Contains(msg, `"node-a"`) {
		t.Fatalf("error of %d bytes: %q", len(msg), msg)
	}
	for i := 0; i < len(msg); i++ {
		if msg[i] < 0x20 || msg[i] > 0x7e {
			t.Fatalf("error %q: byte %#x at %d", msg, msg[i], i)
		}
	}
}
