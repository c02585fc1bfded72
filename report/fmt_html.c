/* fmt_html.c - one self-contained HTML report (inline CSS, JS and SVG; no network):
 * header, source view, sortable hot-line and function tables, memory footprint, and the
 * interactive flame graph written by fmt_flamegraph.c embedded inline. */
#include "html_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "html_css.h"
#include "html_js.h"
#include "scry_err.h"

#define SRC_SNIPPET_CP 160 /* code points of source in the hot-line table */

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void meta_item(report__sb_t *b, const char *dt, const char *dd_html)
{
    report__sb_printf(b, "<div><dt>%s</dt><dd>%s</dd></div>", dt, dd_html);
}

static void head(report__html_t *h)
{
    report__sb_t *b = &h->b;
    const report_profile_t *p = h->p;
    report__sb_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                       /* nothing may be fetched: the report works from disk, offline */
                       "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src "
                       "'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src "
                       "data:\">\n<meta name=\"generator\" content=\"scry\">\n<title>scry: ");
    if (p->meta.command && p->meta.command[0])
        report__sb_xml(b, p->meta.command, 120);
    else
        report__sb_printf(b, "pid %d", (int)p->meta.pid);
    report__sb_puts(b, "</title>\n<style>\n");
    report__sb_puts(b, report__html_css);
    report__sb_puts(b, "</style>\n</head>\n<body>\n");
}

static void header(report__html_t *h)
{
    report__sb_t *b = &h->b;
    const report_profile_t *p = h->p;
    const report__view_t *v = h->v;
    char tmp[128];
    report__sb_puts(b, "<header class=\"sc-head\"><h1>scry profile<span class=\"sc-cmd\">");
    report__sb_xml(b, p->meta.command && p->meta.command[0] ? p->meta.command : "", 600);
    report__sb_puts(b, "</span></h1>\n<dl class=\"sc-meta\">");
    snprintf(tmp, sizeof tmp, "pid %d", (int)p->meta.pid);
    meta_item(b, "target", tmp);
    report__sb_puts(b, "<div><dt>Python</dt><dd>");
    report__sb_xml(b, p->meta.python_version ? p->meta.python_version : "unknown", 40);
    report__sb_puts(b, "</dd></div>");
    snprintf(tmp, sizeof tmp, "%.2f s", v->duration_s);
    meta_item(b, "duration", tmp);
    if (p->meta.rate_hz > 0)
        snprintf(tmp, sizeof tmp, "%" PRIu64 " at %.0f Hz", v->cpu_count, p->meta.rate_hz);
    else
        snprintf(tmp, sizeof tmp, "%" PRIu64, v->cpu_count);
    meta_item(b, "samples", tmp);
    if (v->use_weight) {
        snprintf(tmp, sizeof tmp, "%.3f s", (double)v->cpu_total / 1e9);
        meta_item(b, "time sampled", tmp);
    }
    if (p->nsamples > v->cpu_count) {
        snprintf(tmp, sizeof tmp, "%" PRIu64, p->nsamples - v->cpu_count);
        meta_item(b, "memory samples", tmp);
    }
    snprintf(tmp, sizeof tmp, "%" PRIu64, p->end.errors);
    meta_item(b, "errors", tmp);
    if (p->end.errors) {
        snprintf(tmp, sizeof tmp,
                 "%" PRIu64 " unreadable ticks, %" PRIu64 " torn stacks dropped, %" PRIu64
                 " bad memory records",
                 p->end.err_rounds, p->end.err_torn, p->end.err_records);
        meta_item(b, "error kinds", tmp);
    }
    if (p->end.rate_achieved_hz > 0) {
        snprintf(tmp, sizeof tmp, "%.0f Hz", p->end.rate_achieved_hz);
        meta_item(b, "rate achieved", tmp);
    }
    if (p->end.dropped) {
        snprintf(tmp, sizeof tmp, "%" PRIu64, p->end.dropped);
        meta_item(b, "dropped", tmp);
    }
    if (p->truncated) {
        snprintf(tmp, sizeof tmp, "%" PRIu64, p->truncated);
        meta_item(b, "truncated stacks", tmp);
    }
    if (p->end.late) {
        snprintf(tmp, sizeof tmp, "%" PRIu64 " (max %.1f ms)", p->end.late, p->end.late_max_ms);
        meta_item(b, "late ticks", tmp);
    }
    double gil = report__gil_pct(v);
    if (gil >= 0)
        snprintf(tmp, sizeof tmp, "%.1f%% %s", gil, report__gil_unit(v));
    else
        snprintf(tmp, sizeof tmp, "unknown");
    meta_item(b, "GIL held", tmp);
    if (v->has_memory) {
        snprintf(tmp, sizeof tmp, "%.1f MiB", (double)p->mem_peak / REPORT__MB);
        meta_item(b, "memory peak", tmp);
    }
    if (p->meta.start_unix_ns > 0) {
        time_t t = (time_t)(p->meta.start_unix_ns / 1000000000);
        struct tm tm;
        if (gmtime_r(&t, &tm) && strftime(tmp, sizeof tmp, "%Y-%m-%d %H:%M:%S UTC", &tm))
            meta_item(b, "started", tmp);
    }
    report__sb_puts(b, "</dl>\n");
    if (p->end.target_exited)
        report__sb_puts(b, "<p class=\"sc-warn\">The target exited while it was sampled; the "
                           "report holds what was collected.</p>\n");
    report__sb_puts(b, "</header>\n");
}

static void nav(report__html_t *h)
{
    report__sb_t *b = &h->b;
    report__sb_puts(b, "<nav class=\"sc-nav\"><a href=\"#sc-src\" data-tab=\"sc-src\">Source</a>"
                       "<a href=\"#sc-hot\" data-tab=\"sc-hot\">Hot lines</a>"
                       "<a href=\"#sc-fn\" data-tab=\"sc-fn\">Functions</a>");
    if (h->v->has_memory)
        report__sb_puts(b, "<a href=\"#sc-mem\" data-tab=\"sc-mem\">Memory</a>");
    report__sb_puts(b, "<a href=\"#sc-fg\" data-tab=\"sc-fg\">Flame graph</a>"
                       "<input id=\"sc-filter\" type=\"search\" placeholder=\"filter by file or "
                       "function\" aria-label=\"filter by file or function\">"
                       "<span id=\"sc-count\"></span><span class=\"sc-legend\">CPU:"
                       "<i class=\"py\"></i>Python<i class=\"nat\"></i>native"
                       "<i class=\"sys\"></i>system</span></nav>\n<main>\n");
}

/* "file:line" (or the library of a native frame) as a cell, linked to the source view. */
static void loc_cell(report__html_t *h, const char *file, int32_t line, uint8_t kind)
{
    report__sb_t *b = &h->b;
    report__sb_puts(b, "<td class=\"loc\" data-v=\"");
    report__sb_xml(b, file, 1000);
    report__sb_printf(b, ":%010d\" title=\"", (int)line);
    report__sb_xml(b, file, 1000);
    report__sb_puts(b, "\">");
    int fi = kind == SCRY_FRAME_PYTHON && line > 0 ? report__html_file_index(h, file) : -1;
    if (fi >= 0)
        report__sb_printf(b, "<a class=\"sc-goto\" href=\"#L%d-%d\">", fi, (int)line);
    report__sb_xml(b, report__base_name(file), 200);
    if (kind == SCRY_FRAME_PYTHON)
        report__sb_printf(b, ":%d", (int)line);
    if (fi >= 0)
        report__sb_puts(b, "</a>");
    report__sb_puts(b, "</td>");
}

static void pct_cell(report__sb_t *b, double x, int bold)
{
    report__sb_printf(b, "<td class=\"n\" data-v=\"%.4f\">%s", x, bold ? "<b>" : "");
    report__html_pct(b, x, 0);
    report__sb_puts(b, bold ? "</b></td>" : "</td>");
}

static void filter_key(report__sb_t *b, const char *file, const char *function)
{
    report__sb_puts(b, " data-k=\"");
    report__sb_xml(b, file, 1000);
    report__sb_putc(b, ' ');
    report__sb_xml(b, function, 500);
    report__sb_puts(b, "\"");
}

static void snippet_cell(report__html_t *h, const report__line_t *l)
{
    report__sb_t *b = &h->b;
    size_t n = 0;
    const char *s =
        l->kind == SCRY_FRAME_PYTHON ? report__src_line(h->src, l->file, l->line, &n) : NULL;
    report__sb_puts(b, "<td class=\"src\"><div>");
    if (s) {
        while (n && (*s == ' ' || *s == '\t'))
            s++, n--;
        char tmp[4 * SRC_SNIPPET_CP + 4];
        size_t take = n < sizeof tmp - 1 ? n : sizeof tmp - 1;
        memcpy(tmp, s, take);
        tmp[take] = 0;
        report__sb_xml(b, tmp, SRC_SNIPPET_CP);
    }
    report__sb_puts(b, "</div></td>");
}

static void hot_lines(report__html_t *h)
{
    report__sb_t *b = &h->b;
    const report__view_t *v = h->v;
    const report_profile_t *p = h->p;
    report__sb_puts(b, "<section id=\"sc-hot\"><h2>Hot lines</h2>\n");
    if (!v->nline_order) {
        report__sb_puts(b, "<p class=\"sc-empty\">No samples were collected.</p></section>\n");
        return;
    }
    report__sb_printf(b,
                      "<p class=\"sc-note\">Every line that received a sample (%u), hottest "
                      "first%s. Click a column to sort; shares are of all profiled time.</p>\n",
                      v->nline_order,
                      v->nline_order > REPORT__HTML_MAX_ROWS ? ", the first 500 shown" : "");
    report__sb_puts(b, "<table class=\"sc-tab sc-sort\" id=\"sc-hot-table\"><thead><tr>"
                       "<th class=\"l\">location</th><th class=\"l\">function</th>"
                       "<th data-t=\"n\">total</th><th data-t=\"n\">Python</th>"
                       "<th data-t=\"n\">native</th><th data-t=\"n\">system</th>"
                       "<th data-t=\"n\">samples</th>");
    if (h->mem)
        report__sb_puts(b, "<th data-t=\"n\">alloc MiB</th><th data-t=\"n\">Python alloc</th>"
                           "<th data-t=\"n\">net MiB</th><th data-t=\"n\">peak MiB</th>"
                           "<th data-t=\"n\">copy MiB/s</th><th data-t=\"n\">leak</th>"
                           "<th data-t=\"n\" class=\"l\">trend</th>");
    report__sb_puts(b, "<th class=\"l\">source</th></tr></thead><tbody>\n");
    for (uint32_t k = 0; k < v->nline_order && k < REPORT__HTML_MAX_ROWS; k++) {
        uint32_t i = v->line_order[k];
        const report__line_t *l = &p->lines[i];
        const uint64_t *c = v->line_cpu + (size_t)i * REPORT__NCLASS;
        report__sb_puts(b, "<tr");
        filter_key(b, l->file, l->function);
        report__sb_puts(b, ">");
        loc_cell(h, l->file, l->line, l->kind);
        report__sb_puts(b, "<td>");
        report__sb_xml(b, l->function && l->function[0] ? l->function : "<unknown>", 300);
        report__sb_puts(b, "</td>");
        pct_cell(b, pct(c[0] + c[1] + c[2], v->cpu_total), 1);
        for (int cl = 0; cl < REPORT__NCLASS; cl++)
            pct_cell(b, pct(c[cl], v->cpu_total), 0);
        report__sb_printf(b, "<td class=\"n\" data-v=\"%" PRIu64 "\">%" PRIu64 "</td>",
                          v->line_count[i], v->line_count[i]);
        if (h->mem)
            report__html_mem_cells(b, v, l, 0);
        snippet_cell(h, l);
        report__sb_puts(b, "</tr>\n");
    }
    report__sb_puts(b, "</tbody></table>");
    uint32_t cut = report__src_cut(h->src); /* source section and this table together */
    if (cut)
        report__sb_printf(b,
                          "<p class=\"sc-note\">The source of %u file%s was not read: the "
                          "report's source budget (%s) is spent.</p>",
                          cut, cut == 1 ? "" : "s", REPORT__SRC_BUDGET_TEXT);
    report__sb_puts(b, "</section>\n");
}

static void functions(report__html_t *h)
{
    report__sb_t *b = &h->b;
    const report__view_t *v = h->v;
    report__sb_puts(b, "<section id=\"sc-fn\"><h2>Functions</h2>\n");
    if (!v->nfuncs) {
        report__sb_puts(b, "<p class=\"sc-empty\">No CPU samples were collected.</p></section>\n");
        return;
    }
    report__sb_puts(b, "<p class=\"sc-note\">total: share of time with the function on the "
                       "stack; self: share attributed to its own lines (split by class).</p>\n"
                       "<table class=\"sc-tab sc-sort\" id=\"sc-fn-table\"><thead><tr>"
                       "<th class=\"l\">function</th><th class=\"l\">location</th>"
                       "<th class=\"l\">kind</th><th data-t=\"n\">total</th>"
                       "<th data-t=\"n\">self</th><th data-t=\"n\">Python</th>"
                       "<th data-t=\"n\">native</th><th data-t=\"n\">system</th>"
                       "<th data-t=\"n\">samples</th></tr></thead><tbody>\n");
    for (uint32_t k = 0; k < v->nfuncs && k < REPORT__HTML_MAX_ROWS; k++) {
        const report__func_t *f = &v->funcs[v->func_order[k]];
        uint64_t self = f->self_value[0] + f->self_value[1] + f->self_value[2];
        report__sb_puts(b, "<tr");
        filter_key(b, f->file, f->function);
        report__sb_puts(b, "><td>");
        report__sb_xml(b, f->function && f->function[0] ? f->function : "<unknown>", 300);
        report__sb_puts(b, "</td>");
        loc_cell(h, f->file, f->first_line, f->kind);
        report__sb_printf(b, "<td>%s</td>", report__kind_name(f->kind));
        pct_cell(b, pct(f->total_value, v->cpu_total), 1);
        pct_cell(b, pct(self, v->cpu_total), 0);
        for (int c = 0; c < REPORT__NCLASS; c++)
            pct_cell(b, pct(f->self_value[c], v->cpu_total), 0);
        report__sb_printf(b, "<td class=\"n\" data-v=\"%" PRIu64 "\">%" PRIu64 "</td></tr>\n",
                          f->total_count, f->total_count);
    }
    report__sb_puts(b, "</tbody></table></section>\n");
}

static void kpi(report__sb_t *b, const char *label, double mb, const char *unit)
{
    report__sb_puts(b, "<div><b>");
    report__html_mb(b, mb);
    report__sb_printf(b, " %s</b><span>%s</span></div>", unit, label);
}

static void memory(report__html_t *h)
{
    report__sb_t *b = &h->b;
    const report__view_t *v = h->v;
    const report_profile_t *p = h->p;
    uint64_t alloc = 0, freed = 0, copy = 0;
    for (uint32_t k = 0; k < v->nline_order; k++) {
        const report__line_t *l = &p->lines[v->line_order[k]];
        alloc += l->alloc_bytes, freed += l->free_bytes, copy += l->copy_bytes;
    }
    report__sb_puts(b, "<section id=\"sc-mem\"><h2>Memory</h2>\n<div class=\"sc-kpis\">");
    kpi(b, "peak footprint", (double)p->mem_peak / REPORT__MB, "MiB");
    kpi(b, "net at the end", (double)p->mem_net / REPORT__MB, "MiB");
    kpi(b, "allocated", (double)alloc / REPORT__MB, "MiB");
    kpi(b, "freed (matched)", (double)freed / REPORT__MB, "MiB");
    kpi(b, "copied", (double)copy / REPORT__MB, "MiB");
    kpi(b, "copy rate", v->duration_s > 0 ? (double)copy / REPORT__MB / v->duration_s : 0, "MiB/s");
    report__sb_puts(b, "</div>\n<p class=\"sc-note\">Sampled footprint of the program over time "
                       "(each point: the largest net in its time bucket).</p>\n");
    report__html_footprint(b, p, v->duration_s);
    /* possible leaks: still holding memory near their peak and growing */
    uint32_t nleaks = 0;
    for (uint32_t k = 0; k < v->nline_order && nleaks < 50; k++) {
        const report__line_t *l = &p->lines[v->line_order[k]];
        if (!report__likely_leak(p, l))
            continue;
        if (!nleaks++)
            report__sb_puts(b, "<h2>Possible leaks</h2>\n<table class=\"sc-tab sc-sort\"><thead>"
                               "<tr><th class=\"l\">location</th><th class=\"l\">function</th>"
                               "<th data-t=\"n\">leak score</th><th data-t=\"n\">net MiB</th>"
                               "<th data-t=\"n\">peak MiB</th><th data-t=\"n\">allocs</th>"
                               "<th data-t=\"n\">frees</th></tr></thead><tbody>\n");
        report__sb_puts(b, "<tr");
        filter_key(b, l->file, l->function);
        report__sb_puts(b, ">");
        loc_cell(h, l->file, l->line, l->kind);
        report__sb_puts(b, "<td>");
        report__sb_xml(b, l->function, 300);
        report__sb_printf(b, "</td><td class=\"n\" data-v=\"%.4f\">%.2f</td>",
                          report__leak_score(l, NULL), report__leak_score(l, NULL));
        report__sb_printf(b, "<td class=\"n\" data-v=\"%.6g\">", (double)l->net / REPORT__MB);
        report__html_mb(b, (double)l->net / REPORT__MB);
        report__sb_printf(b, "</td><td class=\"n\" data-v=\"%.6g\">", (double)l->peak / REPORT__MB);
        report__html_mb(b, (double)l->peak / REPORT__MB);
        report__sb_printf(b,
                          "</td><td class=\"n\" data-v=\"%" PRIu64 "\">%" PRIu64
                          "</td><td class=\"n\" data-v=\"%" PRIu64 "\">%" PRIu64 "</td></tr>\n",
                          l->allocs, l->allocs, l->frees, l->frees);
    }
    if (nleaks)
        report__sb_puts(b, "</tbody></table>\n");
    report__sb_puts(b, "</section>\n");
}

/* Embeds the SVG flame graph inline: fmt_flamegraph.c's document without its XML prolog. */
static int flamegraph(report__html_t *h)
{
    report__sb_t *b = &h->b;
    char *svg = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&svg, &len);
    if (!mf)
        return SCRY_E_NOMEM;
    int rc = report__write_flamegraph((report_profile_t *)h->p, mf, h->o);
    if (fclose(mf) != 0 && rc == 0)
        rc = SCRY_E_NOMEM;
    if (rc < 0) {
        free(svg);
        return rc;
    }
    report__sb_puts(b, "<section id=\"sc-fg\"><h2>Flame graph</h2>\n<p class=\"sc-note\">Click a "
                       "frame to zoom, \xe2\x80\x9cReset Zoom\xe2\x80\x9d (top left) to go back, "
                       "\xe2\x80\x9cSearch\xe2\x80\x9d (top right) to highlight frames matching "
                       "a regular expression.</p>\n<div class=\"sc-fg\">\n");
    const char *start = svg ? strstr(svg, "<svg") : NULL;
    if (start)
        report__sb_putn(b, start, len - (size_t)(start - svg));
    report__sb_puts(b, "</div></section>\n");
    free(svg);
    return 0;
}

int report__write_html(report_profile_t *p, FILE *out, const report_options_t *o)
{
    report__view_t v;
    int rc = report__view_build(&v, p);
    if (rc < 0)
        return rc;
    report__html_t h;
    memset(&h, 0, sizeof h);
    h.out = out;
    h.p = p;
    h.v = &v;
    h.o = o;
    h.mem = v.has_memory;
    h.src = report__src_new(o);
    if (!h.src) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    head(&h);
    header(&h);
    nav(&h);
    if ((rc = report__sb_flush(&h.b, out)) < 0 || (rc = report__html_source(&h)) < 0)
        goto out;
    hot_lines(&h);
    functions(&h);
    if (v.has_memory)
        memory(&h);
    if ((rc = report__sb_flush(&h.b, out)) < 0 || (rc = flamegraph(&h)) < 0)
        goto out;
    report__sb_puts(&h.b, "</main>\n<script>\n");
    report__sb_puts(&h.b, report__html_js);
    report__sb_puts(&h.b, "</script>\n</body>\n</html>\n");
    rc = report__sb_flush(&h.b, out);
out:
    report__sb_free(&h.b);
    report__src_free(h.src);
    report__view_free(&v);
    return rc;
}
