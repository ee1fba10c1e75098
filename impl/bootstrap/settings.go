package bootstrap

import (
	"strconv"
	"strings"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/logx"
)

// This file is the bootstrap's one reader of the environment (tests/go/settings_test.go holds
// every other file of the package to it). The bootstrap reads its settings itself, not through
// impl/config.go: config.go's package imports this one, and mscclppGetUniqueId reads them
// before any communicator exists.

// Environment variables read by this package.
const (
	// EnvCommID is the root address NewID uses instead of picking one.
	EnvCommID = "MSCCLPP_COMM_ID"
	// EnvSocketIfname selects bootstrap interfaces as NCCL_SOCKET_IFNAME does.
	EnvSocketIfname = "MSCCLPP_SOCKET_IFNAME"
	// EnvSocketFamily restricts bootstrap addresses to AF_INET or AF_INET6.
	EnvSocketFamily = "MSCCLPP_SOCKET_FAMILY"
	// EnvSpinUS is how many microseconds a collective's read busy-polls
	// before parking (default: 50 when a host runs no more ranks than it has
	// CPUs, else 0).
	EnvSpinUS = "MSCCLPP_BOOTSTRAP_SPIN_US"
	// EnvSecret is the bootstrap secret of ip:port communicators.
	EnvSecret = "MSCCLPP_BOOTSTRAP_SECRET"
	// EnvSecretFile names a file holding the bootstrap secret.
	EnvSecretFile = "MSCCLPP_BOOTSTRAP_SECRET_FILE"
)

// commIDEnv is MSCCLPP_COMM_ID, trimmed ("" when unset).
func commIDEnv() string { return strings.TrimSpace(env.Get(EnvCommID)) }

// ifnameEnv is MSCCLPP_SOCKET_IFNAME as set.
func ifnameEnv() string { return env.Get(EnvSocketIfname) }

// familyEnv returns 4 or 6 for MSCCLPP_SOCKET_FAMILY=AF_INET/AF_INET6, else 0.
func familyEnv() int {
	v := env.Get(EnvSocketFamily)
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "AF_INET", "INET", "4", "IPV4":
		return 4
	case "AF_INET6", "INET6", "6", "IPV6":
		return 6
	case "":
		return 0
	}
	logx.Malformed("bootstrap: ignoring %s=%q: want AF_INET or AF_INET6; both families are used", EnvSocketFamily, v)
	return 0
}

// spinEnv is MSCCLPP_BOOTSTRAP_SPIN_US and whether it is set to a valid value (a malformed one is
// reported once and ignored).
func spinEnv() (time.Duration, bool) {
	v := strings.TrimSpace(env.Get(EnvSpinUS))
	if v == "" {
		return 0, false
	}
	if us, err := strconv.Atoi(v); err == nil && us >= 0 {
		return time.Duration(us) * time.Microsecond, true
	}
	logx.Malformed("bootstrap: ignoring %s=%q: not a non-negative number of microseconds; the default is used", EnvSpinUS, v)
	return 0, false
}

// secretEnv reads MSCCLPP_BOOTSTRAP_SECRET; the ENV log line says that it is
// set, never what it is.
func secretEnv() string {
	s, _ := env.Raw(EnvSecret)
	if s != "" {
		env.Report(EnvSecret, "a value (not shown)")
	}
	return s
}

// secretFileEnv is MSCCLPP_BOOTSTRAP_SECRET_FILE as set.
func secretFileEnv() string { return env.Get(EnvSecretFile) }

// homeEnv is HOME as it is now (as os.UserHomeDir, which reads Go's copy taken at load time).
func homeEnv() string {
	home, _ := env.Raw("HOME")
	return home
}
