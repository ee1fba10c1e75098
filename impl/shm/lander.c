/*
 * lander.c: a communicator's lander thread (ring.h): lands what peers queued
 * in this rank's eager rings while no wait on the connection does, so the
 * data arrives without any call on this side. It polls every ring, spinning
 * briefly after work, then sleeping with a doubling period up to 1 ms: the
 * delay before data lands is bounded by about 1 ms, and an idle lander costs
 * no CPU to speak of. Started by the first ring, stopped at destroy; a forked
 * child has no lander (threads do not survive fork) and may not use the data
 * path anyway.
 */
#include <errno.h>
#include <stdlib.h>

#include "../engine/backoff.h"
#include "ring.h"

struct shmLander {
  pthread_mutex_t mu; /* guards list against shmLanderAdd */
  shmIn* list;
  pthread_t thread;
  int running;
  volatile int stop;
};

static const engBackoffCfg landerCfg = {.spin = 64, .yields = 8, .sleepMaxUs = 1000};

/* One pass over every ring: the number of entries landed. */
static int landAll(shmLander* l)
{
  int n = 0;
  pthread_mutex_lock(&l->mu);
  for (shmIn* in = l->list; in != NULL; in = in->next) {
    int k = shmInLand(in);
    if (k > 0) n += k;
  }
  pthread_mutex_unlock(&l->mu);
  return n;
}

static void* landerMain(void* arg)
{
  shmLander* l = (shmLander*)arg;
  engBackoff b = {0, 0};
  while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
    if (landAll(l) > 0) {
      b.n = 0;
      b.sleepUs = 0;
      continue;
    }
    engBackoffStep(&b, &landerCfg);
  }
  return NULL;
}

shmLander* shmLanderNew(void)
{
  shmLander* l = (shmLander*)calloc(1, sizeof(shmLander));
  if (l != NULL) pthread_mutex_init(&l->mu, NULL);
  return l;
}

int shmLanderAdd(shmLander* l, shmIn* in)
{
  pthread_mutex_lock(&l->mu);
  in->next = l->list;
  l->list = in;
  pthread_mutex_unlock(&l->mu);
  if (l->running) return 0;
  int rc = pthread_create(&l->thread, NULL, landerMain, l);
  if (rc == 0) l->running = 1;
  return rc;
}

void shmLanderFree(shmLander* l)
{
  if (l == NULL) return;
  if (l->running) {
    __atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
    pthread_join(l->thread, NULL);
  }
  landAll(l); /* what arrived since the last pass */
  for (shmIn* in = l->list; in != NULL;) {
    shmIn* next = in->next;
    free(in->local);
    free(in);
    in = next;
  }
  pthread_mutex_destroy(&l->mu);
  free(l);
}
