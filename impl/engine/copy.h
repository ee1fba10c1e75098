/*
 * copy.h: how a put's bytes reach a registration from this process
 * (copy.c): memcpy into mapped memory, a streaming copy for large puts
 * there, else process_vm_writev.
 */
#ifndef MSCCLPP_ENGINE_COPY_H_
#define MSCCLPP_ENGINE_COPY_H_

#include "objects.h"

/* Copies a put of [streamBytes, streamMaxBytes) bytes into mapped memory. */
void engCopyLarge(engComm* comm, char* dst, const char* src, uint64_t size);
/* Whether a put of size bytes into mapped memory goes through engCopyLarge (comm may be NULL). */
static inline int engCopiesLarge(const engComm* comm, uint64_t size)
{
  return comm != NULL && comm->streamBytes != 0 && size >= comm->streamBytes && size < comm->streamMaxBytes;
}
/* The way engCopyLarge copies size bytes now: -1 while timing both, 0 memcpy, 1 streaming. */
int engCopyChoice(engComm* comm, uint64_t size);
/* How many puts of size bytes' band engCopyLarge has timed each way: n[0] memcpy, n[1] streaming. */
void engCopySamples(engComm* comm, uint64_t size, uint32_t n[2]);
/* Copies size bytes from src to the registration r at off (memcpy or process_vm_writev). */
int engWrite(engComm* comm, const engReg* r, uint64_t off, const void* src, uint64_t size, char* err, int errLen);

#endif
