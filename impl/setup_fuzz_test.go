package impl

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzDecodeSetup: a peer's setup message decodes to what it encodes, or to
// an error; never a panic, and the registrations it claims are bounded
// before anything is allocated for them.
func FuzzDecodeSetup(f *testing.F) {
	f.Add(setupMsg{transport: 1, pid: 1234, blobs: [][]byte{bytes.Repeat([]byte{1}, 56), {2}}}.encode())
	f.Add(setupMsg{transport: 4}.encode())
	huge := setupMsg{transport: 1, pid: 1}.encode()
	binary.LittleEndian.PutUint64(huge[16:], 1<<62)
	f.Add(huge)
	long := setupMsg{transport: 1, blobs: [][]byte{{1, 2, 3}}}.encode()
	binary.LittleEndian.PutUint32(long[24:], 0xffffffff)
	f.Add(long)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeSetup(data)
		if err != nil {
			return
		}
		if len(m.blobs) > maxSetupBlobs {
			t.Fatalf("%d registrations accepted", len(m.blobs))
		}
		for i, b := range m.blobs {
			if len(b) > maxSetupBlobSize {
				t.Fatalf("registration %d of %d bytes accepted", i, len(b))
			}
		}
		if again := m.encode(); !bytes.Equal(again, data) {
			t.Fatalf("%x decodes to a message that encodes as %x", data, again)
		}
	})
}
