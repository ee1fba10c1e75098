package bootstrap

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"strconv"
	"sync"

	"github.com/mscclpp-go/mscclpp/impl/status"
)

// IDBytes is the size of an ID, the same as MSCCLPP_UNIQUE_ID_BYTES.
const IDBytes = 128

// ID is the opaque mscclppUniqueId: the root's address, the communicator's
// magic and secret, and a format version.
type ID [IDBytes]byte

// ID layout: [0] version, [1] address family (4 or 6), [2:4] port (big
// endian), [4:20] IP (IPv4 in the first 4 bytes), [20:28] magic (little
// endian), [28:60] secret, [60] zone length, [61:77] IPv6 zone; the rest is
// zero.

const (
	idVersion   = 1
	secretBytes = 32
	maxZoneLen  = 16
)

// idFields is a decoded ID.
type idFields struct {
	addr   netip.AddrPort
	magic  uint64
	secret [secretBytes]byte
}

func (f *idFields) encode() ID {
	var id ID
	id[0] = idVersion
	ip := f.addr.Addr()
	if ip.Is4() {
		id[1] = 4
		a := ip.As4()
		copy(id[4:8], a[:])
	} else {
		id[1] = 6
		a := ip.As16()
		copy(id[4:20], a[:])
		z := ip.Zone()
		id[60] = byte(len(z))
		copy(id[61:61+maxZoneLen], z)
	}
	binary.BigEndian.PutUint16(id[2:4], f.addr.Port())
	binary.LittleEndian.PutUint64(id[20:28], f.magic)
	copy(id[28:60], f.secret[:])
	return id
}

func (id *ID) decode() (idFields, error) {
	var f idFields
	bad := func(why string) (idFields, error) {
		return idFields{}, status.Errorf(status.InvalidArgument, "bootstrap: not a valid unique id: %s", why)
	}
	if id[0] != idVersion {
		return bad("unknown format version " + strconv.Itoa(int(id[0])) + " (want a unique id made by GetUniqueId)")
	}
	port := binary.BigEndian.Uint16(id[2:4])
	if port == 0 {
		return bad("port 0")
	}
	var ip netip.Addr
	switch id[1] {
	case 4:
		ip = netip.AddrFrom4([4]byte(id[4:8]))
	case 6:
		ip = netip.AddrFrom16([16]byte(id[4:20]))
		zl := int(id[60])
		if zl > maxZoneLen {
			return bad("zone too long")
		}
		if zl > 0 {
			ip = ip.WithZone(string(id[61 : 61+zl]))
		}
	default:
		return bad("unknown address family " + strconv.Itoa(int(id[1])))
	}
	f.addr = netip.AddrPortFrom(ip, port)
	f.magic = binary.LittleEndian.Uint64(id[20:28])
	copy(f.secret[:], id[28:60])
	if f.secret == ([secretBytes]byte{}) {
		return bad("empty secret")
	}
	return f, nil
}

// RootAddr returns the root address recorded in the id.
func (id ID) RootAddr() (netip.AddrPort, error) {
	f, err := id.decode()
	return f.addr, err
}

// Magic returns the communicator magic recorded in the id.
func (id ID) Magic() uint64 {
	return binary.LittleEndian.Uint64(id[20:28])
}

// randomFields returns a fresh random magic and secret.
func randomFields() (uint64, [secretBytes]byte, error) {
	var buf [8 + secretBytes]byte
	if _, err := rand.Read(buf[:]); err != nil {
		return 0, [secretBytes]byte{}, status.Errorf(status.SystemError, "bootstrap: no random data for a unique id: %w", err)
	}
	var secret [secretBytes]byte
	copy(secret[:], buf[8:])
	return binary.LittleEndian.Uint64(buf[:8]), secret, nil
}

// addrMagic derives the magic of a communicator formed with InitAddr from
// its root address, which is all that its ranks share besides the secret.
// The magic only tells communicators apart (it appears in logs); the key
// that authenticates peers comes from addrKey.
func addrMagic(addr netip.AddrPort) uint64 {
	m := sha256.Sum256([]byte("mscclpp-go bootstrap magic v2\x00" + addr.String()))
	return binary.LittleEndian.Uint64(m[:8])
}

// roots holds the roots NewID started in this process, by magic, until they
// finish; Init attaches to them so Close can wait for them.
var roots sync.Map // uint64 -> *root

// NewID makes a unique id like ncclGetUniqueId: it picks the root address
// (MSCCLPP_COMM_ID if set, else an address of the interface selected by
// MSCCLPP_SOCKET_IFNAME / MSCCLPP_SOCKET_FAMILY with an ephemeral port), a
// random magic and secret, and starts the root listener in this process; the
// root lives until all ranks registered, opts.Timeout passed, or it is closed.
func NewID(opts Options) (ID, error) {
	timeout, err := opts.timeout()
	if err != nil {
		return ID{}, err
	}
	var addr netip.AddrPort
	if v := commIDEnv(); v != "" {
		a, err := ParseAddr(v)
		if err != nil {
			return ID{}, status.Errorf(status.InvalidArgument, "bootstrap: %s: %w", EnvCommID, err)
		}
		addr = a
	} else {
		a, err := selectInterface()
		if err != nil {
			return ID{}, err
		}
		addr = netip.AddrPortFrom(a.ip, 0)
	}
	magic, secret, err := randomFields()
	if err != nil {
		return ID{}, err
	}
	r, err := startRoot(addr, magic, secret, timeout, opts.logger())
	if err != nil {
		return ID{}, err
	}
	roots.Store(magic, r)
	go func() {
		<-r.done
		roots.CompareAndDelete(magic, r)
	}()
	f := idFields{addr: r.addr, magic: magic, secret: secret}
	return f.encode(), nil
}

// ReleaseID stops the root NewID started in this process for id, if it is
// still running (for an id that will never be used), and waits for it.
func ReleaseID(id ID) {
	if v, ok := roots.Load(id.Magic()); ok {
		r := v.(*root)
		r.stop()
		<-r.done
	}
}

// localRoot returns the root NewID started in this process for magic, if
// any is still running.
func localRoot(magic uint64) *root {
	if v, ok := roots.Load(magic); ok {
		return v.(*root)
	}
	return nil
}
