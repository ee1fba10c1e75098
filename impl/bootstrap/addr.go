package bootstrap

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// resolveTimeout bounds a host name lookup in ParseAddr.
const resolveTimeout = 10 * time.Second

// ParseAddr parses "ip:port", "[ipv6]:port" or "host:port" (a host name is
// resolved, preferring the family of MSCCLPP_SOCKET_FAMILY, else IPv4).
// A malformed or unresolvable address is status.InvalidArgument.
func ParseAddr(s string) (netip.AddrPort, error) {
	host, portStr, err := net.SplitHostPort(strings.TrimSpace(s))
	if err != nil {
		return netip.AddrPort{}, status.Errorf(status.InvalidArgument,
			"invalid bootstrap address %q: want ip:port, [ipv6]:port or host:port", s)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return netip.AddrPort{}, status.Errorf(status.InvalidArgument,
			"invalid bootstrap address %q: port %q is not a number in 0..65535", s, portStr)
	}
	if host == "" {
		return netip.AddrPort{}, status.Errorf(status.InvalidArgument,
			"invalid bootstrap address %q: the host is empty", s)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
	}
	if strings.ContainsAny(host, ":%[] ") {
		return netip.AddrPort{}, status.Errorf(status.InvalidArgument,
			"invalid bootstrap address %q: %q is neither an IP address nor a host name", s, host)
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return netip.AddrPort{}, status.Errorf(status.InvalidArgument,
			"invalid bootstrap address %q: cannot resolve host %q: %v", s, host, err)
	}
	want6 := familyEnv() == 6
	best := ips[0].Unmap()
	for _, ip := range ips {
		ip = ip.Unmap()
		if ip.Is6() == want6 {
			best = ip
			break
		}
	}
	return netip.AddrPortFrom(best, uint16(port)), nil
}

// ifSpec is a parsed MSCCLPP_SOCKET_IFNAME: a comma list of name prefixes;
// a leading '^' turns it into an exclude list, a following (or leading) '='
// makes the names exact.
type ifSpec struct {
	exclude bool
	exact   bool
	names   []string
}

func parseIfSpec(s string) ifSpec {
	var sp ifSpec
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "^") {
		sp.exclude = true
		s = s[1:]
	}
	if strings.HasPrefix(s, "=") {
		sp.exact = true
		s = s[1:]
	}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if i := strings.IndexByte(n, ':'); i >= 0 { // NCCL allows "name:port"; the port is ignored here
			n = n[:i]
		}
		if n != "" {
			sp.names = append(sp.names, n)
		}
	}
	return sp
}

// match reports whether the interface name is selected by sp.
func (sp ifSpec) match(name string) bool {
	hit := false
	for _, n := range sp.names {
		if (sp.exact && name == n) || (!sp.exact && strings.HasPrefix(name, n)) {
			hit = true
			break
		}
	}
	return hit != sp.exclude
}

// ifAddr is one address of one interface.
type ifAddr struct {
	name string
	ip   netip.Addr
}

// interfaceAddrs lists the usable addresses of the interfaces that are up, in
// system order (link-local IPv6 addresses are skipped: they need a zone).
func interfaceAddrs() ([]ifAddr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []ifAddr
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			pfx, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			ip := pfx.Addr().Unmap()
			if ip.Is6() && (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) {
				continue
			}
			out = append(out, ifAddr{ifc.Name, ip})
		}
	}
	return out, nil
}

// pickFrom returns the first address (IPv4 before IPv6 unless family says
// otherwise) of an interface selected by sp.
func pickFrom(addrs []ifAddr, sp ifSpec, family int) (ifAddr, bool) {
	fams := []int{4, 6}
	if family != 0 {
		fams = []int{family}
	}
	for _, f := range fams {
		for _, a := range addrs {
			if (a.ip.Is4() == (f == 4)) && sp.match(a.name) {
				return a, true
			}
		}
	}
	return ifAddr{}, false
}

// selectInterface picks the address used for bootstrap sockets the NCCL way:
// MSCCLPP_SOCKET_IFNAME if set; otherwise interfaces starting with "ib", then
// anything but docker* and lo, then docker*, then lo.
func selectInterface() (ifAddr, error) {
	addrs, err := interfaceAddrs()
	if err != nil {
		return ifAddr{}, status.Errorf(status.SystemError, "bootstrap: cannot list network interfaces: %w", err)
	}
	family := familyEnv()
	if env := ifnameEnv(); strings.TrimSpace(env) != "" {
		if a, ok := pickFrom(addrs, parseIfSpec(env), family); ok {
			return a, nil
		}
		return ifAddr{}, status.Errorf(status.InvalidUsage,
			"bootstrap: no interface that is up matches %s=%q%s", EnvSocketIfname, env, familyText(family))
	}
	for _, spec := range []string{"ib", "^docker,lo", "docker", "lo"} {
		if a, ok := pickFrom(addrs, parseIfSpec(spec), family); ok {
			return a, nil
		}
	}
	return ifAddr{}, status.Errorf(status.SystemError, "bootstrap: no usable network interface%s", familyText(family))
}

func familyText(f int) string {
	switch f {
	case 4:
		return fmt.Sprintf(" with %s=AF_INET", EnvSocketFamily)
	case 6:
		return fmt.Sprintf(" with %s=AF_INET6", EnvSocketFamily)
	}
	return ""
}

// spinBudget returns the busy-poll budget of a ring read. The default is
// 50 µs when this host runs no more ranks than it has CPUs (the peer is
// likely running and answers within a few µs, sooner than a wake-up from
// the netpoller), and 0 when oversubscribed (spinning would only steal
// the CPU from the rank we wait for). MSCCLPP_BOOTSTRAP_SPIN_US overrides it.
func spinBudget(localRanks, ncpu int) time.Duration {
	if d, ok := spinEnv(); ok {
		return d
	}
	if localRanks <= ncpu {
		return defaultSpin
	}
	return 0
}

// defaultSpin is the spin budget when ranks do not outnumber CPUs.
const defaultSpin = 50 * time.Microsecond
