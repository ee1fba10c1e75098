/*
 * perf_pattern.h: the data perf writes and checks, for perf.c (included once
 * there; static functions): byte i of the chunk rank r sends at chunk size s
 * is a function of (r, s, in place or not, i), so every receiver can check
 * every element without a copy of the sender's data (fill, count_wrong,
 * seed_of); and the sizes a run steps through (next_size, chunk_of). A file
 * of its own: what "wrong" means, apart from how the run is driven.
 */
#ifndef PERF_PATTERN_H_
#define PERF_PATTERN_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t mix(uint64_t seed, uint64_t w)
{
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + w * 0xBF58476D1CE4E5B9ull + 0x632BE59BD9B4E019ull;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 29;
  return z;
}

static void fill(unsigned char* p, size_t n, uint64_t seed)
{
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = mix(seed, i >> 3);
    memcpy(p + i, &w, 8);
  }
  for (; i < n; i++) p[i] = (unsigned char)(mix(seed, i >> 3) >> ((i & 7) * 8));
}

/* wrong elements of ws bytes (1, 2, 4 or 8: they tile the 8-byte words) */
static long long count_wrong(const unsigned char* p, size_t n, uint64_t seed, size_t ws)
{
  long long wrong = 0;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w = mix(seed, i >> 3);
    unsigned char want[8];
    memcpy(want, &w, 8);
    size_t m = n - i < 8 ? n - i : 8;
    if (memcmp(p + i, want, m) == 0) continue;
    for (size_t e = 0; e < m; e += ws) wrong += memcmp(p + i + e, want + e, ws) != 0;
  }
  return wrong;
}

static uint64_t seed_of(int r, size_t chunk, int inPlace) { return mix(0x5eed0000ull + (uint64_t)r * 2 + inPlace, chunk); }

/* The size after size: times factor when factor > 1, else plus step; 0 past SIZE_MAX. */
static size_t next_size(size_t size, double factor, size_t step)
{
  double next = factor > 1 ? (double)size * factor : (double)size + (double)step;
  if (next >= 18446744073709551615.0) return 0;
  size_t n = (size_t)next;
  return n > size ? n : size + 1;
}

/* bytes of a rank's chunk at size want for elements of ws bytes (at least one element) */
static size_t chunk_of(size_t want, size_t ws)
{
  size_t c = want / ws / (size_t)nranks;
  return (c < 1 ? 1 : c) * ws;
}

#endif
