/* memcache.c - how the unwinder reads target memory.
 *
 * Two sources, tried in order:
 *  1. a copy of the sampled thread's stack from sp upward, taken with one
 *     read per sample (through rmem) (UNWIND_STACK_FIRST bytes) and extended by doubling
 *     when the unwinder reads above it (at most UNWIND_STACK_MAX bytes);
 *  2. a page cache: read-only file-backed pages (.eh_frame_hdr, .eh_frame, text) are
 *     kept across samples; any other page is valid for the current sample only.
 */
#include <stdlib.h>
#include <string.h>

#include "scry_err.h"
#include "unwind_internal.h"

int unwind__mem_init(struct unwind *u)
{
    u->slots = calloc(UNWIND_CACHE_SLOTS, sizeof *u->slots);
    if (!u->slots)
        return SCRY_E_NOMEM;
    u->stack_cap = UNWIND_STACK_FIRST;
    u->stack = malloc(u->stack_cap);
    if (!u->stack)
        return SCRY_E_NOMEM;
    return 0;
}

void unwind__mem_flush(struct unwind *u)
{
    if (!u->slots)
        return;
    for (size_t i = 0; i < UNWIND_CACHE_SLOTS; i++) {
        free(u->slots[i].data);
        u->slots[i] = (unwind_page_t){0};
    }
    u->npages = 0;
}

void unwind__mem_fini(struct unwind *u)
{
    unwind__mem_flush(u);
    free(u->slots);
    u->slots = NULL;
    free(u->stack);
    u->stack = NULL;
}

/* Reads up to LEN bytes at ADDR; returns the number of bytes read (a partial read stops
 * at the first unreadable page), or a negative code when nothing could be read. */
static long read_partial(struct unwind *u, uint64_t addr, void *buf, size_t len)
{
    long got = rmem_read_partial(u->mem, addr, buf, len);
    return got == 0 && len ? SCRY_E_FAULT : got;
}

int unwind__stack_snapshot(struct unwind *u, uint64_t sp)
{
    u->stack_lo = sp & ~(uint64_t)7;
    u->stack_len = 0;
    u->stack_end = 0;
    size_t want = UNWIND_STACK_FIRST;
    /* Do not cross the end of the stack's page run only to fail: a partial read is fine. */
    long got = read_partial(u, u->stack_lo, u->stack, want);
    u->st.stack_reads++;
    if (got < 0)
        return (int)got;
    u->stack_len = (size_t)got;
    if ((size_t)got < want)
        u->stack_end = 1;
    return 0;
}

/* Extends the stack copy so that it covers ADDR+8 if possible. */
static void stack_extend(struct unwind *u, uint64_t addr)
{
    uint64_t need = addr + 8 - u->stack_lo;
    if (u->stack_end || need > UNWIND_STACK_MAX)
        return;
    size_t newlen = u->stack_cap;
    while (newlen < need)
        newlen *= 2;
    if (newlen > UNWIND_STACK_MAX)
        newlen = UNWIND_STACK_MAX;
    if (newlen > u->stack_cap) {
        uint8_t *p = realloc(u->stack, newlen);
        if (!p)
            return;
        u->stack = p;
        u->stack_cap = newlen;
    }
    size_t want = newlen - u->stack_len;
    long got = read_partial(u, u->stack_lo + u->stack_len, u->stack + u->stack_len, want);
    u->st.stack_reads++;
    if (got <= 0) {
        u->stack_end = 1;
        return;
    }
    u->stack_len += (size_t)got;
    if ((size_t)got < want)
        u->stack_end = 1;
}

static size_t slot_hash(uint64_t page)
{
    uint64_t h = (page >> 12) * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 40) & (UNWIND_CACHE_SLOTS - 1);
}

/* Persistent pages are those of read-only file mappings: their content cannot change. */
static int page_is_stable(struct unwind *u, uint64_t page)
{
    if (!u->maps)
        return 0;
    const elfsym_map_t *m = elfsym_maps_find(u->maps, page);
    if (!m || !elfsym_map_is_file(m) || m->deleted)
        return 0;
    return (m->perms & ELFSYM_PERM_W) == 0 && (m->perms & ELFSYM_PERM_R);
}

/* Returns the cached page at PAGE, reading it on a miss; NULL when unreadable. */
static const uint8_t *page_get(struct unwind *u, uint64_t page)
{
    if (u->frozen && !page_is_stable(u, page)) {
        /* Live volatile memory would not match the copy; just above it, the unwinder
         * wanted more of the stack than was copied. */
        if (page >= u->stack_lo && page - u->stack_lo < UNWIND_STACK_MAX)
            u->short_read = 1;
        return NULL;
    }
    size_t h = slot_hash(page);
    unwind_page_t *victim = NULL;
    for (size_t i = 0; i < UNWIND_CACHE_PROBE; i++) {
        unwind_page_t *s = &u->slots[(h + i) & (UNWIND_CACHE_SLOTS - 1)];
        if (s->addr == page && s->data) {
            if (s->gen == 0 || s->gen == u->gen) {
                u->st.page_hits++;
                return s->data;
            }
            victim = s; /* stale volatile page: refresh in place */
            break;
        }
        if (!victim && (!s->data || (s->gen != 0 && s->gen != u->gen)))
            victim = s;
    }
    if (!victim) /* every probed slot holds a live page: evict the first */
        victim = &u->slots[h];
    if (!victim->data) {
        if (u->npages >= UNWIND_CACHE_PAGES) {
            /* Full: evict the probe's first slot and reuse its buffer. */
            unwind_page_t *first = &u->slots[h];
            if (first != victim && first->data) {
                victim->data = first->data;
                first->data = NULL;
                first->addr = 0;
            }
        }
        if (!victim->data) {
            victim->data = malloc(UNWIND_PAGE);
            if (!victim->data)
                return NULL;
            u->npages++;
        }
    }
    u->st.page_misses++;
    long got = read_partial(u, page, victim->data, UNWIND_PAGE);
    if (got != (long)UNWIND_PAGE) {
        victim->addr = 0;
        u->st.page_faults++;
        return NULL;
    }
    victim->addr = page;
    victim->gen = page_is_stable(u, page) ? 0 : u->gen;
    return victim->data;
}

int unwind__read_word(struct unwind *u, uint64_t addr, uint64_t *out)
{
    if (u->frozen) {
        /* A copy taken earlier: the stack as it was then, never the live one. Other
         * addresses go to the page cache, which serves only read-only file pages. */
        if (addr >= u->stack_lo && addr - u->stack_lo + 8 <= u->stack_len) {
            memcpy(out, u->stack_ext + (addr - u->stack_lo), 8);
            return 0;
        }
    } else if (addr >= u->stack_lo && addr - u->stack_lo + 8 > u->stack_len &&
               addr - u->stack_lo < UNWIND_STACK_MAX)
        stack_extend(u, addr);
    if (addr >= u->stack_lo && addr - u->stack_lo + 8 <= u->stack_len) {
        memcpy(out, u->stack + (addr - u->stack_lo), 8);
        return 0;
    }
    uint64_t page = addr & ~(uint64_t)(UNWIND_PAGE - 1);
    size_t off = (size_t)(addr - page);
    const uint8_t *p = page_get(u, page);
    if (!p)
        return SCRY_E_FAULT;
    if (off + 8 <= UNWIND_PAGE) {
        memcpy(out, p + off, 8);
        return 0;
    }
    /* Straddles two pages (libunwind reads aligned words, so this is rare). */
    uint8_t tmp[8];
    size_t first = UNWIND_PAGE - off;
    memcpy(tmp, p + off, first);
    const uint8_t *q = page_get(u, page + UNWIND_PAGE);
    if (!q)
        return SCRY_E_FAULT;
    memcpy(tmp + first, q, 8 - first);
    memcpy(out, tmp, 8);
    return 0;
}
