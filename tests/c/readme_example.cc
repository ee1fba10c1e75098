/*
 * readme_example.cc: the host-mode example of docs/PROGRAMMING.md, built and run as
 * one rank started by launch (run with N = 2 and 3), so the page's code
 * cannot drift from the library (the name is from when it was in README.md).
 *
 * run.sh extracts the fenced block between the comments
 * <!-- readme-example:begin --> and <!-- readme-example:end --> of
 * docs/PROGRAMMING.md into BUILD/tests/c/readme_example.inc. This file includes it
 * with its main renamed and calls it as `allgather RANK NRANKS IP:PORT`
 * with launch's MSCCLPP_TEST_RANK, _NRANKS and _ADDR. The example checks
 * every byte it gathered itself; its exit status is this program's.
 */
#include <mscclpp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define main readme_example_main
#include "readme_example.inc"
#undef main

int main()
{
  const char* r = std::getenv("MSCCLPP_TEST_RANK");
  const char* n = std::getenv("MSCCLPP_TEST_NRANKS");
  const char* a = std::getenv("MSCCLPP_TEST_ADDR");
  if (r == nullptr || n == nullptr || a == nullptr) {
    std::printf("readme_example: start me with tests/c/launch\n");
    return 1;
  }
  static char prog[] = "allgather", rank[16], nranks[16], addr[256];
  std::snprintf(rank, sizeof rank, "%s", r);
  std::snprintf(nranks, sizeof nranks, "%s", n);
  std::snprintf(addr, sizeof addr, "%s", a);
  char* argv[] = {prog, rank, nranks, addr, nullptr};
  int rc = readme_example_main(4, argv);
  if (rc != 0) std::printf("FAILED: the example of docs/PROGRAMMING.md exited with %d\n", rc);
  return rc;
}
