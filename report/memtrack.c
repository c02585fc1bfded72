/* memtrack.c - memory accounting: alloc/free matching by address, per-line net, peak and
 * trend, program footprint. Needs samples in time order. */
#include "report_internal.h"

#include <stdlib.h>
#include <string.h>

#include "scry_err.h"

static inline uint32_t addr_slot(uint64_t addr, uint32_t mask)
{
    uint64_t x = addr >> 4; /* blocks are at least 16-byte aligned */
    x *= 0x9E3779B97F4A7C15ULL;
    return (uint32_t)(x >> 32) & mask;
}

static int amap_grow(report_profile_t *p)
{
    uint32_t ncap = p->amap_cap ? p->amap_cap * 2 : 1024;
    report__addr_t *n = calloc(ncap, sizeof *n);
    if (!n)
        return SCRY_E_NOMEM;
    for (uint32_t i = 0; i < p->amap_cap; i++) {
        if (!p->amap[i].addr)
            continue;
        uint32_t j = addr_slot(p->amap[i].addr, ncap - 1);
        while (n[j].addr)
            j = (j + 1) & (ncap - 1);
        n[j] = p->amap[i];
    }
    free(p->amap);
    p->amap = n;
    p->amap_cap = ncap;
    return 0;
}

/* Index of ADDR's slot, or of the empty slot where it would go. */
static uint32_t amap_find(const report_profile_t *p, uint64_t addr)
{
    uint32_t mask = p->amap_cap - 1;
    uint32_t j = addr_slot(addr, mask);
    while (p->amap[j].addr && p->amap[j].addr != addr)
        j = (j + 1) & mask;
    return j;
}

/* Backward-shift deletion keeps linear probing chains intact without tombstones. */
static void amap_delete(report_profile_t *p, uint32_t j)
{
    uint32_t mask = p->amap_cap - 1;
    uint32_t i = j;
    for (;;) {
        p->amap[i].addr = 0;
        uint32_t k = i;
        for (;;) {
            k = (k + 1) & mask;
            if (!p->amap[k].addr)
                goto done;
            uint32_t home = addr_slot(p->amap[k].addr, mask);
            /* move k into the hole at i unless its home lies cyclically in (i, k] */
            if ((i <= k) ? (i < home && home <= k) : (i < home || home <= k))
                continue;
            break;
        }
        p->amap[i] = p->amap[k];
        i = k;
    }
done:
    p->amap_count--;
}

void report__trend_push(report__line_t *l, float value)
{
    if (l->ntrend >= REPORT__TREND_MAX) {
        /* full: merge the history into medians of three, keeping recent samples fine
         * from here on (Scalene's Adaptive scheme) */
        float n[REPORT__TREND_MAX / 3];
        for (int i = 0; i < REPORT__TREND_MAX / 3; i++) {
            float a = l->trend[3 * i], b = l->trend[3 * i + 1], c = l->trend[3 * i + 2];
            float lo = a < b ? a : b, hi = a < b ? b : a;
            n[i] = c < lo ? lo : (c > hi ? hi : c);
        }
        memcpy(l->trend, n, sizeof n);
        l->ntrend = REPORT__TREND_MAX / 3;
    }
    l->trend[l->ntrend++] = value;
}

double report__rel_s(const report_profile_t *p, uint64_t t_ns)
{
    uint64_t base = p->meta.start_mono_ns ? p->meta.start_mono_ns : p->first_ns;
    return t_ns > base ? (double)(t_ns - base) / 1e9 : 0.0;
}

static void footprint_point(report_profile_t *p, uint64_t t_ns)
{
    double t = report__rel_s(p, t_ns);
    double mb = (double)p->mem_net / REPORT__MB;
    double bucket = (double)p->foot_bucket_ns / 1e9;
    if (p->nfoot > 0) {
        report__point_t *last = &p->foot[p->nfoot - 1];
        if (t <= last->t_s || (uint64_t)(t / bucket) == (uint64_t)(last->t_s / bucket)) {
            /* same bucket (or a sample out of time order): one point, its maximum */
            if (t < last->t_s)
                t = last->t_s;
            if (mb > last->mb)
                *last = (report__point_t){t, mb};
            return;
        }
    }
    if (p->nfoot == REPORT__FOOT_MAX) {
        /* full: double the bucket width, merging neighbours (keeping the larger) */
        uint32_t k = 0;
        for (uint32_t i = 0; i < p->nfoot; i += 2) {
            report__point_t a = p->foot[i];
            if (i + 1 < p->nfoot && p->foot[i + 1].mb > a.mb)
                a = p->foot[i + 1];
            p->foot[k++] = a;
        }
        p->nfoot = k;
        p->foot_bucket_ns *= 2;
    }
    p->foot[p->nfoot++] = (report__point_t){t, mb};
}

static void line_changed(report_profile_t *p, report__line_t *l, uint64_t t_ns)
{
    if (l->net > l->peak)
        l->peak = l->net;
    report__trend_push(l, (float)((double)l->net / REPORT__MB));
    if (p->mem_net > p->mem_peak)
        p->mem_peak = p->mem_net;
    footprint_point(p, t_ns);
}

int report__mem_add(report_profile_t *p, const scry_sample_t *s, uint32_t line)
{
    report__line_t *l = &p->lines[line];
    switch (s->metric) {
    case SCRY_METRIC_ALLOC:
        l->alloc_bytes += s->bytes;
        if (s->cls == 0)
            l->alloc_py_bytes += s->bytes;
        l->allocs++;
        l->net += (int64_t)s->bytes;
        p->mem_net += (int64_t)s->bytes;
        if (s->address) {
            if (p->amap_count + 1 > p->amap_cap / 2 && p->amap_cap < REPORT__ADDR_MAX &&
                amap_grow(p) < 0)
                return SCRY_E_NOMEM;
            if (p->amap_count + 1 > p->amap_cap / 2 + p->amap_cap / 4) {
                p->untracked_allocs++; /* bound reached: this block's free won't match */
            } else {
                uint32_t j = amap_find(p, s->address);
                if (!p->amap[j].addr)
                    p->amap_count++;
                p->amap[j] = (report__addr_t){s->address, s->bytes, line};
            }
        }
        line_changed(p, l, s->time_ns);
        return 0;
    case SCRY_METRIC_FREE: {
        if (!s->address || !p->amap_cap) {
            p->unmatched_frees++;
            return 0;
        }
        uint32_t j = amap_find(p, s->address);
        if (!p->amap[j].addr) {
            p->unmatched_frees++;
            return 0;
        }
        report__addr_t a = p->amap[j];
        amap_delete(p, j);
        uint64_t bytes = a.bytes ? a.bytes : s->bytes;
        report__line_t *al = &p->lines[a.line];
        al->free_bytes += bytes;
        al->frees++;
        al->net -= (int64_t)bytes;
        p->mem_net -= (int64_t)bytes;
        line_changed(p, al, s->time_ns);
        return 0;
    }
    case SCRY_METRIC_COPY:
        l->copy_bytes += s->bytes;
        return 0;
    default:
        return SCRY_E_INVAL;
    }
}

double report__leak_score(const report__line_t *l, int *growing)
{
    /* Rule of succession: after `allocs` sampled allocations of which `frees` were seen
     * freed, the probability that the next one is freed is (frees+1)/(allocs+2). */
    double score = 1.0 - ((double)l->frees + 1.0) / ((double)l->allocs + 2.0);
    if (!l->allocs || score < 0)
        score = 0;
    if (growing)
        *growing = l->net > 0 && (double)l->net >= 0.75 * (double)l->peak;
    return score;
}
