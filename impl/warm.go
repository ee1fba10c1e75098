package impl

// Facts of this process that mscclppCommInitRank needs and that cannot change
// while it runs, worked out once and ahead of time: a goroutine started when
// the library is loaded computes them (and makes the net package do its
// once-per-process probes), so that the first communicator does not wait for
// them. Whatever the environment decides (MSCCLPP_HOSTID,
// MSCCLPP_SOCKET_IFNAME, ...) is still read at every mscclppCommInitRank.
// A Go process never runs on after fork without exec, and exec starts over,
// so a fact computed before a fork cannot reach a child.

import (
	"bytes"
	"os"
	"sync"

	"github.com/mscclpp-go/mscclpp/impl/bootstrap"
	"github.com/mscclpp-go/mscclpp/impl/sysinfo"
)

// machineID is the host name and the kernel's boot id: ranks with the same one share a
// node (the boot id tells containers of one machine from other machines with the same name).
var machineID = sync.OnceValue(func() string {
	h, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return h + "/" + string(bytes.TrimRight(boot, "\n "))
})

func init() { go warm() }

// warm computes the facts above; every one is also computed on first use, so nothing
// depends on warm having finished (or started). Then it becomes the init worker.
func warm() {
	machineID()
	sysinfo.OnlineCPUs()
	bootstrap.Warm()
	initWorker()
}
