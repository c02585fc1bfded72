/* fmt_collapsed.c - folded stacks for flamegraph.pl / inferno: "root;...;leaf count". */
#include "report_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "scry_err.h"

typedef struct folded {
    size_t off; /* into the text buffer */
    uint64_t value;
} folded_t;

static int folded_cmp(const void *x, const void *y, void *ctx)
{
    const char *buf = ctx;
    const folded_t *a = x, *b = y;
    return strcmp(buf + a->off, buf + b->off);
}

int report__write_collapsed(report_profile_t *p, FILE *out, const report_options_t *o)
{
    int metric = report__pick_metric(p, o);
    report__sb_t text = {0}, line = {0};
    folded_t *rows = malloc(((size_t)p->nstacks + 1) * sizeof *rows);
    size_t nrows = 0;
    int rc = 0;
    if (!rows) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    for (uint32_t si = 0; si < p->nstacks; si++) {
        const report__stack_t *st = &p->stacks[si];
        uint64_t v = report__stack_value(st, metric);
        if (!v)
            continue;
        rows[nrows].off = text.len;
        rows[nrows].value = v;
        nrows++;
        const uint32_t *ids = p->ids + st->off;
        if (!st->depth)
            report__sb_puts(&text, "<unknown>");
        for (uint32_t i = st->depth; i-- > 0;) {
            report__sb_frame(&text, &p->frames[ids[i]]);
            if (i)
                report__sb_putc(&text, ';');
        }
        report__sb_putc(&text, '\0');
    }
    if (text.oom) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    qsort_r(rows, nrows, sizeof *rows, folded_cmp, text.buf);
    for (size_t i = 0; i < nrows;) {
        uint64_t sum = 0;
        size_t j = i;
        while (j < nrows && strcmp(text.buf + rows[j].off, text.buf + rows[i].off) == 0)
            sum += rows[j++].value;
        report__sb_puts(&line, text.buf + rows[i].off);
        report__sb_printf(&line, " %" PRIu64 "\n", sum);
        if (line.len > 65536 && (rc = report__sb_flush(&line, out)) < 0)
            goto out;
        i = j;
    }
    rc = report__sb_flush(&line, out);
out:
    free(rows);
    report__sb_free(&text);
    report__sb_free(&line);
    return rc;
}
