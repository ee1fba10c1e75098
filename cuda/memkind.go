package cuda

/*
#include "calls.h"
*/
import "C"

import "github.com/mscclpp-go/mscclpp/impl/status"

// UnshareableMemory says why device memory from cudaMallocAsync or the VMM API is refused where a
// buffer is handed to mscclpp (mscclppConnect, mscclppRegisterBuffer): part of every such error.
const UnshareableMemory = "memory from cudaMallocAsync or the VMM API (cuMemCreate/cuMemMap) has no CUDA IPC handle and no nvidia-peermem registration, so mscclpp cannot share it with a peer: allocate the buffer with cudaMalloc"

// CheckShareable returns an InvalidUsage error naming UnshareableMemory where the size bytes at
// ptr are device memory from a memory pool (cudaMallocAsync) or the VMM API, and nil for
// cudaMalloc memory, host memory, or where the loaded driver does not say.
func CheckShareable(ptr, size uint64) error { return checkShareable(driver(), ptr, size) }

func checkShareable(l *loader, ptr, size uint64) error {
	if ptr == 0 || l.load() != nil {
		return nil
	}
	var kind C.int
	C.cuwShareKind(l.api(), C.cuwDevicePtr(ptr), &kind)
	switch kind {
	case C.CUW_SHARE_POOL:
		return status.Errorf(status.InvalidUsage, "buffer %#x (%d bytes) is from a CUDA memory pool (cudaMallocAsync): %s", ptr, size, UnshareableMemory)
	case C.CUW_SHARE_VMM:
		return status.Errorf(status.InvalidUsage, "buffer %#x (%d bytes) is not legacy-IPC capable device memory (the VMM API: cuMemCreate/cuMemMap): %s", ptr, size, UnshareableMemory)
	}
	return nil
}
