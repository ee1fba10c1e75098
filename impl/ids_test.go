package impl

import (
	"github.com/mscclpp-go/mscclpp/impl/eth"
	"github.com/mscclpp-go/mscclpp/impl/p2p"
	"github.com/mscclpp-go/mscclpp/impl/shm"
)

// The transports the tests of this package name.
const (
	TransportP2P = p2p.ID
	TransportSHM = shm.ID
)

// TransportEthernet is mscclppTransportEthernet.
const TransportEthernet = eth.ID
