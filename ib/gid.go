package ib

/*
#include "ibcore.h"
*/
import "C"

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/mscclpp-go/mscclpp/impl/logx"
	"github.com/mscclpp-go/mscclpp/impl/status"
)

// SysfsRoot is where the kernel lists RDMA devices; tests point it at a tree of their own.
var SysfsRoot = "/sys/class/infiniband"

// roceV2Index is the first GID index of device dev's port whose type is "RoCE v2" and whose GID
// is IPv4-mapped (::ffff:a.b.c.d), as NCCL picks one, and that GID; -1 when sysfs lists none.
func roceV2Index(dev string, port, tableLen int) (int, net.IP) {
	dir := filepath.Join(SysfsRoot, dev, "ports", fmt.Sprint(port))
	for i := 0; i < tableLen; i++ {
		typ, err := os.ReadFile(filepath.Join(dir, "gid_attrs", "types", fmt.Sprint(i)))
		if err != nil || !strings.EqualFold(strings.TrimSpace(string(typ)), "RoCE v2") {
			continue // an empty entry reads as an error
		}
		g, err := os.ReadFile(filepath.Join(dir, "gids", fmt.Sprint(i)))
		if err != nil {
			continue
		}
		if ip := net.ParseIP(strings.TrimSpace(string(g))); ip != nil && ip.To4() != nil && !ip.To4().IsUnspecified() {
			return i, ip
		}
	}
	return -1, nil
}

// pickGID sets the GID of x when the index was left to this library (MSCCLPP_IB_GID_INDEX
// unset): on RoCE the first RoCE v2 IPv4-mapped entry (routable; index 0 is usually RoCE v1
// link-local, which fails on routed fabrics), else index 0. An INFO line names the choice.
func (x *Context) pickGID() error {
	idx := 0
	if x.RoCE() {
		i, ip := roceV2Index(x.Name(), x.Port(), int(x.c.portAttr.gid_tbl_len))
		if i >= 0 {
			idx = i
			logx.Infof(logx.Net, "IB device %s port %d: GID index %d (RoCE v2, %s) chosen; MSCCLPP_IB_GID_INDEX overrides", x.Name(), x.Port(), i, ip)
		} else {
			logx.Infof(logx.Net, "IB device %s port %d: no RoCE v2 IPv4-mapped GID listed under %s; GID index 0 used (MSCCLPP_IB_GID_INDEX overrides)", x.Name(), x.Port(), SysfsRoot)
		}
	}
	var msg [errLen]C.char
	if C.ibCtxSetGid(x.c, C.int(idx), &msg[0], errLen) != 0 {
		return status.Errorf(status.SystemError, "%s", cerr(&msg[0]))
	}
	return nil
}

// GIDIndexInUse is the GID table index the context uses.
func (x *Context) GIDIndexInUse() int { return int(x.c.gidIndex) }
