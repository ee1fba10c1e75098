package ib

import (
	"sort"
	"strings"

	"github.com/Mellanox/rdmamap"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// Discovery is the seam to the host's RDMA device map (sysfs, through
// rdmamap); tests supply a fake.
type Discovery interface {
	// RdmaDevices lists the RDMA devices of the host ("mlx5_0", ...).
	RdmaDevices() []string
	// ForNetdev maps a network interface ("ib0", "eth2") to its RDMA device.
	ForNetdev(netdev string) (string, error)
	// ForPCI lists the RDMA devices of a PCI function ("0000:3b:00.0").
	ForPCI(pciAddr string) []string
}

// Sysfs is the Discovery of the running host, through rdmamap v1.1.0.
type Sysfs struct{}

// RdmaDevices implements Discovery with rdmamap.GetRdmaDeviceList.
func (Sysfs) RdmaDevices() []string { return rdmamap.GetRdmaDeviceList() }

// ForNetdev implements Discovery with rdmamap.GetRdmaDeviceForNetdevice.
func (Sysfs) ForNetdev(netdev string) (string, error) {
	return rdmamap.GetRdmaDeviceForNetdevice(netdev)
}

// ForPCI implements Discovery with rdmamap.GetRdmaDevicesForPcidev.
func (Sysfs) ForPCI(pciAddr string) []string { return rdmamap.GetRdmaDevicesForPcidev(pciAddr) }

// ResolveDevice turns the ibDev string of mscclppConnect into the name of a
// verbs device: a name the verbs library lists is taken as is ("mlx5_0");
// otherwise d maps a network interface ("ib0") or a PCI address
// ("0000:3b:00.0", its first RDMA device) to one. A name nothing knows is
// an InvalidArgument that lists the devices there are ("no RDMA devices"
// when there are none).
func ResolveDevice(lib *Lib, d Discovery, ibDev string) (string, error) {
	if ibDev == "" {
		return "", status.Errorf(status.InvalidArgument, "IB transport needs an IB device name (ibDev is empty)")
	}
	verbs, err := lib.DeviceNames()
	if err != nil {
		return "", err
	}
	for _, n := range verbs {
		if n == ibDev {
			return n, nil
		}
	}
	if d == nil {
		d = Sysfs{}
	}
	mapped := ""
	if m, err := d.ForNetdev(ibDev); err == nil && m != "" {
		mapped = m
	} else if strings.Count(ibDev, ":") >= 1 {
		if ms := d.ForPCI(ibDev); len(ms) > 0 {
			sort.Strings(ms)
			mapped = ms[0]
		}
	}
	if mapped != "" {
		for _, n := range verbs {
			if n == mapped {
				return n, nil
			}
		}
		return "", status.Errorf(status.InvalidArgument, "IB device %q (%q on this host) not found by %s%s", mapped,
			ibDev, lib.Path(), listing(verbs))
	}
	return "", status.Errorf(status.InvalidArgument, "IB device %q not found%s", ibDev, listing(verbs))
}

func listing(names []string) string {
	if len(names) == 0 {
		return ": no RDMA devices"
	}
	return " (devices: " + strings.Join(names, ", ") + ")"
}
