package ib

// The fabric settings, with NCCL's meanings: MSCCLPP_IB_HCA (which devices and ports may be used,
// NCCL_IB_HCA's syntax), MSCCLPP_IB_SL (service level), MSCCLPP_IB_TC (traffic class, RoCE);
// the GID index (MSCCLPP_IB_GID_INDEX) is the verbs binding's.

import (
	"strconv"
	"strings"

	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// The variables read here.
const (
	EnvHCA = "MSCCLPP_IB_HCA"
	EnvSL  = "MSCCLPP_IB_SL"
	EnvTC  = "MSCCLPP_IB_TC"
)

// hcaEntry is one item of MSCCLPP_IB_HCA: a device name (or its prefix) and a port (0: any).
type hcaEntry struct {
	name string
	port int
}

// hcaFilter is MSCCLPP_IB_HCA parsed: "mlx5_0:1,mlx5_1" (devices whose names start with an
// entry, on the port given, if any), "^mlx5_2" (every device but those), "=mlx5_0" (exact names).
type hcaFilter struct {
	set     bool
	exclude bool
	exact   bool
	entries []hcaEntry
}

// parseHCA parses an MSCCLPP_IB_HCA value.
func parseHCA(v string) (hcaFilter, error) {
	v = strings.TrimSpace(v)
	f := hcaFilter{set: v != ""}
	if strings.HasPrefix(v, "^") {
		f.exclude, v = true, v[1:]
	}
	if strings.HasPrefix(v, "=") {
		f.exact, v = true, v[1:]
	}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, port, hasPort := strings.Cut(item, ":")
		e := hcaEntry{name: name}
		if hasPort {
			p, err := strconv.Atoi(port)
			if err != nil || p < 1 || p > 255 || name == "" {
				return hcaFilter{}, status.Errorf(status.InvalidArgument, "%s: %q is not a device[:port] (port from 1)", EnvHCA, item)
			}
			e.port = p
		}
		f.entries = append(f.entries, e)
	}
	if f.set && len(f.entries) == 0 {
		return hcaFilter{}, status.Errorf(status.InvalidArgument, "%s=%q names no device", EnvHCA, v)
	}
	return f, nil
}

// allow reports whether device name may be used and on which port (0: the first ACTIVE one).
func (f hcaFilter) allow(name string) (ok bool, port int) {
	if !f.set {
		return true, 0
	}
	for _, e := range f.entries {
		match := name == e.name || (!f.exact && strings.HasPrefix(name, e.name))
		if match {
			if f.exclude {
				return e.port != 0, 0 // "^dev:2" excludes port 2 only: the first other ACTIVE port is used
			}
			return true, e.port
		}
	}
	return f.exclude, 0
}

// fabric is the settings one communicator's devices are opened with.
type fabric struct {
	hca    hcaFilter
	hcaRaw string
	sl, tc int
}

// readFabric reads MSCCLPP_IB_HCA, MSCCLPP_IB_SL and MSCCLPP_IB_TC (at the transport's first use
// in a communicator: upstream reads its variables when it needs them).
func readFabric() (fabric, error) {
	var f fabric
	var err error
	f.hcaRaw = env.Get(EnvHCA)
	if f.hca, err = parseHCA(f.hcaRaw); err != nil {
		return fabric{}, err
	}
	if f.sl, err = envRange(EnvSL, 15); err != nil {
		return fabric{}, err
	}
	if f.tc, err = envRange(EnvTC, 255); err != nil {
		return fabric{}, err
	}
	return f, nil
}

// envRange reads name as an integer from 0 to max (0 when unset).
func envRange(name string, max int) (int, error) {
	s := strings.TrimSpace(env.Get(name))
	if s == "" {
		return 0, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > max {
		return 0, status.Errorf(status.InvalidArgument, "%s=%q: want an integer from 0 to %d", name, s, max)
	}
	return v, nil
}
