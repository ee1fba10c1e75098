/*
 * process.c: whether a peer's process still runs (objects.h engProcessGone),
 * the liveness check of every host wait on a peer of this node. A peer proven by its pidfd
 * (its proof of rank, docs/SECURITY.md) is that process only: once it exited, a process given its pid is not it.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "objects.h"

int engProcessGone(int pid)
{
  if (pid <= 0) return 0;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64], buf[256];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "re"); /* "e": O_CLOEXEC, as every descriptor the library opens */
  if (f == NULL) return 1;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  char* p = strrchr(buf, ')');
  return p != NULL && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

int engPidfdExited(int pidfd)
{
  struct pollfd p = {.fd = pidfd, .events = POLLIN};
  int n;
  while ((n = poll(&p, 1, 0)) < 0 && errno == EINTR) {
  }
  return n > 0 && (p.revents & POLLIN);
}

int engPeerGone(int pid, int pidfd)
{
  if (pidfd > 0) return engPidfdExited(pidfd);
  return engProcessGone(pid);
}
