/*
 * find_package.c: the program tests/c/cmake/CMakeLists.txt builds through
 * the imported target mscclpp::mscclpp alone (no include or link flags of
 * its own). It runs without LD_LIBRARY_PATH: the library must be found
 * through the build's rpath. Exit status 0 when the library it loaded
 * answers like the header it was compiled with.
 */
#include <mscclpp.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
  int version = 0, bad = 0;
  if (mscclppGetVersion(&version) != mscclppSuccess || version != MSCCLPP_VERSION) {
    printf("mscclppGetVersion: %d, want %d\n", version, MSCCLPP_VERSION);
    bad = 1;
  }
  if (strcmp(mscclppGetErrorString(mscclppInvalidUsage), "invalid usage") != 0) {
    printf("mscclppGetErrorString(mscclppInvalidUsage): \"%s\"\n", mscclppGetErrorString(mscclppInvalidUsage));
    bad = 1;
  }
  int rank = -1;
  if (mscclppCommRank(NULL, &rank) != mscclppInvalidUsage) {
    printf("mscclppCommRank(NULL) did not return mscclppInvalidUsage\n");
    bad = 1;
  }
  printf("find_package: library version %d, %s\n", version, bad ? "FAILED" : "ok");
  return bad;
}
