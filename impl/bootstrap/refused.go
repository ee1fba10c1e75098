package bootstrap

import (
	"fmt"
	"net"
	"sort"
	"strings"
)

// Registrations the root refused because their key differs: the root warns
// at once with the peer's address, and names them, with what to do, in the
// error it returns at its timeout. It cannot fail the job at once: an
// unauthenticated connection cannot be told from a stranger's, and a
// stranger must not be able to end a job.

// secretAdvice is what to do when ranks' keys differ.
const secretAdvice = "set the same " + EnvSecret + " on every rank (or " + EnvSecretFile +
	", or a ~/" + CookieName + " that every node shares), or use mscclppGetUniqueId"

// noteRefused records a registration refused because its key differs.
func (r *root) noteRefused(from net.Addr) {
	r.refused.Add(1)
	ip := from.String()
	if a, ok := from.(*net.TCPAddr); ok {
		ip = a.AddrPort().Addr().Unmap().String()
	}
	r.mu.Lock()
	r.refusedFrom[ip]++
	r.mu.Unlock()
}

// refusals describes the refused registrations, "" when there were none:
// "3 connections from 10.0.0.2 (2), 10.0.0.3 (1) refused: different job
// secret; set the same ...".
func (r *root) refusals() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.refusedFrom) == 0 {
		return ""
	}
	ips := make([]string, 0, len(r.refusedFrom))
	total := 0
	for ip, n := range r.refusedFrom {
		ips = append(ips, ip)
		total += n
	}
	sort.Strings(ips)
	from := ips[0]
	if len(ips) > 1 {
		parts := make([]string, len(ips))
		for i, ip := range ips {
			parts[i] = fmt.Sprintf("%s (%d)", ip, r.refusedFrom[ip])
		}
		from = strings.Join(parts, ", ")
	}
	what := "connections"
	if total == 1 {
		what = "connection"
	}
	return fmt.Sprintf("%d %s from %s refused: different job secret; %s", total, what, from, secretAdvice)
}
