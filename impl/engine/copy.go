package engine

// The Go face of copy.c: how a communicator's large host puts into mapped memory copy.

/*
#include "engine.h"
*/
import "C"

// SetStreamBytes makes puts of [min, max) bytes into mapped memory use non-temporal stores (min 0: never).
func (c *Comm) SetStreamBytes(min, max uint64) {
	c.p.streamBytes, c.p.streamMaxBytes = C.uint64_t(min), C.uint64_t(max)
}

// probes is how many puts of each way a size band below 32 MiB times before it keeps one (copy.c).
const probes = C.ENG_COPY_PROBES

// recheck is how often a band that has chosen times the other way again: every recheck-th put (copy.c).
const recheck = C.ENG_COPY_RECHECK

// SetStreamAuto chooses how puts in the SetStreamBytes range copy: on (the default), each
// power-of-two size band times its first puts with memcpy and with non-temporal stores and then
// keeps the faster (copy.c); off, they always use non-temporal stores.
func (c *Comm) SetStreamAuto(on bool) {
	c.p.streamAuto = 0
	if on {
		c.p.streamAuto = 1
	}
}

// CopyChoice is the way puts of size bytes in the streaming range copy now: -1 while both are
// still being timed, 0 memcpy, 1 non-temporal stores.
func (c *Comm) CopyChoice(size uint64) int { return int(C.engCopyChoice(c.p, C.uint64_t(size))) }

// CopySamples is how many puts of size bytes' band were timed: [0] with memcpy, [1] with non-temporal stores.
func (c *Comm) CopySamples(size uint64) [2]int {
	var n [2]C.uint32_t
	C.engCopySamples(c.p, C.uint64_t(size), &n[0])
	return [2]int{int(n[0]), int(n[1])}
}
