// Package ethfuzz hands the Ethernet transport's C frame-header decoder
// (impl/eth/ethwire.h) to Go fuzz tests, which cannot use cgo themselves.
// Test support only: nothing in the library imports it, so it adds no
// symbol to libmscclpp.so.
package ethfuzz

/*
#cgo CFLAGS: -O2 -Wall
#include <stdlib.h>
#include "../ethwire.h"

// decode runs the receive thread's checks on one header against
// registrations of the given sizes (mapped[i] != 0: host memory); *why is
// NULL when a DATA frame may be written, or an ETH_REG frame (the same sizes
// standing for the mscclppRegisterBuffer buffers its index names, as regAt
// in ethrx.c finds them). Returns ethHdrDecode's result.
static int decode(const unsigned char* p, const uint64_t* sizes, const unsigned char* mapped, int nLocal, int staged,
                  ethHdr* h, const char** why)
{
  engReg local[8];
  memset(local, 0, sizeof local);
  for (int i = 0; i < nLocal && i < 8; i++) {
    local[i].size = sizes[i];
    local[i].mapped = mapped[i] ? (char*)local : NULL;
  }
  *why = NULL;
  int rc = ethHdrDecode(p, h);
  if (rc == 0 && (h->type == ETH_DATA || h->type == ETH_DATASIG)) *why = ethDataBad(h, local, nLocal, staged);
  if (rc == 0 && h->type == ETH_REG) *why = ethRegBad(h->a < (uint64_t)nLocal ? &local[h->a] : NULL, h->b, h->n);
  return rc;
}
*/
import "C"

// HdrBytes is the size of a frame header.
const HdrBytes = C.ETH_HDR_BYTES

// Frame types and magic (eth.h).
const (
	Magic    = C.ETH_MAGIC
	Data     = C.ETH_DATA
	Flag     = C.ETH_FLAG
	Fence    = C.ETH_FENCE
	Bye      = C.ETH_BYE
	RegWrite = C.ETH_REG       // a write into a buffer of mscclppRegisterBuffer
	Ping     = C.ETH_PING      // the heartbeat
	DataSig  = C.ETH_DATASIG   // a put and its signal in one frame
	SigBytes = C.ETH_SIG_BYTES // the count after a DATASIG payload
)

// Reg is one registration of the receiving rank.
type Reg struct {
	Size   uint64
	Mapped bool
}

// Hdr is a decoded header.
type Hdr struct {
	Magic, Type uint32
	A, B, N     uint64
}

// Decode decodes hdr (HdrBytes long) as the receive thread does and, for a
// DATA frame, checks it against regs (at most 8; handle 0 is the signal
// slot; a DATASIG frame the same), for an ETH_REG frame against regs as registered buffers 0..7.
// ok: a header of this protocol; why: "" when a DATA or ETH_REG frame's
// bytes may be written, else the reason it is dropped.
func Decode(hdr []byte, regs []Reg, staged bool) (h Hdr, ok bool, why string) {
	if len(hdr) != HdrBytes || len(regs) > 8 {
		panic("ethfuzz.Decode: a header of HdrBytes and at most 8 registrations")
	}
	var sizes [8]C.uint64_t
	var mapped [8]C.uchar
	for i, r := range regs {
		sizes[i] = C.uint64_t(r.Size)
		if r.Mapped {
			mapped[i] = 1
		}
	}
	st := C.int(0)
	if staged {
		st = 1
	}
	var ch C.ethHdr
	var cwhy *C.char
	p := C.CBytes(hdr)
	defer C.free(p)
	rc := C.decode((*C.uchar)(p), &sizes[0], &mapped[0], C.int(len(regs)), st, &ch, &cwhy)
	h = Hdr{uint32(ch.magic), uint32(ch._type), uint64(ch.a), uint64(ch.b), uint64(ch.n)}
	if cwhy != nil {
		why = C.GoString(cwhy)
	}
	return h, rc == 0, why
}
