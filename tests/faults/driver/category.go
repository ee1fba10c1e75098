package main

import (
	"fmt"
	"math/rand"
	"strings"
)

// category: one kind of fault over one transport and one cluster shape.
type category struct {
	name      string
	transport string // shm, ethernet, ib
	nodes     int
	ranks     int
	action    string // kill, stop, flap (rank faults), linkdown, linkflap (link faults)
	waitMs    int    // the ranks' wait deadline in the puts; -1: none
	plant     bool   // self-test: the driver leaves a name in node 0's /dev/shm
}

// selftests: controls the suite must catch, each with what it must count.
var selftests = []struct {
	c      category
	phase  string
	caught func(*counts) bool
	what   string
}{
	{category{name: "selftest-crash", transport: "shm", nodes: 1, ranks: 2, action: "segv", waitMs: 3000}, "puts",
		func(c *counts) bool { return c.crashes > 0 }, "a rank killed by SIGSEGV counted as a crash"},
	{category{name: "selftest-bytes", transport: "shm", nodes: 1, ranks: 2, action: "corrupt", waitMs: 3000}, "puts",
		func(c *counts) bool { return c.wrongBytes > 0 }, "wrong bytes sent counted as wrong bytes"},
	{category{name: "selftest-litter", transport: "shm", nodes: 1, ranks: 2, action: "none", waitMs: 3000, plant: true}, "puts",
		func(c *counts) bool { return c.litter > 0 }, "a name left in a node's /dev/shm counted as litter"},
	{category{name: "selftest-hang", transport: "shm", nodes: 1, ranks: 2, action: "stop", waitMs: -1}, "puts",
		func(c *counts) bool { return c.hangs > 0 }, "a wait without deadline on a stopped SHM peer counted as a hang"},
}

// categories: SHM inside one simulated node (its own /dev/shm; bounded
// waits: nothing tells a stopped process from a slow one there), Ethernet
// and the IB double across two (waits without deadline: a lost peer or link
// must end them).
var categories = []category{
	{"shm-kill", "shm", 1, 3, "kill", 3000, false},
	{"shm-stop", "shm", 1, 3, "stop", 3000, false},
	{"shm-flap", "shm", 1, 3, "flap", 3000, false},
	{"eth-kill", "ethernet", 2, 2, "kill", -1, false},
	{"eth-stop", "ethernet", 2, 2, "stop", -1, false},
	{"eth-flap", "ethernet", 2, 2, "flap", -1, false},
	{"eth-linkdown", "ethernet", 2, 2, "linkdown", -1, false},
	{"eth-linkflap", "ethernet", 2, 2, "linkflap", -1, false},
	{"ib-kill", "ib", 2, 2, "kill", -1, false},
	{"ib-stop", "ib", 2, 2, "stop", -1, false},
	{"ib-flap", "ib", 2, 2, "flap", -1, false},
	// a rank destroys its communicator while its peers still send to it (fault_rank's ACTION
	// destroy): its destroy returns at once, the peers see RemoteError
	{"shm-destroy", "shm", 1, 3, "destroy", 3000, false},
	{"eth-destroy", "ethernet", 2, 2, "destroy", -1, false},
	{"ib-destroy", "ib", 2, 2, "destroy", -1, false},
}

func allCategories() []string {
	var out []string
	for _, c := range categories {
		out = append(out, c.name)
	}
	return out
}

func pickCategories(list string) ([]category, error) {
	var out []category
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		found := false
		for _, c := range categories {
			if c.name == n {
				out = append(out, c)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown category %q (known: %s)", n, strings.Join(allCategories(), ","))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no category in %q", list)
	}
	return out, nil
}

// plan: what one run does, drawn from the suite's random stream.
type plan struct {
	phase   string // the victim's phase when its timer starts
	victim  int    // the rank hurt; for link faults the node whose link goes down
	delayUs int64  // from entering the phase (rank faults) or from the ranks' start (link faults)
	holdMs  int64  // flap: how long the rank is stopped, or the link down
	rounds  int
	chunk   int
}

var phases = []string{"init", "setup", "puts", "destroy"}

// span: roughly how long a phase takes here (measured without faults), so
// that most delays land inside it; the rest land in a later phase or after
// the rank's end (the run then counts as one where no fault fired).
func (c category) span(phase string) int64 {
	switch phase {
	case "init", "destroy":
		return 8000
	case "setup":
		if c.transport == "ethernet" {
			return 250000
		}
		return 30000
	}
	if c.transport == "ethernet" {
		return 200000
	}
	return 80000
}

func (c category) plan(rng *rand.Rand) plan {
	p := plan{rounds: 200, chunk: 65536}
	if c.transport == "ethernet" {
		p.rounds, p.chunk = 100, 1<<20
	}
	switch c.action {
	case "destroy":
		p.phase = "puts"
		p.victim = rng.Intn(c.ranks)
		p.delayUs = rng.Int63n(int64(p.rounds))
	case "linkdown", "linkflap":
		p.phase = "none"
		p.victim = 1 + rng.Intn(c.nodes-1)
		p.rounds = 400
		p.delayUs = rng.Int63n(700000)
		p.holdMs = 200 + rng.Int63n(1300)
	default:
		p.phase = phases[rng.Intn(len(phases))]
		p.victim = rng.Intn(c.ranks)
		p.delayUs = rng.Int63n(c.span(p.phase))
		p.holdMs = 50 + rng.Int63n(1000)
	}
	return p
}

func (p plan) String() string {
	return fmt.Sprintf("phase=%s victim=%d delay=%dus hold=%dms", p.phase, p.victim, p.delayUs, p.holdMs)
}
