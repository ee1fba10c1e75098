package shm

import (
	"bytes"
	"testing"
)

// FuzzDecode: a peer's SHM registration (eight words) decodes to the words
// it holds, and anything else is an error, never a panic.
func FuzzDecode(f *testing.F) {
	f.Add(desc{kind: regHostAlloc, addr: 0x7f0000000000, size: 4096, fd: 7, ino: 99, regSize: 8192, offset: 64}.encode())
	f.Add(desc{kind: regSignal, offset: 3<<32 | 1}.encode())
	f.Add(desc{kind: regRaw, addr: 1, size: 1 << 40}.encode())
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decode(data)
		if err != nil {
			if len(data) == descBytes {
				t.Fatalf("%d bytes refused: %v", len(data), err)
			}
			return
		}
		if !bytes.Equal(d.encode(), data) {
			t.Fatalf("%x decodes to %+v, which encodes differently", data, d)
		}
	})
}
