package bootstrap

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// wholeTable is the root's answer that holds every row of rows.
func wholeTable(nonce uint64, rows []peerEntry) []byte {
	ranks := make([]int, len(rows))
	for r := range rows {
		ranks[r] = r
	}
	return encodeTable(rootTable{nonce: nonce, rows: rows}, ranks)
}

// tableRows is n rows of ranks spread over hosts hosts, rank r on host r % hosts.
func tableRows(n, hosts int) []peerEntry {
	rows := make([]peerEntry, n)
	for r := range rows {
		rows[r] = peerEntry{addr: fmt.Sprintf("10.0.%d.%d:%d", r/250, r%250+1, 4000+r), hostID: "node" + strconv.Itoa(r%hosts),
			pid: uint64(100 + r), token: nonce{byte(r), byte(r >> 8)}}
	}
	return rows
}

// The root sends a rank its host's rows and its ring and star neighbours', not all N:
// what leaves the root grows as N × ranks per host, and each answer decodes to exactly
// those rows, as the root registered them. On one host the answer is the whole table.
func TestTableAnswersRowsARankNeeds(t *testing.T) {
	for _, tc := range []struct{ n, hosts int }{{6, 3}, {16, 4}, {512, 64}, {512, 1}, {5, 5}} {
		t.Run(fmt.Sprintf("%dx%d", tc.hosts, tc.n/tc.hosts), func(t *testing.T) {
			rows := tableRows(tc.n, tc.hosts)
			answerOf := tableAnswers(42, rows)
			total := 0
			for rank := range rows {
				p := answerOf(rank)
				total += len(p)
				got, ok := decodeTable(p, tc.n)
				if !ok {
					t.Fatalf("rank %d: the answer does not decode", rank)
				}
				want := map[int]bool{0: true, (rank + 1) % tc.n: true, (rank + tc.n - 1) % tc.n: true}
				for r := rank % tc.hosts; r < tc.n; r += tc.hosts {
					want[r] = true
				}
				if (got.slot == 0) != (tc.hosts == 1) { // every rank gathers, or none
					t.Fatalf("rank %d: slot %d with %d hosts", rank, got.slot, tc.hosts)
				}
				for r, e := range got.rows {
					switch {
					case e.addr == "" && (want[r] || tc.hosts == 1):
						t.Fatalf("rank %d: the answer lacks rank %d's row", rank, r)
					case e.addr != "" && !want[r] && tc.hosts > 1:
						t.Fatalf("rank %d: the answer holds rank %d's row, which it does not need", rank, r)
					case e.addr != "" && e != rows[r]:
						t.Fatalf("rank %d: rank %d's row reads %+v, registered %+v", rank, r, e, rows[r])
					}
				}
				if got.nonce != 42 || tc.hosts > 1 && got.slot < rowLen(rows[rank]) {
					t.Fatalf("rank %d: nonce %d, slot %d", rank, got.nonce, got.slot)
				}
			}
			perHost, row := tc.n/tc.hosts, 0
			for _, e := range rows {
				row = max(row, 4+rowLen(e))
			}
			if bound := tc.n * (20 + (perHost+3)*row); tc.hosts > 1 && total > bound {
				t.Fatalf("the root sends %d bytes, more than N × (ranks per host + 3) rows (%d)", total, bound)
			}
		})
	}
}

// A communicator across hosts completes its table by the gather: after Init every rank
// has every rank's host id and pid, and the same InstanceID, and a user's AllGather
// after it works; while Joined ran, a rank knew its own host's rows (what it maps the
// node's memory with) and read unknownHost for the ranks of other hosts that are not its
// neighbours. In the 2 × 2 layout rank 2 is sent every row (its host's and its
// neighbours' are all 4), and it gathers all the same, as the others do.
func TestTableGatheredAcrossHosts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		hostOf func(r int) int
	}{{"3 hosts round robin", 9, func(r int) int { return r % 3 }}, {"2x2", 4, func(r int) int { return r / 2 }}} {
		t.Run(tc.name, func(t *testing.T) { checkTableGathered(t, tc.n, tc.hostOf) })
	}
}

func checkTableGathered(t *testing.T, n int, hostOf func(int) int) {
	addr := loopbackAddr(t)
	var mu sync.Mutex
	during := make([][]string, n)
	bs := form(t, n, func(r int) (*Bootstrap, error) {
		return InitAddr(addr, r, n, Options{HostID: "host" + strconv.Itoa(hostOf(r)), RingOnlyOnOneHost: true,
			Joined: func(b *Bootstrap) error {
				mu.Lock()
				during[b.Rank()] = b.HostIDs()
				mu.Unlock()
				return nil
			}})
	})
	want := make([]string, n)
	for r := range want {
		want[r] = "host" + strconv.Itoa(hostOf(r))
	}
	for _, b := range bs {
		r := b.Rank()
		if got := b.HostIDs(); !slices.Equal(got, want) {
			t.Fatalf("rank %d: HostIDs %q after Init, want %q", r, got, want)
		}
		if pids := b.Pids(); slices.Contains(pids, 0) {
			t.Fatalf("rank %d: Pids %v after Init", r, pids)
		}
		if b.InstanceID() != bs[0].InstanceID() {
			t.Fatalf("rank %d: InstanceID %s, rank 0's %s", r, b.InstanceID(), bs[0].InstanceID())
		}
		for p, id := range during[r] {
			neighbour := p == 0 || p == (r+1)%n || p == (r+n-1)%n
			switch {
			case hostOf(p) == hostOf(r) || neighbour:
				if id != want[p] {
					t.Fatalf("rank %d: during Joined, rank %d's host id read %q, want %q", r, p, id, want[p])
				}
			case id != unknownHost:
				t.Fatalf("rank %d: during Joined, rank %d (another host) read %q before the gather", r, p, id)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	got := make([][]byte, n)
	for _, b := range bs {
		wg.Go(func() {
			buf := make([]byte, n*4)
			buf[b.Rank()*4] = byte(b.Rank() + 1)
			errs[b.Rank()], got[b.Rank()] = b.AllGather(buf, 4), buf
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: allgather after Init: %v", r, err)
		}
		for p := 0; p < n; p++ {
			if got[r][p*4] != byte(p+1) {
				t.Fatalf("rank %d: allgather after Init: slot %d reads %d", r, p, got[r][p*4])
			}
		}
	}
}

// A host id with a NUL byte is refused where it is set: unknownHost must equal no rank's.
func TestHostIDWithNULRefused(t *testing.T) {
	_, err := InitAddr(loopbackAddr(t), 0, 2, Options{HostID: "a\x00b"})
	if err == nil {
		t.Fatal("Init took a host id with a NUL byte")
	}
	if _, ok := decodeRegister(encodeRegister("127.0.0.1:9", "a\x00b", 1)); ok {
		t.Fatal("the root takes a registration whose host id has a NUL byte")
	}
}

// The star's hub sends at most starHubMax per collective: past it, the ring.
func TestStarBoundedAtTheHub(t *testing.T) {
	for _, tc := range []struct {
		n, size int
		star    bool
	}{{3, 4, true}, {1024, 4, true}, {7, 16 << 10, true}, {8, 16 << 10, false}, {400, 100, true}, {420, 100, false}} {
		if got := useStar(tc.n, tc.size); got != tc.star {
			t.Errorf("useStar(%d ranks, %d bytes) = %v, want %v", tc.n, tc.size, got, tc.star)
		}
	}
}

// A rank whose row in the gather is not the one it registered (here: the pid the root
// sent its neighbours and host mates changes before the gather) fails Init on every
// rank, each naming that rank: the ranks that see the difference tell the root, which
// tells everyone the first failure, within the timeout.
func TestTableGatherMismatchFailsEveryRank(t *testing.T) {
	const n, timeout = 6, 10 * time.Second
	addr := loopbackAddr(t)
	start := time.Now()
	errs, _ := initSome([]int{0, 1, 2, 3, 4, 5}, func(r int) (*Bootstrap, error) {
		return InitAddr(addr, r, n, Options{HostID: "host" + strconv.Itoa(r%3), Timeout: timeout,
			Joined: func(b *Bootstrap) error {
				if b.Rank() == 2 {
					b.table[2].pid++
				}
				return nil
			}})
	})
	for _, err := range errs {
		wantCode(t, err, status.RemoteError, "rank 2's row of the table")
	}
	if took := time.Since(start); took > timeout {
		t.Fatalf("the ranks failed after %v, past the timeout (%v)", took, timeout)
	}
}
