package impl

import "fmt"

// ipcClosedTag is the bootstrap tag of the teardown handshake: outside the int range of
// application tags (mscclppConnect's tag), so it never meets a connection's setup messages.
const ipcClosedTag = 1 << 40

// peersClosed is transport.Host.PeersClosed: this rank has closed its mappings of each peer's
// memory; it tells them, then waits until each says the same, so that no rank frees device
// memory a peer still maps through CUDA IPC. A peer that died or does not answer within the
// bootstrap timeout ends the wait with its error (the caller frees anyway and warns).
func (c *Comm) peersClosed(peers []int) error {
	var first error
	for _, p := range peers {
		if err := c.boot.Send(p, ipcClosedTag, []byte{1}); err != nil && first == nil {
			first = fmt.Errorf("telling rank %d this rank closed its mappings: %w", p, err)
		}
	}
	for _, p := range peers {
		if _, err := c.boot.RecvLimit(p, ipcClosedTag, 1); err != nil && first == nil {
			first = fmt.Errorf("waiting for rank %d to close its mappings of this rank's memory: %w", p, err)
		}
	}
	return first
}
