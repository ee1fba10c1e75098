package engine

import (
	"testing"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/hostmem"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestWriteStreamingEdges copies through both the plain and the non-temporal path at every
// alignment of the destination (the 16- and 32-byte store loops' heads) and around their
// 64- and 128-byte steps, checking the bytes around the copy are untouched.
func TestWriteStreamingEdges(t *testing.T) {
	const n = 1 << 16
	srcP, dstP := hostPair(t, n, n)
	src := unsafe.Slice((*byte)(srcP), n)
	dst := unsafe.Slice((*byte)(dstP), n)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	comm := NewComm(0, Backoff{1, 1, 1}, Backoff{1, 1, 1})
	defer comm.Free()
	rec := NewRegRecord(Reg{Mapped: dstP, Size: n})
	defer rec.Free()
	comm.SetStreamAuto(false) // every put in the range streams: the non-temporal path itself
	for _, stream := range []uint64{0, 64} {
		comm.SetStreamBytes(stream, 1<<20)
		for _, off := range []uint64{0, 1, 7, 15, 16, 17, 31, 32, 33, 48} {
			for _, size := range []uint64{0, 1, 31, 63, 64, 65, 127, 128, 129, 159, 1000, 4099} {
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

// TestCopyLargeAuto puts into mapped memory through the timed choice (copy.c): while both
// ways are timed and after one is kept, every put lands whole and nothing around it is
// touched; each size band decides on its own, after the same number of puts.
func TestCopyLargeAuto(t *testing.T) {
	const n = 1 << 22
	srcP, dstP := hostPair(t, n, n+64)
	src := unsafe.Slice((*byte)(srcP), n)
	dst := unsafe.Slice((*byte)(dstP), n+64)
	comm := NewComm(0, Backoff{1, 1, 1}, Backoff{1, 1, 1})
	defer comm.Free()
	comm.SetStreamBytes(1<<20, 1<<30)
	rec := NewRegRecord(Reg{Mapped: dstP, Size: n + 64})
	defer rec.Free()
	sizes := []uint64{1<<20 + 3, 1<<22 - 5} // bands 0 and 2
	for _, size := range sizes {
		if got := comm.CopyChoice(size); got != -1 {
			t.Fatalf("size %d: choice %d before any put, want -1 (timing)", size, got)
		}
	}
	for round := 0; round < 2*probes+2; round++ {
		for _, size := range sizes {
			for i := range src {
				src[i] = byte(i*13 + round)
			}
			for i := range dst {
				dst[i] = 0xee
			}
			if err := rec.Write(comm, 7, srcP, size); err != nil {
				t.Fatal(err)
			}
			for i := range dst {
				want := byte(0xee)
				if i >= 7 && uint64(i) < 7+size {
					want = src[i-7]
				}
				if dst[i] != want {
					t.Fatalf("round %d size %d: byte %d = %#x, want %#x", round, size, i, dst[i], want)
				}
			}
			got := comm.CopyChoice(size)
			if round+1 < 2*probes && got != -1 {
				t.Fatalf("round %d size %d: choice %d after %d puts, want -1 (still timing)", round, size, got, round+1)
			}
			if round+1 >= 2*probes && got != 0 && got != 1 {
				t.Fatalf("round %d size %d: choice %d after %d puts, want 0 or 1", round, size, got, round+1)
			}
		}
	}
	if got := comm.CopyChoice(1 << 25); got != -1 {
		t.Fatalf("an untouched band: choice %d, want -1", got)
	}
}

// TestCopyLargeProbesAndRecheck: a band of puts long enough to time alone decides after fewer
// puts (32 MiB: 2 each way, 64 MiB: 1), so that a short run of large puts is not spent timing
// the slower way; and a band that has chosen times the other way once in every recheck puts,
// so that one disturbed probe does not keep the slower way for the communicator's life.
func TestCopyLargeProbesAndRecheck(t *testing.T) {
	const n = 64 << 20
	srcP, dstP := hostPair(t, n, n)
	comm := NewComm(0, Backoff{1, 1, 1}, Backoff{1, 1, 1})
	defer comm.Free()
	comm.SetStreamBytes(1<<20, 1<<40)
	rec := NewRegRecord(Reg{Mapped: dstP, Size: n})
	defer rec.Free()
	put := func(size uint64) {
		t.Helper()
		if err := rec.Write(comm, 0, srcP, size); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		size   uint64
		probes int
	}{{32 << 20, 2}, {64 << 20, 1}} {
		for i := 0; i < 2*c.probes; i++ {
			if got := comm.CopyChoice(c.size); got != -1 {
				t.Fatalf("%d MiB: choice %d after %d puts, want -1 (still timing %d each way)", c.size>>20, got, i, c.probes)
			}
			put(c.size)
		}
		if got := comm.CopyChoice(c.size); got != 0 && got != 1 {
			t.Fatalf("%d MiB: choice %d after %d puts, want 0 or 1", c.size>>20, got, 2*c.probes)
		}
	}

	const size = 1 << 20 // band 0: probes puts each way
	for i := 0; i < 2*probes; i++ {
		put(size)
	}
	way := comm.CopyChoice(size)
	if way != 0 && way != 1 {
		t.Fatalf("1 MiB: choice %d after %d puts, want 0 or 1", way, 2*probes)
	}
	before := comm.CopySamples(size)
	for i := 0; i < recheck-1; i++ {
		put(size)
	}
	if got := comm.CopySamples(size); got != before {
		t.Fatalf("1 MiB: samples %v after %d chosen puts, want %v (no recheck yet)", got, recheck-1, before)
	}
	put(size)
	after := comm.CopySamples(size)
	want := before
	want[1-way]++
	if after != want {
		t.Fatalf("1 MiB: samples %v after %d chosen puts, want %v (the other way timed once)", after, recheck, want)
	}
}

// cString reads the NUL-terminated text at p.
func cString(p unsafe.Pointer) string {
	var b []byte
	for i := uintptr(0); ; i++ {
		c := *(*byte)(unsafe.Add(p, i))
		if c == 0 {
			return string(b)
		}
		b = append(b, c)
	}
}

// TestErrorRecord: a communicator's first asynchronous error stays, its last error and the
// process's follow every failure (impl/status's errs.c keeps both).
func TestErrorRecord(t *testing.T) {
	comm := NewComm(0, Backoff{1, 1, 1}, Backoff{1, 1, 1})
	defer comm.Free()
	if err := comm.Err(); err != nil {
		t.Fatalf("a new communicator has error %v", err)
	}
	comm.SetErr(status.Errorf(status.RemoteError, "first"))
	comm.SetErr(status.Errorf(status.InvalidUsage, "second"))
	if err := comm.Err(); status.CodeOf(err) != status.RemoteError || err.Error() != "first" {
		t.Errorf("Err() = %v (%v), want the first: RemoteError \"first\"", err, status.CodeOf(err))
	}
	if got := cString(comm.LastPtr()); got != "second" {
		t.Errorf("last error %q, want \"second\"", got)
	}
	if got := status.Last(); got != "second" {
		t.Errorf("the process's last error %q, want \"second\"", got)
	}
	comm.SetLast("third")
	if got := cString(comm.LastPtr()); got != "third" || status.Last() != "third" {
		t.Errorf("after SetLast: communicator %q, process %q", got, status.Last())
	}
	if err := comm.Err(); err.Error() != "first" {
		t.Errorf("SetLast changed the asynchronous error to %v", err)
	}
}

// hostPair allocates a source of srcN and a destination of dstN bytes of host memory, freed when t ends.
func hostPair(t *testing.T, srcN, dstN uint64) (src, dst unsafe.Pointer) {
	t.Helper()
	for _, b := range []struct {
		p *unsafe.Pointer
		n uint64
	}{{&src, srcN}, {&dst, dstN}} {
		p, err := hostmem.Alloc(b.n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hostmem.Free(p) })
		*b.p = p
	}
	return src, dst
}
