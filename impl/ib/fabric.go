package ib

// The transport's settings, with NCCL's meanings: MSCCLPP_IB_HCA (which devices and ports may
// be used, NCCL_IB_HCA's syntax), MSCCLPP_IB_SL (service level), MSCCLPP_IB_TC (traffic class,
// RoCE), MSCCLPP_IB_GID_INDEX (parsed by the verbs binding), MSCCLPP_IB_TIMEOUT and
// MSCCLPP_IB_RETRY_CNT (each QP's ACK timeout and retry count) and MSCCLPP_IB_MAX_SEND_WR (each
// QP's send queue depth). The core reads them (Entry.Settings); this file parses them and holds
// their defaults.

import (
	"strconv"
	"strings"

	verbs "github.com/mscclpp-go/mscclpp/ib"
	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// The names of the variables parsed here (impl/env's table declares them).
const (
	EnvHCA       = string(env.IBHCA)
	EnvSL        = string(env.IBSL)
	EnvTC        = string(env.IBTC)
	EnvMaxSendWr = string(env.IBMaxSendWr)
	EnvTimeout   = string(env.IBTimeout)
	EnvRetryCnt  = string(env.IBRetryCnt)
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
			if err != nil || p < 1 || p > 63 || name == "" {
				return hcaFilter{}, status.Errorf(status.InvalidArgument, "%s: %q is not a device[:port] (port from 1 to 63)", EnvHCA, item)
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

// allow reports whether device name may be used, on which port (0: the first ACTIVE one) and
// which ports not to take then (bit p: port p).
func (f hcaFilter) allow(name string) (ok bool, port int, skip uint64) {
	if !f.set {
		return true, 0, 0
	}
	for _, e := range f.entries {
		match := name == e.name || (!f.exact && strings.HasPrefix(name, e.name))
		switch {
		case !match:
		case !f.exclude:
			return true, e.port, 0
		case e.port == 0:
			return false, 0, 0
		default: // "^dev:2" excludes port 2 only: the first other ACTIVE port is used
			skip |= 1 << e.port
		}
	}
	if !f.exclude {
		return false, 0, 0
	}
	return true, 0, skip
}

// fabric is the settings one communicator's devices are opened with.
type fabric struct {
	hca    hcaFilter
	hcaRaw string
	sl, tc int
	gid    int // the GID index; -1: verbs.Open picks one
	wr     int // the send queue depth of each connection's QP
	// timeout is each QP's ACK timeout (4.096 us * 2^timeout), retry its retry count
	timeout, retry int
}

// defaultMaxSendWr is MSCCLPP_IB_MAX_SEND_WR when unset.
const defaultMaxSendWr = 256

// readFabric parses the settings as the core read them for h's communicator (Entry.Settings).
func readFabric(h *transport.Host) (fabric, error) {
	var f fabric
	var err error
	f.hcaRaw = h.Setting(EnvHCA)
	if f.hca, err = parseHCA(f.hcaRaw); err != nil {
		return fabric{}, err
	}
	if f.sl, err = parseRange(EnvSL, h.Setting(EnvSL), 15); err != nil {
		return fabric{}, err
	}
	if f.tc, err = parseRange(EnvTC, h.Setting(EnvTC), 255); err != nil {
		return fabric{}, err
	}
	if f.gid, err = verbs.ParseGIDIndex(h.Setting(verbs.EnvGIDIndex)); err != nil {
		return fabric{}, err
	}
	f.timeout, f.retry = verbs.DefaultAckTimeout, verbs.DefaultRetryCount
	if v := h.Setting(EnvTimeout); v != "" {
		if f.timeout, err = parseRange(EnvTimeout, v, 31); err != nil || f.timeout == 0 {
			return fabric{}, status.Errorf(status.InvalidArgument, "%s=%q: want an integer from 1 to 31", EnvTimeout, v)
		}
	}
	if v := h.Setting(EnvRetryCnt); v != "" {
		if f.retry, err = parseRange(EnvRetryCnt, v, 7); err != nil {
			return fabric{}, err
		}
	}
	f.wr = defaultMaxSendWr
	if v := h.Setting(EnvMaxSendWr); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			f.wr = n
		} else {
			logx.Malformed("ignoring %s=%q: not a positive integer; the default %d is used", EnvMaxSendWr, v, f.wr)
		}
	}
	return f, nil
}

// parseRange parses value s of variable name as an integer from 0 to max (0 when unset).
func parseRange(name, s string, max int) (int, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > max {
		return 0, status.Errorf(status.InvalidArgument, "%s=%q: want an integer from 0 to %d", name, s, max)
	}
	return v, nil
}
