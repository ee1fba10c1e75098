//go:build mscclpp_testhooks

package eth

import "testing"

// TestCrashRecordedBeforePeerClosed: when a peer's socket ends without a goodbye, the receive
// thread records the remote error before it sets the connection's peerClosed, so a wait that the
// flag ends (and mscclppCommGetAsyncError after it) finds the error there, never success.
func TestCrashRecordedBeforePeerClosed(t *testing.T) {
	const rounds, remoteError = 50, 6 // mscclppRemoteError
	for i := 0; i < rounds; i++ {
		p, err := newTestPair(64, 60000, nil)
		if err != nil {
			t.Fatal(err)
		}
		code := p.crashSeen(0)
		p.free()
		switch code {
		case -1:
			t.Fatalf("round %d: the connection's peerClosed never appeared after the peer's socket ended", i)
		case remoteError:
		default:
			t.Fatalf("round %d: when peerClosed appeared the asynchronous error was %d, want %d (mscclppRemoteError): the flag came before the error", i, code, remoteError)
		}
	}
}
