/* view.c - write-time derived data: per-line CPU shares, functions, deterministic orders. */
#include "report_internal.h"

#include <stdlib.h>
#include <string.h>

#include "scry_err.h"

static const char *nz(const char *s)
{
    return s ? s : "";
}

static int frame_cmp(const report__frame_t *a, const report__frame_t *b)
{
    int c = strcmp(nz(a->function), nz(b->function));
    if (c)
        return c;
    if ((c = strcmp(nz(a->file), nz(b->file))) != 0)
        return c;
    if (a->line != b->line)
        return a->line < b->line ? -1 : 1;
    return (int)a->kind - (int)b->kind;
}

static int frame_id_cmp(const void *x, const void *y, void *ctx)
{
    const report_profile_t *p = ctx;
    return frame_cmp(&p->frames[*(const uint32_t *)x], &p->frames[*(const uint32_t *)y]);
}

typedef struct sort_ctx {
    const report_profile_t *p;
    const uint32_t *rank; /* frame id -> rank in text order */
    int by_tid;
} sort_ctx_t;

static int stack_cmp(const void *x, const void *y, void *ctxp)
{
    const sort_ctx_t *ctx = ctxp;
    const report__stack_t *a = &ctx->p->stacks[*(const uint32_t *)x];
    const report__stack_t *b = &ctx->p->stacks[*(const uint32_t *)y];
    if (ctx->by_tid && a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    const uint32_t *ia = ctx->p->ids + a->off, *ib = ctx->p->ids + b->off;
    uint32_t n = a->depth < b->depth ? a->depth : b->depth;
    for (uint32_t i = 1; i <= n; i++) { /* root first */
        uint32_t ra = ctx->rank[ia[a->depth - i]], rb = ctx->rank[ib[b->depth - i]];
        if (ra != rb)
            return ra < rb ? -1 : 1;
    }
    if (a->depth != b->depth)
        return a->depth < b->depth ? -1 : 1;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    return 0;
}

uint32_t *report__sorted_stacks(const report_profile_t *p, int by_tid)
{
    uint32_t *order = malloc(((size_t)p->nstacks + 1) * sizeof *order);
    uint32_t *byrank = malloc(((size_t)p->nframes + 1) * sizeof *byrank);
    uint32_t *rank = malloc(((size_t)p->nframes + 1) * sizeof *rank);
    if (!order || !byrank || !rank) {
        free(order);
        order = NULL;
        goto out;
    }
    for (uint32_t i = 0; i < p->nframes; i++)
        byrank[i] = i;
    qsort_r(byrank, p->nframes, sizeof *byrank, frame_id_cmp, (void *)p);
    for (uint32_t i = 0; i < p->nframes; i++)
        rank[byrank[i]] = i;
    for (uint32_t i = 0; i < p->nstacks; i++)
        order[i] = i;
    sort_ctx_t ctx = {p, rank, by_tid};
    qsort_r(order, p->nstacks, sizeof *order, stack_cmp, &ctx);
out:
    free(byrank);
    free(rank);
    return order;
}

int report__pick_metric(const report_profile_t *p, const report_options_t *opt)
{
    if (opt && opt->metric >= 0 && opt->metric <= REPORT_METRIC_PEAK)
        return opt->metric;
    if (p->metric_count[SCRY_METRIC_CPU] || !p->metric_count[SCRY_METRIC_ALLOC])
        return SCRY_METRIC_CPU;
    return SCRY_METRIC_ALLOC;
}

uint64_t report__stack_cls_value(const report__stack_t *s, int metric, int c)
{
    if (metric == REPORT_METRIC_INUSE || metric == REPORT_METRIC_PEAK) {
        int64_t v = metric == REPORT_METRIC_INUSE ? s->inuse : s->peak_inuse;
        return c == SCRY_CLASS_PYTHON && v > 0 ? (uint64_t)v : 0; /* one class */
    }
    return metric == SCRY_METRIC_CPU ? s->count[metric][c] : s->value[metric][c];
}

uint64_t report__stack_value(const report__stack_t *s, int metric)
{
    if (metric == REPORT_METRIC_INUSE || metric == REPORT_METRIC_PEAK)
        return report__stack_cls_value(s, metric, SCRY_CLASS_PYTHON);
    uint64_t v = 0;
    for (int c = 0; c < REPORT__NCLASS; c++)
        v += metric == SCRY_METRIC_CPU ? s->count[metric][c] : s->value[metric][c];
    return v;
}

uint64_t report__line_total(const report__view_t *v, uint32_t line)
{
    const uint64_t *c = v->line_cpu + (size_t)line * REPORT__NCLASS;
    return c[0] + c[1] + c[2];
}

/* CPU samples of stack SI in class C (the view's override when it has one). */
static uint64_t stack_count(const report__view_t *v, uint32_t si, int c)
{
    if (v->stack_cpu)
        return v->stack_cpu[(size_t)si * 2 * REPORT__NCLASS + (size_t)c];
    return v->p->stacks[si].count[SCRY_METRIC_CPU][c];
}

/* CPU figure of stack SI in class C in the view's unit (weight_ns or samples). */
static uint64_t stack_cpu_value(const report__view_t *v, uint32_t si, int c)
{
    if (!v->use_weight)
        return stack_count(v, si, c);
    if (v->stack_cpu)
        return v->stack_cpu[(size_t)si * 2 * REPORT__NCLASS + REPORT__NCLASS + (size_t)c];
    return v->p->stacks[si].value[SCRY_METRIC_CPU][c];
}

void report__view_stack_cpu(const report__view_t *v, uint32_t si, uint64_t *count, uint64_t *value)
{
    *count = *value = 0;
    for (int c = 0; c < REPORT__NCLASS; c++) {
        *count += stack_count(v, si, c);
        *value += stack_cpu_value(v, si, c);
    }
}

/* The frame ids of stack SI with its CPU samples in *CNT and its CPU figure in *VAL; NULL
 * when it has no CPU sample. */
static const uint32_t *cpu_stack(const report__view_t *v, uint32_t si, uint64_t *cnt, uint64_t *val)
{
    report__view_stack_cpu(v, si, cnt, val);
    return *cnt ? v->p->ids + v->p->stacks[si].off : NULL;
}

/* --- functions --- */

typedef struct func_table {
    uint32_t *slots; /* id + 1 */
    uint32_t cap;
} func_table_t;

static uint64_t func_hash(const char *function, const char *file)
{
    uint64_t h = (uint64_t)(uintptr_t)function * 0x9E3779B97F4A7C15ULL;
    h ^= (uint64_t)(uintptr_t)file * 0xC2B2AE3D27D4EB4FULL;
    return h ^ (h >> 29);
}

/* Returns the function id of frame F, adding it; REPORT__NONE on OOM. */
static uint32_t func_of(report__view_t *v, func_table_t *t, uint32_t *cap, const report__frame_t *f)
{
    uint32_t mask = t->cap - 1;
    uint32_t j = (uint32_t)func_hash(f->function, f->file) & mask;
    for (uint32_t s; (s = t->slots[j]) != 0; j = (j + 1) & mask) {
        report__func_t *e = &v->funcs[s - 1];
        if (e->function == f->function && e->file == f->file) {
            if (f->line > 0 && (e->first_line <= 0 || f->line < e->first_line))
                e->first_line = f->line;
            return s - 1;
        }
    }
    report__func_t *n = report__grow(v->funcs, cap, sizeof *n, v->nfuncs + 1, 64);
    if (!n)
        return REPORT__NONE;
    v->funcs = n;
    report__func_t *e = &v->funcs[v->nfuncs];
    memset(e, 0, sizeof *e);
    e->function = f->function;
    e->file = f->file;
    e->first_line = f->line;
    e->kind = f->kind;
    e->stamp = REPORT__NONE;
    t->slots[j] = ++v->nfuncs;
    return v->nfuncs - 1;
}

/* One frame of a stack with CPU samples (see each_cpu_frame): stack SI, frame id FID, SELF
 * when it is the stack's attribution frame, CNT samples and VAL CPU time of the stack. */
typedef int (*cpu_frame_fn)(report__view_t *v, uint32_t si, uint32_t fid, int self, uint64_t cnt,
                            uint64_t val, void *ctx);

/* Calls FN(.., CTX) on every Python frame, and the attribution frame (the stack's uattr when
 * UATTR, else its attr), of every stack with CPU samples, leaf first. Returns 0 or FN's
 * first non-zero return. */
static int each_cpu_frame(report__view_t *v, int uattr, cpu_frame_fn fn, void *ctx)
{
    const report_profile_t *p = v->p;
    for (uint32_t si = 0; si < p->nstacks; si++) {
        const report__stack_t *st = &p->stacks[si];
        uint32_t attr = uattr ? st->uattr : st->attr;
        uint64_t cnt, val;
        const uint32_t *ids = cpu_stack(v, si, &cnt, &val);
        if (!ids)
            continue;
        for (uint32_t i = 0; i < st->depth; i++) {
            if (p->frames[ids[i]].kind != SCRY_FRAME_PYTHON && i != attr)
                continue;
            int rc = fn(v, si, ids[i], i == attr, cnt, val, ctx);
            if (rc)
                return rc;
        }
    }
    return 0;
}

typedef struct funcs_build {
    func_table_t t;
    uint32_t cap; /* of v->funcs */
} funcs_build_t;

static int add_func_frame(report__view_t *v, uint32_t si, uint32_t fid, int self, uint64_t cnt,
                          uint64_t val, void *ctx)
{
    funcs_build_t *b = ctx;
    uint32_t k = func_of(v, &b->t, &b->cap, &v->p->frames[fid]);
    if (k == REPORT__NONE)
        return SCRY_E_NOMEM;
    report__func_t *fn = &v->funcs[k];
    if (self) {
        for (int c = 0; c < REPORT__NCLASS; c++) {
            fn->self_count[c] += stack_count(v, si, c);
            fn->self_value[c] += stack_cpu_value(v, si, c);
        }
    }
    if (fn->stamp != si) { /* count a recursive function once per stack */
        fn->stamp = si;
        fn->total_count += cnt;
        fn->total_value += val;
    }
    return 0;
}

static int build_funcs(report__view_t *v)
{
    const report_profile_t *p = v->p;
    funcs_build_t b = {{0}, 64};
    /* at most one function per frame: size the table for every frame */
    b.t.cap = 64;
    while (b.t.cap < p->nframes * 2 + 2)
        b.t.cap *= 2;
    b.t.slots = calloc(b.t.cap, sizeof *b.t.slots);
    v->funcs = malloc(b.cap * sizeof *v->funcs);
    if (!b.t.slots || !v->funcs) {
        free(b.t.slots);
        return SCRY_E_NOMEM;
    }
    int rc = each_cpu_frame(v, 0, add_func_frame, &b);
    free(b.t.slots);
    return rc;
}

static int func_order_cmp(const void *x, const void *y, void *ctx)
{
    const report__view_t *v = ctx;
    const report__func_t *a = &v->funcs[*(const uint32_t *)x];
    const report__func_t *b = &v->funcs[*(const uint32_t *)y];
    if (a->total_value != b->total_value)
        return a->total_value > b->total_value ? -1 : 1;
    uint64_t sa = a->self_value[0] + a->self_value[1] + a->self_value[2];
    uint64_t sb = b->self_value[0] + b->self_value[1] + b->self_value[2];
    if (sa != sb)
        return sa > sb ? -1 : 1;
    int c = strcmp(nz(a->function), nz(b->function));
    if (c)
        return c;
    if ((c = strcmp(nz(a->file), nz(b->file))) != 0)
        return c;
    return a->first_line < b->first_line ? -1 : a->first_line > b->first_line;
}

static int line_order_cmp(const void *x, const void *y, void *ctx)
{
    const report__view_t *v = ctx;
    uint32_t ia = *(const uint32_t *)x, ib = *(const uint32_t *)y;
    const report__line_t *la = &v->p->lines[ia], *lb = &v->p->lines[ib];
    if (!(v->p->meta.flags & REPORT_F_ALL_LINES) && la->user != lb->user)
        return la->user ? -1 : 1; /* the user's lines first */
    uint64_t ta = report__line_total(v, ia), tb = report__line_total(v, ib);
    if (ta != tb)
        return ta > tb ? -1 : 1;
    const report__line_t *a = &v->p->lines[ia], *b = &v->p->lines[ib];
    if (a->alloc_bytes != b->alloc_bytes)
        return a->alloc_bytes > b->alloc_bytes ? -1 : 1;
    if (a->copy_bytes != b->copy_bytes)
        return a->copy_bytes > b->copy_bytes ? -1 : 1;
    int c = strcmp(nz(a->file), nz(b->file));
    if (c)
        return c;
    if (a->line != b->line)
        return a->line < b->line ? -1 : 1;
    if ((c = strcmp(nz(a->function), nz(b->function))) != 0)
        return c;
    return (int)a->kind - (int)b->kind;
}

int report__view_build(report__view_t *v, const report_profile_t *p)
{
    return report__view_build_over(v, p, NULL);
}

int report__view_build_over(report__view_t *v, const report_profile_t *p, const uint64_t *stack_cpu)
{
    memset(v, 0, sizeof *v);
    v->p = p;
    v->stack_cpu = stack_cpu;
    v->use_weight = p->metric_value[SCRY_METRIC_CPU] > 0;
    v->cpu_count = p->metric_count[SCRY_METRIC_CPU];
    if (stack_cpu) {
        v->cpu_count = 0;
        for (uint32_t si = 0; si < p->nstacks; si++)
            for (int c = 0; c < REPORT__NCLASS; c++)
                v->cpu_count += stack_count(v, si, c);
    }
    v->has_memory = p->metric_count[SCRY_METRIC_ALLOC] + p->metric_count[SCRY_METRIC_FREE] +
                        p->metric_count[SCRY_METRIC_COPY] >
                    0;
    if (p->have_end && p->end.duration_s > 0)
        v->duration_s = p->end.duration_s;
    else if (p->nsamples)
        v->duration_s = (double)(p->last_ns - p->first_ns) / 1e9;

    size_t n = (size_t)p->nlines + 1;
    v->line_cpu = calloc(n * REPORT__NCLASS, sizeof *v->line_cpu);
    v->line_count = calloc(n, sizeof *v->line_count);
    v->line_order = malloc(n * sizeof *v->line_order);
    if (!v->line_cpu || !v->line_count || !v->line_order)
        goto oom;
    for (uint32_t si = 0; si < p->nstacks; si++) {
        const report__stack_t *st = &p->stacks[si];
        uint64_t *lc = v->line_cpu + (size_t)st->line * REPORT__NCLASS;
        for (int c = 0; c < REPORT__NCLASS; c++) {
            lc[c] += stack_cpu_value(v, si, c);
            v->line_count[st->line] += stack_count(v, si, c);
        }
    }
    for (uint32_t i = 0; i < p->nlines; i++) {
        v->cpu_total += report__line_total(v, i);
        const report__line_t *l = &p->lines[i];
        if (v->line_count[i] || l->allocs || l->copy_bytes || l->frees)
            v->line_order[v->nline_order++] = i;
    }
    qsort_r(v->line_order, v->nline_order, sizeof *v->line_order, line_order_cmp, v);

    if (build_funcs(v) < 0)
        goto oom;
    v->func_order = malloc(((size_t)v->nfuncs + 1) * sizeof *v->func_order);
    if (!v->func_order)
        goto oom;
    for (uint32_t i = 0; i < v->nfuncs; i++)
        v->func_order[i] = i;
    qsort_r(v->func_order, v->nfuncs, sizeof *v->func_order, func_order_cmp, v);
    return 0;
oom:
    report__view_free(v);
    return SCRY_E_NOMEM;
}

/* each_cpu_frame's visitor of report__view_build_frames; CTX: the stamp per frame. */
static int add_line_frame(report__view_t *v, uint32_t si, uint32_t fid, int self, uint64_t cnt,
                          uint64_t val, void *ctx)
{
    uint32_t *stamp = ctx;
    if (self) { /* the line views' attribution */
        for (int c = 0; c < REPORT__NCLASS; c++) {
            v->frame_self[(size_t)fid * REPORT__NCLASS + (size_t)c] += stack_cpu_value(v, si, c);
            v->frame_self_count[fid] += stack_count(v, si, c);
        }
    }
    if (stamp[fid] != si) { /* a recursive line counts once per stack */
        stamp[fid] = si;
        v->frame_total[fid] += val;
        v->frame_total_count[fid] += cnt;
    }
    return 0;
}

int report__view_build_frames(report__view_t *v)
{
    const report_profile_t *p = v->p;
    size_t n = (size_t)p->nframes + 1;
    uint32_t *stamp = malloc(n * sizeof *stamp);
    free(v->frame_self);
    free(v->frame_self_count);
    free(v->frame_total);
    free(v->frame_total_count);
    v->frame_self = calloc(n * REPORT__NCLASS, sizeof *v->frame_self);
    v->frame_self_count = calloc(n, sizeof *v->frame_self_count);
    v->frame_total = calloc(n, sizeof *v->frame_total);
    v->frame_total_count = calloc(n, sizeof *v->frame_total_count);
    if (!stamp || !v->frame_self || !v->frame_self_count || !v->frame_total ||
        !v->frame_total_count) {
        free(stamp);
        return SCRY_E_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        stamp[i] = REPORT__NONE;
    each_cpu_frame(v, 1, add_line_frame, stamp);
    free(stamp);
    return 0;
}

void report__view_free(report__view_t *v)
{
    free(v->frame_self);
    free(v->frame_self_count);
    free(v->frame_total);
    free(v->frame_total_count);
    free(v->line_cpu);
    free(v->line_count);
    free(v->line_order);
    free(v->funcs);
    free(v->func_order);
    memset(v, 0, sizeof *v);
}

/* GIL share in percent, or < 0 when unknown: the caller's figure (end.gil_fraction), else
 * the share of the CPU samples that held it (a thread that never lets it go is 100%,
 * however little CPU it gets; counting sampling rounds instead followed the CPU share).
 * With --gil only the holder is sampled: then the share of the time it was held. Not for
 * several processes (one per interpreter). */
double report__gil_pct(const report__view_t *v)
{
    const report_profile_t *p = v->p;
    if (p->have_end && p->end.gil_fraction >= 0)
        return 100.0 * (p->end.gil_fraction > 1 ? 1 : p->end.gil_fraction);
    if (!v->cpu_count || (p->have_end && p->end.nprocesses))
        return -1;
    double x;
    if ((p->meta.flags & REPORT_F_GIL) && v->use_weight && v->duration_s > 0)
        x = (double)p->gil_weight / (v->duration_s * 1e9);
    else
        x = (double)p->gil_count / (double)v->cpu_count;
    return 100.0 * (x > 1 ? 1 : x);
}

const char *report__gil_unit(const report__view_t *v)
{
    return (v->p->meta.flags & REPORT_F_GIL) ? "of the time" : "of the samples";
}
