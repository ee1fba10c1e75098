package impl

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// forRanks runs f for every rank of an n-rank communicator formed in this process.
func forRanks(t *testing.T, n int, f func(c *Comm) error) {
	t.Helper()
	addr := freeAddr(t)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			c, err := InitRank(n, addr, r)
			if err != nil {
				errs[r] = err
				return
			}
			errs[r] = f(c)
			if derr := c.Destroy(); derr != nil && errs[r] == nil {
				errs[r] = derr
			}
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// runRanks runs f(r) for ranks 0..n-1, each in a goroutine of its own, and fails t with every
// rank's error; a rank still running after 60 s fails it as hung.
func runRanks(t *testing.T, n int, f func(r int) error) {
	t.Helper()
	errs := make([]error, n)
	done := make(chan int, n)
	for r := range n {
		go func() {
			defer func() { done <- r }()
			errs[r] = f(r)
		}()
	}
	for range n {
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("a rank hung")
		}
	}
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestAllGatherInProcess(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			forRanks(t, n, func(c *Comm) error {
				buf := make([]byte, 16*n)
				for i := 0; i < 16; i++ {
					buf[c.Rank()*16+i] = byte(c.Rank()*7 + i)
				}
				if err := c.AllGather(unsafe.Pointer(&buf[0]), 16); err != nil {
					return err
				}
				for r := 0; r < n; r++ {
					for i := 0; i < 16; i++ {
						if buf[r*16+i] != byte(r*7+i) {
							return fmt.Errorf("slot %d byte %d = %d", r, i, buf[r*16+i])
						}
					}
				}
				return c.Barrier()
			})
		})
	}
}

func TestConnectionBookkeeping(t *testing.T) {
	const n = 3
	forRanks(t, n, func(c *Comm) error {
		bufs := make([][]byte, n)
		for p := 0; p < n; p++ {
			if p == c.Rank() {
				continue
			}
			bufs[p] = make([]byte, 64)
			if err := c.Connect(p, 5, unsafe.Pointer(&bufs[p][0]), 64, TransportSHM, nil, true); err != nil {
				return err
			}
		}
		extra := make([]byte, 32)
		h, err := c.RegisterBufferForConnection(0, unsafe.Pointer(&extra[0]), 32)
		if err != nil || h != 2 {
			return fmt.Errorf("extra handle %d, %v; want 2", h, err)
		}
		if err := c.Connect((c.Rank()+1)%n, 5, unsafe.Pointer(&extra[0]), 32, TransportSHM, nil, true); status.CodeOf(err) != status.InvalidArgument {
			return fmt.Errorf("duplicate connection: %v", err)
		}
		if err := c.Connect((c.Rank()+1)%n, 6, nil, 0, Transport(7), nil, false); status.CodeOf(err) != status.InvalidUsage {
			return fmt.Errorf("unknown transport: %v", err)
		}
		if _, err := c.RegisterBufferForConnection(9, unsafe.Pointer(&extra[0]), 32); status.CodeOf(err) != status.InvalidArgument {
			return fmt.Errorf("connIdx out of range: %v", err)
		}
		if err := c.ProxyLaunch(); err != nil { // before setup, as upstream allows
			return fmt.Errorf("launch before setup: %v", err)
		}
		if err := c.ProxyLaunch(); status.CodeOf(err) != status.InvalidUsage {
			return fmt.Errorf("second launch: %v", err)
		}
		if err := c.ConnectionSetup(); err != nil {
			return err
		}
		if _, err := c.RegisterBufferForConnection(0, unsafe.Pointer(&extra[0]), 32); status.CodeOf(err) != status.InvalidUsage || !strings.Contains(err.Error(), "already set up") {
			return fmt.Errorf("handle on a set-up connection: %v", err)
		}
		_, cnt := c.DeviceConnections()
		if cnt != n-1 {
			return fmt.Errorf("%d connections, want %d", cnt, n-1)
		}
		if _, err := c.DeviceConnection(c.Rank(), 5); status.CodeOf(err) != status.InvalidArgument {
			return fmt.Errorf("lookup of a missing connection: %v", err)
		}
		return c.ProxyStop()
	})
}

func TestUnmatchedConnectionNamesRankAndTag(t *testing.T) {
	old := BootstrapTimeout()
	if err := SetBootstrapTimeout(1); err != nil {
		t.Fatal(err)
	}
	defer bootstrapTimeoutNs.Store(int64(old))
	start := time.Now()
	addr := freeAddr(t)
	var wg sync.WaitGroup
	var setupErr error
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			c, err := InitRank(2, addr, r)
			if err != nil {
				t.Errorf("rank %d init: %v", r, err)
				return
			}
			defer c.Destroy()
			if r == 0 {
				buf := make([]byte, 8)
				if err := c.Connect(1, 42, unsafe.Pointer(&buf[0]), 8, TransportSHM, nil, true); err != nil {
					t.Error(err)
				}
				setupErr = c.ConnectionSetup()
			} else {
				_ = c.ConnectionSetup() // declares nothing: rank 0 waits for tag 42 in vain
			}
		}(r)
	}
	wg.Wait()
	if setupErr == nil || !strings.Contains(setupErr.Error(), "rank 1") || !strings.Contains(setupErr.Error(), "tag 42") {
		t.Fatalf("setup error %v does not name rank 1 and tag 42", setupErr)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("took %v with a 1 s timeout", el)
	}
}

func TestBadArguments(t *testing.T) {
	cases := []struct {
		n, r int
		addr string
	}{{0, 0, "127.0.0.1:1"}, {2, 2, "127.0.0.1:1"}, {2, -1, "127.0.0.1:1"}, {2, 0, "nocolon"}, {2, 0, "1.2.3.4:99999"}}
	for _, tc := range cases {
		if _, err := InitRank(tc.n, tc.addr, tc.r); status.CodeOf(err) != status.InvalidArgument {
			t.Errorf("InitRank(%d, %q, %d) = %v, want InvalidArgument", tc.n, tc.addr, tc.r, err)
		}
	}
	if err := SetBootstrapTimeout(0); status.CodeOf(err) != status.InvalidArgument {
		t.Errorf("timeout 0: %v", err)
	}
}

func TestMismatchedCollectiveSizes(t *testing.T) {
	addr := freeAddr(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			c, err := InitRank(2, addr, r)
			if err != nil {
				errs[r] = err
				return
			}
			defer c.Destroy()
			buf := make([]byte, 2*16)
			errs[r] = c.AllGather(unsafe.Pointer(&buf[0]), 8+8*r) // rank 0: 8 bytes, rank 1: 16
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if status.CodeOf(err) != status.InvalidUsage || !strings.Contains(err.Error(), "same size") {
			t.Errorf("rank %d: %v, want InvalidUsage naming the size mismatch", r, err)
		}
	}
}
