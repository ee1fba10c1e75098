/*
 * error_strings.c: mscclppGetErrorString returns the exact upstream string
 * for every code, "unknown result code" for anything else, never NULL, and
 * works before any other library call.
 */
#define _GNU_SOURCE
#include <limits.h>

#include "check.h"

static void expect_string(int code, const char* want)
{
  const char* got = mscclppGetErrorString((mscclppResult_t)code);
  if (!CHECK(got != NULL, "mscclppGetErrorString(%d) returned NULL", code))
    return;
  if (CHECK(strcmp(got, want) == 0, "mscclppGetErrorString(%d) is \"%s\", expected \"%s\"", code, got, want))
    printf("ok   mscclppGetErrorString(%d) = \"%s\"\n", code, got);
}

int main(void)
{
  test_init("error_strings");
  expect_string(mscclppSuccess, "no error");
  expect_string(mscclppUnhandledCudaError, "unhandled cuda error");
  expect_string(mscclppSystemError, "unhandled system error");
  expect_string(mscclppInternalError, "internal error");
  expect_string(mscclppInvalidArgument, "invalid argument");
  expect_string(mscclppInvalidUsage, "invalid usage");
  expect_string(mscclppRemoteError, "remote process exited or there was a network error");
  expect_string(mscclppInProgress, "MSCCL++ operation in progress");
  expect_string(mscclppNumResults, "unknown result code");

  const int others[] = {9, 10, 42, 100, 255, 256, 65536, INT_MAX, -1, -2, -100, INT_MIN};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
    expect_string(others[i], "unknown result code");

  /* the same answer twice (a static string, not a reused buffer) */
  const char* a = mscclppGetErrorString(mscclppInvalidUsage);
  const char* b = mscclppGetErrorString(mscclppRemoteError);
  CHECK(strcmp(a, "invalid usage") == 0, "first string changed by a later call: \"%s\"", a);
  CHECK(strcmp(b, "remote process exited or there was a network error") == 0, "got \"%s\"", b);

  /* no failure happened yet: the process-wide last error is empty */
  const char* last = mscclppGetLastError(NULL);
  CHECK(last != NULL && last[0] == '\0', "mscclppGetLastError(NULL) before any failure is \"%s\"",
        last ? last : "(NULL)");
  return test_finish();
}
