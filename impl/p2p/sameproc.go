package p2p

// A peer in this process: the driver refuses to IPC-import a handle the calling process exported
// (CUDA_ERROR_INVALID_CONTEXT), so its memory is used at its own address (unified addressing),
// with peer access enabled when it lives on another GPU, and nothing to close at teardown. As
// NCCL, UCX and PyTorch do.

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mscclpp-go/mscclpp/cuda"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// cudaErrPeerAccessUnsupported is CUDA_ERROR_PEER_ACCESS_UNSUPPORTED.
const cudaErrPeerAccessUnsupported = 217

var nonce struct {
	once sync.Once
	v    uint64
}

// processNonce is a random number drawn once per process: with the pid, it tells a peer in this
// process from one in another whose pid is the same (another host, another pid namespace).
func processNonce() uint64 {
	nonce.once.Do(func() {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			// no randomness: the pid and the time keep processes of one host apart
			binary.LittleEndian.PutUint64(b[:], uint64(os.Getpid())<<32^uint64(time.Now().UnixNano()))
		}
		nonce.v = binary.LittleEndian.Uint64(b[:]) | 1 // never 0: a blob's zero nonce is no process
	})
	return nonce.v
}

// asOtherProcess makes Describe write another nonce, so that peers in this process take the IPC
// path as those of another process do (set by tests, through the harness, only).
var asOtherProcess atomic.Bool

// describedNonce is the nonce Describe sends: processNonce, unless asOtherProcess.
func describedNonce() uint64 {
	if asOtherProcess.Load() {
		return processNonce() ^ 2
	}
	return processNonce()
}

// sameProcess reports whether d was described by this process (the peer's pid and nonce).
func sameProcess(d ipcDesc, peerPid int) bool {
	return d.nonce == processNonce() && peerPid == os.Getpid()
}

// openDirect returns the address of a same-process peer's memory, checked against its allocation,
// after enabling this context's access to the peer's GPU where that is another one.
func (c *p2p) openDirect(d ipcDesc) (uint64, error) {
	if c.cuda == nil {
		return 0, status.Errorf(status.InvalidUsage, "the peer registered device memory, but this rank runs in host mode")
	}
	owner, err := cuda.ProbePointer(d.base)
	if err != nil {
		return 0, status.Errorf(status.RemoteError, "the peer's buffer at %#x (same process) is no device memory here: %v", d.base, err)
	}
	if owner.Ordinal != c.cuda.dev.Ordinal && !c.cuda.peerOn[owner.Ordinal] {
		if err := c.cuda.dev.EnablePeerAccess(owner); err != nil {
			var ce *cuda.Error
			if !errors.As(err, &ce) || ce.Code != cudaErrPeerAccessUnsupported {
				return 0, err
			}
			// copies still go through the driver; kernels must not touch the peer's memory
			logx.Infof(logx.P2P, "rank %d: no peer access from device %d to device %d (%v): the proxy's copies work, a kernel cannot reach the peer's buffer", c.h.Rank, c.cuda.dev.Ordinal, owner.Ordinal, err)
		} else {
			logx.Infof(logx.P2P, "rank %d: peer access from device %d to device %d enabled for a peer in this process", c.h.Rank, c.cuda.dev.Ordinal, owner.Ordinal)
		}
		c.cuda.peerOn[owner.Ordinal] = true
	}
	return c.inAllocation(d, d.base)
}
