#include "prefetch.h"

#include "scry_err.h"

#include <stdlib.h>
#include <string.h>

#define PF_HASH 16384 /* power of two, > 2 * PF_MAX_REGIONS */

typedef struct pf_region {
    raddr_t addr;
    uint32_t len;
    uint32_t off; /* into the data buffer (a twice region: its first copy, then its second) */
    uint8_t range;
    uint8_t twice; /* read twice in a row (pystate__pf_read_twice) */
    uint8_t valid; /* read successfully this sample (both copies) */
    uint8_t done;  /* copies read this sample */
    uint8_t loose; /* PF_LOOSE: read in a merged piece, at no particular moment */
    uint32_t slot; /* its index in the hash table */
} pf_region_t;

/* A piece of loose regions read as one: LOOSE[FIRST .. FIRST + COUNT) of the sorted ones. */
typedef struct pf_run {
    raddr_t lo;
    uint32_t len;
    uint32_t first, count;
} pf_run_t;

typedef struct pf_key {
    raddr_t addr;
    uint32_t idx;
} pf_key_t;

#define PF_IOV_RUN 0x80000000u /* iov_region: a run's index, not a region's */

typedef struct pf_set {
    pf_region_t regions[PF_MAX_REGIONS];
    size_t n;
    size_t bytes;
    int32_t hash[PF_HASH]; /* index+1 of exact-address regions, 0 = empty */
    uint32_t ranges[256];  /* indices of range regions */
    size_t nranges;
} pf_set_t;

struct pystate_prefetch {
    pf_set_t sets[2];
    pf_set_t *cur;  /* read at begin, served from */
    pf_set_t *next; /* being planned */
    uint8_t *data;
    size_t data_cap;
    rmem_iov_t *iov;
    uint32_t *iov_region; /* the region each iov entry reads (or PF_IOV_RUN | run) */
    pf_key_t *loose;      /* this sample's loose regions, by address */
    pf_run_t *runs;
    uint64_t hits, misses;
    int direct; /* pystate__pf_direct */
};

static size_t pf_slot(raddr_t addr)
{
    return (size_t)((addr * 0x9E3779B97F4A7C15ULL) >> 50) & (PF_HASH - 1);
}

static void set_clear(pf_set_t *s)
{
    /* Only the slots in use are cleared: a sample plans a few dozen regions, and wiping
     * the whole table each time would cost more than the sample. */
    for (size_t i = 0; i < s->n; i++)
        s->hash[s->regions[i].slot] = 0;
    s->n = 0;
    s->bytes = 0;
    s->nranges = 0;
}

pystate_prefetch_t *pystate__pf_new(void)
{
    pystate_prefetch_t *pf = calloc(1, sizeof *pf);
    if (!pf)
        return NULL;
    pf->cur = &pf->sets[0];
    pf->next = &pf->sets[1];
    pf->iov = malloc(2 * PF_MAX_REGIONS * sizeof *pf->iov);
    pf->iov_region = malloc(2 * PF_MAX_REGIONS * sizeof *pf->iov_region);
    pf->loose = malloc(PF_MAX_REGIONS * sizeof *pf->loose);
    pf->runs = malloc(PF_MAX_REGIONS * sizeof *pf->runs);
    if (!pf->iov || !pf->iov_region || !pf->loose || !pf->runs) {
        pystate__pf_free(pf);
        return NULL;
    }
    return pf;
}

void pystate__pf_free(pystate_prefetch_t *pf)
{
    if (!pf)
        return;
    free(pf->data);
    free(pf->iov);
    free(pf->iov_region);
    free(pf->loose);
    free(pf->runs);
    free(pf);
}

static pf_region_t *find_exact(pf_set_t *s, raddr_t addr)
{
    size_t i = pf_slot(addr);
    for (size_t probe = 0; probe < PF_HASH; probe++) {
        int32_t k = s->hash[i];
        if (k == 0)
            return NULL;
        if (s->regions[k - 1].addr == addr)
            return &s->regions[k - 1];
        i = (i + 1) & (PF_HASH - 1);
    }
    return NULL;
}

void pystate__pf_plan(pystate_prefetch_t *pf, raddr_t addr, size_t len, int range)
{
    pf_set_t *s = pf->next;
    if (!addr || len == 0 || len > PF_RANGE_MAX)
        return;
    int loose = (range & PF_LOOSE) != 0;
    range &= ~PF_LOOSE;
    int twice = range == PF_RANGE_TWICE;
    pf_region_t *r = find_exact(s, addr);
    if (r) {
        r->loose = (uint8_t)(r->loose && loose); /* planned in order once: kept in order */
        size_t copies = r->twice || twice ? 2 : 1;
        size_t want = len > r->len ? len : r->len;
        size_t had = (size_t)r->len * (r->twice ? 2 : 1);
        if (want * copies > had && s->bytes + (want * copies - had) <= PF_MAX_BYTES) {
            s->bytes += want * copies - had;
            r->len = (uint32_t)want;
            r->twice = (uint8_t)(copies == 2);
        }
        return;
    }
    if (s->n >= PF_MAX_REGIONS || s->bytes + len * (twice ? 2 : 1) > PF_MAX_BYTES ||
        (range && s->nranges >= sizeof s->ranges / sizeof s->ranges[0]))
        return;
    size_t idx = s->n++;
    s->regions[idx] = (pf_region_t){.addr = addr,
                                    .len = (uint32_t)len,
                                    .range = (uint8_t)(range != 0),
                                    .twice = (uint8_t)twice,
                                    .loose = (uint8_t)loose};
    s->bytes += len * (twice ? 2 : 1);
    size_t i = pf_slot(addr);
    while (s->hash[i])
        i = (i + 1) & (PF_HASH - 1);
    s->hash[i] = (int32_t)idx + 1;
    s->regions[idx].slot = (uint32_t)i;
    if (range)
        s->ranges[s->nranges++] = (uint32_t)idx;
}

static int key_cmp(const void *a, const void *b)
{
    raddr_t x = ((const pf_key_t *)a)->addr, y = ((const pf_key_t *)b)->addr;
    return x < y ? -1 : x > y;
}

static int is_loose(const pf_region_t *r)
{
    return r->loose && !r->twice && r->len <= PF_RUN_MAX;
}

/* Sorts the loose regions of S by address into pf->loose and cuts them into runs: pieces
 * whose members lie within PF_MERGE_GAP of each other, at most PF_RUN_MAX long. Returns the
 * number of runs and adds their bytes to *BYTES. */
static size_t plan_runs(pystate_prefetch_t *pf, pf_set_t *s, size_t *bytes)
{
    size_t nl = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (is_loose(&s->regions[i]))
            pf->loose[nl++] = (pf_key_t){s->regions[i].addr, (uint32_t)i};
    }
    if (nl > 32) {
        qsort(pf->loose, nl, sizeof *pf->loose, key_cmp);
    } else { /* a few dozen at most, mostly in order already: no allocation, no calls */
        for (size_t i = 1; i < nl; i++) {
            pf_key_t k = pf->loose[i];
            size_t j = i;
            for (; j > 0 && pf->loose[j - 1].addr > k.addr; j--)
                pf->loose[j] = pf->loose[j - 1];
            pf->loose[j] = k;
        }
    }
    size_t nruns = 0;
    for (size_t i = 0; i < nl;) {
        const pf_region_t *r = &s->regions[pf->loose[i].idx];
        raddr_t lo = r->addr, hi = r->addr + r->len;
        size_t j = i + 1;
        for (; j < nl; j++) {
            const pf_region_t *q = &s->regions[pf->loose[j].idx];
            raddr_t end = q->addr + q->len > hi ? q->addr + q->len : hi;
            if (q->addr > hi + PF_MERGE_GAP || end - lo > PF_RUN_MAX)
                break;
            hi = end;
        }
        pf->runs[nruns++] = (pf_run_t){lo, (uint32_t)(hi - lo), (uint32_t)i, (uint32_t)(j - i)};
        *bytes += (size_t)(hi - lo);
        i = j;
    }
    return nruns;
}

static void mark_read(pystate_prefetch_t *pf, pf_set_t *s, uint32_t what)
{
    if (what & PF_IOV_RUN) {
        const pf_run_t *run = &pf->runs[what & ~PF_IOV_RUN];
        for (uint32_t k = 0; k < run->count; k++) {
            pf_region_t *r = &s->regions[pf->loose[run->first + k].idx];
            r->done = 1;
            r->valid = 1;
        }
        return;
    }
    pf_region_t *r = &s->regions[what];
    r->valid = ++r->done == (r->twice ? 2 : 1);
}

int pystate__pf_begin(pystate_prefetch_t *pf, rmem_t *m)
{
    /* The plan made during the last sample becomes what we read now. */
    pf->direct = 0;
    pf_set_t *tmp = pf->cur;
    pf->cur = pf->next;
    pf->next = tmp;
    set_clear(pf->next);
    pf_set_t *s = pf->cur;
    size_t bytes = 0;
    size_t nruns = plan_runs(pf, s, &bytes);
    for (size_t i = 0; i < s->n; i++) {
        if (!is_loose(&s->regions[i]))
            bytes += (size_t)s->regions[i].len * (s->regions[i].twice ? 2 : 1);
    }
    if (bytes > pf->data_cap) {
        uint8_t *d = realloc(pf->data, bytes);
        if (!d) {
            set_clear(s);
            return SCRY_E_NOMEM;
        }
        pf->data = d;
        pf->data_cap = bytes;
    }
    /* The loose regions first, a piece per run; then the others in the reverse of the
     * order the walk first needed them: the root-ward frames before the leaf-ward ones,
     * and the pointers to the top of each stack (thread states, current frames) last. The
     * target runs while the kernel copies; if its stack changes meanwhile, the walk then
     * starts from a newer top over older parents (a leaf at a slightly stale line), never
     * from an older top over parents that have moved on (a wrong caller). */
    size_t off = 0, niov = 0;
    for (size_t k = 0; k < nruns; k++) {
        pf_run_t *run = &pf->runs[k];
        for (uint32_t j = 0; j < run->count; j++) {
            pf_region_t *r = &s->regions[pf->loose[run->first + j].idx];
            r->off = (uint32_t)(off + (r->addr - run->lo));
            r->valid = r->done = 0;
        }
        pf->iov[niov] = (rmem_iov_t){run->lo, pf->data + off, run->len};
        pf->iov_region[niov++] = PF_IOV_RUN | (uint32_t)k;
        off += run->len;
    }
    for (size_t i = 0; i < s->n; i++)
        niov += is_loose(&s->regions[i]) ? 0 : s->regions[i].twice ? 2 : 1;
    size_t k = niov;
    for (size_t i = 0; i < s->n; i++) {
        pf_region_t *r = &s->regions[i];
        if (is_loose(r))
            continue;
        r->off = (uint32_t)off;
        r->valid = r->done = 0;
        /* a twice region: its first copy, then at once its second (read in that order) */
        for (int c = r->twice ? 1 : 0; c >= 0; c--) {
            k--;
            pf->iov[k] = (rmem_iov_t){r->addr, pf->data + off + (size_t)c * r->len, r->len};
            pf->iov_region[k] = (uint32_t)i;
        }
        off += (size_t)r->len * (r->twice ? 2 : 1);
    }
    size_t done = 0;
    while (done < niov) {
        int got = rmem_readv(m, pf->iov + done, niov - done);
        if (got < 0) {
            if (done == 0)
                return got == SCRY_E_FAULT ? 0 : got;
            break;
        }
        for (size_t i = done; i < done + (size_t)got; i++)
            mark_read(pf, s, pf->iov_region[i]);
        done += (size_t)got;
        if (done < niov)
            done++; /* skip the piece that faulted: its regions stay invalid */
    }
    return 0;
}

/* The first range region of S read this sample that holds LEN bytes at ADDR, or NULL. */
static pf_region_t *covering_range(pf_set_t *s, raddr_t addr, size_t len)
{
    for (size_t i = 0; i < s->nranges; i++) {
        pf_region_t *c = &s->regions[s->ranges[i]];
        if (c->valid && addr >= c->addr && addr - c->addr <= c->len &&
            len <= c->len - (addr - c->addr))
            return c;
    }
    return NULL;
}

int pystate__pf_read(pystate_prefetch_t *pf, rmem_t *m, raddr_t addr, void *buf, size_t len,
                     int range)
{
    pf_set_t *s = pf->cur;
    pf_region_t *r = pf->direct ? NULL : find_exact(s, addr);
    int usable = r && r->valid && len <= r->len;
    /* Else a range that covers it. A loose exact read inside a range read anyway (a
     * chunk's size field inside the chunk) is served from the range too, which alone is
     * planned again: one piece less to pin and copy. */
    if (!pf->direct && (!usable || (range == PF_LOOSE && !r->range))) {
        pf_region_t *c = covering_range(s, addr, len);
        if (c || !usable)
            r = c;
    }
    if (r) {
        /* a twice region serves its second (later) copy */
        memcpy(buf, pf->data + r->off + (r->twice ? r->len : 0) + (addr - r->addr), len);
        pf->hits++;
        if (r->range) {
            if (range & ~PF_LOOSE)
                pystate__pf_plan(pf, addr, len, range);
            else /* keep the covering range */
                pystate__pf_plan(pf, r->addr, r->len,
                                 r->twice ? PF_RANGE_TWICE : (1 | (r->loose ? PF_LOOSE : 0)));
        } else {
            pystate__pf_plan(pf, addr, len, range);
        }
        return 0;
    }
    pf->misses++;
    int err = rmem_read(m, addr, buf, len);
    if (err == 0)
        pystate__pf_plan(pf, addr, len, range);
    return err;
}

int pystate__pf_read_twice(pystate_prefetch_t *pf, rmem_t *m, raddr_t addr, void *first,
                           void *second, size_t len)
{
    pf_set_t *s = pf->cur;
    /* the region planned at ADDR itself first (a thread's chunk is planned at its start),
     * then any range read twice that covers it */
    pf_region_t *exact = pf->direct ? NULL : find_exact(s, addr);
    for (size_t i = 0; !pf->direct && i <= s->nranges; i++) {
        pf_region_t *c = i == 0 ? exact : &s->regions[s->ranges[i - 1]];
        if (c && c->twice && c->valid && addr >= c->addr && addr - c->addr <= c->len &&
            len <= c->len - (addr - c->addr)) {
            memcpy(first, pf->data + c->off + (addr - c->addr), len);
            memcpy(second, pf->data + c->off + c->len + (addr - c->addr), len);
            pf->hits++;
            pystate__pf_plan(pf, c->addr, c->len, PF_RANGE_TWICE);
            return 0;
        }
    }
    pf->misses++;
    rmem_iov_t iov[2] = {{addr, first, len}, {addr, second, len}};
    int got = rmem_readv(m, iov, 2);
    if (got == 2) {
        pystate__pf_plan(pf, addr, len, PF_RANGE_TWICE);
        return 0;
    }
    return got < 0 ? got : SCRY_E_FAULT;
}

void pystate__pf_direct(pystate_prefetch_t *pf, int on)
{
    pf->direct = on != 0;
}

void pystate__pf_counts(const pystate_prefetch_t *pf, uint64_t *hits, uint64_t *misses)
{
    *hits = pf->hits;
    *misses = pf->misses;
}
