/* shim_live.c - the bounded, lock-free set of sampled blocks that are still live.
 *
 * free() must find out whether its block was sampled, and almost never is. The filter is
 * an array of 8-bit counters indexed by a hash of the address: counter = number of
 * tracked blocks with that hash, so an untracked free costs one load and a branch.
 * Behind it, an open-addressing table (linear probing, at most SHIM_LIVE_MAX_PROBES)
 * whose keys are claimed and released with CAS. Both arrays live in .bss: pages are
 * touched only when used.
 */
#include "shim_internal.h"

#define LIVE_EMPTY 0ull
#define LIVE_TOMB  1ull /* deleted: reusable, but probing goes on past it */
#define LIVE_CAP   (1u << SHIM_LIVE_TABLE_BITS)
#define LIVE_MASK  (LIVE_CAP - 1u)

typedef struct live_entry {
    uint64_t key;         /* address, LIVE_EMPTY or LIVE_TOMB (addresses are never 0 or 1) */
    uint64_t size_origin; /* size << 8 | origin */
    uint64_t weight;
} live_entry_t;

uint8_t shim__live_filter[1u << SHIM_LIVE_FILTER_BITS];
static live_entry_t live_table[LIVE_CAP];
static uint64_t live_count;

static inline uint32_t filter_index(uint64_t addr)
{
    return (uint32_t)(shim__live_hash(addr) >> (64 - SHIM_LIVE_FILTER_BITS));
}

static inline uint32_t table_index(uint64_t addr)
{
    return (uint32_t)((addr >> 4) * 0xc2b2ae3d27d4eb4full >> (64 - SHIM_LIVE_TABLE_BITS));
}

int shim__live_insert(uint64_t addr, uint64_t size, uint64_t weight, uint8_t origin)
{
    if (addr <= LIVE_TOMB)
        return -1;
    uint8_t *cnt = &shim__live_filter[filter_index(addr)];
    if (__atomic_load_n(cnt, __ATOMIC_RELAXED) >= 250)
        return -1;
    uint32_t i = table_index(addr);
    for (unsigned n = 0; n < SHIM_LIVE_MAX_PROBES; n++, i = (i + 1) & LIVE_MASK) {
        live_entry_t *e = &live_table[i];
        uint64_t k = __atomic_load_n(&e->key, __ATOMIC_RELAXED);
        if (k != LIVE_EMPTY && k != LIVE_TOMB)
            continue;
        /* Reserve the slot with a value no free() can match (odd, and addresses from the
         * allocator are even), fill it, then publish the key. */
        if (!__atomic_compare_exchange_n(&e->key, &k, LIVE_TOMB | 2ull, 0, __ATOMIC_ACQUIRE,
                                         __ATOMIC_RELAXED))
            continue;
        e->size_origin = size << 8 | origin;
        e->weight = weight;
        __atomic_fetch_add(cnt, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&e->key, addr, __ATOMIC_RELEASE);
        __atomic_fetch_add(&live_count, 1, __ATOMIC_RELAXED);
        return 0;
    }
    return -1;
}

int shim__live_remove(uint64_t addr, uint64_t *size, uint64_t *weight, uint8_t *origin)
{
    if (addr <= LIVE_TOMB)
        return -1;
    uint32_t i = table_index(addr);
    for (unsigned n = 0; n < SHIM_LIVE_MAX_PROBES; n++, i = (i + 1) & LIVE_MASK) {
        live_entry_t *e = &live_table[i];
        uint64_t k = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
        if (k == LIVE_EMPTY)
            return -1;
        if (k != addr)
            continue;
        uint64_t so = e->size_origin, w = e->weight;
        if (!__atomic_compare_exchange_n(&e->key, &k, LIVE_TOMB, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED))
            return -1; /* someone else removed it (double free in the target) */
        __atomic_fetch_sub(&shim__live_filter[filter_index(addr)], 1, __ATOMIC_RELAXED);
        __atomic_fetch_sub(&live_count, 1, __ATOMIC_RELAXED);
        *size = so >> 8;
        *origin = (uint8_t)(so & 0xff);
        *weight = w;
        return 0;
    }
    return -1;
}

uint64_t shim__live_count(void)
{
    return __atomic_load_n(&live_count, __ATOMIC_RELAXED);
}

void shim__live_reset(void)
{
    for (uint32_t i = 0; i < LIVE_CAP; i++)
        if (live_table[i].key != LIVE_EMPTY)
            live_table[i].key = LIVE_EMPTY;
    for (uint32_t i = 0; i < (1u << SHIM_LIVE_FILTER_BITS); i++)
        if (shim__live_filter[i])
            shim__live_filter[i] = 0;
    live_count = 0;
}
