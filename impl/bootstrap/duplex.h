/* duplex.h: one step of the bootstrap ring for large slots (duplex.c). */
#ifndef MSCCLPP_BOOT_DUPLEX_H_
#define MSCCLPP_BOOT_DUPLEX_H_

#include <stddef.h>

/* A step's progress (no pointers: it may live in Go memory): sent and recvd count the bytes
 * done so far, header first, and carry over between calls. */
typedef struct {
  int sfd, rfd;
  size_t hdrLen, slotLen, sent, recvd;
  int err; /* errno of a failure */
} bootDuplexStep;

enum { BOOT_DUPLEX_DONE = 0, BOOT_DUPLEX_SLICE = 1, BOOT_DUPLEX_SEND_ERR = 2, BOOT_DUPLEX_RECV_ERR = 3, BOOT_DUPLEX_EOF = 4 };

/* Sends {shdr, sslot} on d->sfd while receiving {rhdr, rslot} from d->rfd until both are
 * complete, one fails, or no byte moves for sliceMs; with nothing to do it yields the CPU for up
 * to spinUs before it sleeps in poll. */
int bootDuplex(bootDuplexStep* d, void* shdr, void* sslot, void* rhdr, void* rslot, int sliceMs, int spinUs);

#endif
