//go:build mscclpp_testhooks

package bootstrap

// SetRootNonceForTest makes the roots of this process hand out nonce n with their table (0:
// a fresh random one), as a malicious root may: the one of another instance.
func SetRootNonceForTest(n uint64) { forcedRootNonce.Store(n) }
