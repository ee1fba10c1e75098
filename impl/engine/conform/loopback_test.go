//go:build mscclpp_testhooks

package conform

import "testing"

// TestLoopback: the transport the "add a transport" recipe of docs/ARCHITECTURE.md builds from
// transport.h alone passes the conformance suite.
func TestLoopback(t *testing.T) {
	l := NewLoopback(1 << 16)
	defer l.Free()
	Run(t, l.Conn)
}
