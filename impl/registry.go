package impl

import (
	"fmt"
	"strings"

	"github.com/mscclpp-go/mscclpp/impl/eth"
	"github.com/mscclpp-go/mscclpp/impl/ib"
	"github.com/mscclpp-go/mscclpp/impl/p2p"
	"github.com/mscclpp-go/mscclpp/impl/shm"
	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// transports lists every transport built into the library by mscclppTransport_t value, like
// NCCL's ncclTransports array: adding a transport is its package plus one line here. The core
// iterates it; nothing else keeps the list.
var transports = []transport.Entry{
	p2p.Entry,
	shm.Entry,
	ib.Entry,
	eth.Entry,
}

// lookupTransport returns the entry of transport id.
func lookupTransport(id transport.ID) (transport.Entry, error) {
	for _, e := range transports {
		if e.ID == id {
			return e, nil
		}
	}
	names := make([]string, len(transports))
	for i, e := range transports {
		names[i] = fmt.Sprintf("%s=%d", e.Name, int32(e.ID))
	}
	return transport.Entry{}, status.Errorf(status.InvalidUsage, "unknown transport %d (this library has %s)", int32(id), strings.Join(names, ", "))
}

// transportName is the name of transport id, or "transport(id)".
func transportName(id transport.ID) string {
	if e, err := lookupTransport(id); err == nil {
		return e.Name
	}
	return fmt.Sprintf("transport(%d)", int32(id))
}
