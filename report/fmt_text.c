/* fmt_text.c - the terminal report: header, hottest lines with their source, functions. */
#include "report_internal.h"

#include <inttypes.h>
#include <string.h>

#include "scry_err.h"

#define LOC_MAX 40 /* columns of "file:line" */

typedef struct text {
    report__sb_t b;
    int color;
} text_t;

static void on(text_t *t, const char *sgr)
{
    if (t->color)
        report__sb_printf(&t->b, "\x1b[%sm", sgr);
}

static void off(text_t *t)
{
    if (t->color)
        report__sb_puts(&t->b, "\x1b[0m");
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void pct_col(text_t *t, double x)
{
    if (x >= 20)
        on(t, "1;31");
    else if (x >= 5)
        on(t, "33");
    else if (x < 0.05)
        on(t, "2");
    report__sb_printf(&t->b, " %6.1f%%", x);
    off(t);
}

/* Appends at most MAXCOLS code points of S (LEN bytes), printable only, tabs as spaces. */
static void put_clean(report__sb_t *b, const char *s, size_t len, size_t maxcols)
{
    char tmp[4096];
    if (!s)
        return;
    if (len >= sizeof tmp)
        len = sizeof tmp - 1;
    memcpy(tmp, s, len);
    tmp[len] = 0;
    const char *p = tmp;
    size_t cols = 0;
    while (*p) {
        uint32_t c = report__utf8_next(&p);
        if (cols + 1 > maxcols) {
            report__sb_puts(b, "\xe2\x80\xa6"); /* … */
            return;
        }
        if (c == '\t') {
            report__sb_putc(b, ' ');
        } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0)) {
            report__sb_putc(b, '?');
        } else {
            report__sb_put_cp(b, c);
        }
        cols++;
    }
}

/* Appends "file:line" cut from the left to LOC_MAX columns; returns columns written. */
static size_t put_loc(report__sb_t *b, const char *file, int32_t line)
{
    char num[16];
    snprintf(num, sizeof num, ":%d", (int)line);
    const char *f = file && file[0] ? file : "?";
    size_t cols = 0;
    for (const char *p = f; *p;) {
        report__utf8_next(&p);
        cols++;
    }
    size_t budget = LOC_MAX - strlen(num);
    const char *p = f;
    if (cols > budget) {
        size_t skip = cols - budget + 1;
        while (skip--)
            report__utf8_next(&p);
        report__sb_puts(b, "\xe2\x80\xa6");
        cols = budget;
    }
    put_clean(b, p, strlen(p), budget);
    report__sb_puts(b, num);
    return cols + strlen(num);
}

static void spark(report__sb_t *b, const report__line_t *l)
{
    static const char *blocks[8] = {"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84",
                                    "\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88"};
    float lo = 0, hi = 0;
    for (uint32_t i = 0; i < l->ntrend; i++) {
        lo = l->trend[i] < lo ? l->trend[i] : lo;
        hi = l->trend[i] > hi ? l->trend[i] : hi;
    }
    for (uint32_t i = 0; i < REPORT__TREND_MAX; i++) {
        if (i >= l->ntrend) {
            report__sb_putc(b, ' ');
            continue;
        }
        int k = hi > lo ? (int)((l->trend[i] - lo) / (hi - lo) * 7.0f + 0.5f) : 0;
        report__sb_puts(b, blocks[k < 0 ? 0 : k > 7 ? 7 : k]);
    }
}

/* --subprocesses: a line per process of the program, its share of the CPU time. */
static void processes(text_t *t, const report_profile_t *p)
{
    uint64_t total = 0;
    for (size_t i = 0; i < p->end.nprocesses; i++)
        total += p->end.processes[i].cpu_ns;
    report__sb_printf(&t->b, "processes (%zu):\n", p->end.nprocesses);
    for (size_t i = 0; i < p->end.nprocesses; i++) {
        const report_process_t *q = &p->end.processes[i];
        report__sb_printf(&t->b, "  pid %-7d %5.1f%%  %7" PRIu64 " samples  ", (int)q->pid,
                          total ? 100.0 * (double)q->cpu_ns / (double)total : 0.0, q->samples);
        if (q->python_version[0])
            report__sb_printf(&t->b, "Python %-8s ", q->python_version);
        put_clean(&t->b, q->command, strlen(q->command), 100);
        if (q->exited)
            report__sb_puts(&t->b, " (exited)");
        if (q->note[0]) {
            report__sb_puts(&t->b, " (not sampled: ");
            put_clean(&t->b, q->note, strlen(q->note), 160);
            report__sb_putc(&t->b, ')');
        }
        report__sb_putc(&t->b, '\n');
    }
}

static void header(text_t *t, const report__view_t *v)
{
    const report_profile_t *p = v->p;
    on(t, "1");
    report__sb_printf(&t->b, "scry: pid %d", (int)p->meta.pid);
    off(t);
    if (p->meta.ns_pid > 0)
        report__sb_printf(&t->b, " [pid %d in its namespace]", (int)p->meta.ns_pid);
    const report_container_t *ct = p->meta.container;
    if (ct && ct->id) /* the summary's form: runtime and the id's first 12 digits */
        report__sb_printf(&t->b, " in container %s%s%.12s", ct->runtime ? ct->runtime : "",
                          ct->runtime && ct->runtime[0] ? ":" : "", ct->id);
    if (p->meta.python_version)
        report__sb_printf(&t->b, ", Python %s", p->meta.python_version);
    if (p->meta.command && p->meta.command[0]) {
        report__sb_puts(&t->b, ": ");
        put_clean(&t->b, p->meta.command, strlen(p->meta.command), 200);
    }
    report__sb_printf(&t->b, "\nduration %.2f s, %" PRIu64 " samples", v->duration_s, v->cpu_count);
    if (p->meta.rate_hz > 0)
        report__sb_printf(&t->b, " at %.0f Hz", p->meta.rate_hz);
    if (p->end.rate_achieved_hz > 0)
        report__sb_printf(&t->b, " (%.0f Hz achieved)", p->end.rate_achieved_hz);
    if (p->nsamples > v->cpu_count)
        report__sb_printf(&t->b, ", %" PRIu64 " memory samples", p->nsamples - v->cpu_count);
    report__sb_printf(&t->b, ", %" PRIu64 " errors", p->end.errors);
    if (p->end.errors)
        report__sb_printf(&t->b,
                          " (%" PRIu64 " unreadable ticks, %" PRIu64
                          " torn stacks dropped, %" PRIu64 " bad memory records)",
                          p->end.err_rounds, p->end.err_torn, p->end.err_records);
    if (p->end.dropped)
        report__sb_printf(&t->b, ", %" PRIu64 " dropped", p->end.dropped);
    if (p->truncated)
        report__sb_printf(&t->b, ", %" PRIu64 " truncated stacks", p->truncated);
    if (p->end.late)
        report__sb_printf(&t->b, ", %" PRIu64 " late ticks (max %.1f ms)", p->end.late,
                          p->end.late_max_ms);
    if (p->end.target_exited) {
        on(t, "33");
        report__sb_puts(&t->b, " (target exited)");
        off(t);
    }
    report__sb_putc(&t->b, '\n');
    if (p->end.nprocesses)
        processes(t, p);
    double gil = report__gil_pct(v);
    if (gil >= 0)
        report__sb_printf(&t->b, "GIL held %.1f%% %s\n", gil, report__gil_unit(v));
    if (v->has_memory)
        report__sb_printf(&t->b, "memory: peak %.1f MiB, net %.1f MiB at the end\n",
                          (double)p->mem_peak / REPORT__MB, (double)p->mem_net / REPORT__MB);
}

/* One line per file among the first TOP hot lines whose source could not be read, with the
 * reason (the lines above show "# in FUNCTION" instead of the text). */
static void missing_source(text_t *t, const report__view_t *v, uint32_t top, report__src_t *src,
                           size_t width)
{
    const char *seen[8];
    uint32_t nseen = 0;
    for (uint32_t k = 0; k < v->nline_order && k < top && nseen < 8; k++) {
        const report__line_t *l = &v->p->lines[v->line_order[k]];
        int err = l->kind == SCRY_FRAME_PYTHON ? report__src_error(src, l->file) : 0;
        if (err >= 0 || err == SCRY_E_NOSYS || !l->file || l->file[0] == '<')
            continue;
        uint32_t s = 0;
        while (s < nseen && seen[s] != l->file)
            s++;
        if (s < nseen)
            continue;
        seen[nseen++] = l->file;
        on(t, "2");
        report__sb_puts(&t->b, "  source not available: ");
        put_clean(&t->b, l->file, strlen(l->file), width);
        report__sb_printf(&t->b, " (%s)", report__src_why(src, l->file));
        off(t);
        report__sb_putc(&t->b, '\n');
    }
    uint32_t cut = report__src_cut(src);
    if (cut) {
        on(t, "2");
        report__sb_printf(&t->b,
                          "  the source of %u file%s was not read: the report's source "
                          "budget (%s) is spent",
                          cut, cut == 1 ? "" : "s", REPORT__SRC_BUDGET_TEXT);
        off(t);
        report__sb_putc(&t->b, '\n');
    }
}

static void lines(text_t *t, const report__view_t *v, const report_options_t *o, report__src_t *src)
{
    const report_profile_t *p = v->p;
    uint32_t top = o->top_lines > 0 ? (uint32_t)o->top_lines : 20;
    size_t width = o->width_text > 0 ? (size_t)o->width_text : 72;
    on(t, "1");
    report__sb_puts(&t->b, "\nHottest lines");
    off(t);
    if (v->use_weight)
        report__sb_printf(&t->b, " (%% of %.3f s sampled)", (double)v->cpu_total / 1e9);
    report__sb_puts(&t->b, "\n  %python %native %system");
    if (v->has_memory)
        report__sb_printf(&t->b, " %9s %9s %9s  %-27s", "alloc MiB", "net MiB", "copy MiB/s",
                          "trend");
    report__sb_puts(&t->b, "  line\n");
    for (uint32_t k = 0; k < v->nline_order && k < top; k++) {
        uint32_t i = v->line_order[k];
        const report__line_t *l = &p->lines[i];
        const uint64_t *c = v->line_cpu + (size_t)i * REPORT__NCLASS;
        report__sb_putc(&t->b, ' ');
        pct_col(t, pct(c[SCRY_CLASS_PYTHON], v->cpu_total));
        pct_col(t, pct(c[SCRY_CLASS_NATIVE], v->cpu_total));
        pct_col(t, pct(c[SCRY_CLASS_SYSTEM], v->cpu_total));
        if (v->has_memory) {
            report__sb_printf(&t->b, " %9.1f %9.1f %9.1f  ", (double)l->alloc_bytes / REPORT__MB,
                              (double)l->net / REPORT__MB,
                              v->duration_s > 0 ? (double)l->copy_bytes / REPORT__MB / v->duration_s
                                                : 0.0);
            on(t, "36");
            spark(&t->b, l);
            off(t);
        }
        report__sb_puts(&t->b, "  ");
        on(t, "36");
        size_t cols;
        if (l->kind == SCRY_FRAME_PYTHON) {
            cols = put_loc(&t->b, l->file, l->line);
        } else { /* no Python frame: the native/other leaf */
            report__sb_t name = {0};
            report__frame_t fr = {l->function, l->file, l->line, l->kind};
            report__sb_frame(&name, &fr);
            if (!name.oom)
                put_clean(&t->b, name.buf, name.len, LOC_MAX);
            report__sb_free(&name);
            cols = LOC_MAX;
        }
        off(t);
        size_t n = 0;
        const char *s =
            l->kind == SCRY_FRAME_PYTHON ? report__src_line(src, l->file, l->line, &n) : NULL;
        if (s) {
            while (n && (*s == ' ' || *s == '\t'))
                s++, n--;
            for (; cols < LOC_MAX; cols++)
                report__sb_putc(&t->b, ' ');
            report__sb_puts(&t->b, "  ");
            put_clean(&t->b, s, n, width);
        } else if (l->kind == SCRY_FRAME_PYTHON) {
            for (; cols < LOC_MAX; cols++)
                report__sb_putc(&t->b, ' ');
            report__sb_puts(&t->b, "  ");
            on(t, "2");
            report__sb_puts(&t->b, "# in ");
            put_clean(&t->b, l->function, strlen(l->function ? l->function : ""), width);
            off(t);
        }
        report__sb_putc(&t->b, '\n');
    }
    missing_source(t, v, top, src, width);
}

static void functions(text_t *t, const report__view_t *v, const report_options_t *o)
{
    uint32_t top = o->top_functions > 0 ? (uint32_t)o->top_functions : 10;
    on(t, "1");
    report__sb_puts(&t->b, "\nHottest functions\n");
    off(t);
    report__sb_puts(&t->b, "   %total   %self  function\n");
    for (uint32_t k = 0; k < v->nfuncs && k < top; k++) {
        const report__func_t *f = &v->funcs[v->func_order[k]];
        uint64_t self = f->self_value[0] + f->self_value[1] + f->self_value[2];
        report__sb_putc(&t->b, ' ');
        pct_col(t, pct(f->total_value, v->cpu_total));
        pct_col(t, pct(self, v->cpu_total));
        report__sb_puts(&t->b, "  ");
        const char *fn = f->function ? f->function : "";
        put_clean(&t->b, fn, strlen(fn), 60);
        if (f->kind == SCRY_FRAME_NATIVE && f->file && f->file[0]) {
            report__sb_puts(&t->b, " (");
            put_clean(&t->b, f->file, strlen(f->file), 60);
            report__sb_putc(&t->b, ')');
        } else if (f->kind == SCRY_FRAME_PYTHON) {
            report__sb_puts(&t->b, " (");
            on(t, "36");
            put_loc(&t->b, f->file, f->first_line);
            off(t);
            report__sb_putc(&t->b, ')');
        }
        report__sb_putc(&t->b, '\n');
    }
}

static void leaks(text_t *t, const report__view_t *v)
{
    const report_profile_t *p = v->p;
    int any = 0;
    for (uint32_t k = 0; k < v->nline_order; k++) {
        const report__line_t *l = &p->lines[v->line_order[k]];
        double score = report__leak_score(l, NULL);
        if (!report__likely_leak(p, l))
            continue;
        if (any == 10) {
            report__sb_puts(&t->b, "  ...\n");
            break;
        }
        if (!any++) {
            on(t, "1");
            report__sb_puts(&t->b, "\nPossible leaks\n");
            off(t);
        }
        report__sb_printf(&t->b, "  score %.2f  net %.1f MiB  ", score,
                          (double)l->net / REPORT__MB);
        put_loc(&t->b, l->file, l->line);
        report__sb_putc(&t->b, '\n');
    }
}

int report__write_text(report_profile_t *p, FILE *out, const report_options_t *o)
{
    report__view_t v;
    text_t t = {.color = o->color};
    int rc = report__view_build(&v, p);
    if (rc < 0)
        return rc;
    report__src_t *src = report__src_new(o);
    if (!src) {
        report__view_free(&v);
        return SCRY_E_NOMEM;
    }
    header(&t, &v);
    if (!v.nline_order) {
        report__sb_puts(&t.b, "\nno samples collected\n");
    } else {
        lines(&t, &v, o, src);
        if (v.nfuncs)
            functions(&t, &v, o);
        if (v.has_memory)
            leaks(&t, &v);
    }
    rc = report__sb_flush(&t.b, out);
    report__sb_free(&t.b);
    report__src_free(src);
    report__view_free(&v);
    return rc;
}
