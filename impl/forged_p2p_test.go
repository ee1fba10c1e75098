//go:build mscclpp_testhooks

package impl

import (
	"os"
	"strings"
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestForgedP2PSetup: a P2P peer's claimed buffer is checked against the device allocation
// its IPC handle opens (a copy past its end would be an illegal address, fatal to the CUDA
// context): beyond it, setup fails with RemoteError naming the rank. On the fake driver,
// in a child process (the driver library is chosen once per process).
func TestForgedP2PSetup(t *testing.T) {
	if os.Getenv(fakeChildEnv) == "forged-p2p" {
		forgedP2PChild(t)
		return
	}
	t.Parallel()
	runFakeCUDAChildPassing(t, "TestForgedP2PSetup", "forged-p2p")
}

func forgedP2PChild(t *testing.T) {
	const size = 1 << 16
	var bufs [2]uint64
	fakeDeviceBuffers(t, bufs[:], make([]byte, size))
	connect := func(c *Comm) (func(), error) {
		return nil, c.Connect(1-c.Rank(), 3, engine.DevPtr(bufs[c.Rank()]), size, TransportP2P, nil, true)
	}
	const wSize, wOffset = 0, 1 // words of the P2P registration blob (see p2p's ipcDesc)
	cases := map[string]func(m *setupMsg){
		"buffer-1GiB":   func(m *setupMsg) { setWord(m, 1, wSize, 1<<30) },
		"past-the-end":  func(m *setupMsg) { setWord(m, 1, wOffset, size-4096); setWord(m, 1, wSize, 8192) },
		"offset-beyond": func(m *setupMsg) { setWord(m, 1, wOffset, 1<<40); setWord(m, 1, wSize, 1) },
	}
	for name, forge := range cases {
		err := forgedSetupOver(t, connect, forge)
		if status.CodeOf(err) != status.RemoteError || !strings.Contains(err.Error(), "rank 0") ||
			!strings.Contains(err.Error(), "outside its 65536-byte device allocation") {
			t.Errorf("%s: setup with a forged P2P peer: %v; want RemoteError naming rank 0 and the allocation", name, err)
		}
	}
	if err := forgedSetupOver(t, connect, nil); err != nil {
		t.Fatalf("genuine P2P setup: %v", err)
	}
}
