/* live.c - rolling windows over a profile and sorted tables for live views. */
#include "live.h"

#include "report_internal.h"
#include "scry_err.h"

#include <stdlib.h>
#include <string.h>

#define FIG (2 * REPORT__NCLASS) /* figures per stack: count[NCLASS], value[NCLASS] */

typedef struct live_entry {
    uint32_t stack;
    uint64_t fig[FIG]; /* the interval's increase */
} live_entry_t;

typedef struct live_bucket {
    uint64_t t0, t1; /* the interval's bounds (monotonic ns) */
    live_entry_t *e;
    uint32_t n;
} live_bucket_t;

struct report_live {
    report_profile_t *p;
    uint64_t start_ns; /* start or last reset */
    uint64_t mark_ns;  /* end of the last interval (start_ns before any) */
    uint64_t *prev;    /* per stack figures at the last mark */
    uint32_t nprev;    /* stacks in prev */
    uint32_t prev_cap;
    live_bucket_t ring[REPORT_LIVE_HISTORY];
    uint32_t head;  /* next slot to write */
    uint32_t count; /* buckets held */
};

report_live_t *report_live_new(const report_meta_t *meta, uint64_t now_ns)
{
    if (!meta)
        return NULL;
    report_live_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->p = report_profile_new(meta);
    if (!l->p) {
        free(l);
        return NULL;
    }
    l->start_ns = l->mark_ns = now_ns;
    return l;
}

static void drop_history(report_live_t *l)
{
    for (uint32_t i = 0; i < REPORT_LIVE_HISTORY; i++) {
        free(l->ring[i].e);
        memset(&l->ring[i], 0, sizeof l->ring[i]);
    }
    l->head = l->count = 0;
    l->nprev = 0;
}

void report_live_free(report_live_t *l)
{
    if (!l)
        return;
    drop_history(l);
    free(l->prev);
    report_profile_free(l->p);
    free(l);
}

int report_live_add(report_live_t *l, const scry_sample_t *s)
{
    if (!l)
        return SCRY_E_INVAL;
    return report_profile_add(l->p, s);
}

report_profile_t *report_live_profile(report_live_t *l)
{
    return l ? l->p : NULL;
}

static void stack_figures(const report__stack_t *st, uint64_t *fig)
{
    for (int c = 0; c < REPORT__NCLASS; c++) {
        fig[c] = st->count[SCRY_METRIC_CPU][c];
        fig[REPORT__NCLASS + c] = st->value[SCRY_METRIC_CPU][c];
    }
}

int report_live_mark(report_live_t *l, uint64_t now_ns)
{
    if (!l)
        return SCRY_E_INVAL;
    const report_profile_t *p = l->p;
    if (p->nstacks > l->prev_cap) {
        uint64_t *np = report__grow(l->prev, &l->prev_cap, FIG * sizeof *np, p->nstacks, 256);
        if (!np)
            return SCRY_E_NOMEM;
        l->prev = np;
    }
    /* Count the changed stacks first so the bucket is allocated once. */
    uint32_t changed = 0;
    uint64_t fig[FIG];
    for (uint32_t si = 0; si < p->nstacks; si++) {
        stack_figures(&p->stacks[si], fig);
        if (si >= l->nprev || memcmp(fig, l->prev + (size_t)si * FIG, sizeof fig) != 0)
            changed++;
    }
    live_entry_t *e = changed ? malloc((size_t)changed * sizeof *e) : NULL;
    if (changed && !e)
        return SCRY_E_NOMEM;
    uint32_t n = 0;
    for (uint32_t si = 0; si < p->nstacks && n < changed; si++) {
        uint64_t *old = l->prev + (size_t)si * FIG;
        stack_figures(&p->stacks[si], fig);
        if (si >= l->nprev)
            memset(old, 0, sizeof fig);
        else if (memcmp(fig, old, sizeof fig) == 0)
            continue;
        e[n].stack = si;
        for (int k = 0; k < FIG; k++)
            e[n].fig[k] = fig[k] - old[k];
        memcpy(old, fig, sizeof fig);
        n++;
    }
    l->nprev = p->nstacks;
    live_bucket_t *b = &l->ring[l->head];
    free(b->e);
    b->e = e;
    b->n = n;
    b->t0 = l->mark_ns;
    b->t1 = now_ns > l->mark_ns ? now_ns : l->mark_ns;
    l->head = (l->head + 1) % REPORT_LIVE_HISTORY;
    if (l->count < REPORT_LIVE_HISTORY)
        l->count++;
    l->mark_ns = b->t1;
    return 0;
}

int report_live_reset(report_live_t *l, uint64_t now_ns)
{
    if (!l)
        return SCRY_E_INVAL;
    report_profile_t *np = report_profile_new(&l->p->meta);
    if (!np)
        return SCRY_E_NOMEM;
    report_profile_free(l->p);
    l->p = np;
    drop_history(l);
    l->start_ns = l->mark_ns = now_ns;
    return 0;
}

/* Sums the buckets of the last WINDOW_NS into a per-stack figure array. Returns it (caller
 * frees) with *WALL_NS the wall time covered, or NULL (*WALL_NS = 0) when there is no
 * bucket yet or memory ran out (*OOM set). */
static uint64_t *window_figures(const report_live_t *l, uint64_t window_ns, uint64_t *wall_ns,
                                int *oom)
{
    *wall_ns = 0;
    *oom = 0;
    if (!l->count)
        return NULL;
    uint64_t *dense = calloc(((size_t)l->p->nstacks + 1) * FIG, sizeof *dense);
    if (!dense) {
        *oom = 1;
        return NULL;
    }
    uint64_t oldest = l->mark_ns;
    for (uint32_t k = 0; k < l->count; k++) {
        const live_bucket_t *b =
            &l->ring[(l->head + REPORT_LIVE_HISTORY - 1 - k) % REPORT_LIVE_HISTORY];
        /* the newest interval always counts; older ones while they start no more than 10%
         * before the window (marks jitter around the refresh period), or while what is
         * covered is under half the window (a short last interval, e.g. at exit) */
        if (k > 0 && l->mark_ns - oldest >= window_ns / 2 &&
            l->mark_ns - b->t0 > window_ns + window_ns / 10)
            break;
        for (uint32_t i = 0; i < b->n; i++) {
            uint64_t *d = dense + (size_t)b->e[i].stack * FIG;
            for (int j = 0; j < FIG; j++)
                d[j] += b->e[i].fig[j];
        }
        oldest = b->t0;
    }
    *wall_ns = l->mark_ns - oldest;
    return dense;
}

/* --- joining functions of two views by identity --- */

typedef struct func_map {
    uint32_t *slots; /* func id + 1 */
    uint32_t mask;
} func_map_t;

static uint32_t fm_hash(const char *function, const char *file)
{
    uint64_t h = (uint64_t)(uintptr_t)function * 0x9E3779B97F4A7C15ULL;
    h ^= (uint64_t)(uintptr_t)file * 0xC2B2AE3D27D4EB4FULL;
    return (uint32_t)(h ^ (h >> 31));
}

static int fm_build(func_map_t *m, const report__view_t *v)
{
    uint32_t cap = 16;
    while (cap < v->nfuncs * 2 + 2)
        cap *= 2;
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots)
        return SCRY_E_NOMEM;
    m->mask = cap - 1;
    for (uint32_t i = 0; i < v->nfuncs; i++) {
        uint32_t j = fm_hash(v->funcs[i].function, v->funcs[i].file) & m->mask;
        while (m->slots[j])
            j = (j + 1) & m->mask;
        m->slots[j] = i + 1;
    }
    return 0;
}

static const report__func_t *fm_find(const func_map_t *m, const report__view_t *v,
                                     const char *function, const char *file)
{
    for (uint32_t j = fm_hash(function, file) & m->mask, s; (s = m->slots[j]) != 0;
         j = (j + 1) & m->mask) {
        const report__func_t *f = &v->funcs[s - 1];
        if (f->function == function && f->file == file)
            return f;
    }
    return NULL;
}

/* --- the table --- */

typedef struct conv {
    int use_weight;
    double rate_hz;
    double wall_s;
} conv_t;

/* Seconds that VALUE (in the view's unit) stands for. */
static double to_s(const conv_t *c, uint64_t value)
{
    if (c->use_weight)
        return (double)value / 1e9;
    return c->rate_hz > 0 ? (double)value / c->rate_hz : 0.0;
}

static double to_pct(const conv_t *c, uint64_t value)
{
    return c->wall_s > 0 ? 100.0 * to_s(c, value) / c->wall_s : 0.0;
}

static int cmp_double(double a, double b)
{
    return a > b ? -1 : a < b ? 1 : 0; /* larger first */
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

static int row_cmp(const void *x, const void *y, void *ctx)
{
    const report_live_row_t *a = x, *b = y;
    int key = *(const int *)ctx;
    double ka[REPORT_LIVE_NSORT] = {a->own_pct, a->total_pct, a->own_s, a->total_s};
    double kb[REPORT_LIVE_NSORT] = {b->own_pct, b->total_pct, b->own_s, b->total_s};
    int c = cmp_double(ka[key], kb[key]);
    for (int k = 0; !c && k < REPORT_LIVE_NSORT; k++)
        c = cmp_double(ka[k], kb[k]);
    if (c)
        return c;
    if ((c = strcmp(nz(a->function), nz(b->function))) != 0)
        return c;
    if ((c = strcmp(nz(a->file), nz(b->file))) != 0)
        return c;
    return a->line < b->line ? -1 : a->line > b->line;
}

int report_live_table_sort(report_live_table_t *t, int sort)
{
    if (!t || sort < 0 || sort >= REPORT_LIVE_NSORT)
        return SCRY_E_INVAL;
    t->sort = sort;
    if (t->nrows > 1)
        qsort_r(t->rows, t->nrows, sizeof *t->rows, row_cmp, &sort);
    return 0;
}

void report_live_table_free(report_live_table_t *t)
{
    if (!t)
        return;
    free(t->rows);
    memset(t, 0, sizeof *t);
}

static int function_rows(report_live_table_t *out, const report__view_t *cv,
                         const report__view_t *wv, const conv_t *cum, const conv_t *win)
{
    func_map_t m = {0};
    if (wv != cv && fm_build(&m, wv) < 0)
        return SCRY_E_NOMEM;
    out->rows = calloc((size_t)cv->nfuncs + 1, sizeof *out->rows);
    if (!out->rows) {
        free(m.slots);
        return SCRY_E_NOMEM;
    }
    for (uint32_t i = 0; i < cv->nfuncs; i++) {
        const report__func_t *f = &cv->funcs[i];
        if (!f->total_count)
            continue;
        report_live_row_t *r = &out->rows[out->nrows++];
        r->function = f->function;
        r->file = nz(f->file);
        r->line = f->first_line;
        r->kind = f->kind;
        r->own_s = to_s(cum, f->self_value[0] + f->self_value[1] + f->self_value[2]);
        r->total_s = to_s(cum, f->total_value);
        r->own_samples = f->self_count[0] + f->self_count[1] + f->self_count[2];
        r->samples = f->total_count;
        const report__func_t *w = wv == cv ? f : fm_find(&m, wv, f->function, f->file);
        if (!w)
            continue;
        for (int c = 0; c < REPORT__NCLASS; c++) {
            r->cls_pct[c] = to_pct(win, w->self_value[c]);
            r->own_pct += r->cls_pct[c];
        }
        r->total_pct = to_pct(win, w->total_value);
    }
    free(m.slots);
    return 0;
}

static int line_rows(report_live_table_t *out, const report__view_t *cv, const report__view_t *wv,
                     const conv_t *cum, const conv_t *win)
{
    const report_profile_t *p = cv->p;
    out->rows = calloc((size_t)p->nframes + 1, sizeof *out->rows);
    if (!out->rows)
        return SCRY_E_NOMEM;
    for (uint32_t fid = 0; fid < p->nframes; fid++) {
        if (!cv->frame_total_count[fid])
            continue;
        const report__frame_t *f = &p->frames[fid];
        const uint64_t *cs = cv->frame_self + (size_t)fid * REPORT__NCLASS;
        const uint64_t *ws = wv->frame_self + (size_t)fid * REPORT__NCLASS;
        report_live_row_t *r = &out->rows[out->nrows++];
        r->function = f->function;
        r->file = nz(f->file);
        r->line = f->line;
        r->kind = f->kind;
        r->own_s = to_s(cum, cs[0] + cs[1] + cs[2]);
        r->total_s = to_s(cum, cv->frame_total[fid]);
        r->own_samples = cv->frame_self_count[fid];
        r->samples = cv->frame_total_count[fid];
        for (int c = 0; c < REPORT__NCLASS; c++) {
            r->cls_pct[c] = to_pct(win, ws[c]);
            r->own_pct += r->cls_pct[c];
        }
        r->total_pct = to_pct(win, wv->frame_total[fid]);
    }
    return 0;
}

/* The process root of stack SI ("process PID (command)", --subprocesses), or REPORT__NONE. */
static uint32_t process_frame(const report_profile_t *p, uint32_t si)
{
    const report__stack_t *st = &p->stacks[si];
    for (uint32_t i = st->depth; i-- > 0;)
        if (p->frames[p->ids[st->off + i]].kind == SCRY_FRAME_PROCESS)
            return p->ids[st->off + i];
    return REPORT__NONE;
}

/* With --subprocesses, one row per process root ("process PID (command)") giving that
 * process's total, in either view: appended to OUT's rows. Returns 0 or SCRY_E_NOMEM. */
static int process_rows(report_live_table_t *out, const report__view_t *cv,
                        const report__view_t *wv, const conv_t *cum, const conv_t *win)
{
    const report_profile_t *p = cv->p;
    uint32_t first = out->nrows;
    for (uint32_t si = 0; si < p->nstacks; si++) {
        uint32_t fid = process_frame(p, si);
        if (fid == REPORT__NONE)
            continue;
        uint64_t cc, cval, wc, wval;
        report__view_stack_cpu(cv, si, &cc, &cval);
        report__view_stack_cpu(wv, si, &wc, &wval);
        if (!cc)
            continue;
        uint32_t k = first;
        while (k < out->nrows && out->rows[k].function != p->frames[fid].function)
            k++;
        if (k == out->nrows) {
            report_live_row_t *nr = realloc(out->rows, ((size_t)out->nrows + 1) * sizeof *nr);
            if (!nr)
                return SCRY_E_NOMEM;
            out->rows = nr;
            memset(&nr[k], 0, sizeof nr[k]);
            nr[k].function = p->frames[fid].function;
            nr[k].file = "";
            nr[k].kind = SCRY_FRAME_PROCESS;
            out->nrows++;
        }
        report_live_row_t *r = &out->rows[k];
        r->samples += cc;
        r->total_s += to_s(cum, cval);
        r->total_pct += to_pct(win, wval);
    }
    return 0;
}

int report_live_snapshot(report_live_t *l, const report_live_query_t *q, report_live_table_t *out)
{
    if (!out)
        return SCRY_E_INVAL;
    memset(out, 0, sizeof *out);
    if (!l || !q || q->sort < 0 || q->sort >= REPORT_LIVE_NSORT)
        return SCRY_E_INVAL;
    report__view_t cv, wv;
    uint64_t *dense = NULL;
    int have_wv = 0, rc = 0;
    if (report__view_build(&cv, l->p) < 0)
        return SCRY_E_NOMEM;
    conv_t cum = {cv.use_weight, l->p->meta.rate_hz, (double)(l->mark_ns - l->start_ns) / 1e9};
    conv_t win = cum;
    if (q->window_s > 0) {
        uint64_t wall_ns = 0;
        int oom = 0;
        dense = window_figures(l, (uint64_t)(q->window_s * 1e9), &wall_ns, &oom);
        if (oom) {
            rc = SCRY_E_NOMEM;
            goto out;
        }
        if (dense) {
            if (report__view_build_over(&wv, l->p, dense) < 0) {
                rc = SCRY_E_NOMEM;
                goto out;
            }
            have_wv = 1;
            win.wall_s = (double)wall_ns / 1e9;
        }
    }
    const report__view_t *w = have_wv ? &wv : &cv;
    if (q->by_lines) {
        if (report__view_build_frames(&cv) < 0 || (have_wv && report__view_build_frames(&wv) < 0)) {
            rc = SCRY_E_NOMEM;
            goto out;
        }
        rc = line_rows(out, &cv, w, &cum, &win);
    } else {
        rc = function_rows(out, &cv, w, &cum, &win);
    }
    if (rc == 0)
        rc = process_rows(out, &cv, w, &cum, &win);
    if (rc)
        goto out;
    out->by_lines = q->by_lines ? 1 : 0;
    out->window_s = win.wall_s;
    out->elapsed_s = cum.wall_s;
    out->samples = w->cpu_count;
    out->samples_all = cv.cpu_count;
    for (uint32_t i = 0; i < l->p->nlines; i++) {
        const uint64_t *c = w->line_cpu + (size_t)i * REPORT__NCLASS;
        for (int k = 0; k < REPORT__NCLASS; k++)
            out->cls_pct[k] += to_pct(&win, c[k]);
    }
    out->cpu_pct = out->cls_pct[0] + out->cls_pct[1] + out->cls_pct[2];
    out->nrows_all = out->nrows;
    report_live_table_sort(out, q->sort);
    if (q->max_rows && out->nrows > q->max_rows)
        out->nrows = q->max_rows;
out:
    if (rc)
        report_live_table_free(out);
    if (have_wv)
        report__view_free(&wv);
    report__view_free(&cv);
    free(dense);
    return rc;
}
