package bootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// TestMain gives the package's tests (and the helper processes they start)
// a HOME of their own, so the bootstrap cookie they create is theirs.
func TestMain(m *testing.M) {
	if os.Getenv(envHelper) == "" {
		home, err := os.MkdirTemp("", "mscclpp-bootstrap-test-home-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Setenv("HOME", home)
		os.Unsetenv(EnvSecret)
		os.Unsetenv(EnvSecretFile)
		code := m.Run()
		os.RemoveAll(home)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// testKey returns the magic and key InitAddr uses for addr here.
func testKey(t testing.TB, addr string) (uint64, [keyBytes]byte) {
	t.Helper()
	ap, err := ParseAddr(addr)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := addrKey(ap, func(bool, string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	return addrMagic(ap), key
}

// dialChallenge connects to addr and reads its challenge.
func dialChallenge(t testing.TB, addr string) (net.Conn, nonce) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	ch, err := readChallenge(c)
	if err != nil {
		t.Fatalf("challenge from %s: %v", addr, err)
	}
	return c, ch
}

// rawHello is a hello as a peer (or a stranger) might send it.
func rawHello(kind byte, magic uint64, key *[keyBytes]byte, challenge *nonce, rank, nranks int, payload []byte) []byte {
	h := hello{kind: kind, magic: magic, nonce: newNonce(), rank: rank, nranks: nranks, payload: payload}
	return h.encode(key, challenge)
}

// wantRejected checks that the root answers c with a reject of reason and
// nothing else (in particular no table), then closes it.
func wantRejected(t testing.TB, c net.Conn, reason byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	all, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the root's answer: %v", err)
	}
	want := encodeReject(0, reason)
	if len(all) != len(want) || all[4] != replyReject || all[replyHdrLen] != reason {
		t.Fatalf("the root answered %d bytes %q, want only a reject (reason %d)", len(all), printable(all), reason)
	}
}

// register registers as rank with the real key, as a rank would, and
// returns the connection, the root's challenge and the hello's nonce.
func register(t testing.TB, addr string, rank, nranks int) (net.Conn, nonce, nonce) {
	t.Helper()
	magic, key := testKey(t, addr)
	c, ch := dialChallenge(t, addr)
	h := hello{kind: kindRegister, magic: magic, nonce: newNonce(), rank: rank, nranks: nranks,
		payload: encodeRegister("127.0.0.1:1", "", 1)}
	if _, err := c.Write(h.encode(&key, &ch)); err != nil {
		t.Fatal(err)
	}
	return c, ch, h.nonce
}

// TestReplayedHello: a hello recorded from a good handshake does not open
// another connection, at the root or at a rank.
func TestReplayedHello(t *testing.T) {
	addr := loopbackAddr(t)
	magic, key := testKey(t, addr)
	logs := newLogSink()
	opts := Options{Timeout: 10 * time.Second, Logf: logs.logf}
	var wg sync.WaitGroup
	bs := make([]*Bootstrap, 2)
	errs := make([]error, 2)
	wg.Go(func() { bs[0], errs[0] = InitAddr(addr, 0, 2, opts) })
	logs.waitFor(t, "rank 0 registered")
	// A hello that was valid for one challenge...
	_, ch := dialChallenge(t, addr)
	recorded := rawHello(kindRegister, magic, &key, &ch, 1, 2, encodeRegister("127.0.0.1:1", "", 1))
	// ...is refused on any other connection.
	c, _ := dialChallenge(t, addr)
	c.Write(recorded)
	wantRejected(t, c, rejectKey)
	logs.waitFor(t, "replayed hello")
	wg.Go(func() { bs[1], errs[1] = InitAddr(addr, 1, 2, opts) })
	wg.Wait()
	closeAll(t, bs)
	noErrs(t, "init", errs)
	// At a rank's listener as well.
	_, ch = dialChallenge(t, bs[1].ListenAddr())
	recorded = rawHello(kindP2P, magic, &key, &ch, 0, 2, nil)
	c, _ = dialChallenge(t, bs[1].ListenAddr())
	c.Write(recorded)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, _ := io.ReadAll(c); len(got) != 0 {
		t.Fatalf("a replayed hello got %d bytes back", len(got))
	}
	noErrs(t, "p2p", each(bs, func(b *Bootstrap) error {
		peer := 1 - b.Rank()
		if err := b.Send(peer, 1, []byte{byte(b.Rank())}); err != nil {
			return err
		}
		msg, err := b.Recv(peer, 1)
		if err == nil && (len(msg) != 1 || msg[0] != byte(peer)) {
			err = fmt.Errorf("got %v", msg)
		}
		return err
	}))
}

// fakeRoot listens at addr and answers the first connection with reply
// (after reading its hello); it returns when done.
func fakeRoot(t *testing.T, addr string, answer func(c net.Conn, h *hello) []byte) chan struct{} {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		ch, err := writeChallenge(c)
		if err != nil {
			return
		}
		// The fake root cannot check the MAC; it reads the hello as is.
		var hdr [helloLen]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		h := &hello{nonce: nonce(hdr[16:48]), rank: int(binary.LittleEndian.Uint32(hdr[48:52]))}
		io.CopyN(io.Discard, c, int64(binary.LittleEndian.Uint32(hdr[56:60])))
		_ = ch
		c.Write(answer(c, h))
		io.Copy(io.Discard, c)
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return done
}

// TestFakeRoot: a rank does not trust a root that cannot prove the key: a
// forged table, a huge announced length, or no challenge at all.
func TestFakeRoot(t *testing.T) {
	var wrong [keyBytes]byte
	table := func(addr string) []byte {
		return wholeTable(1, []peerEntry{{addr: "127.0.0.1:9"}, {addr: "127.0.0.1:10"}})
	}
	cases := []struct {
		name   string
		answer func(addr string, h *hello) []byte
		want   []string
	}{
		{"forged-table", func(addr string, h *hello) []byte {
			magic, _ := testKey(t, addr)
			return encodeReply(replyOK, magic, table(addr), &wrong, labelReply, &h.nonce)
		}, []string{"is not trusted", "does not prove"}},
		{"forged-error", func(addr string, h *hello) []byte {
			magic, _ := testKey(t, addr)
			return encodeReply(replyUsage, magic, []byte("go away"), &wrong, labelReply, &h.nonce)
		}, []string{"is not trusted"}},
		{"replayed-reply", func(addr string, h *hello) []byte {
			magic, key := testKey(t, addr)
			old := newNonce() // an answer made for another connection
			return encodeReply(replyOK, magic, table(addr), &key, labelReply, &old)
		}, []string{"is not trusted"}},
		{"huge-length", func(addr string, h *hello) []byte {
			magic, key := testKey(t, addr)
			msg := encodeReply(replyOK, magic, nil, &key, labelReply, &h.nonce)
			binary.LittleEndian.PutUint32(msg[16:20], 0xffffffff)
			return msg
		}, []string{"4294967295 bytes, more than the"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr := loopbackAddr(t)
			fakeRoot(t, addr, func(_ net.Conn, h *hello) []byte { return c.answer(addr, h) })
			start := time.Now()
			_, err := InitAddr(addr, 1, 2, Options{Timeout: 5 * time.Second})
			code := status.InvalidUsage
			if c.name == "huge-length" {
				code = status.RemoteError
			}
			wantCode(t, err, code, c.want...)
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
	t.Run("not-a-root", func(t *testing.T) {
		addr := loopbackAddr(t)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n" + strings.Repeat(" ", 40)))
				time.Sleep(time.Second)
				c.Close()
			}
		}()
		_, err = InitAddr(addr, 1, 2, Options{Timeout: 5 * time.Second})
		wantCode(t, err, status.InvalidUsage, "is not the bootstrap root", "SSH-2.0")
	})
}

// TestWrongSecret: a rank whose secret differs from the root's gets
// InvalidUsage at once, and the root WARNs at once naming its address; at
// the timeout the others get InvalidUsage naming the missing rank, the
// refused connections and what to do.
func TestWrongSecret(t *testing.T) {
	addr := loopbackAddr(t)
	t.Setenv(EnvSecret, "the right one")
	logs := newLogSink()
	var wg sync.WaitGroup
	var err0 error
	wg.Go(func() {
		var b *Bootstrap
		b, err0 = InitAddr(addr, 0, 2, Options{Timeout: time.Second, Logf: logs.logf})
		if b != nil {
			b.Close()
		}
	})
	logs.waitFor(t, "rank 0 registered")
	os.Setenv(EnvSecret, "a wrong one")
	start := time.Now()
	_, err := InitAddr(addr, 1, 2, Options{Timeout: time.Second})
	wantCode(t, err, status.InvalidUsage, "refused this rank's key", EnvSecret, "mscclppGetUniqueId")
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("the wrong key was noticed after %v", d)
	}
	// The root logged the refusal before it answered the rank.
	if !logs.has("WARN bootstrap root at "+addr+": dropped a connection from 127.0.0.1:") || !logs.has("a different secret? set the same "+EnvSecret) {
		t.Errorf("the root did not WARN at once about the refused registration")
	}
	wg.Wait()
	wantCode(t, err0, status.InvalidUsage, "rank 1 never connected",
		"1 connection from 127.0.0.1 refused: different job secret; set the same "+EnvSecret+" on every rank", "mscclppGetUniqueId")
}

// TestHugeP2PLength: an authenticated peer that announces a huge
// point-to-point message ends its own connection, costs no memory, and
// crashes nothing; lengths between the chunk size and the cap are read
// only as the bytes arrive.
func TestHugeP2PLength(t *testing.T) {
	addr := loopbackAddr(t)
	logs := newLogSink()
	bs := form(t, 3, func(r int) (*Bootstrap, error) {
		return InitAddr(addr, r, 3, Options{Timeout: 10 * time.Second, Logf: logs.logf})
	})
	b := bs[1]
	p2p := func(from int, size uint64, body []byte) net.Conn {
		c, ch := dialChallenge(t, b.ListenAddr())
		h := hello{kind: kindP2P, magic: b.magic, nonce: newNonce(), rank: from, nranks: 3}
		c.Write(h.encode(&b.key, &ch))
		if _, err := readHello(c, b.magic, &b.key, &h.nonce); err != nil {
			t.Fatalf("no ack: %v", err)
		}
		var hdr [p2pHdrLen]byte
		binary.LittleEndian.PutUint64(hdr[0:8], 7)
		binary.LittleEndian.PutUint64(hdr[8:16], size)
		c.Write(append(hdr[:], body...))
		return c
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p2p(0, 1<<36, nil)
	logs.waitFor(t, "announced a message of 68719476736 bytes")
	_, err := b.Recv(0, 7)
	wantCode(t, err, status.RemoteError, "rank 0", "68719476736")
	c := p2p(2, 15<<20, []byte("only a few bytes"))
	time.Sleep(50 * time.Millisecond)
	c.Close()
	_, err = b.Recv(2, 7)
	wantCode(t, err, status.RemoteError, "rank 2")
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Fatalf("lying about lengths cost the receiver %d bytes", grew)
	}
	// The ring still works.
	checkAllGather(t, bs, 4, 2)
	// Send refuses what a receiver would refuse; RecvLimit bounds a message.
	wantCode(t, bs[0].Send(2, 1, make([]byte, maxP2PMessage+1)), status.InvalidArgument, "16777216")
	if err := bs[0].Send(2, 1, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	_, err = bs[2].RecvLimit(0, 1, 99)
	wantCode(t, err, status.InvalidUsage, "100 bytes, more than the 99")
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if err := bs[0].Send(2, 2, big); err != nil {
		t.Fatal(err)
	}
	if msg, err := bs[2].RecvLimit(0, 2, len(big)); err != nil || string(msg) != string(big) {
		t.Fatalf("3 MiB message: %d bytes, %v", len(msg), err)
	}
}

func TestReadChunked(t *testing.T) {
	data := make([]byte, 300<<10)
	for i := range data {
		data[i] = byte(i)
	}
	got, err := readChunked(strings.NewReader(string(data)), len(data))
	if err != nil || string(got) != string(data) {
		t.Fatal("round trip", err)
	}
	_, err = readChunked(strings.NewReader("abc"), 10<<20)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatal(err)
	}
}

// initAsync starts InitAddr for rank in a goroutine.
func initAsync(addr string, rank, nranks int, opts Options) chan error {
	ch := make(chan error, 1)
	go func() {
		b, err := InitAddr(addr, rank, nranks, opts)
		if b != nil {
			b.Close()
		}
		ch <- err
	}()
	return ch
}

func waitErr(t testing.TB, ch chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(within):
		t.Fatalf("no result within %v", within)
	}
	return nil
}

// TestRankDiesDuringInit: a rank that registered and dies, before the
// table or after it (before its ring connections), makes every other rank's
// init fail fast with RemoteError naming it, also ranks that come late.
func TestRankDiesDuringInit(t *testing.T) {
	const timeout = 20 * time.Second
	t.Run("before-table", func(t *testing.T) {
		addr := loopbackAddr(t)
		logs := newLogSink()
		opts := Options{Timeout: timeout, Logf: logs.logf}
		e0 := initAsync(addr, 0, 4, opts)
		logs.waitFor(t, "rank 0 registered")
		c, _, _ := register(t, addr, 2, 4)
		logs.waitFor(t, "rank 2 registered")
		c.Close()
		err := waitErr(t, e0, 2*time.Second)
		wantCode(t, err, status.RemoteError, "rank 2", "closed its connection")
		// Rank 1 comes late: the root still answers it.
		err = waitErr(t, initAsync(addr, 1, 4, opts), 2*time.Second)
		wantCode(t, err, status.RemoteError, "rank 2", "closed its connection")
	})
	t.Run("after-table", func(t *testing.T) {
		addr := loopbackAddr(t)
		logs := newLogSink()
		opts := Options{Timeout: timeout, Logf: logs.logf}
		e0 := initAsync(addr, 0, 3, opts)
		e1 := initAsync(addr, 1, 3, opts)
		logs.waitFor(t, "rank 0 registered")
		logs.waitFor(t, "rank 1 registered")
		// Rank 2 registers with a listener nobody answers at, gets the
		// table, and dies before connecting to anyone.
		_, key := testKey(t, addr)
		c, _, n := register(t, addr, 2, 3)
		magic, _ := testKey(t, addr)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		st, _, err := readReply(c, magic, &key, labelReply, &n, maxTableLen(3))
		if err != nil || st != replyOK {
			t.Fatalf("no table: %d %v", st, err)
		}
		start := time.Now()
		c.Close()
		for r, ch := range []chan error{e0, e1} {
			err := waitErr(t, ch, 3*time.Second)
			wantCode(t, err, status.RemoteError, "rank 2")
			t.Logf("rank %d: %v", r, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("survivors noticed after %v", d)
		}
	})
}

// TestRefusedDialReportsTheVerdict: a rank whose ring dial is refused during init (its peer's
// listener closed: the peer failed) reports the root's verdict when one comes, here that a
// third rank closed its connection, not the refusal (which names only the refusing peer).
func TestRefusedDialReportsTheVerdict(t *testing.T) {
	addr := loopbackAddr(t)
	logs := newLogSink()
	e0 := initAsync(addr, 0, 3, Options{Timeout: 20 * time.Second, Logf: logs.logf})
	logs.waitFor(t, "rank 0 registered")
	// Rank 1 registers an address nobody listens at (rank 0's dial to it is refused) and stays.
	c1, _, _ := register(t, addr, 1, 3)
	defer c1.Close()
	logs.waitFor(t, "rank 1 registered")
	// Rank 2 gets the table and dies.
	_, key := testKey(t, addr)
	c2, _, n := register(t, addr, 2, 3)
	magic, _ := testKey(t, addr)
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if st, _, err := readReply(c2, magic, &key, labelReply, &n, maxTableLen(3)); err != nil || st != replyOK {
		t.Fatalf("no table: %d %v", st, err)
	}
	c2.Close()
	err := waitErr(t, e0, 3*time.Second)
	wantCode(t, err, status.RemoteError, "rank 2", "closed its connection")
}

// TestNranksMismatch: ranks that disagree about nranks all fail at once
// with InvalidUsage naming both values, in either order of arrival.
func TestNranksMismatch(t *testing.T) {
	for _, lateFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("wrong-first=%v", lateFirst), func(t *testing.T) {
			addr := loopbackAddr(t)
			logs := newLogSink()
			opts := Options{Timeout: 20 * time.Second, Logf: logs.logf}
			start := time.Now()
			e0 := initAsync(addr, 0, 3, opts)
			logs.waitFor(t, "rank 0 registered")
			var e1, e2 chan error
			if lateFirst {
				e2 = initAsync(addr, 2, 4, opts)
				logs.waitFor(t, "nranks mismatch")
				e1 = initAsync(addr, 1, 3, opts)
			} else {
				e1 = initAsync(addr, 1, 3, opts)
				logs.waitFor(t, "rank 1 registered")
				e2 = initAsync(addr, 2, 4, opts)
			}
			for r, ch := range []chan error{e0, e1, e2} {
				err := waitErr(t, ch, 3*time.Second)
				wantCode(t, err, status.InvalidUsage, "nranks=3", "nranks=4", "rank 2")
				if r == 0 {
					t.Log(err)
				}
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}

// TestDuplicateRank: a rank registered twice (with the key) fails every
// rank with InvalidUsage naming both registrations.
func TestDuplicateRank(t *testing.T) {
	addr := loopbackAddr(t)
	logs := newLogSink()
	opts := Options{Timeout: 20 * time.Second, Logf: logs.logf}
	e0 := initAsync(addr, 0, 3, opts)
	logs.waitFor(t, "rank 0 registered")
	e1 := initAsync(addr, 1, 3, opts)
	logs.waitFor(t, "rank 1 registered")
	c, _, _ := register(t, addr, 1, 3)
	for _, ch := range []chan error{e0, e1} {
		err := waitErr(t, ch, 3*time.Second)
		wantCode(t, err, status.InvalidUsage, "rank 1 registered twice", "listening at 127.0.0.1:1")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, replyHdrLen)
	if _, err := io.ReadFull(c, hdr); err != nil || hdr[4] != replyUsage {
		t.Fatalf("the duplicate got %v %q", err, hdr)
	}
	// The late rank 2 learns it too.
	err := waitErr(t, initAsync(addr, 2, 3, opts), 3*time.Second)
	wantCode(t, err, status.InvalidUsage, "registered twice")
}

// TestSecretSources: where an ip:port communicator's secret comes from,
// and the refusals of files that others could read or own.
func TestSecretSources(t *testing.T) {
	ap, _ := ParseAddr("127.0.0.1:5000")
	nolog := func(bool, string, ...any) {}
	key := func() ([keyBytes]byte, string, error) { return addrKey(ap, nolog) }
	home := t.TempDir()
	t.Setenv("HOME", home)
	cookie := filepath.Join(home, CookieName)

	// The cookie is created once, 0600, and reused.
	k1, src, err := key()
	if err != nil || src != cookie {
		t.Fatalf("cookie: %v %q", err, src)
	}
	fi, err := os.Stat(cookie)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 2*cookieRandom+1 {
		t.Fatalf("cookie file: %v %v", fi, err)
	}
	if k2, _, _ := key(); k2 != k1 {
		t.Fatal("the cookie changed")
	}
	// Another address gives another key.
	if k3, _, _ := addrKey(netipMust("127.0.0.1:5001"), nolog); k3 == k1 {
		t.Fatal("the key does not depend on the address")
	}
	// Concurrent creation: one cookie wins, everyone uses it.
	home2 := t.TempDir()
	t.Setenv("HOME", home2)
	keys := make([][keyBytes]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			var err error
			if keys[i], _, err = key(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range keys {
		if keys[i] != keys[0] {
			t.Fatal("concurrent cookie creation gave different keys")
		}
	}
	if left, _ := filepath.Glob(filepath.Join(home2, CookieName+".tmp*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	t.Setenv("HOME", home)

	// A cookie that others may read is refused.
	os.Chmod(cookie, 0o644)
	_, _, err = key()
	wantCode(t, err, status.InvalidUsage, cookie, "accessible by group or others", "chmod 600")
	os.Chmod(cookie, 0o600)

	// The variable wins, and the same text in a file gives the same key.
	t.Setenv(EnvSecret, "s3cret")
	kEnv, src, err := key()
	if err != nil || src != EnvSecret || kEnv == k1 {
		t.Fatalf("env: %v %q", err, src)
	}
	t.Setenv(EnvSecret, "")
	file := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(file, []byte("s3cret\n"), 0o600)
	t.Setenv(EnvSecretFile, file)
	kFile, src, err := key()
	if err != nil || !strings.Contains(src, file) || kFile != kEnv {
		t.Fatalf("file: %v %q same=%v", err, src, kFile == kEnv)
	}
	// Refusals: group/other access, empty, not a regular file, missing.
	os.Chmod(file, 0o640)
	_, _, err = key()
	wantCode(t, err, status.InvalidUsage, EnvSecretFile, "mode 0640", "chmod 600 "+file)
	os.WriteFile(file, []byte("\n"), 0o600)
	os.Chmod(file, 0o600)
	_, _, err = key()
	wantCode(t, err, status.InvalidUsage, "empty")
	t.Setenv(EnvSecretFile, t.TempDir())
	_, _, err = key()
	wantCode(t, err, status.InvalidUsage, "not a regular file")
	t.Setenv(EnvSecretFile, filepath.Join(home, "nonexistent"))
	_, _, err = key()
	wantCode(t, err, status.InvalidUsage, "does not exist")
	// Owned by someone else (needs root to arrange).
	if os.Geteuid() == 0 {
		other := filepath.Join(t.TempDir(), "other")
		os.WriteFile(other, []byte("x"), 0o600)
		os.Chown(other, 12345, 12345)
		t.Setenv(EnvSecretFile, other)
		_, _, err = key()
		wantCode(t, err, status.InvalidUsage, "belongs to uid 12345")
	} else {
		t.Log("not root: the foreign-owner refusal is not tested")
	}
	// No HOME, no variables: a clear InvalidUsage.
	t.Setenv(EnvSecretFile, "")
	t.Setenv("HOME", "")
	_, _, err = key()
	wantCode(t, err, status.InvalidUsage, EnvSecret, EnvSecretFile)
	// An unwritable HOME: the cookie cannot be created.
	if os.Geteuid() != 0 {
		ro := t.TempDir()
		os.Chmod(ro, 0o500)
		t.Cleanup(func() { os.Chmod(ro, 0o700) })
		t.Setenv("HOME", ro)
		_, _, err = key()
		wantCode(t, err, status.InvalidUsage, "cannot create the bootstrap cookie")
	}
	// A single rank needs no secret at all.
	if _, err := InitAddr("127.0.0.1:5000", 0, 1, Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestTimeout: Options.Timeout bounds a real wait; 0 is DefaultTimeout (the library
// resolves MSCCLPP_BOOTSTRAP_TIMEOUT itself, in impl).
func TestTimeout(t *testing.T) {
	if got, _ := (&Options{}).timeout(); got != DefaultTimeout {
		t.Errorf("zero timeout: %v, want %v", got, DefaultTimeout)
	}
	if got, _ := (&Options{Timeout: time.Second}).timeout(); got != time.Second {
		t.Errorf("explicit timeout: %v", got)
	}
	start := time.Now()
	_, err := InitAddr(loopbackAddr(t), 0, 2, Options{Timeout: time.Second})
	wantCode(t, err, status.RemoteError, "rank 1 never connected", "within 1s")
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Fatalf("took %v", d)
	}
}

func netipMust(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
