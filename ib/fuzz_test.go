package ib

import (
	"bytes"
	"testing"
)

// FuzzUnmarshalMRInfo: a peer's memory region info decodes to what it
// encodes, or to an error; never a panic.
func FuzzUnmarshalMRInfo(f *testing.F) {
	f.Add(MRInfo{Addr: 0x7f0000001000, Size: 1 << 20, Rkey: 77}.Marshal())
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		i, err := UnmarshalMRInfo(data)
		if err == nil && !bytes.Equal(i.Marshal(), data) {
			t.Fatalf("%x decodes to %+v, which encodes differently", data, i)
		}
		if err != nil && len(data) == MRInfoSize {
			t.Fatalf("%d bytes refused: %v", len(data), err)
		}
	})
}

// FuzzUnmarshalQPInfo: the same for a peer's queue pair info.
func FuzzUnmarshalQPInfo(f *testing.F) {
	f.Add(QPInfo{LID: 1, Port: 1, LinkLayer: 1, QPN: 0x1234, MTU: 4, PSN: 99}.Marshal())
	var gid [16]byte
	gid[15] = 1
	f.Add(QPInfo{Port: 1, LinkLayer: 2, GID: gid}.Marshal())
	f.Add(make([]byte, QPInfoSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		i, err := UnmarshalQPInfo(data)
		if err == nil && !bytes.Equal(i.Marshal(), data) {
			t.Fatalf("%x decodes to %+v, which encodes differently", data, i)
		}
	})
}
