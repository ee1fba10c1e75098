package bootstrap

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestUnreceivedTagsBounded: a peer that sends messages on tags nobody receives (20 of 16 MiB
// grew a victim by 460 MB) fills at most the per-peer queue bound; then the victim drops its
// connection with a WARN, the sender's Send fails, and the victim's Recv from that peer is
// RemoteError saying why. Messages sent before their Recv, within the bound, still arrive, and
// receiving them frees their room. The victim's bounds are lowered to 3.5 messages of 2 MiB
// (the rule of 64 MiB for 16 MiB messages, with an eighth of the bytes through loopback TCP).
func TestUnreceivedTagsBounded(t *testing.T) {
	logs := newLogSink()
	// a long timeout: the flood must be refused by the queue bound, never by a timeout
	bs := formAddr(t, 2, Options{Timeout: 60 * time.Second, Logf: logs.logf})
	victim, sender := bs[0], bs[1]
	const msgBytes = 2 << 20
	limit := queueLimits{perPeer: 7 * queueCost(msgBytes) / 2}
	limit.total = 4 * limit.perPeer
	victim.boxMu.Lock()
	victim.qLimit = limit
	victim.boxMu.Unlock()
	big := bytes.Repeat([]byte{0xa5}, msgBytes)

	// legitimate: sends ahead of the receives, twice the bound in all, received in between
	for round := range 2 {
		for i := range 3 {
			if err := sender.Send(0, 100+i, big); err != nil {
				t.Fatalf("round %d: send %d within the bound: %v", round, i, err)
			}
		}
		for i := range 3 {
			msg, err := victim.Recv(1, 100+i)
			if err != nil || !bytes.Equal(msg, big) {
				t.Fatalf("round %d: recv %d: %d bytes, %v", round, i, len(msg), err)
			}
		}
	}

	// hostile: 20 messages on tags nobody receives
	var sendErr error
	sent := 0
	for ; sent < 20 && sendErr == nil; sent++ {
		sendErr = sender.Send(0, 1000+sent, big)
	}
	if status.CodeOf(sendErr) != status.RemoteError {
		t.Fatalf("%d sends of 2 MiB on unreceived tags: last error %v, want RemoteError (the victim drops the connection)", sent, sendErr)
	}
	victim.boxMu.Lock()
	queued, all := victim.queued[1], victim.qTotal
	victim.boxMu.Unlock()
	if queued > limit.perPeer || all > limit.total {
		t.Fatalf("the victim queued %d bytes from rank 1 (%d in all), more than the bounds %d, %d", queued, all, limit.perPeer, limit.total)
	}
	_, err := victim.Recv(1, 7)
	if status.CodeOf(err) != status.RemoteError || !strings.Contains(err.Error(), "rank 1") ||
		!strings.Contains(err.Error(), "unreceived") {
		t.Fatalf("recv from the flooding rank: %v; want RemoteError naming rank 1 and the queue bound", err)
	}
	logs.waitFor(t, "closing the connection from rank 1")
	t.Logf("sender failed after %d sends: %v; victim: %v", sent, sendErr, err)
}
