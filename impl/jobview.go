package impl

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/logx"
)

// The job's view of a hang: the reporting rank asks every other rank, over the bootstrap's
// point-to-point messages, which of its signal waits make no progress. The requests are
// answered by the bootstrap's own goroutines (bootstrap.SetTagHandler), whatever the
// application threads of that rank are doing; a rank that does not answer within
// jobViewBound is named as missing. The report then follows the chain of waits from this
// rank to the rank at its end: the one that waits on nothing (behind), is missing, or closes
// a cycle.

// The bootstrap tags of the requests and answers (beside teardown's ipcClosedTag).
const (
	viewRequestTag = 1<<40 + 1
	viewAnswerTag  = 1<<40 + 2
)

// jobViewBound is how long the report waits for the other ranks' answers.
const jobViewBound = 2 * time.Second

// What a peer's requests and answers may cost this rank (the bootstrap runs one handler call
// per peer and tag at a time and refuses longer messages, see bootstrap.SetTagHandler): an
// answer names at most maxViewWaits waits in at most maxViewAnswer bytes, and a peer gets at
// most viewBurst answers at once, then one per viewRefill.
const (
	maxViewWaits  = 16
	maxViewAnswer = 16 << 10
	viewBurst     = 8
	viewRefill    = 250 * time.Millisecond
)

// The notes a rank's answer may carry (anything else is printed quoted, as a peer's text).
const (
	noteBusy      = "busy (a control call holds the communicator)"
	noteDestroyed = "communicator destroyed"
)

// rankView is one rank's answer: its signal waits without progress.
type rankView struct {
	Rank  int        `json:"rank"`
	Waits []waitView `json:"waits"`
	Note  string     `json:"note,omitempty"` // why the waits are not known (control lock busy, no answer)

	unreachable bool // the request could not be sent: not an answer
}

// waitView is one connection whose last wait has made no progress.
type waitView struct {
	Peer      int     `json:"peer"`
	Tag       int     `json:"tag"`
	Want      uint64  `json:"want"`
	Signalled uint64  `json:"signalled"`
	StalledS  float64 `json:"stalled_s"`
}

var (
	viewSeq     atomic.Uint64 // request ids, unique in the process
	viewPending sync.Map      // request id -> chan rankView
)

// serveJobViews makes c's bootstrap answer other ranks' requests and take their answers.
func (c *Comm) serveJobViews() {
	limit := newViewLimiter(c.nranks)
	c.boot.SetTagHandler(viewRequestTag, 8, func(peer int, msg []byte) {
		if len(msg) != 8 || !limit.allow(peer) {
			return // the asker names this rank missing
		}
		b, err := json.Marshal(c.localView())
		if err != nil {
			return
		}
		_ = c.boot.Send(peer, viewAnswerTag, append(msg[:8:8], b...)) // the asker names us missing if this fails
	})
	c.boot.SetTagHandler(viewAnswerTag, 8+maxViewAnswer, func(peer int, msg []byte) {
		if len(msg) < 8 {
			return
		}
		ch, ok := viewPending.Load(binary.LittleEndian.Uint64(msg[:8]))
		if !ok {
			return // an answer after the bound
		}
		v := checkedView(peer, c.nranks, msg[8:])
		select {
		case ch.(chan rankView) <- v:
		default:
		}
	})
}

// checkedView is peer's answer b as this rank prints it: a view of peer's with at most
// maxViewWaits waits, each on a rank of the communicator's nranks, and a note this library
// writes; else a note saying what is wrong with it (the peer's own text quoted).
func checkedView(peer, nranks int, b []byte) rankView {
	var v rankView
	if json.Unmarshal(b, &v) != nil || v.Rank != peer {
		return rankView{Rank: peer, Note: "answered with a malformed view"}
	}
	if len(v.Waits) > maxViewWaits {
		return rankView{Rank: peer, Note: fmt.Sprintf("answered with %d waits, more than the %d an answer names", len(v.Waits), maxViewWaits)}
	}
	for _, w := range v.Waits {
		if w.Peer < 0 || w.Peer >= nranks {
			return rankView{Rank: peer, Note: fmt.Sprintf("answered with a wait on rank %d, not one of the %d ranks", w.Peer, nranks)}
		}
	}
	if v.Note != "" && v.Note != noteBusy && v.Note != noteDestroyed {
		return rankView{Rank: peer, Note: "answered with a note of its own: " + logx.PeerText(v.Note)}
	}
	return v
}

// viewLimiter bounds how often each peer gets an answer: a token bucket per peer.
type viewLimiter struct {
	mu     sync.Mutex
	tokens []float64
	last   []time.Time
}

func newViewLimiter(nranks int) *viewLimiter {
	l := &viewLimiter{tokens: make([]float64, nranks), last: make([]time.Time, nranks)}
	for i := range l.tokens {
		l.tokens[i] = viewBurst
	}
	return l
}

// allow takes one of peer's tokens, if it has one.
func (l *viewLimiter) allow(peer int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if peer < 0 || peer >= len(l.tokens) {
		return false
	}
	now := time.Now()
	if !l.last[peer].IsZero() {
		l.tokens[peer] = min(viewBurst, l.tokens[peer]+float64(now.Sub(l.last[peer]))/float64(viewRefill))
	}
	l.last[peer] = now
	if l.tokens[peer] < 1 {
		return false
	}
	l.tokens[peer]--
	return true
}

// localView is this rank's signal waits without progress.
func (c *Comm) localView() rankView {
	v := rankView{Rank: c.rank, Waits: []waitView{}}
	if !c.lockWithin(200 * time.Millisecond) {
		v.Note = noteBusy
		return v
	}
	defer c.mu.Unlock()
	if c.state == stateClosed {
		v.Note = noteDestroyed
		return v
	}
	for _, cn := range c.conns {
		if cn.eng == nil {
			continue
		}
		if s := cn.eng.Stat(); s.Stalled > 0 {
			v.Waits = append(v.Waits, waitView{Peer: s.Peer, Tag: s.Tag, Want: s.StallWant, Signalled: s.Signalled, StalledS: s.Stalled.Seconds()})
		}
	}
	sort.Slice(v.Waits, func(i, j int) bool { return v.Waits[i].StalledS > v.Waits[j].StalledS })
	if len(v.Waits) > maxViewWaits { // the longest-stalled ones: the chain follows the first
		v.Waits = v.Waits[:maxViewWaits]
	}
	return v
}

// jobView asks every other rank for its view, waiting at most bound, and returns the lines of
// the job's view.
func (c *Comm) jobView(bound time.Duration) []string {
	id := viewSeq.Add(1)
	ch := make(chan rankView, c.nranks)
	viewPending.Store(id, ch)
	defer viewPending.Delete(id)
	var req [8]byte
	binary.LittleEndian.PutUint64(req[:], id)
	for p := 0; p < c.nranks; p++ {
		if p == c.rank {
			continue
		}
		go func(p int) {
			if err := c.boot.Send(p, viewRequestTag, req[:]); err != nil {
				select {
				case ch <- rankView{Rank: p, Note: fmt.Sprintf("missing (unreachable: %v)", err), unreachable: true}:
				default:
				}
			}
		}(p)
	}
	views := map[int]rankView{c.rank: c.localView()}
	timer := time.NewTimer(bound)
	defer timer.Stop()
	answered := 0
collect:
	for len(views) < c.nranks {
		select {
		case v := <-ch:
			if _, dup := views[v.Rank]; !dup && v.Rank >= 0 && v.Rank < c.nranks {
				views[v.Rank] = v
				if !v.unreachable {
					answered++
				}
			}
		case <-timer.C:
			break collect
		}
	}
	return viewLines(c.rank, c.nranks, views, answered, bound)
}

// viewLines formats the answers (views by rank; a rank absent did not answer) and the chain of
// waits that starts at rank me.
func viewLines(me, nranks int, views map[int]rankView, answered int, bound time.Duration) []string {
	lines := []string{fmt.Sprintf("%d of %d other ranks answered within %v", answered, nranks-1, bound)}
	for r := 0; r < nranks; r++ {
		v, ok := views[r]
		switch {
		case !ok:
			lines = append(lines, fmt.Sprintf("rank %d: missing (no answer within %v)", r, bound))
		case v.Note != "":
			lines = append(lines, fmt.Sprintf("rank %d: %s", r, v.Note))
		case len(v.Waits) == 0:
			lines = append(lines, fmt.Sprintf("rank %d: no wait without progress", r))
		}
		if ok {
			for _, w := range v.Waits {
				lines = append(lines, fmt.Sprintf("rank %d waits on rank %d (tag %d) for epoch %d (no progress for %.1f s); rank %d has signalled %d",
					r, w.Peer, w.Tag, w.Want, w.StalledS, w.Peer, w.Signalled))
			}
		}
	}
	return append(lines, chainLine(me, views))
}

// chainLine follows the longest-stalled wait of each rank from me to where the chain ends.
func chainLine(me int, views map[int]rankView) string {
	path := fmt.Sprintf("rank %d", me)
	seen := map[int]bool{me: true}
	cur := me
	for {
		v, ok := views[cur]
		switch {
		case !ok || v.Note != "":
			if cur == me {
				return "chain of waits: " + path + ": unknown"
			}
			return fmt.Sprintf("chain of waits: %s, which is missing: rank %d is the one to look at", path, cur)
		case len(v.Waits) == 0:
			if cur == me {
				return "chain of waits: rank " + fmt.Sprint(me) + " waits on nothing"
			}
			return fmt.Sprintf("chain of waits: %s, which waits on nothing: rank %d is behind", path, cur)
		}
		next := v.Waits[0].Peer
		path += fmt.Sprintf(" -> rank %d", next)
		if seen[next] {
			return "chain of waits: " + path + ": a cycle (each waits on the next)"
		}
		seen[next] = true
		cur = next
	}
}
