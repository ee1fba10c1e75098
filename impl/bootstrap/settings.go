package bootstrap

import (
	"strconv"
	"strings"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/env"
	"github.com/mscclpp-go/mscclpp/impl/logx"
)

// This file parses the bootstrap's settings, each read through its entry of the one table of
// variables (impl/env's vars.go), when ENVIRONMENT.md says: config.go's package imports this
// one, and mscclppGetUniqueId reads them before any communicator exists.

// The names of the variables read by this package, for messages.
const (
	// EnvCommID is the root address NewID uses instead of picking one.
	EnvCommID = string(env.CommID)
	// EnvSocketIfname selects bootstrap interfaces as NCCL_SOCKET_IFNAME does.
	EnvSocketIfname = string(env.SocketIfname)
	// EnvSocketFamily restricts bootstrap addresses to AF_INET or AF_INET6.
	EnvSocketFamily = string(env.SocketFamily)
	// EnvSpinUS is how many microseconds a collective's read busy-polls
	// before parking (default: 50 when a host runs no more ranks than it has
	// CPUs, else 0).
	EnvSpinUS = string(env.BootstrapSpinUS)
	// EnvSecret is the bootstrap secret of ip:port communicators.
	EnvSecret = string(env.BootstrapSecret)
	// EnvSecretFile names a file holding the bootstrap secret.
	EnvSecretFile = string(env.SecretFile)
)

// commIDEnv is MSCCLPP_COMM_ID, trimmed ("" when unset).
func commIDEnv() string { return strings.TrimSpace(env.CommID.Get()) }

// ifnameEnv is MSCCLPP_SOCKET_IFNAME as set.
func ifnameEnv() string { return env.SocketIfname.Get() }

// familyEnv returns 4 or 6 for MSCCLPP_SOCKET_FAMILY=AF_INET/AF_INET6, else 0.
func familyEnv() int {
	v := env.SocketFamily.Get()
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
	v := strings.TrimSpace(env.BootstrapSpinUS.Get())
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
func secretEnv() string { return env.BootstrapSecret.Get() }

// secretFileEnv is MSCCLPP_BOOTSTRAP_SECRET_FILE as set.
func secretFileEnv() string { return env.SecretFile.Get() }

// homeEnv is HOME as it is now (as os.UserHomeDir, which reads Go's copy taken at load time).
func homeEnv() string {
	home, _ := env.Home.Raw()
	return home
}
