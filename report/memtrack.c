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

#define TREND_SLICE0_NS 100000000ull /* first width of a trend slice: 100 ms */

/* Halves every line's trend: slice i of the new width is slice 2i+1 of the old (the net at
 * its end), or 2i when that was the line's last. */
static void trend_widen(report_profile_t *p)
{
    for (uint32_t k = 0; k < p->nlines; k++) {
        report__line_t *l = &p->lines[k];
        uint32_t n = (l->ntrend + 1) / 2;
        for (uint32_t i = 0; i < n; i++)
            l->trend[i] = l->trend[2 * i + 1 < l->ntrend ? 2 * i + 1 : 2 * i];
        l->ntrend = n;
    }
    p->trend_bucket_ns *= 2;
}

void report__trend_push(report_profile_t *p, report__line_t *l, uint64_t t_ns)
{
    if (!p->trend_bucket_ns) {
        p->trend_bucket_ns = TREND_SLICE0_NS;
        p->trend_t0 = t_ns;
    }
    uint64_t dt = t_ns > p->trend_t0 ? t_ns - p->trend_t0 : 0;
    while (dt / p->trend_bucket_ns >= REPORT__TREND_MAX)
        trend_widen(p);
    uint32_t b = (uint32_t)(dt / p->trend_bucket_ns);
    if (l->ntrend && b < l->ntrend - 1)
        b = l->ntrend - 1; /* a sample out of time order: into the latest slice */
    float last = l->ntrend ? l->trend[l->ntrend - 1] : 0.0f;
    for (uint32_t i = l->ntrend; i < b; i++)
        l->trend[i] = last; /* no event in between: the net stayed */
    l->trend[b] = (float)((double)l->net / REPORT__MB);
    l->ntrend = b + 1;
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
    report__trend_push(p, l, t_ns);
    if (p->mem_net > p->mem_peak)
        p->mem_peak = p->mem_net;
    footprint_point(p, t_ns);
}

/* Copies every stack's in-use bytes as the peak view when the footprint passed the last
 * copy by 1% (so the copies cost O(stacks) per 1% of growth, and the view is within 1% of
 * the true peak). */
static void peak_snapshot(report_profile_t *p)
{
    if (p->mem_net <= 0 || p->mem_net < p->peak_snap + p->peak_snap / 100 + 1)
        return;
    for (uint32_t i = 0; i < p->nstacks; i++)
        p->stacks[i].peak_inuse = p->stacks[i].inuse;
    p->peak_snap = p->mem_net;
}

int report__mem_add(report_profile_t *p, const scry_sample_t *s, uint32_t stack)
{
    uint32_t line = p->stacks[stack].line;
    report__line_t *l = &p->lines[line];
    switch (s->metric) {
    case SCRY_METRIC_ALLOC:
        l->alloc_bytes += s->bytes;
        if (s->cls == 0)
            l->alloc_py_bytes += s->bytes;
        l->allocs++;
        l->net += (int64_t)s->bytes;
        p->mem_net += (int64_t)s->bytes;
        p->stacks[stack].inuse += (int64_t)s->bytes;
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
                p->amap[j] = (report__addr_t){s->address, s->bytes, stack};
            }
        }
        line_changed(p, l, s->time_ns);
        peak_snapshot(p);
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
        report__line_t *al = &p->lines[p->stacks[a.stack].line];
        p->stacks[a.stack].inuse -= (int64_t)bytes;
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

int report__likely_leak(const report_profile_t *p, const report__line_t *l)
{
    if (l->net <= 0 || (double)l->net < 0.75 * (double)l->peak || !l->ntrend || !p->trend_bucket_ns)
        return 0;
    /* sampled allocations (20 at least) all but never freed: what it made is still there,
     * however early it stopped growing (a short run, a burst at start-up) */
    if (l->allocs >= 20 && report__leak_score(l, NULL) >= 0.95)
        return 1;
    /* its net at the middle of the run (memory events' time span), carried forward */
    uint64_t span = p->last_ns > p->trend_t0 ? p->last_ns - p->trend_t0 : 0;
    uint32_t mid = (uint32_t)(span / 2 / p->trend_bucket_ns);
    float at_mid = l->trend[mid < l->ntrend ? mid : l->ntrend - 1];
    return (double)l->net / REPORT__MB > (double)at_mid;
}
