package nodeshm

import (
	"testing"
	"unsafe"
)

// A signaller reads the peer's sleeper count right after it stores the peer's epoch: the count
// must not share a cache line with any epoch or wait counter of the node (a read there pulls
// back the line the peer is about to read and write), and it stays inside its rank's region.
func TestSleepersApartFromEpochs(t *testing.T) {
	const nLocal = 3
	for _, maxConns := range []int{1, 2, 15, 16, 17, 64, 1024} {
		s := &Segment{nLocal: nLocal, maxConns: maxConns, region: regionSize(maxConns)}
		s.mem = make([]byte, headerBytes+nLocal*(s.region+collRegion))
		base := uintptr(unsafe.Pointer(&s.mem[0]))
		line := func(p unsafe.Pointer) uintptr { return (uintptr(p) - base) / 64 }
		busy := map[uintptr]string{} // lines of epochs and wait counters
		for l := 0; l < nLocal; l++ {
			for c := 0; c < maxConns; c++ {
				busy[line(s.Epoch(l, c))] = "an epoch"
				busy[line(s.Wait(l, c))] = "a wait counter"
			}
		}
		for l := 0; l < nLocal; l++ {
			lo, hi := uintptr(s.regionOff(l)), uintptr(s.regionOff(l)+s.region)
			for c := 0; c < maxConns; c++ {
				p := s.Sleepers(l, c)
				off := uintptr(p) - base
				if what, ok := busy[line(p)]; ok {
					t.Fatalf("maxConns %d: rank %d's sleeper count of connection %d shares line %d with %s", maxConns, l, c, line(p), what)
				}
				if off < lo || off+sleeperBytes > hi || off%sleeperBytes != 0 {
					t.Fatalf("maxConns %d: rank %d's sleeper count of connection %d at %d, outside its region [%d, %d) or unaligned", maxConns, l, c, off, lo, hi)
				}
			}
		}
	}
}
