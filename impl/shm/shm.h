/*
 * shm.h: the SHM transport of the C engine (host mode, ranks of one node):
 * a put is a memcpy into a peer's mscclppHostAlloc region mapped here, else
 * process_vm_writev (engWrite); a signal is an atomic store of the
 * connection's signal count into the peer's epoch in the node segment, with a
 * futex wake when the peer sleeps on it.
 */
#ifndef MSCCLPP_SHM_H_
#define MSCCLPP_SHM_H_

#include "../engine/engine.h"

/* The ops of a connection (shmOps), and of one whose peer queues into an eager ring whose
 * waits land it (shmLandOps: Conn.SetOps at setup). */
extern const engOps shmOps;
extern const engOps shmLandOps;

#endif
