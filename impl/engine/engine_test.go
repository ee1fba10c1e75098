package engine

import (
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestWriteStreamingEdges copies through both the plain and the non-temporal path at every
// alignment of the destination, checking the bytes around the copy are untouched.
func TestWriteStreamingEdges(t *testing.T) {
	const n = 1 << 16
	srcP, err := hostmem.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer hostmem.Free(srcP)
	dstP, err := hostmem.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer hostmem.Free(dstP)
	src := unsafe.Slice((*byte)(srcP), n)
	dst := unsafe.Slice((*byte)(dstP), n)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	comm := NewComm(0, Backoff{1, 1, 1}, Backoff{1, 1, 1})
	defer comm.Free()
	rec := NewRegRecord(Reg{Mapped: dstP, Size: n})
	defer rec.Free()
	for _, stream := range []uint64{0, 64} {
		comm.SetStreamBytes(stream, 1<<20)
		for _, off := range []uint64{0, 1, 7, 15, 16, 33} {
			for _, size := range []uint64{0, 1, 63, 64, 65, 1000, 4099} {
				for i := range dst {
					dst[i] = 0xee
				}
				if err := rec.Write(comm, off, unsafe.Add(srcP, 5), size); err != nil {
					t.Fatal(err)
				}
				for i := uint64(0); i < n; i++ {
					want := byte(0xee)
					if i >= off && i < off+size {
						want = src[5+i-off]
					}
					if dst[i] != want {
						t.Fatalf("stream %d off %d size %d: byte %d = %#x, want %#x", stream, off, size, i, dst[i], want)
					}
				}
			}
		}
	}
	if err := rec.Write(comm, n-1, srcP, 2); status.CodeOf(err) != status.InvalidArgument {
		t.Fatalf("write past the end: %v", err)
	}
}
