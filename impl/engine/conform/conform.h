/*
 * conform.h: the C side of the conformance suite (conform.go): what a test
 * thread of the suite does to a transport's connection, through the engine's
 * one path (engConnDo) and its FIFO, as the host calls and the proxy do.
 */
#ifndef MSCCLPP_CONFORM_H_
#define MSCCLPP_CONFORM_H_

#include <stdint.h>

/* engConnDo on c (an engConn*). */
int cfDo(void* c, uint64_t type, uint64_t dstHandle, uint64_t dstOff, uint64_t srcHandle, uint64_t srcOff,
         uint64_t size);
/* Whether c's connection is marked failed on its communicator. */
int cfFailed(void* c);
/* n signals (Flag triggers) pushed into the FIFO of c's context, served by its proxy (started
 * here when it does not run, stopped again after): 0, or -1 when a push or its wait failed. */
int cfPushFlags(void* c, int n);
/* Starts and stops the proxy of c's context: 0, or -1. */
int cfProxyStart(void* c);
void cfProxyStop(void* c);
/* The 8-byte word at p, acquire. */
uint64_t cfLoad64(const void* p);
/* The signals c has sent (its count, relaxed). */
uint64_t cfSignalsDone(void* c);

/* mscclppConnWaitNext on c's device view; the rounds waits on c went through (engConn.waitRounds). */
int cfWaitNext(void* c, int64_t timeoutMs);
uint64_t cfWaitRounds(void* c);
/* Makes pid the process of c's peer (0: none), which every wait on c checks (engPeerGone). */
void cfSetPeerPid(void* c, int pid);
/* Gives c a table of its own whose operations fail the connection (engConnFail with
 * mscclppRemoteError), as a transport's do when the connection is lost. */
void cfInjectFailure(void* c);

/* Wraps c's ops table so that the signal values the engine hands its transport are checked (they
 * must rise in the order of the calls); cfUnwatch restores the table and returns the values that
 * did not rise, and in *calls the signals seen. */
void cfWatch(void* c);
uint64_t cfUnwatch(uint64_t* calls);

#endif
