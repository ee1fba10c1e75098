package bootstrap

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
	"golang.org/x/sys/unix"
)

// logSink collects log lines and lets a test wait for one.
type logSink struct {
	mu     sync.Mutex
	lines  []string
	notify chan struct{}
}

func newLogSink() *logSink { return &logSink{notify: make(chan struct{}, 1)} }

func (l *logSink) logf(warn bool, format string, args ...any) {
	level := "INFO"
	if warn {
		level = "WARN"
	}
	l.mu.Lock()
	l.lines = append(l.lines, level+" "+fmt.Sprintf(format, args...))
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

func (l *logSink) has(substr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, substr) {
			return true
		}
	}
	return false
}

// waitFor waits until a line containing substr was logged.
func (l *logSink) waitFor(t testing.TB, substr string) {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for !l.has(substr) {
		select {
		case <-l.notify:
		case <-timer.C:
			l.mu.Lock()
			t.Fatalf("no log line containing %q; got:\n%s", substr, strings.Join(l.lines, "\n"))
		}
	}
}

func freePort(t testing.TB, host string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", host, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func loopbackAddr(t testing.TB) string {
	return "127.0.0.1:" + strconv.Itoa(freePort(t, "127.0.0.1"))
}

// deadAddr is a loopback address where nothing listens, for as long as t
// runs: a socket bound there, never listening, refuses every connection and
// keeps the port from any other listener (a port freePort found free may be
// taken by another process's listener before it is dialled).
func deadAddr(t testing.TB) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(sa.(*unix.SockaddrInet4).Port)
}

// form starts n ranks concurrently with mk and fails the test unless all succeed.
func form(t testing.TB, n int, mk func(rank int) (*Bootstrap, error)) []*Bootstrap {
	t.Helper()
	bs, err := formErr(t, n, mk)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// formAddr forms an n-rank communicator with InitAddr on a loopback port.
func formAddr(t testing.TB, n int, opts Options) []*Bootstrap {
	addr := loopbackAddr(t)
	return form(t, n, func(r int) (*Bootstrap, error) { return InitAddr(addr, r, n, opts) })
}

// each runs f for every rank concurrently and returns the errors.
func each(bs []*Bootstrap, f func(b *Bootstrap) error) []error {
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Go(func() { errs[i] = f(b) })
	}
	wg.Wait()
	return errs
}

// closeAll closes, when t ends, every bootstrap of bs that was made.
func closeAll(t testing.TB, bs []*Bootstrap) {
	t.Cleanup(func() {
		for _, b := range bs {
			if b != nil {
				b.Close()
			}
		}
	})
}

func noErrs(t testing.TB, what string, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("%s: rank %d: %v", what, r, err)
		}
	}
}

func slotByte(rank, iter, i int) byte { return byte(rank*31 + iter*7 + i*13 + 1) }

// checkAllGather runs iters allgathers of size bytes and checks every slot.
func checkAllGather(t testing.TB, bs []*Bootstrap, size, iters int) {
	t.Helper()
	n := len(bs)
	errs := each(bs, func(b *Bootstrap) error {
		data := make([]byte, n*size)
		for it := range iters {
			clear(data)
			me := b.Rank()
			for i := range size {
				data[me*size+i] = slotByte(me, it, i)
			}
			if err := b.AllGather(data, size); err != nil {
				return err
			}
			for r := range n {
				for i := 0; i < size; i += max(1, size/97) {
					if got, want := data[r*size+i], slotByte(r, it, i); got != want {
						return fmt.Errorf("iter %d: slot %d byte %d = %d, want %d", it, r, i, got, want)
					}
				}
			}
		}
		return nil
	})
	noErrs(t, fmt.Sprintf("allgather of %d bytes", size), errs)
}

func wantCode(t testing.TB, err error, c status.Code, substr ...string) {
	t.Helper()
	if got := status.CodeOf(err); got != c {
		t.Fatalf("error %v: code %v, want %v", err, got, c)
	}
	for _, s := range substr {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not mention %q", err, s)
		}
	}
}

func TestSingleRank(t *testing.T) {
	t.Setenv(EnvSocketIfname, "lo")
	id, err := NewID(Options{})
	if err != nil {
		t.Fatal(err)
	}
	b1, err := Init(id, 0, 1, Options{HostID: "h"})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := InitAddr("127.0.0.1:1", 0, 1, Options{HostID: "h2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []*Bootstrap{b1, b2} {
		if b.Rank() != 0 || b.Size() != 1 || len(b.HostIDs()) != 1 {
			t.Fatalf("rank %d size %d hosts %v", b.Rank(), b.Size(), b.HostIDs())
		}
		data := []byte{1, 2, 3}
		if err := b.AllGather(data, 3); err != nil || !bytes.Equal(data, []byte{1, 2, 3}) {
			t.Fatalf("allgather: %v %v", err, data)
		}
		if err := b.Barrier(); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(0, 7, []byte("self")); err != nil {
			t.Fatal(err)
		}
		if msg, err := b.Recv(0, 7); err != nil || string(msg) != "self" {
			t.Fatalf("recv: %q %v", msg, err)
		}
		b.Close()
		b.Close()
		wantCode(t, b.Barrier(), status.InvalidUsage, "Close")
		wantCode(t, b.Send(0, 1, nil), status.InvalidUsage)
	}
	if b1.HostIDs()[0] != "h" || b1.Magic() != id.Magic() {
		t.Fatalf("host ids %v magic %#x", b1.HostIDs(), b1.Magic())
	}
}

func TestAllGatherInProcess(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 4, 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			bs := formAddr(t, n, Options{Timeout: 20 * time.Second})
			for r, b := range bs {
				if b.Rank() != r || b.Size() != n {
					t.Fatalf("rank %d: Rank()=%d Size()=%d", r, b.Rank(), b.Size())
				}
			}
			checkAllGather(t, bs, 1, 50)
			checkAllGather(t, bs, 4, 50)
			checkAllGather(t, bs, 1000, 10)
			checkAllGather(t, bs, 1<<20, 2)
			noErrs(t, "barrier", each(bs, func(b *Bootstrap) error {
				for range 50 {
					if err := b.Barrier(); err != nil {
						return err
					}
				}
				return nil
			}))
		})
	}
}

func TestAllGather64MiB(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	t.Parallel()
	bs := formAddr(t, 2, Options{})
	const size = 64 << 20
	noErrs(t, "64 MiB", each(bs, func(b *Bootstrap) error {
		data := make([]byte, 2*size)
		me := b.Rank()
		for i := me * size; i < (me+1)*size; i += 4096 {
			data[i] = byte(me + 1)
		}
		if err := b.AllGather(data, size); err != nil {
			return err
		}
		for r := range 2 {
			for i := r * size; i < (r+1)*size; i += 4096 {
				if data[i] != byte(r+1) {
					return fmt.Errorf("byte %d = %d", i, data[i])
				}
			}
		}
		return nil
	}))
}

func TestHostIDs(t *testing.T) {
	addr := loopbackAddr(t)
	bs := form(t, 3, func(r int) (*Bootstrap, error) {
		return InitAddr(addr, r, 3, Options{HostID: "host" + strconv.Itoa(r%2)})
	})
	want := []string{"host0", "host1", "host0"}
	for _, b := range bs {
		if got := b.HostIDs(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("rank %d: HostIDs %v", b.Rank(), got)
		}
		if b.Magic() != bs[0].Magic() {
			t.Fatal("magic differs")
		}
	}
}

// TestTableCarriesPidsAndNonce: the root's table brings every rank's pid and one nonce per
// instance of the communicator (what init used to gather in a second allgather).
func TestTableCarriesPidsAndNonce(t *testing.T) {
	addr := loopbackAddr(t)
	var nonces []uint64
	for round := 0; round < 2; round++ {
		bs := form(t, 3, func(r int) (*Bootstrap, error) { return InitAddr(addr, r, 3, Options{}) })
		for _, b := range bs {
			if got := b.Pids(); len(got) != 3 || got[0] != os.Getpid() || got[1] != os.Getpid() || got[2] != os.Getpid() {
				t.Fatalf("rank %d: Pids %v, want this process's %d thrice", b.Rank(), got, os.Getpid())
			}
			if b.Nonce() == 0 || b.Nonce() != bs[0].Nonce() {
				t.Fatalf("rank %d: nonce %#x, rank 0's %#x", b.Rank(), b.Nonce(), bs[0].Nonce())
			}
		}
		nonces = append(nonces, bs[0].Nonce())
		closeAll(t, bs)
	}
	if nonces[0] == nonces[1] {
		t.Fatalf("a communicator re-formed at %s has the same nonce %#x", addr, nonces[0])
	}
}

func TestSendRecvTags(t *testing.T) {
	t.Parallel()
	bs := formAddr(t, 3, Options{Timeout: 10 * time.Second})
	const perTag = 20
	// Rank 0 and rank 2 each send to rank 1 on tags 1..3, interleaved.
	noErrs(t, "send", each([]*Bootstrap{bs[0], bs[2]}, func(b *Bootstrap) error {
		for i := range perTag {
			for tag := 1; tag <= 3; tag++ {
				if err := b.Send(1, tag, []byte(fmt.Sprintf("%d/%d/%d", b.Rank(), tag, i))); err != nil {
					return err
				}
			}
		}
		return b.Send(1, -5, nil)
	}))
	// Rank 1 receives tag 3 first, then 1, then 2, from rank 2 first.
	for _, from := range []int{2, 0} {
		for _, tag := range []int{3, 1, 2} {
			for i := range perTag {
				msg, err := bs[1].Recv(from, tag)
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf("%d/%d/%d", from, tag, i); string(msg) != want {
					t.Fatalf("got %q, want %q", msg, want)
				}
			}
		}
		if msg, err := bs[1].Recv(from, -5); err != nil || len(msg) != 0 {
			t.Fatalf("empty message: %q %v", msg, err)
		}
	}
	// Large messages both ways at once, and concurrent senders to one peer.
	big := bytes.Repeat([]byte("x"), 3<<20)
	noErrs(t, "big", each(bs[:2], func(b *Bootstrap) error {
		peer := 1 - b.Rank()
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for g := range 4 {
			wg.Go(func() { errs[g] = b.Send(peer, 100+g, big) })
		}
		for g := range 4 {
			msg, err := b.Recv(peer, 100+g)
			if err != nil {
				return err
			}
			if !bytes.Equal(msg, big) {
				return fmt.Errorf("big message corrupted")
			}
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}))
}

func TestRecvTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	underStallsFormed(t, 2, timeout, func(bs []*Bootstrap) error {
		start := time.Now()
		_, err := bs[0].Recv(1, 42)
		if err := codeErr(err, status.RemoteError, "rank 1", "tag 42"); err != nil {
			return err
		}
		if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
			return fmt.Errorf("timed out after %v", d)
		}
		return nil
	})
}

func TestCollectiveTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	cases := []struct {
		n, waiting, absent int
		want               string
	}{
		{2, 0, 1, "no data from rank 1 within 300ms"}, // ring
		{3, 1, 0, "no data from rank 0 within 300ms"}, // star spoke waits for rank 0
		{3, 0, 1, "no data from rank 1 within 300ms"}, // rank 0 waits for a spoke
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			underStallsFormed(t, c.n, timeout, func(bs []*Bootstrap) error {
				return collectiveTimeout(bs, c.waiting, c.absent, timeout, c.want)
			})
		})
	}
}

// collectiveTimeout runs a barrier on the ranks of bs (formed with timeout)
// without rank absent: every rank fails with RemoteError between timeout and
// timeout + 2 s, rank waiting's error says want.
func collectiveTimeout(bs []*Bootstrap, waiting, absent int, timeout time.Duration, want string) error {
	start := time.Now()
	var present []*Bootstrap
	for r, b := range bs {
		if r != absent {
			present = append(present, b)
		}
	}
	errs := each(present, func(b *Bootstrap) error { return b.Barrier() })
	if d := time.Since(start); d < timeout-deadlineSlack || d > timeout+2*time.Second {
		return fmt.Errorf("barrier failed after %v", d)
	}
	for i, b := range present {
		var parts []string
		if b.Rank() == waiting {
			parts = append(parts, want)
		}
		if err := codeErr(errs[i], status.RemoteError, parts...); err != nil {
			return fmt.Errorf("rank %d: %w", b.Rank(), err)
		}
	}
	return nil
}

func TestPeerClosedRecv(t *testing.T) {
	bs := formAddr(t, 2, Options{Timeout: 20 * time.Second})
	if err := bs[1].Send(0, 1, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	bs[1].Close()
	msg, err := bs[0].Recv(1, 1)
	if err != nil || string(msg) != "last words" {
		t.Fatalf("queued message: %q %v", msg, err)
	}
	start := time.Now()
	_, err = bs[0].Recv(1, 1)
	wantCode(t, err, status.RemoteError, "rank 1")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("dead peer noticed after %v", d)
	}
	// The ring is broken too.
	wantCode(t, bs[0].Barrier(), status.RemoteError, "rank 1")
	wantCode(t, bs[0].Send(1, 1, []byte("x")), status.RemoteError)
}

func TestInitAddrForms(t *testing.T) {
	cases := []string{
		"127.0.0.1:" + strconv.Itoa(freePort(t, "127.0.0.1")),
		"localhost:" + strconv.Itoa(freePort(t, "127.0.0.1")),
	}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		cases = append(cases, "[::1]:"+strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
		ln.Close()
	} else {
		t.Logf("no IPv6 loopback: %v", err)
	}
	for _, addr := range cases {
		t.Run(addr, func(t *testing.T) {
			bs := form(t, 3, func(r int) (*Bootstrap, error) { return InitAddr(addr, r, 3, Options{}) })
			checkAllGather(t, bs, 8, 5)
			if strings.HasPrefix(addr, "[::1]") && !strings.HasPrefix(bs[1].ListenAddr(), "[::1]") {
				t.Fatalf("listener %s is not on the root's family", bs[1].ListenAddr())
			}
		})
	}
}

func TestNewIDInit(t *testing.T) {
	for _, ifname := range []string{"", "lo"} {
		t.Run("ifname="+ifname, func(t *testing.T) {
			t.Setenv(EnvSocketIfname, ifname)
			id, err := NewID(Options{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ra, err := id.RootAddr()
			if err != nil || ra.Port() == 0 {
				t.Fatalf("root addr %v %v", ra, err)
			}
			if ifname == "lo" && !ra.Addr().IsLoopback() {
				t.Fatalf("root at %v with %s=lo", ra, EnvSocketIfname)
			}
			bs := form(t, 4, func(r int) (*Bootstrap, error) { return Init(id, r, 4, Options{}) })
			if bs[0].Magic() != id.Magic() {
				t.Fatal("magic differs from the id's")
			}
			checkAllGather(t, bs, 4, 10)
		})
	}
}

func TestCommIDEnv(t *testing.T) {
	addr := loopbackAddr(t)
	t.Setenv(EnvCommID, addr)
	id, err := NewID(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ra, _ := id.RootAddr(); ra.String() != addr {
		t.Fatalf("root at %v, want %s", ra, addr)
	}
	bs := form(t, 3, func(r int) (*Bootstrap, error) { return Init(id, r, 3, Options{}) })
	checkAllGather(t, bs, 4, 3)

	t.Setenv(EnvCommID, "not an address")
	_, err = NewID(Options{})
	wantCode(t, err, status.InvalidArgument, EnvCommID, "not an address")
}

// initSome runs Init for the given ranks and returns their errors and the
// longest time one took.
func initSome(ranks []int, mk func(r int) (*Bootstrap, error)) ([]error, time.Duration) {
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	start := time.Now()
	for i, r := range ranks {
		wg.Go(func() {
			b, err := mk(r)
			if err == nil {
				b.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errs, time.Since(start)
}

func TestMissingRank(t *testing.T) {
	t.Setenv(EnvSocketIfname, "lo")
	const timeout = time.Second
	// The ranks present must reach the root well within the timeout: a stall
	// of a quarter of it may break that.
	t.Run("NewID", func(t *testing.T) {
		underStalls(t, timeout/4, func() error {
			id, err := NewID(Options{Timeout: timeout})
			if err != nil {
				return err
			}
			ra, _ := id.RootAddr()
			errs, took := initSome([]int{0, 1, 2}, func(r int) (*Bootstrap, error) {
				return Init(id, r, 4, Options{Timeout: timeout})
			})
			return missingErrs(errs, took, timeout+1500*time.Millisecond, "rank 3 never connected to the root at "+ra.String()+" within 1s")
		})
	})
	t.Run("InitAddr", func(t *testing.T) {
		underStalls(t, timeout/4, func() error {
			addr := loopbackAddr(t)
			errs, took := initSome([]int{0, 1}, func(r int) (*Bootstrap, error) {
				return InitAddr(addr, r, 4, Options{Timeout: timeout})
			})
			return missingErrs(errs, took, timeout+1500*time.Millisecond, "ranks 2,3 never connected to the root at "+addr)
		})
	})
	t.Run("NoRoot", func(t *testing.T) {
		underStalls(t, time.Second, func() error {
			addr := deadAddr(t)
			start := time.Now()
			_, err := InitAddr(addr, 1, 2, Options{Timeout: 300 * time.Millisecond})
			if err := codeErr(err, status.RemoteError, "no answer from the root at "+addr+" within the bootstrap timeout (300ms)"); err != nil {
				return err
			}
			if d := time.Since(start); d > 3*time.Second {
				return fmt.Errorf("took %v", d)
			}
			return nil
		})
	})
}

// A rank that reaches the root after it timed out waiting for others (or whose
// registration was on its way then: a loaded machine) hears why, as after any
// failure before the table: the root lingers a timeout answering late ranks.
func TestLateRankHearsWhy(t *testing.T) {
	const timeout = time.Second
	underStalls(t, timeout/2, func() error { // a stall of rank 1's start past the linger
		addr := loopbackAddr(t)
		want := "ranks 1,2 never connected to the root at " + addr + " within 1s"
		_, err := InitAddr(addr, 0, 3, Options{Timeout: timeout})
		if err := codeErr(err, status.RemoteError, want); err != nil {
			return fmt.Errorf("rank 0: %w", err)
		}
		_, err = InitAddr(addr, 1, 3, Options{Timeout: timeout})
		if err := codeErr(err, status.RemoteError, want); err != nil {
			return fmt.Errorf("rank 1, after rank 0 failed: %w", err)
		}
		return nil
	})
}

// missingErrs is nil when every error of errs is a RemoteError mentioning want and took is at most limit.
func missingErrs(errs []error, took, limit time.Duration, want string) error {
	for r, err := range errs {
		if err := codeErr(err, status.RemoteError, want); err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	if took > limit {
		return fmt.Errorf("took %v", took)
	}
	return nil
}

func TestRankClosedMidAllGather(t *testing.T) {
	const n = 4
	bs := formAddr(t, n, Options{Timeout: 30 * time.Second})
	const iters = 20
	done := make(chan struct{})
	errs := make([]error, n)
	times := make([]time.Time, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			data := make([]byte, 4*n)
			for i := 0; ; i++ {
				if r == 1 && i == iters {
					close(done) // the closer may now close this rank, maybe mid-AllGather
				}
				if err := bs[r].AllGather(data, 4); err != nil {
					errs[r], times[r] = err, time.Now()
					return
				}
			}
		})
	}
	<-done
	closed := time.Now()
	bs[1].Close()
	wg.Wait()
	for r, err := range errs {
		if r == 1 {
			wantCode(t, err, status.InvalidUsage, "Close")
			continue
		}
		wantCode(t, err, status.RemoteError)
		if d := times[r].Sub(closed); d > 5*time.Second {
			t.Fatalf("rank %d noticed after %v", r, d)
		}
	}
	// Rank 2 reads from rank 1: its error names it.
	wantCode(t, errs[2], status.RemoteError, "rank 1")
	// Later calls keep failing with the same error.
	if err := bs[2].Barrier(); err != errs[2] {
		t.Fatalf("later call: %v, want %v", err, errs[2])
	}
}

// TestRankClosedTopologies closes one rank while the others run
// collectives over each topology: the star (small data, N ≥ 3) with a spoke
// or rank 0 gone, and the ring (large slots, and N = 2).
func TestRankClosedTopologies(t *testing.T) {
	cases := []struct {
		name          string
		n, size, dead int
	}{
		{"star-spoke", 4, 4, 2},
		{"star-hub", 4, 4, 0},
		{"ring-small", 3, 8 << 10, 1},
		{"ring-large", 3, 1 << 20, 1},
		{"ring-2", 2, 4, 1},
		{"barrier-star", 5, 0, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bs := formAddr(t, c.n, Options{Timeout: 30 * time.Second})
			bs[c.dead].Close()
			start := time.Now()
			errs := each(bs, func(b *Bootstrap) error {
				if b.Rank() == c.dead {
					return nil
				}
				if c.size == 0 {
					return b.Barrier()
				}
				return b.AllGather(make([]byte, c.n*c.size), c.size)
			})
			for r, err := range errs {
				switch {
				case r == c.dead:
				case c.size > inlineMax && r != (c.dead+1)%c.n:
					// No abort frames while large slots stream: the failure
					// cascades as closed connections.
					wantCode(t, err, status.RemoteError, "closed the connection")
				default:
					wantCode(t, err, status.RemoteError, fmt.Sprintf("rank %d closed", c.dead))
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("survivors noticed after %v", d)
			}
		})
	}
}

func TestAbort(t *testing.T) {
	bs := formAddr(t, 3, Options{Timeout: 30 * time.Second})
	myErr := status.Errorf(status.InternalError, "test abort")
	recvErr := make(chan error, 1)
	go func() {
		_, err := bs[0].Recv(2, 9)
		recvErr <- err
	}()
	bs[0].Abort(myErr)
	if err := <-recvErr; err != myErr {
		t.Fatalf("pending recv: %v", err)
	}
	if err := bs[0].AllGather(make([]byte, 3), 1); err != myErr {
		t.Fatalf("later allgather: %v", err)
	}
	errs := each(bs[1:], func(b *Bootstrap) error { return b.Barrier() })
	for _, err := range errs {
		wantCode(t, err, status.RemoteError)
	}
}

func TestMismatchedCollective(t *testing.T) {
	checkMismatchedGather(t, func(rank int) int { return 4 + 4*rank })
}

// checkMismatchedGather gathers sizeOf(rank) bytes per rank on two ranks, sizes that differ:
// every rank fails, at least one with InvalidUsage, and none hangs.
func checkMismatchedGather(t *testing.T, sizeOf func(rank int) int) {
	t.Helper()
	bs := formAddr(t, 2, Options{Timeout: 30 * time.Second})
	errs := each(bs, func(b *Bootstrap) error {
		size := sizeOf(b.Rank())
		return b.AllGather(make([]byte, 2*size), size)
	})
	usage := 0
	for _, err := range errs {
		if err == nil {
			t.Fatal("mismatched allgather succeeded")
		}
		if status.CodeOf(err) == status.InvalidUsage {
			usage++
		}
	}
	if usage == 0 {
		t.Fatalf("no InvalidUsage among %v", errs)
	}
}

func TestConcurrentUse(t *testing.T) {
	const n = 4
	bs := formAddr(t, n, Options{Timeout: 30 * time.Second})
	noErrs(t, "mixed", each(bs, func(b *Bootstrap) error {
		var wg sync.WaitGroup
		errs := make([]error, 3)
		// Collectives from two goroutines: serialized by the bootstrap; the
		// ranks may pair them up differently, so both goroutines run the same
		// operation with data that depends only on the rank.
		for g := range 2 {
			wg.Go(func() {
				data := make([]byte, 8*n)
				for range 30 {
					data[8*b.Rank()] = byte(b.Rank() + 1)
					if errs[g] = b.AllGather(data, 8); errs[g] != nil {
						return
					}
					for p := range n {
						if data[8*p] != byte(p+1) {
							errs[g] = fmt.Errorf("slot %d = %d", p, data[8*p])
							return
						}
					}
				}
			})
		}
		wg.Go(func() {
			for i := range 30 {
				for p := range n {
					if errs[2] = b.Send(p, i%3, []byte{byte(b.Rank()), byte(i)}); errs[2] != nil {
						return
					}
				}
				for p := range n {
					msg, err := b.Recv(p, i%3)
					if err != nil {
						errs[2] = err
						return
					}
					if msg[0] != byte(p) || msg[1] != byte(i) {
						errs[2] = fmt.Errorf("from %d got %v at %d", p, msg, i)
						return
					}
				}
			}
		})
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}))
}

func TestTwoCommunicators(t *testing.T) {
	t.Setenv(EnvSocketIfname, "lo")
	id, err := NewID(Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := loopbackAddr(t)
	var a, b []*Bootstrap
	var wg sync.WaitGroup
	wg.Go(func() { a = form(t, 4, func(r int) (*Bootstrap, error) { return Init(id, r, 4, Options{}) }) })
	wg.Go(func() { b = form(t, 3, func(r int) (*Bootstrap, error) { return InitAddr(addr, r, 3, Options{}) }) })
	wg.Wait()
	if a == nil || b == nil {
		t.FailNow()
	}
	if a[0].Magic() == b[0].Magic() {
		t.Fatal("same magic")
	}
	wg.Go(func() { checkAllGather(t, a, 16, 30) })
	wg.Go(func() { checkAllGather(t, b, 16, 30) })
	wg.Wait()
}

func TestReinitSamePort(t *testing.T) {
	addr := loopbackAddr(t)
	for i := range 5 {
		bs := make([]*Bootstrap, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Go(func() { bs[r], errs[r] = InitAddr(addr, r, 2, Options{Timeout: 10 * time.Second}) })
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("round %d rank %d: %v", i, r, err)
			}
		}
		noErrs(t, "barrier", each(bs, func(b *Bootstrap) error { return b.Barrier() }))
		for _, b := range bs {
			b.Close()
		}
	}
}

// poke connects to addr, writes msg and optionally closes at once.
func poke(t *testing.T, addr string, msg []byte, closeNow bool) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg) > 0 {
		c.Write(msg)
	}
	if closeNow {
		c.Close()
		return nil
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestStrangersAtRoot(t *testing.T) {
	addr := loopbackAddr(t)
	magic, key := testKey(t, addr)
	logs := newLogSink()
	opts := Options{Timeout: 10 * time.Second, Logf: logs.logf}
	bs := make([]*Bootstrap, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { bs[0], errs[0] = InitAddr(addr, 0, 3, opts) })
	logs.waitFor(t, "rank 0 registered")

	var wrong [keyBytes]byte
	wrong[0] = 1
	reg := encodeRegister("127.0.0.1:1", "", 1)
	poke(t, addr, []byte("GET / HTTP/1.0\r\n\r\n"+strings.Repeat("x", 120)), false)
	c, ch := dialChallenge(t, addr)
	c.Write(rawHello(kindRegister, magic, &wrong, &ch, 1, 3, reg))
	wantRejected(t, c, rejectKey)
	c, ch = dialChallenge(t, addr)
	c.Write(rawHello(kindRegister, magic+1, &key, &ch, 1, 3, reg))
	wantRejected(t, c, rejectMagic)
	c, ch = dialChallenge(t, addr)
	c.Write(rawHello(kindRegister, magic, &key, &ch, 1, 3, reg)[:10])
	c.Close()
	poke(t, addr, nil, false) // silent: dropped when the root finishes
	for _, want := range []string{"garbage", "did not prove the key", "another communicator",
		"closed the connection after 10 bytes"} {
		logs.waitFor(t, want)
	}
	for r := 1; r < 3; r++ {
		wg.Go(func() { bs[r], errs[r] = InitAddr(addr, r, 3, opts) })
	}
	wg.Wait()
	closeAll(t, bs)
	noErrs(t, "init", errs)
	checkAllGather(t, bs, 4, 3)
}

// TestSlowStrangers: connections that send nothing are dropped after the
// handshake deadline, at the root and at a rank, and logged.
func TestSlowStrangers(t *testing.T) {
	saved := maxHandshake
	maxHandshake = 200 * time.Millisecond
	t.Cleanup(func() { maxHandshake = saved })
	addr := loopbackAddr(t)
	logs := newLogSink()
	opts := Options{Timeout: 10 * time.Second, Logf: logs.logf}
	bs := make([]*Bootstrap, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { bs[0], errs[0] = InitAddr(addr, 0, 2, opts) })
	logs.waitFor(t, "rank 0 registered")
	poke(t, addr, []byte("MSC"), false)
	logs.waitFor(t, "sent no complete hello in time (3 bytes)")
	wg.Go(func() { bs[1], errs[1] = InitAddr(addr, 1, 2, opts) })
	wg.Wait()
	closeAll(t, bs)
	noErrs(t, "init", errs)
	poke(t, bs[1].ListenAddr(), nil, false)
	logs.waitFor(t, "sent no complete hello in time (0 bytes)")
	noErrs(t, "barrier", each(bs, func(b *Bootstrap) error { return b.Barrier() }))
}

func TestStrangersAtRank(t *testing.T) {
	logs := newLogSink()
	addr := loopbackAddr(t)
	bs := form(t, 3, func(r int) (*Bootstrap, error) {
		return InitAddr(addr, r, 3, Options{Timeout: 10 * time.Second, Logf: logs.logf})
	})
	b := bs[1]
	var wrong [keyBytes]byte
	la := b.ListenAddr()
	send := func(to string, kind byte, key *[keyBytes]byte, rank, nranks int, cut int) {
		c, ch := dialChallenge(t, to)
		msg := rawHello(kind, b.magic, key, &ch, rank, nranks, nil)
		if cut > 0 {
			c.Write(msg[:cut])
			c.Close()
			return
		}
		c.Write(msg)
	}
	poke(t, la, bytes.Repeat([]byte{0xff}, 100), false)
	send(la, kindP2P, &wrong, 0, 3, 0)
	send(la, kindRing, &b.key, 0, 3, 30)
	send(la, kindRing, &b.key, 2, 3, 0) // not the predecessor
	send(la, kindRing, &b.key, 0, 3, 0) // a second ring connection
	send(la, kindP2P, &b.key, 7, 3, 0)  // out of range
	send(la, kindP2P, &b.key, 0, 4, 0)  // wrong nranks
	send(la, kindAck, &b.key, 0, 3, 0)  // wrong kind
	send(la, kindRegister, &b.key, 0, 3, 0)
	send(la, kindStar, &b.key, 2, 3, 0) // star connections go to rank 0
	send(bs[0].ListenAddr(), kindStar, &b.key, 2, 3, 0)
	for _, want := range []string{"garbage", "did not prove the key", "closed the connection after 30 bytes",
		"ring predecessor is rank 0", "second ring connection", "claims to be rank 7", "nranks=4",
		"kind 4 hello", "kind 1 hello", "not 0", "unexpected star connection"} {
		logs.waitFor(t, want)
	}
	checkAllGather(t, bs, 4, 3)
	noErrs(t, "p2p", each(bs, func(b *Bootstrap) error {
		next, prev := (b.Rank()+1)%3, (b.Rank()+2)%3
		if err := b.Send(next, 5, []byte{byte(b.Rank())}); err != nil {
			return err
		}
		msg, err := b.Recv(prev, 5)
		if err == nil && (len(msg) != 1 || msg[0] != byte(prev)) {
			err = fmt.Errorf("got %v", msg)
		}
		return err
	}))
}

func TestBadArguments(t *testing.T) {
	addr := loopbackAddr(t)
	inval := []func() error{
		func() error { _, err := InitAddr(addr, 0, 0, Options{}); return err },
		func() error { _, err := InitAddr(addr, 0, -1, Options{}); return err },
		func() error { _, err := InitAddr(addr, 0, MaxRanks+1, Options{}); return err },
		func() error { _, err := InitAddr(addr, -1, 2, Options{}); return err },
		func() error { _, err := InitAddr(addr, 2, 2, Options{}); return err },
		func() error { _, err := InitAddr(addr, 0, 2, Options{Timeout: -1}); return err },
		func() error { _, err := InitAddr("127.0.0.1:0", 0, 2, Options{}); return err },
		func() error { _, err := InitAddr("nonsense", 0, 2, Options{}); return err },
		func() error { _, err := Init(ID{}, 0, 2, Options{}); return err },
		func() error { _, err := Init(ID{1, 4, 0, 0}, 0, 2, Options{}); return err },
		func() error { _, err := Init(ID{1, 9, 1, 1}, 0, 2, Options{}); return err },
		func() error { _, err := Init(ID{}, 5, 2, Options{}); return err },
		func() error { _, err := InitAddr(addr, 0, 1, Options{HostID: strings.Repeat("h", 2000)}); return err },
	}
	for i, f := range inval {
		if err := f(); status.CodeOf(err) != status.InvalidArgument {
			t.Errorf("case %d: %v, want InvalidArgument", i, err)
		}
	}
	bs := formAddr(t, 2, Options{})
	b := bs[0]
	for i, err := range []error{
		b.AllGather(make([]byte, 8), 0),
		b.AllGather(make([]byte, 8), -1),
		b.AllGather(make([]byte, 7), 4),
		b.AllGather(nil, 1),
		b.Send(2, 0, nil),
		b.Send(-1, 0, nil),
		func() error { _, err := b.Recv(2, 0); return err }(),
		func() error { _, err := b.Recv(-1, 0); return err }(),
	} {
		if status.CodeOf(err) != status.InvalidArgument {
			t.Errorf("call %d: %v, want InvalidArgument", i, err)
		}
	}
	// The communicator is still fine.
	noErrs(t, "barrier", each(bs, func(b *Bootstrap) error { return b.Barrier() }))
}

func TestParseAddr(t *testing.T) {
	good := map[string]string{
		"127.0.0.1:5000":      "127.0.0.1:5000",
		" 10.1.2.3:1 ":        "10.1.2.3:1",
		"[::1]:6000":          "[::1]:6000",
		"[fe80::1%lo]:7":      "[fe80::1%lo]:7",
		"localhost:80":        "127.0.0.1:80",
		"[::ffff:1.2.3.4]:9":  "1.2.3.4:9",
		"192.168.0.1:65535":   "192.168.0.1:65535",
		"127.0.0.1:0":         "127.0.0.1:0",
		"[2001:db8::5]:12345": "[2001:db8::5]:12345",
	}
	for in, want := range good {
		got, err := ParseAddr(in)
		if err != nil || got.String() != want {
			t.Errorf("ParseAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "127.0.0.1", ":5000", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:70000",
		"::1:5000", "[::1", "[::1]", "a b:1", "1.2.3.4:-1", "no-such-host.invalid:1"} {
		_, err := ParseAddr(in)
		wantCode(t, err, status.InvalidArgument, strconv.Quote(in))
	}
}

func TestIDRoundTrip(t *testing.T) {
	for _, a := range []string{"127.0.0.1:5000", "[::1]:1", "[fe80::1%eth0]:65535"} {
		f := idFields{addr: netip.MustParseAddrPort(a), magic: 0x1234567890abcdef}
		f.secret[3] = 9
		id := f.encode()
		g, err := id.decode()
		if err != nil || g != f {
			t.Fatalf("%s: %+v %v", a, g, err)
		}
		if id.Magic() != f.magic {
			t.Fatal("magic")
		}
	}
}

func TestIfSpec(t *testing.T) {
	cases := []struct {
		spec, name string
		want       bool
	}{
		{"eth", "eth0", true}, {"eth", "ib0", false}, {"eth,ib", "ib1", true},
		{"^docker,lo", "lo", false}, {"^docker,lo", "docker0", false}, {"^docker,lo", "eth0", true},
		{"=eth0", "eth0", true}, {"=eth0", "eth01", false}, {"^=eth0", "eth01", true}, {"^=eth0", "eth0", false},
		{"eth0:1234", "eth0", true},
	}
	for _, c := range cases {
		if got := parseIfSpec(c.spec).match(c.name); got != c.want {
			t.Errorf("%q matches %q = %v", c.spec, c.name, got)
		}
	}
	addrs := []ifAddr{
		{"lo", netip.MustParseAddr("127.0.0.1")}, {"lo", netip.MustParseAddr("::1")},
		{"eth0", netip.MustParseAddr("fd00::2")}, {"eth0", netip.MustParseAddr("10.0.0.2")},
		{"docker0", netip.MustParseAddr("172.17.0.1")},
	}
	if a, _ := pickFrom(addrs, parseIfSpec("^docker,lo"), 0); a.ip.String() != "10.0.0.2" {
		t.Errorf("default picked %v", a)
	}
	if a, _ := pickFrom(addrs, parseIfSpec("^docker,lo"), 6); a.ip.String() != "fd00::2" {
		t.Errorf("AF_INET6 picked %v", a)
	}
	if a, _ := pickFrom(addrs, parseIfSpec("lo"), 6); a.ip.String() != "::1" {
		t.Errorf("lo AF_INET6 picked %v", a)
	}
	if _, ok := pickFrom(addrs, parseIfSpec("ib"), 0); ok {
		t.Error("ib matched")
	}
	t.Setenv(EnvSocketIfname, "=no-such-interface")
	_, err := selectInterface()
	wantCode(t, err, status.InvalidUsage, "no-such-interface")
	t.Setenv(EnvSocketIfname, "lo")
	t.Setenv(EnvSocketFamily, "AF_INET")
	if a, err := selectInterface(); err != nil || a.ip.String() != "127.0.0.1" {
		t.Errorf("lo/AF_INET: %v %v", a, err)
	}
}

func TestSpinBudget(t *testing.T) {
	if spinBudget(2, 2) != defaultSpin || spinBudget(16, 2) != 0 {
		t.Fatal("defaults")
	}
	t.Setenv(EnvSpinUS, "7")
	if spinBudget(16, 2) != 7*time.Microsecond {
		t.Fatal("env")
	}
}

func TestReleaseID(t *testing.T) {
	t.Setenv(EnvSocketIfname, "lo")
	id, err := NewID(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ra, _ := id.RootAddr()
	ReleaseID(id)
	// The port is free again at once.
	ln, err := net.Listen("tcp", ra.String())
	if err != nil {
		t.Fatalf("root port still taken: %v", err)
	}
	ln.Close()
}
