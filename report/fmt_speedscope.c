/* fmt_speedscope.c - the speedscope.app file format (sampled profiles). */
#include "report_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "scry_err.h"

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

typedef struct ss {
    report_profile_t *p;
    report__sb_t b;
    FILE *out;
    uint32_t *index;  /* frame id -> speedscope frame index */
    uint32_t nindex;  /* frames emitted */
    uint32_t unknown; /* index of the "<unknown>" frame (empty stacks) */
    int nprofiles;
} ss_t;

static void assign(ss_t *s, const uint32_t *order, int metric)
{
    report_profile_t *p = s->p;
    for (uint32_t k = 0; k < p->nstacks; k++) {
        const report__stack_t *st = &p->stacks[order[k]];
        if (!report__stack_value(st, metric))
            continue;
        if (!st->depth && s->unknown == REPORT__NONE)
            s->unknown = s->nindex++;
        const uint32_t *ids = p->ids + st->off;
        for (uint32_t i = st->depth; i-- > 0;)
            if (s->index[ids[i]] == REPORT__NONE)
                s->index[ids[i]] = s->nindex++;
    }
}

static void write_frames(ss_t *s)
{
    report_profile_t *p = s->p;
    uint32_t *byindex = malloc(((size_t)s->nindex + 1) * sizeof *byindex);
    if (!byindex) {
        s->b.oom = 1;
        return;
    }
    for (uint32_t i = 0; i < s->nindex; i++)
        byindex[i] = REPORT__NONE;
    for (uint32_t f = 0; f < p->nframes; f++)
        if (s->index[f] != REPORT__NONE)
            byindex[s->index[f]] = f;
    report__sb_puts(&s->b, "\"shared\":{\"frames\":[");
    for (uint32_t i = 0; i < s->nindex; i++) {
        if (i)
            report__sb_putc(&s->b, ',');
        report__sb_puts(&s->b, "\n{\"name\":");
        if (byindex[i] == REPORT__NONE) {
            report__sb_json(&s->b, "<unknown>");
            report__sb_putc(&s->b, '}');
            continue;
        }
        const report__frame_t *f = &p->frames[byindex[i]];
        report__sb_json(&s->b, f->function && f->function[0] ? f->function : "<unknown>");
        if ((f->kind == SCRY_FRAME_PYTHON || f->kind == SCRY_FRAME_NATIVE) && f->file &&
            f->file[0]) {
            report__sb_puts(&s->b, ",\"file\":");
            report__sb_json(&s->b, f->file);
        }
        if (f->kind == SCRY_FRAME_PYTHON && f->line > 0)
            report__sb_printf(&s->b, ",\"line\":%d", (int)f->line);
        report__sb_putc(&s->b, '}');
    }
    report__sb_puts(&s->b, "]}");
    free(byindex);
}

/* One profile over order[from..to) of METRIC; NAME is already JSON-escaped text. */
static int write_profile(ss_t *s, const uint32_t *order, uint32_t from, uint32_t to, int metric,
                         int use_weight, const char *name, const char *unit)
{
    report_profile_t *p = s->p;
    uint64_t total = 0;
    for (uint32_t k = from; k < to; k++) {
        const report__stack_t *st = &p->stacks[order[k]];
        for (int c = 0; c < REPORT__NCLASS; c++)
            total += use_weight ? st->value[metric][c] : st->count[metric][c];
    }
    if (!total)
        return 0;
    report__sb_puts(&s->b, s->nprofiles++ ? ",\n{" : "\n{");
    report__sb_puts(&s->b, "\"type\":\"sampled\",\"name\":");
    report__sb_json(&s->b, name);
    report__sb_printf(&s->b, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%" PRIu64, unit,
                      total);
    report__sb_puts(&s->b, ",\"samples\":[");
    int first = 1;
    for (uint32_t k = from; k < to; k++) {
        const report__stack_t *st = &p->stacks[order[k]];
        if (!report__stack_value(st, metric))
            continue;
        report__sb_puts(&s->b, first ? "\n[" : ",\n[");
        first = 0;
        const uint32_t *ids = p->ids + st->off;
        if (!st->depth)
            report__sb_printf(&s->b, "%" PRIu32, s->unknown);
        for (uint32_t i = st->depth; i-- > 0;)
            report__sb_printf(&s->b, i + 1 == st->depth ? "%" PRIu32 : ",%" PRIu32,
                              s->index[ids[i]]);
        report__sb_putc(&s->b, ']');
        if (s->b.len > 65536) {
            int rc = report__sb_flush(&s->b, s->out);
            if (rc < 0)
                return rc;
        }
    }
    report__sb_puts(&s->b, "],\"weights\":[");
    first = 1;
    for (uint32_t k = from; k < to; k++) {
        const report__stack_t *st = &p->stacks[order[k]];
        if (!report__stack_value(st, metric))
            continue;
        uint64_t w = 0;
        for (int c = 0; c < REPORT__NCLASS; c++)
            w += use_weight ? st->value[metric][c] : st->count[metric][c];
        report__sb_printf(&s->b, first ? "%" PRIu64 : ",%" PRIu64, w);
        first = 0;
    }
    report__sb_puts(&s->b, "]}");
    return 0;
}

int report__write_speedscope(report_profile_t *p, FILE *out, const report_options_t *o)
{
    static const struct {
        int metric;
        const char *name;
    } mem[] = {{SCRY_METRIC_ALLOC, "memory: allocated bytes"},
               {SCRY_METRIC_FREE, "memory: freed bytes"},
               {SCRY_METRIC_COPY, "memory: copied bytes"}};
    ss_t s = {.p = p, .out = out, .unknown = REPORT__NONE};
    int rc = 0;
    uint32_t *by_tid = report__sorted_stacks(p, 1);
    uint32_t *by_text = report__sorted_stacks(p, 0);
    s.index = malloc(((size_t)p->nframes + 1) * sizeof *s.index);
    if (!by_tid || !by_text || !s.index) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < p->nframes; i++)
        s.index[i] = REPORT__NONE;
    assign(&s, by_tid, SCRY_METRIC_CPU);
    for (size_t m = 0; m < sizeof mem / sizeof mem[0]; m++)
        assign(&s, by_text, mem[m].metric);

    report__sb_puts(&s.b, "{\"$schema\":\"" SPEEDSCOPE_SCHEMA "\",\n");
    write_frames(&s);
    report__sb_puts(&s.b, ",\n\"profiles\":[");

    int use_weight = p->metric_value[SCRY_METRIC_CPU] > 0;
    const char *unit = use_weight ? "nanoseconds" : "none";
    int threaded = 0;
    for (uint32_t i = 0; i < p->nthreads; i++)
        threaded |= p->threads[i].tid != 0;
    if (threaded) {
        for (uint32_t k = 0; k < p->nstacks;) {
            int32_t tid = p->stacks[by_tid[k]].tid;
            uint32_t end = k;
            while (end < p->nstacks && p->stacks[by_tid[end]].tid == tid)
                end++;
            report__sb_t name = {0};
            const char *tn = report__thread_name(p, tid);
            report__sb_printf(&name, "thread %d", (int)tid);
            if (tn && tn[0])
                report__sb_printf(&name, " (%s)", tn);
            if (name.oom)
                s.b.oom = 1;
            else if ((rc = write_profile(&s, by_tid, k, end, SCRY_METRIC_CPU, use_weight, name.buf,
                                         unit)) < 0) {
                report__sb_free(&name);
                goto out;
            }
            report__sb_free(&name);
            k = end;
        }
    } else if ((rc = write_profile(&s, by_tid, 0, p->nstacks, SCRY_METRIC_CPU, use_weight, "cpu",
                                   unit)) < 0) {
        goto out;
    }
    for (size_t m = 0; m < sizeof mem / sizeof mem[0]; m++)
        if ((rc = write_profile(&s, by_text, 0, p->nstacks, mem[m].metric, 1, mem[m].name,
                                "bytes")) < 0)
            goto out;
    report__sb_puts(&s.b, "],\n\"name\":");
    report__sb_json(&s.b, p->meta.command && p->meta.command[0] ? p->meta.command : "scry");
    report__sb_puts(&s.b, ",\"activeProfileIndex\":0,\"exporter\":\"scry\"}\n");
    rc = report__sb_flush(&s.b, out);
out:
    free(by_tid);
    free(by_text);
    free(s.index);
    report__sb_free(&s.b);
    (void)o;
    return rc;
}
