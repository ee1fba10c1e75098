package p2p

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzDecodeIpcDesc: a peer's P2P registration is 96 bytes (size, offset,
// IPC handle, process nonce, allocation address); anything else is an error, never a panic.
func FuzzDecodeIpcDesc(f *testing.F) {
	good := binary.LittleEndian.AppendUint64(nil, 1<<20)
	good = binary.LittleEndian.AppendUint64(good, 4096)
	good = append(good, bytes.Repeat([]byte{0xab}, 64)...)
	good = binary.LittleEndian.AppendUint64(good, 0x1234567)
	good = binary.LittleEndian.AppendUint64(good, 1<<40)
	f.Add(good)
	f.Add(good[:95])
	f.Add(append(good, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeIpcDesc(data)
		if err != nil {
			if len(data) == ipcDescBytes {
				t.Fatalf("%d bytes refused: %v", len(data), err)
			}
			return
		}
		if again := d.marshal(); !bytes.Equal(again, data) {
			t.Fatalf("%x decodes to %+v, which encodes differently", data, d)
		}
	})
}
