//go:build mscclpp_testhooks

package engine

// A harness for the biased lock's tests (bias.h): pthreads take fresh locks one at a time, all
// starting on each lock together (a barrier), and increment a plain counter under it, so that
// the first taker owns the bias and the others revoke it while it may be inside.

/*
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include "bias.h"

typedef struct bsShared {
	engBiasLock* locks;
	uint64_t* counts;
	int nLocks, rounds;
	int go;                  // set once start is ready for the threads that started
	pthread_barrier_t start; // before each lock
} bsShared;

typedef struct bsArg {
	bsShared* sh;
	int biased; // takes through the bias
} bsArg;

static void* bsMain(void* p)
{
	bsArg* a = (bsArg*)p;
	bsShared* sh = a->sh;
	engBackoffCfg cfg = {64, 64, 100};
	while (!__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE)) sched_yield();
	for (int i = 0; i < sh->nLocks; i++) {
		pthread_barrier_wait(&sh->start);
		for (int r = 0; r < sh->rounds; r++) {
			int held = engBiasTake(&sh->locks[i], &cfg);
			if (held == ENG_BIAS_HELD_BIAS) a->biased++;
			uint64_t v = *(volatile uint64_t*)&sh->counts[i];
			if (r % 2 == 0) sched_yield(); // a holder that loses its CPU inside: revokers must wait for it
			*(volatile uint64_t*)&sh->counts[i] = v + 1;
			engBiasRelease(&sh->locks[i], held);
		}
	}
	return NULL;
}

// bsRun: threads threads take each of nLocks fresh locks rounds times, in the same order. The
// locks whose count is not threads * rounds (all of them when a thread could not start);
// *biased: takes through the bias; *revoked: locks whose bias ended.
static int bsRun(int threads, int nLocks, int rounds, int* biased, int* revoked)
{
	bsShared sh = {calloc((size_t)nLocks, sizeof(engBiasLock)), calloc((size_t)nLocks, sizeof(uint64_t)), nLocks, rounds, 0};
	bsArg* args = calloc((size_t)threads, sizeof(bsArg));
	pthread_t* ids = calloc((size_t)threads, sizeof(pthread_t));
	int started = 0, bad = 0;
	for (; started < threads; started++) {
		args[started].sh = &sh;
		if (pthread_create(&ids[started], NULL, bsMain, &args[started]) != 0) break;
	}
	pthread_barrier_init(&sh.start, NULL, (unsigned)(started > 0 ? started : 1));
	__atomic_store_n(&sh.go, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < started; i++) pthread_join(ids[i], NULL);
	pthread_barrier_destroy(&sh.start);
	*biased = 0;
	*revoked = 0;
	for (int i = 0; i < started; i++) *biased += args[i].biased;
	for (int i = 0; i < nLocks; i++) {
		if (sh.counts[i] != (uint64_t)threads * (uint64_t)rounds) bad++;
		if (sh.locks[i].owner == ENG_BIAS_REVOKED) ++*revoked;
	}
	free(sh.locks);
	free(sh.counts);
	free(args);
	free(ids);
	return bad;
}
*/
import "C"

// BiasStress runs threads pthreads that take each of nLocks fresh biased locks rounds times
// and count under it: the locks whose count came out wrong, the takes made through the bias,
// and the locks whose bias was revoked.
func BiasStress(threads, nLocks, rounds int) (bad, biased, revoked int) {
	var b, r C.int
	bad = int(C.bsRun(C.int(threads), C.int(nLocks), C.int(rounds), &b, &r))
	return bad, int(b), int(r)
}

// MembarrierMode reports whether host calls hold contexts in membarrier mode (ctx.h), the mode
// in which locks are biased; it is decided at the first context.
func MembarrierMode() bool { return C.engUseMembarrier == 1 }
