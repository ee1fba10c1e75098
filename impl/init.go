package impl

// The orchestration of mscclppCommInitRank: the bootstrap of a rank runs on the
// init worker, a goroutine started when the library is loaded (warm.go), and
// maps the node's segment from inside it (nodejoin.go); comm.go then builds the
// communicator on what the bootstrap formed.

import "github.com/mscclpp-go/mscclpp/impl/status"

// runBootstrap runs f, the bootstrap of a rank, and waits for it (a panic in f becomes an
// InternalError, as the C entry points report theirs).
//
// f runs on a plain goroutine, not on the caller's: the goroutine of a C thread that
// called into the library is locked to that thread, so each of its waits on a channel or
// a socket hands the scheduler's P between the thread and another one, while a plain
// goroutine blocks and wakes on whichever thread is free and the calling thread waits
// once. The goroutine is the idle init worker when there is one (see initWorker), else a
// new one.
func runBootstrap[T any](f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	job := func() {
		defer func() {
			if r := recover(); r != nil {
				var zero T
				ch <- result{zero, status.Errorf(status.InternalError, "internal error (recovered panic): %v", r)}
			}
		}()
		v, err := f()
		ch <- result{v, err}
	}
	select {
	case initJobs <- job: // the idle worker took it
	default:
		go job()
	}
	r := <-ch
	return r.v, r.err
}

// initJobs hands a job to the init worker while it is idle (unbuffered: a send succeeds only
// when the worker waits for one).
var initJobs = make(chan func())

// initWorker runs the jobs runBootstrap hands it, one at a time, for the life of the
// process. It is the goroutine that warmed the bootstrap up at load (warm), whose stack has
// already grown through a dial and a handshake: a new goroutine would start with a few KiB
// and grow by copying as the bootstrap's calls deepen.
func initWorker() {
	for job := range initJobs {
		job()
	}
}
