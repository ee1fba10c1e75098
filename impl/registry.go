package impl

import (
	"github.com/mscclpp-go/mscclpp/impl/eth"
	"github.com/mscclpp-go/mscclpp/impl/ib"
	"github.com/mscclpp-go/mscclpp/impl/p2p"
	"github.com/mscclpp-go/mscclpp/impl/shm"
	"github.com/mscclpp-go/mscclpp/impl/transport"
)

// transports lists every transport built into the library, like NCCL's ncclTransports
// array: adding a transport is its package plus one line here.
var transports = []transport.Entry{
	p2p.Entry,
	shm.Entry,
	eth.Entry,
	ib.Entry,
}

func init() {
	for _, e := range transports {
		transport.Register(e)
	}
}
