//go:build mscclpp_testhooks

package engine

// #include "engine.h"
import "C"

// SpinAnswered returns how many waits on c the inline spin of mscclppConnWaitNext answered.
func (c *Conn) SpinAnswered() uint64 { return uint64(c.p.spinAnswered) }
