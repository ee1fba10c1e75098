/* one.c: a process that makes three calls and exits 0, for the tools' output cases (outfile_test.go). */
#include <mscclpp.h>
#include <stdio.h>

int main(void)
{
  int v = 0;
  for (int i = 0; i < 3; i++)
    if (mscclppGetVersion(&v) != mscclppSuccess) return 2;
  printf("one: version %d\n", v);
  return 0;
}
