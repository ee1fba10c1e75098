/*
 * ethread.c: who reads a host-mode connection's socket: the receive thread
 * (ethRxMain, one per connection), or a wait on the connection, which may take
 * the reader's token and read the frames itself (ethWaitPoll), so that the
 * thread that waits for a signal is the thread the kernel wakes when it
 * arrives, as with a plain TCP socket, instead of a receive thread that
 * wakes it again (a futex wake and a context switch on each side of a
 * round trip).
 *
 * The token (ethConn.reader): ETH_READER_NONE, _RX or _WAIT, taken with a
 * compare-and-swap; exactly one thread reads frames at a time, and a frame
 * is read whole by the thread that read its header. Only one thread is ever
 * blocked on the socket: both asleep in recv would both wake on every
 * arrival. The receive thread hands the token over when a count it
 * delivered woke a sleeping wait (a thread that is about to wait again, most
 * likely), and parks for ETH_PARK_NS, again and again while waits take the
 * token in between; a wait gives the token back without waking it. So
 * frames that arrive while no one waits are read by the next wait or,
 * when no wait came for ETH_PARK_NS, by the receive thread (within two
 * periods), and a ping-pong runs without the receive thread. A wait whose
 * time is up (timeout 0) never takes the token. A reading wait finishes the
 * frame whose header it read, so its deadline can pass by the time one put
 * takes to arrive (as it would for the receive thread).
 */
#define _GNU_SOURCE
#include "ethconn.h"

#include "../engine/backoff.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ETH_PARK_NS 1000000ull /* the longest a parked receive thread leaves the socket alone */
#define ETH_FRAME_SLEEP_NS 20000000ull /* the longest a wait sleeps over a frame the receive thread reads */

static void parkOn(uint32_t* word, uint32_t val)
{
  struct timespec ts = {0, (long)ETH_PARK_NS};
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

/* Whether the receive thread stops reading: the stream ended or the connection closes. */
static int rxOver(ethConn* s)
{
  return __atomic_load_n(&s->ended, __ATOMIC_ACQUIRE) || s->closing || __atomic_load_n(&s->dead, __ATOMIC_ACQUIRE);
}

static int readerTake(ethConn* s)
{
  if (!s->direct) return 1; /* the receive thread is the only reader */
  for (;;) {
    if (rxOver(s)) return 0;
    uint32_t reads = __atomic_load_n(&s->waitReads, __ATOMIC_ACQUIRE);
    if (s->rxHanded && reads != s->rxSeenReads) {
      /* a wait read since the receive thread parked: waits are reading, leave it to them */
      s->rxSeenReads = reads;
      parkOn(&s->reader, __atomic_load_n(&s->reader, __ATOMIC_ACQUIRE));
      continue;
    }
    uint32_t cur = ETH_READER_NONE;
    if (__atomic_compare_exchange_n(&s->reader, &cur, ETH_READER_RX, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      s->rxHanded = 0;
      return 1;
    }
    parkOn(&s->reader, cur); /* a wait reads: look again after ETH_PARK_NS */
  }
}

static void readerGive(ethConn* s, int woke)
{
  if (!s->direct) return;
  if (woke) {
    s->rxHanded = 1; /* leave the next frames to the wait just woken */
    s->rxSeenReads = __atomic_load_n(&s->waitReads, __ATOMIC_ACQUIRE);
  }
  __atomic_store_n(&s->reader, ETH_READER_NONE, __ATOMIC_RELEASE);
  if (woke) parkOn(&s->reader, ETH_READER_NONE);
}

void ethReaderEnd(ethConn* s)
{
  __atomic_store_n(&s->ended, 1, __ATOMIC_RELEASE);
  if (!s->direct) return;
  __atomic_store_n(&s->reader, ETH_READER_NONE, __ATOMIC_RELEASE);
  syscall(SYS_futex, &s->reader, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); /* a parked receive thread exits */
}

/* Nothing came in for a wait's period: the tick (a PING when due); 0, or -1 when the peer is
 * unreachable (recorded). */
static int waitIdle(ethConn* s)
{
  int rc = ethRxTick(s);
  if (rc == 0) return 0;
  ethRxFailed(s, rc, 0);
  return -1;
}

/* A header recv that failed with rc (-1: a clean end of stream): -1, recorded unless closing. */
static int waitEnded(ethConn* s, int rc)
{
  if (!s->closing && !s->dead) ethRxFailed(s, rc, 0);
  return -1;
}

/* A wait spins this long per pause of its communicator's spin budget (waitCfg.spin,
 * MSCCLPP_WAIT_SPIN), at most half its period. */
#define ETH_SPIN_NS_PER_PAUSE 25ull
#define ETH_SPIN_MAX_NS (ETH_WAIT_POLL_NS / 2)

/* The header's recv after a spin on the socket (recv with MSG_DONTWAIT, for the wait's spin
 * budget): what recv returned. A thread asleep in recv is woken by the data's arrival, which
 * costs a CPU's wake-up on each side of a round trip; host waits of the other transports spin
 * first for the same reason. Nothing else on this CPU needs it meanwhile: the receive thread is
 * parked while a wait reads. */
static uint64_t waitSpinNs(ethConn* s)
{
  uint64_t budget = (uint64_t)s->c->comm->waitCfg.spin * ETH_SPIN_NS_PER_PAUSE;
  return budget > ETH_SPIN_MAX_NS ? ETH_SPIN_MAX_NS : budget;
}

static ssize_t recvHeader(ethConn* s, unsigned char* hdr)
{
  uint64_t budget = s->spinNs;
  if (budget > 0) {
    uint64_t t0 = engNowNs();
    do {
      ssize_t k = recv(s->fd, hdr, ETH_HDR_BYTES, MSG_DONTWAIT);
      if (k >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return k; /* bytes, the end, an error */
    } while (engNowNs() - t0 < budget);
  }
  return recv(s->fd, hdr, ETH_HDR_BYTES, MSG_WAITALL);
}

/* Reads one frame's header as a wait does: 1 when it is in hdr; 0 when nothing came before
 * the wait should look at its conditions again (ETH_WAIT_POLL_NS, or its deadline); -1 when the
 * stream ended (recorded). With a whole period left it spins, then blocks in the header's recv (the
 * socket's SO_RCVTIMEO is ETH_WAIT_POLL_NS in this mode): a poll before it would cost a system
 * call per frame, which a plain TCP reader does not make; else it polls for what is left. */
static int waitHeader(ethConn* s, unsigned char* hdr, uint64_t deadlineNs)
{
  uint64_t left = ETH_WAIT_POLL_NS;
  if (deadlineNs != UINT64_MAX) {
    uint64_t now = engNowNs();
    if (now >= deadlineNs) return 0;
    if (deadlineNs - now < left) left = deadlineNs - now;
  }
  size_t got = 0;
  if (left == ETH_WAIT_POLL_NS) {
    ssize_t k = recvHeader(s, hdr);
    if (k == 0) return waitEnded(s, -1);
    if (k < 0) /* nothing for a period (or a signal): the tick, then look again */
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? waitIdle(s) : waitEnded(s, errno);
    __atomic_store_n(&s->lastRecvNs, engNowNs(), __ATOMIC_RELAXED);
    if ((size_t)k == ETH_HDR_BYTES) return 1;
    got = (size_t)k;
  } else {
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    int k = poll(&p, 1, (int)((left + 999999ull) / 1000000ull));
    if (k <= 0) return waitIdle(s); /* nothing yet (or a signal, or no memory for the poll) */
  }
  int rc = ethRecvAll(s, hdr + got, ETH_HDR_BYTES - got); /* something came: the rest of a header follows it */
  if (rc == 0) return 1;
  return waitEnded(s, rc == -1 && got > 0 ? ECONNRESET : rc);
}

/* Whether a wait stops reading: the stream ended, the connection or the context closes. */
static int waitOver(engConn* c, ethConn* s)
{
  return rxOver(s) || __atomic_load_n(&c->peerClosed, __ATOMIC_ACQUIRE) ||
         __atomic_load_n(&c->ctx->closing, __ATOMIC_ACQUIRE);
}

/* A wait on c (s, in direct mode) reads frames itself until *epoch reaches want, the deadline,
 * or a condition the wait looks at: 1, or 0 at once when another thread reads them or reading
 * is over. */
static int waitRead(engConn* c, ethConn* s, volatile uint64_t* epoch, uint64_t want, uint64_t deadlineNs)
{
  if (waitOver(c, s)) return 0;
  /* a wait whose time is up (timeout 0, in a polling loop) leaves the socket to the receive
   * thread: taking the token would keep that parked while nothing is read */
  if (deadlineNs != UINT64_MAX && engNowNs() >= deadlineNs) return 0;
  uint32_t cur = ETH_READER_NONE;
  if (!__atomic_compare_exchange_n(&s->reader, &cur, ETH_READER_WAIT, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return 0; /* the receive thread reads (and wakes the wait), or another wait does */
  __atomic_fetch_add(&s->waitReads, 1, __ATOMIC_RELEASE);
  s->spinNs = waitSpinNs(s); /* the header's and the payload's receives spin first (the receive thread's: never) */
  unsigned char hdr[ETH_HDR_BYTES];
  int ended = 0;
  while (__atomic_load_n(epoch, __ATOMIC_ACQUIRE) < want && !waitOver(c, s)) {
    int got = waitHeader(s, hdr, deadlineNs);
    if (got == 0) break; /* the deadline, or the wait's own checks (a failure elsewhere): it calls again */
    int woke = 0;
    if (got < 0 || ethRxFrame(s, hdr, &woke) != 0) {
      ended = 1;
      break;
    }
  }
  s->spinNs = 0;
  if (ended)
    ethReaderEnd(s);
  else
    __atomic_store_n(&s->reader, ETH_READER_NONE, __ATOMIC_RELEASE); /* the receive thread looks within ETH_PARK_NS */
  return 1;
}

/* While the receive thread reads a frame, a wait that cannot take the socket sleeps until the
 * frame is done (rxFrames moves: the count it delivered, if any, is in the epoch by then), its
 * deadline or ETH_FRAME_SLEEP_NS, instead of waking every millisecond on the rank's CPU while
 * the stream flows, which slows the stream.
 * Whatever ends the frame early (the stream fails, the connection closes: the socket is shut
 * down) ends it through frameDone too. 1 when it slept (or looked), 0 when no frame is being read. */
static int waitFrame(engConn* c, ethConn* s, volatile uint64_t* epoch, uint64_t want, uint64_t deadlineNs)
{
  if (!__atomic_load_n(&s->rxInFrame, __ATOMIC_SEQ_CST)) return 0;
  uint64_t now = engNowNs(), until = now + ETH_FRAME_SLEEP_NS;
  if (deadlineNs < until) until = deadlineNs;
  if (now >= until) return 0;
  __atomic_fetch_add(&s->frameSleepers, 1, __ATOMIC_SEQ_CST);
  uint32_t seen = __atomic_load_n(&s->rxFrames, __ATOMIC_SEQ_CST);
  /* frameDone clears rxInFrame, then moves rxFrames, then looks at frameSleepers */
  if (__atomic_load_n(&s->rxInFrame, __ATOMIC_SEQ_CST) && __atomic_load_n(epoch, __ATOMIC_ACQUIRE) < want &&
      !waitOver(c, s)) {
    struct timespec ts = {(time_t)((until - now) / 1000000000ull), (long)((until - now) % 1000000000ull)};
    syscall(SYS_futex, &s->rxFrames, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
  }
  __atomic_fetch_sub(&s->frameSleepers, 1, __ATOMIC_RELEASE);
  return 1;
}

/* The receive thread finished a frame (read whole, or cut short): waits asleep over it look again. */
static void frameDone(ethConn* s)
{
  __atomic_store_n(&s->rxInFrame, 0, __ATOMIC_SEQ_CST);
  __atomic_fetch_add(&s->rxFrames, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&s->frameSleepers, __ATOMIC_SEQ_CST) != 0)
    syscall(SYS_futex, &s->rxFrames, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* Where waits read the socket (direct), its SO_RCVTIMEO is their period, not the tick: the
 * receive thread polls for a tick before a header instead of waking every period. 1 when
 * something came in, 0 when nothing did for a tick (the tick ran), else ethRxTick's errno. */
static int rxAwait(ethConn* s)
{
  if (!s->direct) return 1;
  struct pollfd p = {.fd = s->fd, .events = POLLIN};
  if (poll(&p, 1, (int)(s->pingNs / 1000000ull)) > 0) return 1;
  return ethRxTick(s);
}

/* The receive thread: reads frames while no wait reads them itself (ethWaitPoll). */
void* ethRxMain(void* arg)
{
  ethConn* s = (ethConn*)arg;
  unsigned char hdr[ETH_HDR_BYTES];
  for (;;) {
    if (!readerTake(s)) return NULL; /* the stream ended, or the connection closes */
    int rc = rxAwait(s);
    if (rc == 0) {
      readerGive(s, 0); /* nothing came for a tick: a wait may take the socket meanwhile */
      continue;
    }
    rc = rc == 1 ? ethRecvAll(s, hdr, sizeof(hdr)) : rc;
    if (rc != 0) {
      if (!s->closing && !s->dead) ethRxFailed(s, rc, 0);
      ethReaderEnd(s);
      return NULL;
    }
    int woke = 0;
    __atomic_store_n(&s->rxInFrame, 1, __ATOMIC_SEQ_CST);
    int fr = ethRxFrame(s, hdr, &woke);
    frameDone(s);
    if (fr != 0) {
      ethReaderEnd(s);
      return NULL;
    }
    readerGive(s, woke);
  }
}

int ethWaitPoll(engConn* c, volatile uint64_t* epoch, uint64_t want, struct engWait* w)
{
  if (w == NULL) return ENG_POLL_IDLE; /* nothing to deliver without reading: the receive thread reads */
  ethConn* s = connState(c);
  if (s == NULL || !s->direct) return ENG_POLL_IDLE; /* the receive thread is the only reader */
  uint64_t deadline = engWaitDeadline(w);
  return waitRead(c, s, epoch, want, deadline) || waitFrame(c, s, epoch, want, deadline) ? ENG_POLL_BLOCKED
                                                                                           : ENG_POLL_IDLE;
}
