package ib

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mscclpp-go/mscclpp/impl/logx"
)

// fakeSysfs writes a GID table for double_0 port 1 as ConnectX RoCE lists one: index 0 RoCE v1
// link-local, 1 RoCE v2 link-local, 2 RoCE v1 IPv4-mapped, 3 RoCE v2 IPv4-mapped.
func fakeSysfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	port := filepath.Join(root, "double_0", "ports", "1")
	entries := []struct{ typ, gid string }{
		{"IB/RoCE v1", "fe80:0000:0000:0000:d00b:0000:0000:0001"},
		{"RoCE v2", "fe80:0000:0000:0000:d00b:0000:0000:0001"},
		{"IB/RoCE v1", "0000:0000:0000:0000:0000:ffff:0a00:0003"},
		{"RoCE v2", "0000:0000:0000:0000:0000:ffff:0a00:0003"},
	}
	for _, d := range []string{"gid_attrs/types", "gids"} {
		if err := os.MkdirAll(filepath.Join(port, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range entries {
		n := string(rune('0' + i))
		if err := os.WriteFile(filepath.Join(port, "gid_attrs", "types", n), []byte(e.typ+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(port, "gids", n), []byte(e.gid+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestRoCEv2GIDChosen: with MSCCLPP_IB_GID_INDEX unset, a RoCE port uses the first RoCE v2
// IPv4-mapped GID sysfs lists (index 3 here), not index 0 (RoCE v1 link-local), and QPs connect
// with it; an index given (the variable's value) still overrides; without such an entry index 0 is used.
func TestRoCEv2GIDChosen(t *testing.T) {
	lib := withDouble(t)
	t.Setenv("MSCCLPP_IBV_DOUBLE_LINK", "eth")
	t.Setenv("MSCCLPP_IBV_DOUBLE_GIDS", "4")
	saved := SysfsRoot
	t.Cleanup(func() { SysfsRoot = saved })
	SysfsRoot = fakeSysfs(t)
	t.Setenv("MSCCLPP_DEBUG", "INFO")
	t.Setenv("MSCCLPP_DEBUG_SUBSYS", "NET")
	logx.Reset()
	var mu sync.Mutex
	var lines []string
	logx.SetHandler(func(line string) { mu.Lock(); lines = append(lines, line); mu.Unlock() })
	t.Cleanup(func() { logx.SetHandler(nil); logx.Reset() })

	l := newLoopback(t, lib, 8)
	if got := l.ctx.GIDIndexInUse(); got != 3 {
		t.Fatalf("GID index %d chosen, want 3 (RoCE v2, IPv4-mapped)", got)
	}
	qi := l.a.Info()
	if g := net.IP(qi.GID[:]); !g.Equal(net.ParseIP("10.0.0.3")) {
		t.Errorf("the QP's GID is %v, want ::ffff:10.0.0.3", g)
	}
	l.connect(t) // RTR with the chosen source GID index
	mu.Lock()
	info := strings.Join(lines, "\n")
	mu.Unlock()
	if !strings.Contains(info, "GID index 3 (RoCE v2, 10.0.0.3) chosen") {
		t.Errorf("no INFO line naming the chosen GID; lines:\n%s", info)
	}

	x, err := Open(lib, "double_0", Options{GIDIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := x.GIDIndexInUse(); got != 1 {
		t.Errorf("MSCCLPP_IB_GID_INDEX=1: index %d used", got)
	}
	x.Close()

	SysfsRoot = t.TempDir() // nothing listed
	if x, err = Open(lib, "double_0", Options{GIDIndex: -1}); err != nil {
		t.Fatal(err)
	}
	if got := x.GIDIndexInUse(); got != 0 {
		t.Errorf("no RoCE v2 entry: index %d used, want 0", got)
	}
	x.Close()
}
