package ethfuzz

import (
	"encoding/binary"
	"testing"
)

func header(magic, typ uint32, a, b, n uint64) []byte {
	h := binary.LittleEndian.AppendUint32(nil, magic)
	h = binary.LittleEndian.AppendUint32(h, typ)
	h = binary.LittleEndian.AppendUint64(h, a)
	h = binary.LittleEndian.AppendUint64(h, b)
	return binary.LittleEndian.AppendUint64(h, n)
}

// FuzzHeader feeds the Ethernet receive thread's decoder any header and any
// registrations: it must accept only this protocol's frames, and a DATA
// or DATASIG frame only when its bytes lie inside a registration the host can write
// (no overflow of offset + size), whatever the peer claims.
func FuzzHeader(f *testing.F) {
	f.Add(header(Magic, Data, 1, 0, 4096), uint64(4096), uint64(16), uint8(2), uint8(3), false)
	f.Add(header(Magic, Data, 1, 1, ^uint64(0)), uint64(4096), uint64(16), uint8(2), uint8(3), false)
	f.Add(header(Magic, Data, 1, ^uint64(0), 2), uint64(4096), uint64(16), uint8(2), uint8(3), false)
	f.Add(header(Magic, Data, 2, 0, 16), uint64(4096), uint64(16), uint8(3), uint8(1), false)
	f.Add(header(Magic, Data, 0, 0, 8), uint64(4096), uint64(16), uint8(2), uint8(3), false)
	f.Add(header(Magic, Flag, 7, 0, 0), uint64(0), uint64(0), uint8(1), uint8(0), false)
	f.Add(header(Magic, Ping, 0, 0, 0), uint64(0), uint64(0), uint8(1), uint8(0), false)
	f.Add(header(Magic, DataSig+1, 0, 0, 0), uint64(0), uint64(0), uint8(1), uint8(0), true)
	f.Add(header(Magic, DataSig, 1, 0, 4096), uint64(4096), uint64(16), uint8(2), uint8(3), false)
	f.Add(header(Magic, DataSig, 1, 8, ^uint64(0)-7), uint64(4096), uint64(16), uint8(2), uint8(3), false)
	f.Add(header(Magic, DataSig, 0, 0, 8), uint64(4096), uint64(16), uint8(2), uint8(3), false)
	f.Add(header(Magic, DataSig, 2, 0, 16), uint64(4096), uint64(16), uint8(3), uint8(1), false)
	f.Add(header(Magic, RegWrite, 1, 0, 4096), uint64(4096), uint64(16), uint8(2), uint8(0), false)
	f.Add(header(Magic, RegWrite, 0, 8, 9), uint64(4096), uint64(16), uint8(1), uint8(0), false)
	f.Add(header(Magic, RegWrite, 1, 1, ^uint64(0)), uint64(4096), uint64(16), uint8(2), uint8(0), false)
	f.Add(header(Magic, RegWrite, 4, 0, 1), uint64(4096), uint64(16), uint8(4), uint8(0), false)
	f.Add(header(0x31455350, Data, 1, 0, 1), uint64(8), uint64(0), uint8(2), uint8(3), true)
	f.Fuzz(func(t *testing.T, hdr []byte, size1, size2 uint64, nregs, mappedBits uint8, staged bool) {
		if len(hdr) < HdrBytes {
			hdr = append(hdr, make([]byte, HdrBytes-len(hdr))...)
		}
		hdr = hdr[:HdrBytes]
		regs := make([]Reg, int(nregs)%5)
		for i := range regs {
			regs[i] = Reg{Size: []uint64{16, size1, size2, size1 ^ size2}[i%4], Mapped: mappedBits&(1<<i) != 0}
		}
		h, ok, why := Decode(hdr, regs, staged)
		wantOK := binary.LittleEndian.Uint32(hdr) == Magic && h.Type >= Data && h.Type <= DataSig
		if ok != wantOK {
			t.Fatalf("header %x: accepted=%v", hdr, ok)
		}
		if ok && h.Type == RegWrite {
			// an ETH_REG write lands exactly when it lies inside the buffer its index names
			in := h.A < uint64(len(regs)) && h.B <= regs[h.A].Size && h.N <= regs[h.A].Size-h.B
			if in != (why == "") {
				t.Fatalf("header %x: ETH_REG of %d bytes at %d into buffer %d of %v: why=%q", hdr, h.N, h.B, h.A, regs, why)
			}
			return
		}
		if !ok || (h.Type != Data && h.Type != DataSig) || why != "" {
			return
		}
		// accepted for writing: check it by arbitrary-precision reasoning
		if h.A == 0 || h.A >= uint64(len(regs)) {
			t.Fatalf("header %x: DATA into handle %d of %d accepted", hdr, h.A, len(regs))
		}
		r := regs[h.A]
		if h.B > r.Size || h.N > r.Size-h.B || (!r.Mapped && !staged) {
			t.Fatalf("header %x: %d bytes at %d accepted into a registration of %d (mapped %v)", hdr, h.N, h.B, r.Size, r.Mapped)
		}
		if end := h.B + h.N; end < h.B || end > r.Size {
			t.Fatalf("header %x: the accepted range wraps or ends past %d", hdr, r.Size)
		}
	})
}
