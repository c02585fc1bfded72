/* fmt_json.c - scry's line-level JSON report (schema in docs/output-formats.md). */
#include "report_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scry_err.h"

#define TOP_ALLOC_LINES 10

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void key(report__sb_t *b, const char *k)
{
    report__sb_putc(b, '"');
    report__sb_puts(b, k);
    report__sb_puts(b, "\":");
}

static void knum(report__sb_t *b, const char *k, double x, int digits)
{
    key(b, k);
    report__sb_num(b, x, digits);
    report__sb_putc(b, ',');
}

static void kstr(report__sb_t *b, const char *k, const char *s)
{
    key(b, k);
    report__sb_json(b, s);
    report__sb_putc(b, ',');
}

static void kint(report__sb_t *b, const char *k, uint64_t x)
{
    report__sb_printf(b, "\"%s\":%" PRIu64 ",", k, x);
}

static void kbool(report__sb_t *b, const char *k, int x)
{
    report__sb_printf(b, "\"%s\":%s,", k, x ? "true" : "false");
}

/* Drops the trailing ',' written by the k*() helpers. */
static void unc(report__sb_t *b)
{
    if (b->len && b->buf[b->len - 1] == ',')
        b->buf[--b->len] = 0;
}

static void write_loc(report__sb_t *b, const report__line_t *l)
{
    kstr(b, "file", l->file);
    report__sb_printf(b, "\"line\":%d,", (int)l->line);
    kstr(b, "function", l->function);
}

static void write_mem_fields(report__sb_t *b, const report__view_t *v, const report__line_t *l)
{
    knum(b, "alloc_mb", (double)l->alloc_bytes / REPORT__MB, 4);
    knum(b, "alloc_python_pct", pct(l->alloc_py_bytes, l->alloc_bytes), 2);
    knum(b, "net_mb", (double)l->net / REPORT__MB, 4);
    knum(b, "peak_mb", (double)l->peak / REPORT__MB, 4);
    knum(b, "copy_mb", (double)l->copy_bytes / REPORT__MB, 4);
    knum(b, "copy_mb_s",
         v->duration_s > 0 ? (double)l->copy_bytes / REPORT__MB / v->duration_s : 0.0, 4);
    int growing;
    double score = report__leak_score(l, &growing);
    knum(b, "leak_score", score, 4);
    kbool(b, "leak_growing", growing);
    report__sb_puts(b, "\"trend\":[");
    for (uint32_t i = 0; i < l->ntrend; i++) {
        if (i)
            report__sb_putc(b, ',');
        report__sb_num(b, l->trend[i], 4);
    }
    report__sb_puts(b, "],");
}

static void write_lines(report__sb_t *b, const report__view_t *v)
{
    const report_profile_t *p = v->p;
    report__sb_puts(b, "\"lines\":[");
    for (uint32_t k = 0; k < v->nline_order; k++) {
        uint32_t i = v->line_order[k];
        const report__line_t *l = &p->lines[i];
        const uint64_t *c = v->line_cpu + (size_t)i * REPORT__NCLASS;
        report__sb_puts(b, k ? ",\n{" : "\n{");
        write_loc(b, l);
        kstr(b, "kind", report__kind_name(l->kind));
        kbool(b, "user", l->user);
        kint(b, "samples", v->line_count[i]);
        knum(b, "total_pct", pct(c[0] + c[1] + c[2], v->cpu_total), 3);
        knum(b, "cpu_python_pct", pct(c[SCRY_CLASS_PYTHON], v->cpu_total), 3);
        knum(b, "cpu_native_pct", pct(c[SCRY_CLASS_NATIVE], v->cpu_total), 3);
        knum(b, "cpu_system_pct", pct(c[SCRY_CLASS_SYSTEM], v->cpu_total), 3);
        if (v->has_memory)
            write_mem_fields(b, v, l);
        unc(b);
        report__sb_putc(b, '}');
    }
    report__sb_puts(b, "],\n");
}

static void write_functions(report__sb_t *b, const report__view_t *v)
{
    report__sb_puts(b, "\"functions\":[");
    for (uint32_t k = 0; k < v->nfuncs; k++) {
        const report__func_t *f = &v->funcs[v->func_order[k]];
        uint64_t self = f->self_value[0] + f->self_value[1] + f->self_value[2];
        report__sb_puts(b, k ? ",\n{" : "\n{");
        kstr(b, "function", f->function);
        kstr(b, "file", f->file);
        report__sb_printf(b, "\"line\":%d,", (int)f->first_line);
        kstr(b, "kind", report__kind_name(f->kind));
        kint(b, "samples", f->total_count);
        kint(b, "self_samples", f->self_count[0] + f->self_count[1] + f->self_count[2]);
        knum(b, "self_pct", pct(self, v->cpu_total), 3);
        knum(b, "total_pct", pct(f->total_value, v->cpu_total), 3);
        knum(b, "cpu_python_pct", pct(f->self_value[SCRY_CLASS_PYTHON], v->cpu_total), 3);
        knum(b, "cpu_native_pct", pct(f->self_value[SCRY_CLASS_NATIVE], v->cpu_total), 3);
        knum(b, "cpu_system_pct", pct(f->self_value[SCRY_CLASS_SYSTEM], v->cpu_total), 3);
        unc(b);
        report__sb_putc(b, '}');
    }
    report__sb_puts(b, "],\n");
}

/* The CPU stacks, for tools that rebuild flame graphs (scry diff): every frame once
 * ("stack_frames"), then each stack with CPU samples as frame indices root first, its
 * samples and its value in the report's unit. Stacks of several threads with the same frames
 * are separate entries. */
static int write_stacks(report__sb_t *b, const report__view_t *v, FILE *out)
{
    const report_profile_t *p = v->p;
    report__sb_puts(b, "\"stack_frames\":[");
    for (uint32_t i = 0; i < p->nframes; i++) {
        const report__frame_t *f = &p->frames[i];
        report__sb_puts(b, i ? ",\n{" : "\n{");
        kstr(b, "function", f->function);
        kstr(b, "file", f->file);
        report__sb_printf(b, "\"line\":%d,", (int)f->line);
        kstr(b, "kind", report__kind_name(f->kind));
        unc(b);
        report__sb_putc(b, '}');
        int rc;
        if (b->len > (1u << 20) && (rc = report__sb_flush(b, out)) < 0)
            return rc;
    }
    report__sb_puts(b, "],\n\"stacks\":[");
    uint32_t *order = report__sorted_stacks(p, 1);
    if (!order)
        return SCRY_E_NOMEM;
    int first = 1;
    for (uint32_t k = 0; k < p->nstacks; k++) {
        const report__stack_t *st = &p->stacks[order[k]];
        uint64_t count = 0, value = 0;
        for (int c = 0; c < REPORT__NCLASS; c++) {
            count += st->count[SCRY_METRIC_CPU][c];
            value += st->value[SCRY_METRIC_CPU][c];
        }
        if (!count)
            continue;
        report__sb_puts(b, first ? "\n{\"frames\":[" : ",\n{\"frames\":[");
        first = 0;
        const uint32_t *ids = p->ids + st->off;
        for (uint32_t d = 0; d < st->depth; d++)
            report__sb_printf(b, d ? ",%" PRIu32 : "%" PRIu32, ids[st->depth - 1 - d]);
        report__sb_printf(b, "],\"samples\":%" PRIu64 ",\"value\":%" PRIu64 "}", count,
                          v->use_weight ? value : count);
        int rc;
        if (b->len > (1u << 20) && (rc = report__sb_flush(b, out)) < 0) {
            free(order);
            return rc;
        }
    }
    free(order);
    report__sb_puts(b, "],\n");
    return 0;
}

static int thread_cmp(const void *x, const void *y)
{
    const report__thread_t *a = *(report__thread_t *const *)x, *b = *(report__thread_t *const *)y;
    return a->tid < b->tid ? -1 : a->tid > b->tid;
}

static int write_threads(report__sb_t *b, const report__view_t *v)
{
    const report_profile_t *p = v->p;
    const report__thread_t **t = malloc(((size_t)p->nthreads + 1) * sizeof *t);
    if (!t)
        return SCRY_E_NOMEM;
    for (uint32_t i = 0; i < p->nthreads; i++)
        t[i] = &p->threads[i];
    qsort(t, p->nthreads, sizeof *t, thread_cmp);
    report__sb_puts(b, "\"threads\":[");
    for (uint32_t i = 0; i < p->nthreads; i++) {
        report__sb_puts(b, i ? ",\n{" : "\n{");
        report__sb_printf(b, "\"tid\":%d,", (int)t[i]->tid);
        kstr(b, "name", t[i]->name);
        kint(b, "samples", t[i]->samples);
        kint(b, "memory_samples", t[i]->mem_samples);
        knum(b, "cpu_pct",
             pct(v->use_weight ? t[i]->weight : t[i]->samples,
                 v->use_weight ? p->metric_value[SCRY_METRIC_CPU] : v->cpu_count),
             3);
        knum(b, "running_pct", pct(t[i]->running, t[i]->samples), 2);
        if (p->meta.flags & REPORT_F_GIL)
            knum(b, "gil_held_pct", pct(t[i]->gil, t[i]->samples), 2);
        unc(b);
        report__sb_putc(b, '}');
    }
    report__sb_puts(b, "],\n");
    free(t);
    return 0;
}

static int alloc_cmp(const void *x, const void *y, void *ctx)
{
    const report_profile_t *p = ctx;
    const report__line_t *a = &p->lines[*(const uint32_t *)x], *b = &p->lines[*(const uint32_t *)y];
    if (a->alloc_bytes != b->alloc_bytes)
        return a->alloc_bytes > b->alloc_bytes ? -1 : 1;
    return *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
}

static int leak_cmp(const void *x, const void *y, void *ctx)
{
    const report_profile_t *p = ctx;
    const report__line_t *a = &p->lines[*(const uint32_t *)x], *b = &p->lines[*(const uint32_t *)y];
    if (a->net != b->net)
        return a->net > b->net ? -1 : 1;
    return *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
}

static int write_memory(report__sb_t *b, const report__view_t *v)
{
    const report_profile_t *p = v->p;
    /* line_order holds the active lines in a deterministic order: re-sort copies */
    uint32_t n = v->nline_order;
    uint32_t *by_alloc = malloc(((size_t)n + 1) * sizeof *by_alloc);
    uint32_t *leaks = malloc(((size_t)n + 1) * sizeof *leaks);
    if (!by_alloc || !leaks) {
        free(by_alloc);
        free(leaks);
        return SCRY_E_NOMEM;
    }
    uint32_t nalloc = 0, nleaks = 0;
    uint64_t alloc = 0, freed = 0, copy = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = v->line_order[k];
        const report__line_t *l = &p->lines[i];
        alloc += l->alloc_bytes;
        freed += l->free_bytes;
        copy += l->copy_bytes;
        if (l->alloc_bytes)
            by_alloc[nalloc++] = i;
        if (report__likely_leak(p, l))
            leaks[nleaks++] = i;
    }
    qsort_r(by_alloc, nalloc, sizeof *by_alloc, alloc_cmp, (void *)p);
    qsort_r(leaks, nleaks, sizeof *leaks, leak_cmp, (void *)p);

    report__sb_puts(b, "\"memory\":{");
    knum(b, "peak_mb", (double)p->mem_peak / REPORT__MB, 4);
    knum(b, "net_mb", (double)p->mem_net / REPORT__MB, 4);
    knum(b, "alloc_mb", (double)alloc / REPORT__MB, 4);
    knum(b, "freed_mb", (double)freed / REPORT__MB, 4);
    knum(b, "copy_mb", (double)copy / REPORT__MB, 4);
    knum(b, "copy_mb_s", v->duration_s > 0 ? (double)copy / REPORT__MB / v->duration_s : 0, 4);
    kint(b, "alloc_samples", p->metric_count[SCRY_METRIC_ALLOC]);
    kint(b, "free_samples", p->metric_count[SCRY_METRIC_FREE]);
    kint(b, "copy_samples", p->metric_count[SCRY_METRIC_COPY]);
    kint(b, "unmatched_frees", p->unmatched_frees);
    kint(b, "untracked_allocs", p->untracked_allocs);
    report__sb_puts(b, "\"footprint\":[");
    for (uint32_t i = 0; i < p->nfoot; i++) {
        report__sb_puts(b, i ? ",[" : "[");
        report__sb_num(b, p->foot[i].t_s, 3);
        report__sb_putc(b, ',');
        report__sb_num(b, p->foot[i].mb, 4);
        report__sb_putc(b, ']');
    }
    report__sb_puts(b, "],\n\"top_alloc_lines\":[");
    for (uint32_t k = 0; k < nalloc && k < TOP_ALLOC_LINES; k++) {
        const report__line_t *l = &p->lines[by_alloc[k]];
        report__sb_puts(b, k ? ",\n{" : "\n{");
        write_loc(b, l);
        knum(b, "alloc_mb", (double)l->alloc_bytes / REPORT__MB, 4);
        knum(b, "alloc_pct", pct(l->alloc_bytes, alloc), 2);
        knum(b, "net_mb", (double)l->net / REPORT__MB, 4);
        unc(b);
        report__sb_putc(b, '}');
    }
    report__sb_puts(b, "],\n\"likely_leaks\":[");
    for (uint32_t k = 0; k < nleaks && k < 50; k++) {
        const report__line_t *l = &p->lines[leaks[k]];
        report__sb_puts(b, k ? ",\n{" : "\n{");
        write_loc(b, l);
        knum(b, "leak_score", report__leak_score(l, NULL), 4);
        knum(b, "net_mb", (double)l->net / REPORT__MB, 4);
        knum(b, "peak_mb", (double)l->peak / REPORT__MB, 4);
        kint(b, "allocs", l->allocs);
        kint(b, "frees", l->frees);
        unc(b);
        report__sb_putc(b, '}');
    }
    report__sb_puts(b, "]},\n");
    free(by_alloc);
    free(leaks);
    return 0;
}

int report__write_json(report_profile_t *p, FILE *out, const report_options_t *o)
{
    report__view_t v;
    report__sb_t b = {0};
    int rc = report__view_build(&v, p);
    if (rc < 0)
        return rc;
    const report_meta_t *m = &p->meta;
    report__sb_puts(&b, "{\"format\":\"scry-report\",\"version\":1,\n\"target\":{");
    report__sb_printf(&b, "\"pid\":%d,", (int)m->pid);
    key(&b, "python_version");
    if (m->python_version)
        report__sb_json(&b, m->python_version);
    else
        report__sb_puts(&b, "null");
    report__sb_putc(&b, ',');
    kstr(&b, "command", m->command ? m->command : "");
    if (m->ns_pid)
        report__sb_printf(&b, "\"ns_pid\":%d,", (int)m->ns_pid);
    if (m->container) {
        key(&b, "container");
        report__sb_putc(&b, '{');
        kstr(&b, "id", m->container->id);
        kstr(&b, "runtime", m->container->runtime);
        kstr(&b, "cgroup", m->container->cgroup);
        unc(&b);
        report__sb_puts(&b, "},");
    }
    unc(&b);
    report__sb_puts(&b, "},\n");
    if (m->start_unix_ns > 0) {
        time_t t = (time_t)(m->start_unix_ns / 1000000000);
        struct tm tm;
        char ts[64];
        if (gmtime_r(&t, &tm) && strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm))
            kstr(&b, "start_time", ts);
    }
    knum(&b, "rate_hz", m->rate_hz, 3);
    report__sb_printf(
        &b,
        "\"mode\":{\"threads\":%s,\"idle\":%s,\"native\":%s,\"gil\":%s,"
        "\"memory\":%s,\"all_lines\":%s},\n",
        m->flags & REPORT_F_THREADS ? "true" : "false", m->flags & REPORT_F_IDLE ? "true" : "false",
        m->flags & REPORT_F_NATIVE ? "true" : "false", m->flags & REPORT_F_GIL ? "true" : "false",
        m->flags & REPORT_F_MEMORY ? "true" : "false",
        m->flags & REPORT_F_ALL_LINES ? "true" : "false");
    knum(&b, "duration_s", v.duration_s, 3);
    kint(&b, "samples", v.cpu_count);
    kint(&b, "memory_samples", p->nsamples - v.cpu_count);
    kint(&b, "ticks", p->end.ticks);
    kint(&b, "errors", p->end.errors);
    report__sb_printf(&b,
                      "\"error_kinds\":{\"unreadable_ticks\":%" PRIu64 ",\"torn_stacks\":%" PRIu64
                      ",\"bad_memory_records\":%" PRIu64 "},\n",
                      p->end.err_rounds, p->end.err_torn, p->end.err_records);
    knum(&b, "rate_achieved_hz", p->end.rate_achieved_hz, 1);
    kint(&b, "dropped", p->end.dropped);
    kint(&b, "truncated", p->truncated);
    report__sb_printf(&b, "\"late\":{\"count\":%" PRIu64 ",", p->end.late);
    knum(&b, "mean_ms", p->end.late_mean_ms, 3);
    knum(&b, "max_ms", p->end.late_max_ms, 3);
    unc(&b);
    report__sb_puts(&b, "},\n");
    kbool(&b, "target_exited", p->end.target_exited);
    if (p->end.nprocesses) {
        key(&b, "processes");
        report__sb_putc(&b, '[');
        for (size_t i = 0; i < p->end.nprocesses; i++) {
            const report_process_t *q = &p->end.processes[i];
            report__sb_putc(&b, '{');
            kint(&b, "pid", (uint64_t)q->pid);
            kstr(&b, "command", q->command);
            kstr(&b, "python_version", q->python_version);
            kint(&b, "samples", q->samples);
            knum(&b, "cpu_s", (double)q->cpu_ns / 1e9, 6);
            kbool(&b, "exited", q->exited);
            kstr(&b, "note", q->note);
            unc(&b);
            report__sb_puts(&b, "},");
        }
        unc(&b);
        report__sb_puts(&b, "],\n");
    }
    kstr(&b, "unit", v.use_weight ? "nanoseconds" : "samples");
    knum(&b, "cpu_s", v.use_weight ? (double)v.cpu_total / 1e9 : 0.0, 6);
    double g = report__gil_pct(&v);
    if (g >= 0)
        knum(&b, "gil_held_pct", g, 2);
    report__sb_putc(&b, '\n');
    write_lines(&b, &v);
    if ((rc = report__sb_flush(&b, out)) < 0)
        goto out;
    write_functions(&b, &v);
    if ((rc = write_threads(&b, &v)) < 0)
        goto out;
    if (v.has_memory && (rc = write_memory(&b, &v)) < 0)
        goto out;
    if ((rc = write_stacks(&b, &v, out)) < 0)
        goto out;
    unc(&b);
    while (b.len && (b.buf[b.len - 1] == '\n' || b.buf[b.len - 1] == ','))
        b.buf[--b.len] = 0;
    report__sb_puts(&b, "\n}\n");
    rc = report__sb_flush(&b, out);
out:
    report__sb_free(&b);
    report__view_free(&v);
    (void)o;
    return rc;
}
