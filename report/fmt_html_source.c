/* fmt_html_source.c - the HTML report's source view: for each file that matters, its active
 * lines (CPU split and memory columns) with context lines, the rest behind a toggle. */
#include "html_internal.h"

#include <stdlib.h>
#include <string.h>

#include "scry_err.h"

#define FILE_MIN_PCT  1.0 /* a file is shown with >= 1% of CPU, allocation or copies */
#define FILE_OPEN_PCT 5.0 /* files below 5% of everything start collapsed */
#define KEY_FUNCS     64  /* function names kept in a file's filter key */

typedef struct sline {
    int32_t line;
    uint64_t cpu[REPORT__NCLASS];
    report__line_t mem; /* memory merged over the functions on this line */
    uint64_t best_alloc;
    const char *function;
} sline_t;

typedef struct sfile {
    const char *file;
    int user; /* the user's code: listed first */
    uint64_t cpu, alloc, copy;
    uint32_t first, n; /* its lines in the sline array, by line number */
} sfile_t;

static const char *nz(const char *s)
{
    return s ? s : "";
}

static int line_cmp(const void *x, const void *y, void *ctx)
{
    const report_profile_t *p = ctx;
    const report__line_t *a = &p->lines[*(const uint32_t *)x], *b = &p->lines[*(const uint32_t *)y];
    int c = a->file == b->file ? 0 : strcmp(nz(a->file), nz(b->file));
    if (c)
        return c;
    if (a->line != b->line)
        return a->line < b->line ? -1 : 1;
    return strcmp(nz(a->function), nz(b->function));
}

static int file_cmp(const void *x, const void *y)
{
    const sfile_t *a = x, *b = y;
    if (a->user != b->user)
        return a->user ? -1 : 1;
    if (a->cpu != b->cpu)
        return a->cpu > b->cpu ? -1 : 1;
    if (a->alloc != b->alloc)
        return a->alloc > b->alloc ? -1 : 1;
    if (a->copy != b->copy)
        return a->copy > b->copy ? -1 : 1;
    return strcmp(nz(a->file), nz(b->file));
}

static void merge_mem(sline_t *s, const report__line_t *l)
{
    report__line_t *m = &s->mem;
    m->alloc_bytes += l->alloc_bytes;
    m->alloc_py_bytes += l->alloc_py_bytes;
    m->free_bytes += l->free_bytes;
    m->copy_bytes += l->copy_bytes;
    m->allocs += l->allocs;
    m->frees += l->frees;
    m->net += l->net;
    m->peak += l->peak; /* an upper bound when several functions share the line */
    if (l->alloc_bytes >= s->best_alloc && l->ntrend) {
        s->best_alloc = l->alloc_bytes;
        m->ntrend = l->ntrend;
        memcpy(m->trend, l->trend, sizeof m->trend);
    }
}

/* Groups the active Python lines by (file, line). Returns 0 or SCRY_E_NOMEM. */
static int collect(const report__view_t *v, sline_t **out_lines, uint32_t *out_nl,
                   sfile_t **out_files, uint32_t *out_nf)
{
    const report_profile_t *p = v->p;
    uint32_t *ids = malloc(((size_t)v->nline_order + 1) * sizeof *ids);
    sline_t *sl = calloc((size_t)v->nline_order + 1, sizeof *sl);
    sfile_t *sf = calloc((size_t)v->nline_order + 1, sizeof *sf);
    if (!ids || !sl || !sf) {
        free(ids);
        free(sl);
        free(sf);
        return SCRY_E_NOMEM;
    }
    uint32_t n = 0, nl = 0, nf = 0;
    for (uint32_t k = 0; k < v->nline_order; k++) {
        const report__line_t *l = &p->lines[v->line_order[k]];
        if (l->kind == SCRY_FRAME_PYTHON && l->line > 0 && l->file && l->file[0])
            ids[n++] = v->line_order[k];
    }
    qsort_r(ids, n, sizeof *ids, line_cmp, (void *)p);
    for (uint32_t k = 0; k < n; k++) {
        const report__line_t *l = &p->lines[ids[k]];
        const uint64_t *c = v->line_cpu + (size_t)ids[k] * REPORT__NCLASS;
        int new_file = !nf || strcmp(sf[nf - 1].file, l->file) != 0;
        if (new_file) {
            sf[nf].file = l->file;
            sf[nf].user = l->user || (p->meta.flags & REPORT_F_ALL_LINES);
            sf[nf].first = nl;
            nf++;
        }
        if (new_file || sl[nl - 1].line != l->line) {
            sl[nl].line = l->line;
            sl[nl].function = l->function;
            nl++;
            sf[nf - 1].n++;
        }
        sline_t *s = &sl[nl - 1];
        for (int i = 0; i < REPORT__NCLASS; i++) {
            s->cpu[i] += c[i];
            sf[nf - 1].cpu += c[i];
        }
        merge_mem(s, l);
        sf[nf - 1].alloc += l->alloc_bytes;
        sf[nf - 1].copy += l->copy_bytes;
    }
    free(ids);
    *out_lines = sl, *out_nl = nl, *out_files = sf, *out_nf = nf;
    return 0;
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

int report__html_file_index(const report__html_t *h, const char *file)
{
    for (uint32_t i = 0; i < h->nfiles; i++)
        if (h->files[i] == file || strcmp(h->files[i], nz(file)) == 0)
            return (int)i;
    return -1;
}

typedef struct emit {
    report__html_t *h;
    const sfile_t *f;
    const sline_t *lines; /* the file's active lines, by line number */
    uint32_t fi;
    uint64_t max_cpu, max_alloc; /* over the whole profile: heat scale */
} emit_t;

static void put_source(report__sb_t *b, report__src_t *src, const char *file, int32_t line,
                       const char *function)
{
    size_t n = 0;
    const char *s = report__src_line(src, file, line, &n);
    if (!s) {
        if (function) {
            report__sb_puts(b, "<td class=\"code sc-none\"># in ");
            report__sb_xml(b, function, 200);
            report__sb_puts(b, "</td>");
        } else {
            report__sb_puts(b, "<td class=\"code\"></td>");
        }
        return;
    }
    /* the line is NUL-terminated in the cache: S[n] is 0 or the '\r' dropped */
    char tmp[4 * REPORT__HTML_SRC_MAXCP + 4];
    size_t take = n < sizeof tmp - 1 ? n : sizeof tmp - 1;
    memcpy(tmp, s, take);
    tmp[take] = 0;
    report__sb_puts(b, "<td class=\"code\">");
    report__sb_xml(b, tmp, REPORT__HTML_SRC_MAXCP);
    size_t cps = 0;
    for (const char *q = tmp; *q && cps <= REPORT__HTML_SRC_MAXCP;) {
        report__utf8_next(&q);
        cps++;
    }
    if (cps > REPORT__HTML_SRC_MAXCP || take < n)
        report__sb_puts(b, "\xe2\x80\xa6");
    report__sb_puts(b, "</td>");
}

static void row(emit_t *e, int32_t line, const sline_t *act, int far)
{
    report__sb_t *b = &e->h->b;
    const report__view_t *v = e->h->v;
    if (act) {
        uint64_t tot = act->cpu[0] + act->cpu[1] + act->cpu[2];
        double heat = e->max_cpu ? (double)tot / (double)e->max_cpu : 0;
        double mheat = e->max_alloc ? (double)act->mem.alloc_bytes / (double)e->max_alloc : 0;
        heat = heat > mheat ? heat : mheat;
        report__sb_printf(b, "<tr class=\"hot\" id=\"L%u-%d\" style=\"--h:%.2f\">", e->fi,
                          (int)line, 0.08 + 0.47 * heat);
        report__sb_printf(b, "<td class=\"ln\">%d</td><td>", (int)line);
        if (tot)
            report__html_bar(b, v, act->cpu);
        report__sb_puts(b, "</td><td class=\"n\"><b>");
        report__html_pct(b, pct(tot, v->cpu_total), 1);
        report__sb_puts(b, "</b></td>");
        for (int c = 0; c < REPORT__NCLASS; c++) {
            report__sb_puts(b, "<td class=\"n\">");
            report__html_pct(b, pct(act->cpu[c], v->cpu_total), 1);
            report__sb_puts(b, "</td>");
        }
        if (e->h->mem)
            report__html_mem_cells(b, v, &act->mem, 1);
        put_source(b, e->h->src, e->f->file, line, act->function);
    } else {
        report__sb_printf(b, "<tr%s><td class=\"ln\">%d</td><td colspan=\"%d\"></td>",
                          far ? " class=\"far\"" : "", (int)line,
                          5 + (e->h->mem ? REPORT__HTML_MEM_COLS : 0));
        put_source(b, e->h->src, e->f->file, line, NULL);
    }
    report__sb_puts(b, "</tr>\n");
}

static void gap(emit_t *e, int64_t from, int64_t to)
{
    int ncols = 7 + (e->h->mem ? REPORT__HTML_MEM_COLS : 0);
    if (to >= from)
        report__sb_printf(&e->h->b,
                          "<tr class=\"gap\"><td colspan=\"%d\">\xe2\x8b\xaf %lld line%s"
                          "</td></tr>\n",
                          ncols, (long long)(to - from + 1), to > from ? "s" : "");
}

/* Rows of one file: active lines and their context; with WHOLE (the file has NLINES <=
 * REPORT__HTML_WHOLE_MAX lines and no active line past its end) every other line as a
 * hidden "far" row. Without source (NLINES 0) only the active lines. */
static void file_rows(emit_t *e, int32_t nlines, int whole)
{
    const sline_t *a = e->lines;
    uint32_t na = e->f->n, k = 0;
    int64_t ctx = nlines > 0 ? REPORT__HTML_CONTEXT : 0;
    int64_t next = 1; /* next line not yet emitted */
    while (k < na) {
        /* one window: merged [active - ctx, active + ctx] ranges */
        int64_t lo = (int64_t)a[k].line - ctx, hi = (int64_t)a[k].line + ctx;
        if (lo < next)
            lo = next;
        uint32_t j = k;
        while (j + 1 < na && (int64_t)a[j + 1].line - ctx <= hi + 1) {
            j++;
            if ((int64_t)a[j].line + ctx > hi)
                hi = (int64_t)a[j].line + ctx;
        }
        if (nlines > 0 && hi > nlines)
            hi = a[j].line > nlines ? a[j].line : nlines;
        if (lo > next && nlines > 0) /* without source the file's length is unknown */
            gap(e, next, lo - 1);
        if (whole)
            for (int64_t l = next; l < lo; l++)
                row(e, (int32_t)l, NULL, 1);
        for (int64_t l = lo; l <= hi; l++) {
            if (k <= j && a[k].line == l)
                row(e, (int32_t)l, &a[k++], 0);
            else
                row(e, (int32_t)l, NULL, 0);
        }
        next = hi + 1;
        k = j + 1;
    }
    if (whole && next <= nlines) {
        gap(e, next, nlines);
        for (int64_t l = next; l <= nlines; l++)
            row(e, (int32_t)l, NULL, 1);
    }
}

/* Lines of FILE that the source cache can give, up to REPORT__HTML_WHOLE_MAX + 1. */
static int32_t count_lines(report__src_t *src, const char *file)
{
    size_t n;
    if (!report__src_line(src, file, 1, &n))
        return 0;
    if (report__src_line(src, file, REPORT__HTML_WHOLE_MAX + 1, &n))
        return REPORT__HTML_WHOLE_MAX + 1;
    int32_t lo = 1, hi = REPORT__HTML_WHOLE_MAX; /* last readable line, by bisection */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (report__src_line(src, file, mid, &n))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static void file_head(emit_t *e, int open, int32_t nlines, int whole)
{
    report__sb_t *b = &e->h->b;
    const report__view_t *v = e->h->v;
    const sfile_t *f = e->f;
    /* filter key: the path and the functions of its active lines */
    report__sb_puts(b, "<details class=\"sc-file\" data-k=\"");
    report__sb_xml(b, f->file, 1000);
    const char *seen[KEY_FUNCS];
    uint32_t nseen = 0;
    for (uint32_t i = 0; i < f->n && nseen < KEY_FUNCS; i++) {
        const char *fn = e->lines[i].function;
        uint32_t s = 0;
        while (s < nseen && seen[s] != fn)
            s++;
        if (s < nseen || !fn)
            continue;
        seen[nseen++] = fn;
        report__sb_putc(b, ' ');
        report__sb_xml(b, fn, 200);
    }
    report__sb_printf(b, "\"%s><summary><span class=\"sc-fname\">", open ? " open" : "");
    report__sb_xml(b, f->file, 1000);
    report__sb_puts(b, "</span><span class=\"sc-fstat\">CPU ");
    report__html_pct(b, pct(f->cpu, v->cpu_total), 0);
    if (e->h->mem) {
        report__sb_puts(b, " \xc2\xb7 alloc ");
        report__html_mb(b, (double)f->alloc / REPORT__MB);
        report__sb_puts(b, " MiB");
    }
    report__sb_printf(b, " \xc2\xb7 %u active line%s", f->n, f->n == 1 ? "" : "s");
    if (!nlines) {
        int err = report__src_error(e->h->src, f->file);
        report__sb_puts(b, " \xc2\xb7 source not available");
        if (err < 0 && err != SCRY_E_NOSYS) {
            report__sb_puts(b, ": ");
            report__sb_xml(b, report__src_why(e->h->src, f->file), 100);
        }
    }
    report__sb_puts(b, "</span>");
    if (whole)
        report__sb_puts(b, "<button class=\"sc-all\" type=\"button\">show whole file</button>");
    report__sb_puts(b, "</summary>\n<table class=\"sc-code\"><thead><tr><th>line</th>"
                       "<th class=\"l\">CPU</th><th>total</th><th>Python</th><th>native</th>"
                       "<th>system</th>");
    if (e->h->mem)
        report__sb_puts(b, "<th>alloc MiB</th><th>Python alloc</th><th>net MiB</th>"
                           "<th>peak MiB</th><th>copy MiB/s</th><th>leak</th>"
                           "<th class=\"l\">trend</th>");
    report__sb_puts(b, "<th class=\"l\">source</th></tr></thead><tbody>\n");
}

int report__html_source(report__html_t *h)
{
    const report__view_t *v = h->v;
    const report_profile_t *p = h->p;
    report__sb_t *b = &h->b;
    sline_t *sl = NULL;
    sfile_t *sf = NULL;
    uint32_t nl = 0, nf = 0;
    int rc = collect(v, &sl, &nl, &sf, &nf);
    if (rc < 0)
        return rc;
    uint64_t alloc = 0, copy = 0, max_cpu = 0, max_alloc = 0;
    for (uint32_t i = 0; i < nf; i++)
        alloc += sf[i].alloc, copy += sf[i].copy;
    for (uint32_t k = 0; k < v->nline_order; k++) { /* totals include non-Python lines */
        const report__line_t *l = &p->lines[v->line_order[k]];
        if (l->kind != SCRY_FRAME_PYTHON || l->line <= 0 || !l->file || !l->file[0])
            alloc += l->alloc_bytes, copy += l->copy_bytes;
    }
    for (uint32_t i = 0; i < nl; i++) {
        uint64_t t = sl[i].cpu[0] + sl[i].cpu[1] + sl[i].cpu[2];
        max_cpu = t > max_cpu ? t : max_cpu;
        max_alloc = sl[i].mem.alloc_bytes > max_alloc ? sl[i].mem.alloc_bytes : max_alloc;
    }
    /* keep the files that matter, hottest first */
    uint32_t keep = 0;
    for (uint32_t i = 0; i < nf; i++) {
        if (pct(sf[i].cpu, v->cpu_total) >= FILE_MIN_PCT ||
            pct(sf[i].alloc, alloc) >= FILE_MIN_PCT || pct(sf[i].copy, copy) >= FILE_MIN_PCT)
            sf[keep++] = sf[i];
    }
    qsort(sf, keep, sizeof *sf, file_cmp);

    report__sb_puts(b, "<section id=\"sc-src\"><h2>Source</h2>\n");
    if (!keep) {
        report__sb_puts(b, "<p class=\"sc-empty\">No Python source line received samples.</p>");
    } else {
        report__sb_printf(b,
                          "<p class=\"sc-note\">Files with at least %.0f%% of the CPU time or "
                          "memory (%u of %u files with samples). Highlighted: lines that "
                          "received samples, with %d lines of context; bars: share of all "
                          "profiled time, split Python / native / system.</p>\n",
                          FILE_MIN_PCT, keep, nf, REPORT__HTML_CONTEXT);
    }
    h->nfiles = 0;
    for (uint32_t i = 0; i < keep && i < REPORT__HTML_MAX_FILES; i++) {
        emit_t e = {h, &sf[i], sl + sf[i].first, i, max_cpu, max_alloc};
        h->files[h->nfiles++] = sf[i].file;
        int32_t nlines = count_lines(h->src, sf[i].file);
        int whole =
            nlines > 0 && nlines <= REPORT__HTML_WHOLE_MAX && e.lines[sf[i].n - 1].line <= nlines;
        int open = i == 0 || pct(sf[i].cpu, v->cpu_total) >= FILE_OPEN_PCT ||
                   pct(sf[i].alloc, alloc) >= FILE_OPEN_PCT;
        file_head(&e, open, nlines, whole);
        file_rows(&e, nlines, whole);
        report__sb_puts(b, "</tbody></table></details>\n");
        if ((rc = report__sb_flush(b, h->out)) < 0)
            goto out;
    }
    if (keep > REPORT__HTML_MAX_FILES)
        report__sb_printf(b, "<p class=\"sc-note\">%u more files not shown.</p>\n",
                          keep - REPORT__HTML_MAX_FILES);
    report__sb_puts(b, "</section>\n");
    rc = report__sb_flush(b, h->out);
out:
    free(sl);
    free(sf);
    return rc;
}
