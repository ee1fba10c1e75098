package impl

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/bootstrap"
	"github.com/mscclpp-go/mscclpp/impl/engine"
	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/sysinfo"
)

// DefaultBootstrapTimeout bounds every bootstrap wait unless mscclppSetBootstrapConnTimeout or
// MSCCLPP_BOOTSTRAP_TIMEOUT changes it. This file is the one owner of the timeout: the
// bootstrap takes the value BootstrapTimeout resolves.
const DefaultBootstrapTimeout = bootstrap.DefaultTimeout

// envTimeout is the default bootstrap timeout in seconds.
const envTimeout = env.BootstrapTimeout

var bootstrapTimeoutNs atomic.Int64

// SetBootstrapTimeout sets the process-wide bound of every bootstrap wait, in seconds.
func SetBootstrapTimeout(seconds int) error {
	if seconds <= 0 {
		return status.Errorf(status.InvalidArgument, "bootstrap timeout must be positive, got %d s", seconds)
	}
	bootstrapTimeoutNs.Store(int64(time.Duration(seconds) * time.Second))
	return nil
}

// BootstrapTimeout is the current bound of every bootstrap wait: what
// mscclppSetBootstrapConnTimeout set, else MSCCLPP_BOOTSTRAP_TIMEOUT seconds as read at the
// latest init or id (a malformed value is reported once by logx.Malformed and ignored), else
// DefaultBootstrapTimeout. It is called on every collective: it reads no environment.
func BootstrapTimeout() time.Duration {
	if v := bootstrapTimeoutNs.Load(); v > 0 {
		return time.Duration(v)
	}
	d := time.Duration(envTimeoutNs.Load())
	if !envTimeoutRead.Load() {
		d = readTimeoutEnv()
	}
	if d > 0 {
		return d
	}
	return DefaultBootstrapTimeout
}

var (
	envTimeoutNs   atomic.Int64 // MSCCLPP_BOOTSTRAP_TIMEOUT as last read; 0: unset or malformed
	envTimeoutRead atomic.Bool
)

// readTimeoutEnv reads MSCCLPP_BOOTSTRAP_TIMEOUT now (through getenv) for BootstrapTimeout.
func readTimeoutEnv() time.Duration {
	var d time.Duration
	if s := envTimeout.Get(); s != "" {
		v, err := parseTimeoutEnv(s)
		if err == nil {
			d = v
		} else {
			logx.Malformed("ignoring %v; the default %v is used", err, DefaultBootstrapTimeout)
		}
	}
	envTimeoutNs.Store(int64(d))
	envTimeoutRead.Store(true)
	return d
}

// parseTimeoutEnv parses a MSCCLPP_BOOTSTRAP_TIMEOUT value: a positive
// whole number of seconds.
func parseTimeoutEnv(s string) (time.Duration, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%s=%q is not a positive number of seconds", envTimeout, s)
	}
	return time.Duration(v) * time.Second, nil
}

// envUint reads a non-negative integer knob, warning about and ignoring a malformed value.
func envUint(name env.Var, def uint32) uint32 {
	s, ok := name.Lookup()
	if !ok || s == "" {
		return def
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		logx.Malformed("ignoring %s=%q: not a non-negative integer; the default %d is used", name, s, def)
		return def
	}
	return uint32(v)
}

// waitBackoff is the polling policy of host waits and FIFO pushes: MSCCLPP_WAIT_SPIN pause
// iterations, then MSCCLPP_WAIT_YIELD sched_yield calls, then sleeps doubling up to
// MSCCLPP_WAIT_SLEEP_MAX_US. With more local ranks than CPUs a spinning waiter only delays the
// rank it waits for, so it spins briefly and soon sleeps; otherwise it keeps a CPU, yielding,
// for up to about a second before it sleeps (a sleeping waiter wakes late: a timer tick).
func waitBackoff(localRanks int) engine.Backoff {
	spin, yields := uint32(4000), uint32(1000000)
	if localRanks > sysinfo.OnlineCPUs() {
		spin, yields = 64, 2000
	}
	return engine.Backoff{
		Spin:       envUint(env.WaitSpin, spin),
		Yields:     envUint(env.WaitYield, yields),
		SleepMaxUs: envUint(env.WaitSleepMaxUs, 1000),
	}
}

// proxyBackoff is the idle policy of host-mode proxy threads (MSCCLPP_PROXY_SPIN,
// MSCCLPP_PROXY_YIELD, then asleep until a push wakes it, looking again every
// MSCCLPP_PROXY_SLEEP_MAX_US) for a process of localRanks ranks on this node that runs proxies
// proxy threads. Where the process may run on one CPU only (a rank pinned to its CPU), or the
// node has more ranks than CPUs, an idle proxy spinning or yielding would hold the CPU its own
// initiator needs: it sleeps at once, and the push's wake-up preempts the initiator's wait
// instead of sharing the CPU with it.
func proxyBackoff(localRanks, proxies int) engine.Backoff {
	spin, yields := uint32(1000), uint32(100)
	if (proxies > 0 && sysinfo.AllowedCPUs() < 2) || localRanks > sysinfo.OnlineCPUs() {
		spin, yields = 0, 0
	}
	return engine.Backoff{
		Spin:       envUint(env.ProxySpin, spin),
		Yields:     envUint(env.ProxyYield, yields),
		SleepMaxUs: envUint(env.ProxySleepMaxUs, 10000),
	}
}

// membarrier is MSCCLPP_MEMBARRIER: false ("0") makes host calls hold proxy contexts with
// locked counters instead of membarrier(2) (for sandboxes without it); "1", or none, keeps
// membarrier where the kernel offers it; anything else is warned about and ignored.
func membarrier() bool {
	return envBool(env.Membarrier, true)
}

// envBool reads a 0-or-1 knob, warning about and ignoring any other value.
func envBool(name env.Var, def bool) bool {
	v, _ := name.Lookup()
	switch strings.TrimSpace(v) {
	case "":
		return def
	case "0":
		return false
	case "1":
		return true
	}
	d := 0
	if def {
		d = 1
	}
	logx.Malformed("ignoring %s=%q: not 0 or 1; the default %d is used", name, v, d)
	return def
}

// streamCopy is how host puts into mapped memory copy (engine.SetStreamBytes, SetStreamAuto):
// puts of MSCCLPP_STREAM_COPY_BYTES and up, below MSCCLPP_STREAM_COPY_MAX_BYTES (0, the
// default: no bound) bytes may use non-temporal stores, chosen per size band by timing unless
// MSCCLPP_STREAM_COPY_AUTO is 0.
func streamCopy() (bytes, maxBytes uint64, auto bool) {
	maxBytes = uint64(envUint(env.StreamCopyMaxBytes, 0))
	if maxBytes == 0 {
		maxBytes = math.MaxUint64
	}
	return uint64(envUint(env.StreamCopyBytes, 8<<20)), maxBytes, envBool(env.StreamCopyAuto, true)
}

// transportSettings reads the environment variables every registered transport declares
// (Entry.Settings, each an entry of impl/env's table) for Host.Settings, each logged once per
// value; a name the table lacks is warned about and left unset.
func transportSettings() map[string]string {
	m := map[string]string{}
	for _, e := range transports {
		for _, name := range e.Settings {
			if v, ok := env.Declared(name); ok {
				m[name] = strings.TrimSpace(v.Get())
			} else {
				logx.Warnf("transport %s declares %s, which impl/env's table of variables lacks: not read", e.Name, name)
			}
		}
	}
	return m
}

// hangReportAfter is MSCCLPP_HANG_REPORT_S as a duration (0: reports off).
func hangReportAfter() time.Duration {
	return time.Duration(envUint(envHangReport, defaultHangReportS)) * time.Second
}

// hostID is this process's host identity: MSCCLPP_HOSTID, else the host name and boot id.
func hostID() string {
	if v := env.HostID.Get(); v != "" {
		return v
	}
	return machineID()
}
