package ib

import "testing"

// TestParseHCA: MSCCLPP_IB_HCA with NCCL_IB_HCA's meanings: a list of device[:port] matched by
// prefix, "=" for exact names, "^" to exclude; malformed entries are errors.
func TestParseHCA(t *testing.T) {
	cases := []struct {
		v    string
		dev  string
		ok   bool
		port int
		skip uint64
	}{
		{"", "mlx5_0", true, 0, 0},
		{"mlx5", "mlx5_1", true, 0, 0},
		{"mlx5_0:1,mlx5_1:2", "mlx5_1", true, 2, 0},
		{"mlx5_0:1,mlx5_1:2", "mlx5_2", false, 0, 0},
		{"=mlx5_1", "mlx5_10", false, 0, 0},
		{"=mlx5_1:2", "mlx5_1", true, 2, 0},
		{"^mlx5_0", "mlx5_0", false, 0, 0},
		{"^mlx5_0", "mlx5_1", true, 0, 0},
		{"^=mlx5_1", "mlx5_10", true, 0, 0},
		{"^mlx5_0:2", "mlx5_0", true, 0, 1 << 2},
		{"^mlx5_0:1,mlx5_0:2", "mlx5_0", true, 0, 1<<1 | 1<<2},
		{"^mlx5_0:2", "mlx5_1", true, 0, 0},
		{"^mlx5_1:2", "mlx5_10", true, 0, 1 << 2},
	}
	for _, c := range cases {
		f, err := parseHCA(c.v)
		if err != nil {
			t.Errorf("parseHCA(%q): %v", c.v, err)
			continue
		}
		if ok, port, skip := f.allow(c.dev); ok != c.ok || port != c.port || skip != c.skip {
			t.Errorf("%s=%q allows %s: %v on port %d skipping %#x, want %v on port %d skipping %#x", EnvHCA, c.v, c.dev, ok, port, skip, c.ok, c.port, c.skip)
		}
	}
	for _, bad := range []string{"mlx5_0:x", "mlx5_0:0", ":1", "^", ","} {
		if _, err := parseHCA(bad); err == nil {
			t.Errorf("parseHCA(%q) accepted", bad)
		}
	}
}
