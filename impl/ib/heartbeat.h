/*
 * heartbeat.h: liveness of IB peers. A waiter on an IB connection polls its own
 * memory, which a NIC writes: a peer that stops answering (its link, its node
 * or its process gone quiet) would leave it waiting for ever. So every tick
 * each rank RDMA-writes a growing beat count into a slot its peer registered
 * for the connection, and watches the slot its peer writes here: a slot that
 * has not moved for deadNs, or a beat the NIC could not deliver (an error
 * completion), makes the peer unreachable: mscclppRemoteError naming it on
 * the communicator, which ends every wait. Beats start once
 * mscclppConnectionSetup's closing barrier has passed (before it, a peer's QP
 * may not accept writes yet). A close writes IB_BEAT_BYE, so a
 * peer that destroys its communicator on purpose is not reported.
 */
#ifndef MSCCLPP_IB_HEARTBEAT_H_
#define MSCCLPP_IB_HEARTBEAT_H_

#include "../engine/engine.h"
#include "../../ib/ibcore.h"

#define IB_BEAT_BYE UINT64_MAX

typedef struct ibBeat {
  ibQp* q;
  struct engComm* comm; /* outlives the transport: failures go here, never to the engConn */
  int connId, peerRank, tag;
  uint64_t raddr; /* the peer's slot for this connection, and its rkey */
  uint32_t rkey;
  volatile uint64_t* mine; /* the slot the peer writes (registered memory of this rank) */
  uint64_t seen;           /* its last value, and when it last moved */
  uint64_t seenNs;
  uint64_t sent; /* beats sent */
  int done;      /* the peer said goodbye, or its loss was reported */
} ibBeat;

/* The beat of a connection just set up (c: its engine connection, read now only). */
ibBeat* ibBeatNew(engConn* c, ibQp* q, volatile uint64_t* mine, uint64_t raddr, uint32_t rkey);
/* Starts the silence clock: every peer is set up (setup's barrier passed). */
void ibBeatArm(ibBeat* b);
/* One tick: looks at the peer's slot, reports the peer after deadNs of silence or a failed beat,
 * else sends the next beat. */
void ibBeatTick(ibBeat* b, uint64_t deadNs);
/* Writes the goodbye and waits (at most timeoutMs) until it is delivered. */
void ibBeatBye(ibBeat* b, int timeoutMs);

#endif
