/* shim_internal.h - pieces of libscry-shim.so shared between its files (and, for the
 * parts that need no process state, unit-tested through the static library scry_shim).
 *
 * Nothing here may call malloc: these functions run inside the target's allocator.
 */
#ifndef SCRY_SHIM_INTERNAL_H
#define SCRY_SHIM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "scry_ring.h"

#define SHIM_LIKELY(x)   __builtin_expect(!!(x), 1)
#define SHIM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SHIM_API         __attribute__((visibility("default")))

/* ---- shim_math.c: sampling maths --------------------------------------------------- */

/* Advances a xorshift64* state (never 0) and returns 64 random bits. */
uint64_t shim__rand64(uint64_t *state);

/* Returns a random stride, exponentially distributed with mean MEAN bytes, clamped to
 * [1, 2^50]. */
int64_t shim__stride(uint64_t *state, uint64_t mean);

/* Returns the unbiased weight of a sampled block of SIZE bytes when bytes are sampled as
 * a Poisson process of mean MEAN: SIZE / (1 - exp(-SIZE/MEAN)). Never less than SIZE
 * and never 0. */
uint64_t shim__weight(uint64_t size, uint64_t mean);

/* Natural logarithm and exp(-x) without libm (x > 0 / x >= 0). Exposed for tests. */
double shim__log(double x);
double shim__expneg(double x);

/* ---- shim_live.c: the set of sampled, still-live blocks ------------------------------ */

#define SHIM_LIVE_FILTER_BITS 17 /* 128 KiB of 8-bit counters */
#define SHIM_LIVE_TABLE_BITS  16 /* 65536 entries of 24 bytes (.bss, touched lazily) */
#define SHIM_LIVE_MAX_PROBES  32

extern uint8_t shim__live_filter[1u << SHIM_LIVE_FILTER_BITS];

static inline uint64_t shim__live_hash(uint64_t addr)
{
    return (addr >> 4) * 0x9e3779b97f4a7c15ull;
}

/* The free() fast path: nonzero when ADDR may be a sampled live block (one load). */
static inline int shim__live_maybe(const void *addr)
{
    uint64_t h = shim__live_hash((uint64_t)(uintptr_t)addr) >> (64 - SHIM_LIVE_FILTER_BITS);
    return __atomic_load_n(&shim__live_filter[h], __ATOMIC_RELAXED) != 0;
}

/* Records ADDR as a sampled live block. Returns 0, or -1 when the set is full (the block
 * is then untracked and its free will not be reported). Lock-free. */
int shim__live_insert(uint64_t addr, uint64_t size, uint64_t weight, uint8_t origin);

/* Removes ADDR; on success returns 0 and its size, weight and origin. Returns -1 when ADDR
 * is not in the set. Lock-free; must be called before the block is really freed. */
int shim__live_remove(uint64_t addr, uint64_t *size, uint64_t *weight, uint8_t *origin);

/* Number of entries now held (approximate under concurrency). */
uint64_t shim__live_count(void);

/* Empties the set (tests; and the fork child, which is single-threaded). */
void shim__live_reset(void);

/* ---- shim_ring.c: producer side of the ring ------------------------------------------- */

/* A validated view of a mapped ring: geometry copied once so that later header writes
 * by a hostile or confused scry cannot make the producer write out of bounds. */
typedef struct shim_ring_view {
    struct scry_ring_header *hdr;
    struct scry_ring_record *recs;
    uint64_t nrecords; /* power of two */
    uint64_t map_len;
} shim_ring_view_t;

/* Checks that the LEN bytes at MEM hold a usable ring header (magic, version, sizes,
 * power-of-two count, file size <= LEN) and fills VIEW. Returns 0 or SCRY_E_INVAL-like -1. */
int shim__ring_view(void *mem, uint64_t len, shim_ring_view_t *view);

/* Claims the next record. Returns it (and its position in *POS), or NULL when the ring
 * is full or too contended (bounded retries; never blocks). */
struct scry_ring_record *shim__ring_claim(const shim_ring_view_t *v, uint64_t *pos);

/* Publishes a claimed record. Returns 0, or -1 when the consumer had already skipped it
 * as stale (the event is lost). */
int shim__ring_commit(struct scry_ring_record *rec, uint64_t pos);

/* Counts one produced event of KIND and WEIGHT, and whether it was dropped. */
void shim__ring_count(const shim_ring_view_t *v, unsigned kind, uint64_t weight, int dropped);

#endif
