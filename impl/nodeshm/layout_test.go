package nodeshm

import (
	"fmt"
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
		s.mem = make([]byte, headerBytes+nLocal*(s.region+collRegion(nLocal)))
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

// The collective slots of every local rank and parity lie apart from each other and from the
// ranks' sequence lines, inside the segment, each of the size the node's ranks all compute;
// nodes of 32 ranks and more keep the smallest slots, smaller ones take at most
// collSlotsPerNode per parity and no slot is larger than collSlotMax.
func TestCollSlotsApart(t *testing.T) {
	const maxConns = 4
	for _, nLocal := range []int{1, 2, 3, 4, 5, 8, 16, 17, 64} {
		s := &Segment{nLocal: nLocal, maxConns: maxConns, region: regionSize(maxConns)}
		s.mem = make([]byte, headerBytes+nLocal*(s.region+collRegion(nLocal)))
		slot := s.CollSlotBytes()
		if slot < collSlotMin || slot > collSlotMax || (nLocal*collSlotMin >= collSlotsPerNode && slot != collSlotMin) ||
			(slot > collSlotMin && nLocal*slot > collSlotsPerNode) {
			t.Errorf("%d local ranks: slots of %d bytes", nLocal, slot)
		}
		base := uintptr(unsafe.Pointer(&s.mem[0]))
		type span struct{ lo, hi uintptr }
		var taken []span
		add := func(what string, lo, hi uintptr) {
			if lo < uintptr(headerBytes+nLocal*s.region) || hi > uintptr(len(s.mem)) {
				t.Fatalf("%d local ranks: %s at [%d, %d), outside the collective areas", nLocal, what, lo, hi)
			}
			for _, o := range taken {
				if lo < o.hi && o.lo < hi {
					t.Fatalf("%d local ranks: %s at [%d, %d) overlaps [%d, %d)", nLocal, what, lo, hi, o.lo, o.hi)
				}
			}
			taken = append(taken, span{lo, hi})
		}
		for l := 0; l < nLocal; l++ {
			seq := uintptr(unsafe.Pointer(s.CollSeq(l))) - base
			add(fmt.Sprintf("rank %d's sequence line", l), seq, seq+64)
			for p := 0; p < 2; p++ {
				b := s.CollSlot(l, p)
				if len(b) != slot || cap(b) != slot {
					t.Fatalf("%d local ranks: rank %d's slot %d has %d bytes (cap %d), want %d", nLocal, l, p, len(b), cap(b), slot)
				}
				lo := uintptr(unsafe.Pointer(&b[0])) - base
				add(fmt.Sprintf("rank %d's slot %d", l, p), lo, lo+uintptr(slot))
			}
		}
	}
}
