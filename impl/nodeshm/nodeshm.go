// Package nodeshm holds the node-local shared-memory segment of a
// communicator: one POSIX shared-memory object per communicator and node,
// created by the node's lowest rank, mapped by every local rank, and
// unlinked by the last rank to map it. It holds what node-local peers write
// into each other: each local rank's signal epochs and wait counters, and
// its pid (for liveness checks).
package nodeshm

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mscclpp-go/mscclpp/impl/status"
	"github.com/mscclpp-go/mscclpp/impl/sysinfo"
)

const (
	headerBytes  = 4096
	regionHeader = 64
	epochSlot    = 64 // one cache line per connection: its epochs (16 bytes)
	waitBytes    = 8
	sleeperBytes = 4                  // a connection's futex-waiter count (see Sleepers)
	segMagic     = 0x4d5343434c505053 // "MSCCLPPS"
	shmDir       = "/dev/shm/"
)

// The collective data slots: each round of a collective moves at most a slot per rank through
// the segment, and every round waits for every local peer (a cross-CPU handoff, or a wake-up),
// so a large gather pays one handoff per slot. The slots of one parity of all local ranks take
// collSlotsPerNode together, each between collSlotMin and collSlotMax (a power of two): small
// nodes get large slots (2 ranks: 1 MiB, one round per MiB instead of sixteen), nodes of 17
// ranks and more the smallest, so the segment grows by 2 slots per rank as before.
const (
	collSlotMin      = 64 << 10
	collSlotMax      = 1 << 20
	collSlotsPerNode = 2 << 20
)

// CollSlotBytesFor is the most data per rank one round of a collective moves through the
// segment of a node of nLocal ranks.
func CollSlotBytesFor(nLocal int) int {
	s := collSlotMax
	for s > collSlotMin && s*nLocal > collSlotsPerNode {
		s /= 2
	}
	return s
}

// collRegion is one local rank's collective area on a node of nLocal ranks: a sequence word on
// its own cache line (with the two sizes and the sleeper count), then two data slots used
// alternately (see Comm.allGatherShm).
func collRegion(nLocal int) int { return 64 + 2*CollSlotBytesFor(nLocal) }

// Segment is one mapping of a node's segment.
type Segment struct {
	name     string
	mem      []byte
	nLocal   int
	maxConns int
	region   int
}

func regionSize(maxConns int) int {
	n := sleepersOff(maxConns) + maxConns*sleeperBytes
	return (n + 4095) &^ 4095
}

// sleepersOff is where a region's futex-waiter counts start: on cache lines of their own, after
// the wait counters (see Sleepers).
func sleepersOff(maxConns int) int { return (regionHeader + maxConns*(epochSlot+waitBytes) + 63) &^ 63 }

// Name is the segment's name for a communicator magic, a per-instance nonce and a node index.
func Name(magic, nonce uint64, node int) string {
	return fmt.Sprintf("mscclpp.%016x.%016x.%d", magic, nonce, node)
}

// Open creates (leader) or opens (others, waiting until deadline for the leader) the segment
// for nLocal ranks with maxConns connection slots each, and returns once every local rank has
// mapped it: the last rank to map it unlinks it, so no name is left behind however the
// processes end later. A rank that gives up waiting (the deadline, or alive's error) unlinks
// it too: the leader may have died between creating it and its unlinking, and the job's name
// is used by nobody else. A rank alone on its node needs no name (memfd): killed at any
// moment, it leaves none. alive is asked every millisecond or so while waiting; its error (a
// local rank that exited) ends the wait.
func Open(name string, leader bool, nLocal, maxConns int, deadline time.Time, alive func() error) (*Segment, error) {
	alive = throttle(alive, time.Millisecond)
	s, err := join(name, leader, nLocal, maxConns, deadline, alive)
	if err != nil {
		return nil, err
	}
	if err := s.awaitMapped(shmDir+name, deadline, alive); err != nil {
		return nil, err
	}
	return s, nil
}

// Join is Open without the wait for the other local ranks: it returns once this rank has
// mapped the segment and counted itself in (the last to count in unlinks the name). For a
// caller that learns from elsewhere that every local rank joined (the bootstrap's last
// answer, see impl's nodeJoin), and that calls Unlink (then Close) when that never comes.
func Join(name string, leader bool, nLocal, maxConns int, deadline time.Time, alive func() error) (*Segment, error) {
	return join(name, leader, nLocal, maxConns, deadline, throttle(alive, time.Millisecond))
}

func join(name string, leader bool, nLocal, maxConns int, deadline time.Time, alive func() error) (*Segment, error) {
	size := headerBytes + nLocal*(regionSize(maxConns)+collRegion(nLocal))
	path := shmDir + name
	var fd int
	var err error
	switch {
	case leader && nLocal == 1:
		fd, err = createUnnamed(name, size)
	case leader:
		fd, err = create(path, size)
	default:
		fd, err = awaitCreated(path, size, deadline, alive)
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	// MmapPtr, not Mmap: Mmap records every mapping in a map of its own under a lock
	p, err := unix.MmapPtr(fd, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		if leader {
			_ = os.Remove(path)
		}
		return nil, status.Errorf(status.SystemError, "map node shared memory %s: %w", path, err)
	}
	s := &Segment{name: name, mem: unsafe.Slice((*byte)(p), size), nLocal: nLocal, maxConns: maxConns, region: regionSize(maxConns)}
	if leader {
		atomic.StoreUint64(s.word(0), segMagic)
	} else {
		for atomic.LoadUint64(s.word(0)) != segMagic {
			err := alive()
			if err == nil && time.Now().After(deadline) {
				err = status.Errorf(status.RemoteError, "node shared memory %s never became ready", path)
			}
			if err != nil {
				s.Close()
				_ = os.Remove(path) // its leader is gone or stuck: nobody will use it
				return nil, err
			}
			sysinfo.Nap(20 * time.Microsecond)
		}
	}
	if int(atomic.AddUint64(s.word(8), 1)) == nLocal {
		_ = os.Remove(path)
		wakeAll(s.word(8))
	}
	return s, nil
}

// The segment's file is opened, sized and mapped with plain system calls, not through an
// os.File, which for every open tries to register the file with the network poller (an
// epoll_ctl refused for a regular file and four fcntl calls): work every rank paid during
// mscclppCommInitRank for nothing. Errors read as os.File's did (*os.PathError).

// openFile opens path (flags as open(2)), retrying an interrupted call.
func openFile(path string, flags int, perm uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, perm)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// reserve sizes the file of fd, named path (for the error), to size bytes with every page
// allocated: a segment only ftruncated is sparse, and on a full tmpfs the first store to a page
// the filesystem cannot back kills the process with SIGBUS instead of failing here. The size
// shows only once every page is there (fallocate sets it last), so a rank that opens the file
// as soon as it has its size maps pages that exist. A filesystem without fallocate gets the
// sparse file of ftruncate.
func reserve(fd int, path string, size int) error {
	for {
		err := unix.Fallocate(fd, 0, 0, int64(size))
		if err == unix.EINTR {
			continue
		}
		if err == unix.EOPNOTSUPP || err == unix.ENOSYS {
			err = unix.Ftruncate(fd, int64(size))
			if err == unix.EINTR {
				continue
			}
		}
		if err == unix.ENOSPC {
			return fmt.Errorf("%w (the shared memory filesystem is full)", &os.PathError{Op: "fallocate", Path: path, Err: err})
		}
		if err != nil {
			return &os.PathError{Op: "fallocate", Path: path, Err: err}
		}
		return nil
	}
}

// create makes the segment's file of size bytes (the leader), replacing a stale one.
func create(path string, size int) (int, error) {
	fd, err := openFile(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o600)
	if os.IsExist(err) { // a stale segment of a crashed run with the same name
		_ = os.Remove(path)
		fd, err = openFile(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o600)
	}
	if err != nil {
		return -1, status.Errorf(status.SystemError, "create node shared memory %s: %w", path, err)
	}
	if err = reserve(fd, path, size); err != nil {
		unix.Close(fd)
		_ = os.Remove(path)
		return -1, status.Errorf(status.SystemError, "reserve node shared memory %s of %d bytes: %w", path, size, err)
	}
	return fd, nil
}

// createUnnamed makes the segment of a rank alone on its node: a memfd, which no process
// ending at any moment can leave behind.
func createUnnamed(name string, size int) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return -1, status.Errorf(status.SystemError, "create node shared memory %s: %w", name, err)
	}
	if err = reserve(fd, name, size); err != nil {
		unix.Close(fd)
		return -1, status.Errorf(status.SystemError, "reserve node shared memory %s of %d bytes: %w", name, size, err)
	}
	return fd, nil
}

// awaitCreated opens the segment's file once the leader created and sized it.
func awaitCreated(path string, size int, deadline time.Time, alive func() error) (int, error) {
	sleep := 20 * time.Microsecond
	for {
		fd, err := openFile(path, unix.O_RDWR, 0)
		if err == nil {
			var st unix.Stat_t
			if unix.Fstat(fd, &st) == nil && st.Size == int64(size) {
				return fd, nil
			}
			unix.Close(fd)
		} else if !os.IsNotExist(err) {
			return -1, status.Errorf(status.SystemError, "open node shared memory %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			_ = os.Remove(path) // created, never sized: its leader is gone
			return -1, status.Errorf(status.RemoteError, "node shared memory %s was not created by the node's lowest rank in time", path)
		}
		if err := alive(); err != nil {
			_ = os.Remove(path)
			return -1, err
		}
		sysinfo.Nap(sleep)
		if sleep < time.Millisecond {
			sleep *= 2
		}
	}
}

// awaitMapped waits until every local rank mapped the segment and counted itself in (the
// last one removes its name and wakes the others); on failure s is closed.
func (s *Segment) awaitMapped(path string, deadline time.Time, alive func() error) error {
	nLocal := s.nLocal
	count := s.word(8)
	for {
		n := atomic.LoadUint64(count)
		if int(n) >= nLocal {
			return nil
		}
		err := alive()
		if err != nil && int(atomic.LoadUint64(count)) == nLocal {
			return nil // every rank mapped it before one of them exited
		}
		if err == nil && time.Now().After(deadline) {
			err = status.Errorf(status.RemoteError, "only %d of %d local ranks mapped node shared memory %s in time", atomic.LoadUint64(count), nLocal, path)
		}
		if err != nil {
			_ = os.Remove(path) // nobody else will map it now
			s.Close()
			return err
		}
		waitChange(count, n, time.Millisecond) // alive is asked about every millisecond
	}
}

func (s *Segment) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }

func (s *Segment) regionOff(local int) int { return headerBytes + local*s.region }

// Epoch is the address of local rank local's signal epoch slot for its connection conn.
func (s *Segment) Epoch(local, conn int) unsafe.Pointer {
	return unsafe.Pointer(&s.mem[s.regionOff(local)+regionHeader+conn*epochSlot])
}

// Wait is the address of local rank local's wait counter for its connection conn.
func (s *Segment) Wait(local, conn int) unsafe.Pointer {
	return unsafe.Pointer(&s.mem[s.regionOff(local)+regionHeader+s.maxConns*epochSlot+conn*waitBytes])
}

// Sleepers is the address of the count of local rank local's threads asleep on the epoch of its
// connection conn (a signaller wakes them when it is not zero). The counts lie apart from the
// epochs: a signaller reads the count right after it stores the peer's epoch, and a read of the
// epoch's line there would pull back the line the peer is about to read and write (about 20–45
// ns per signal on a 2-vCPU VM); these lines change only when a wait goes to sleep.
func (s *Segment) Sleepers(local, conn int) unsafe.Pointer {
	return unsafe.Pointer(&s.mem[s.regionOff(local)+sleepersOff(s.maxConns)+conn*sleeperBytes])
}

func (s *Segment) collOff(local int) int {
	return headerBytes + s.nLocal*s.region + local*collRegion(s.nLocal)
}

// CollSlotBytes is the size of each collective data slot (CollSlot): the most data per rank one
// round of a collective moves.
func (s *Segment) CollSlotBytes() int { return CollSlotBytesFor(s.nLocal) }

// CollSeq is local rank local's collective sequence word.
func (s *Segment) CollSeq(local int) *uint64 { return s.word(s.collOff(local)) }

// CollSleepers counts the threads asleep on local rank local's collective sequence word (on its
// cache line: the rank reads it right after publishing).
func (s *Segment) CollSleepers(local int) *uint32 {
	return (*uint32)(unsafe.Pointer(&s.mem[s.collOff(local)+24]))
}

// CollSize is where local rank local records the size of its collective of the given parity.
func (s *Segment) CollSize(local, parity int) *uint64 { return s.word(s.collOff(local) + 8 + 8*parity) }

// CollSlot is local rank local's data slot of the given parity (0 or 1).
func (s *Segment) CollSlot(local, parity int) []byte {
	n := s.CollSlotBytes()
	off := s.collOff(local) + 64 + parity*n
	return s.mem[off : off+n : off+n]
}

// SetPid records the pid of local rank local.
func (s *Segment) SetPid(local, pid int) { atomic.StoreUint64(s.word(s.regionOff(local)), uint64(pid)) }

// Pid is the recorded pid of local rank local (0 until it recorded one).
func (s *Segment) Pid(local int) int { return int(atomic.LoadUint64(s.word(s.regionOff(local)))) }

// throttle runs check at most once per period, the first time one period after throttle was
// called; in between it reports nil. A wait that ends within its first period (the usual one:
// the leader creates the segment at once) asks nothing: a check of impl's costs a kill and a
// read of /proc/PID/stat per local rank, which every local rank would otherwise pay at every
// poll of every init.
func throttle(check func() error, period time.Duration) func() error {
	last := time.Now()
	return func() error {
		if now := time.Now(); now.Sub(last) >= period {
			last = now
			return check()
		}
		return nil
	}
}

// Name is the segment's name: unique to one communicator instance and node.
func (s *Segment) Name() string { return s.name }

// Unlink removes the segment's name (harmless when already gone).
func (s *Segment) Unlink() { _ = os.Remove(shmDir + s.name) }

// Close unmaps the segment.
func (s *Segment) Close() error {
	if s.mem == nil {
		return nil
	}
	err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(s.mem)), uintptr(len(s.mem)))
	s.mem = nil
	return err
}
