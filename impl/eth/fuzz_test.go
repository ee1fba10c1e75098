package eth

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
)

// FuzzImport: a peer's Ethernet registration (a signal slot: address, port
// and token; a data buffer: its size; or a buffer of mscclppRegisterBuffer:
// its index at the peer and its size) is accepted only in those three
// shapes; anything else is an error, never a panic.
func FuzzImport(f *testing.F) {
	var tok [tokenBytes]byte
	tok[0] = 5
	f.Add(signalBlob(netip.MustParseAddrPort("10.0.0.2:4000"), tok))
	f.Add(dataBlob(1 << 30))
	f.Add([]byte{kindData, 1, 2})
	f.Add([]byte{kindReg, 7, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{kindReg, 7, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := importReg(data)
		if err != nil {
			return
		}
		switch {
		case data[0] == kindData:
			if !bytes.Equal(dataBlob(r.Size), data) {
				t.Fatalf("data blob %x imported as %d bytes", data, r.Size)
			}
		case data[0] == kindSignal:
			if len(data) != 1+16+2+tokenBytes || r.Size != 16 {
				t.Fatalf("signal blob %x imported as %+v", data, r)
			}
		case data[0] == kindReg:
			if len(data) != 13 || r.Addr != uint64(binary.LittleEndian.Uint32(data[1:])) || r.Size != binary.LittleEndian.Uint64(data[5:]) {
				t.Fatalf("registered-buffer blob %x imported as %+v", data, r)
			}
		default:
			t.Fatalf("blob %x of kind %d imported", data, data[0])
		}
	})
}
