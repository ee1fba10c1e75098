//go:build mscclpp_testhooks

package engine

// #include "engine.h"
import "C"

// SpinAnswered returns how many waits on c the inline spin of mscclppConnWaitNext answered.
func (c *Conn) SpinAnswered() uint64 { return uint64(c.p.spinAnswered) }

// WaitRounds returns how many rounds the waits on c went through past the inline spin: each a
// look at the epoch after a transport's poll or a back-off step (a wake-up, once they sleep).
func (c *Conn) WaitRounds() uint64 { return uint64(c.p.waitRounds) }
