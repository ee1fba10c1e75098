package bootstrap

import (
	"slices"
	"testing"
)

// The root answers the lowest rank of each host first (it creates the node's shared
// memory the others wait for), then the others, each part by rank.
func TestRegListLeadersFirst(t *testing.T) {
	hosts := map[int]string{0: "a", 1: "b", 2: "a", 3: "b", 4: "c", 5: "a"}
	regs := make(map[int]*rootReg)
	for rank, h := range hosts {
		regs[rank] = &rootReg{ev: rootEvent{h: &hello{rank: rank}, entry: peerEntry{hostID: h}}}
	}
	var got []int
	for _, reg := range regList(regs) {
		got = append(got, reg.ev.h.rank)
	}
	if want := []int{0, 1, 4, 2, 3, 5}; !slices.Equal(got, want) {
		t.Fatalf("answer order %v, want %v", got, want)
	}
}
