/*
 * ports.h: picks free TCP ports for a job's ranks, shared by the two rank
 * launchers (tests/c/launch.c, tests/c/bench/launch.c). Below the kernel's
 * ephemeral range, so that the ranks' own listeners and outgoing
 * connections, which take ports from that range, cannot take a picked port
 * before the rank meant to bind it does. Uses rand(): seed it first.
 */
#ifndef MSCCLPP_TESTS_PORTS_H_
#define MSCCLPP_TESTS_PORTS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Whether port can be bound now, on the loopback and on the wildcard address. */
static int port_free(int port)
{
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0)
    return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ok = bind(s, (struct sockaddr*)&a, sizeof a) == 0;
  close(s);
  if (!ok)
    return 0;
  /* also the wildcard address, where a library might listen */
  s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0)
    return 0;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  ok = bind(s, (struct sockaddr*)&a, sizeof a) == 0;
  close(s);
  return ok;
}

/* A base port P such that P..P+n-1 are free, chosen below the kernel's ephemeral range (above
 * it when there is no room below), or -1 when 500 tries found none. */
static int pick_ports(int n)
{
  int lo = 32768, hi = 60999;
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%d %d", &lo, &hi) != 2) {
      lo = 32768;
      hi = 60999;
    }
    fclose(f);
  }
  int rangeLo = 10000, rangeHi = lo - n - 1;
  if (rangeHi - rangeLo < 1000) { /* no room below: go above */
    rangeLo = hi + 1;
    rangeHi = 65535 - n;
  }
  if (rangeHi - rangeLo < 100) {
    rangeLo = 20000;
    rangeHi = 30000;
  }
  for (int attempt = 0; attempt < 500; attempt++) {
    int base = rangeLo + rand() % (rangeHi - rangeLo);
    int ok = 1;
    for (int k = 0; k < n && ok; k++)
      ok = port_free(base + k);
    if (ok)
      return base;
  }
  return -1;
}

#endif
