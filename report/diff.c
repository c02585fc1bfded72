/* diff.c - 'scry diff': two JSON reports compared (differential flame graph, changed lines).
 *
 * The JSON files come from anywhere (hostile): json-c parses them with a bounded depth, the
 * text is bounded by the caller, and every count, index and string is checked before use.
 */
#include "json_in.h"
#include "report_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "scry_err.h"

#define DIFF_DEPTH     16       /* JSON nesting accepted (the report needs 5) */
#define DIFF_MAX_ITEMS 4000000u /* frames, stacks or lines per report */
#define DIFF_MAX_STR   65536u   /* bytes of one name */
#define DIFF_MAX_COUNT (1ull << 48)
#define DIFF_TOP_LINES 20

typedef struct diff_line {
    const char *file, *function;
    int32_t line;
    uint8_t kind;
    uint8_t side; /* 0 base, 1 new */
    double pct;   /* total_pct */
} diff_line_t;

typedef struct diff_side {
    report_profile_t *prof; /* rebuilt from "stacks" */
    int loaded;
    int32_t pid;
    const char *command;
    uint64_t samples;
    diff_line_t *lines;
    uint32_t nlines;
} diff_side_t;

struct report_diff {
    strtab_t *strs; /* every string of both sides: frames compare by pointer */
    diff_side_t side[2];
};

report_diff_t *report_diff_new(void)
{
    report_diff_t *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (!(d->strs = strtab_new())) {
        free(d);
        return NULL;
    }
    return d;
}

void report_diff_free(report_diff_t *d)
{
    if (!d)
        return;
    for (int i = 0; i < 2; i++) {
        report_profile_free(d->side[i].prof);
        free(d->side[i].lines);
    }
    strtab_free(d->strs);
    free(d);
}

static json_object *field(json_object *o, const char *k, json_type t)
{
    json_object *v = NULL;
    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, k, &v) ||
        !json_object_is_type(v, t))
        return NULL;
    return v;
}

/* Interns string field K of O into *OUT. Returns 0 or a negative code. */
static int get_str(report_diff_t *d, json_object *o, const char *k, const char **out)
{
    json_object *v = field(o, k, json_type_string);
    if (!v)
        return SCRY_E_CORRUPT;
    int len = json_object_get_string_len(v);
    if (len < 0 || (unsigned)len > DIFF_MAX_STR)
        return SCRY_E_CORRUPT;
    const char *s = json_object_get_string(v);
    if (!s || memchr(s, 0, (size_t)len))
        return SCRY_E_CORRUPT;
    *out = strtab_intern_n(d->strs, s, (size_t)len);
    return *out ? 0 : SCRY_E_NOMEM;
}

/* Integer field K of O in [LO, HI] into *OUT. */
static int get_int(json_object *o, const char *k, int64_t lo, int64_t hi, int64_t *out)
{
    json_object *v = field(o, k, json_type_int);
    if (!v)
        return SCRY_E_CORRUPT;
    errno = 0;
    int64_t x = json_object_get_int64(v);
    if (errno || x < lo || x > hi)
        return SCRY_E_CORRUPT;
    *out = x;
    return 0;
}

/* Reads function, file, line, kind of O. */
static int get_loc(report_diff_t *d, json_object *o, scry_frame_t *f)
{
    const char *kind;
    int64_t line;
    int rc;
    if ((rc = get_str(d, o, "function", &f->function)) < 0 ||
        (rc = get_str(d, o, "file", &f->file)) < 0 || (rc = get_str(d, o, "kind", &kind)) < 0 ||
        (rc = get_int(o, "line", 0, INT32_MAX, &line)) < 0)
        return rc;
    int k = report__kind_of(kind);
    if (k < 0)
        return SCRY_E_CORRUPT;
    f->line = (int32_t)line;
    f->kind = (uint8_t)k;
    return 0;
}

static int load_stacks(report_diff_t *d, diff_side_t *s, json_object *root, char *msg,
                       size_t msglen)
{
    json_object *jf = field(root, "stack_frames", json_type_array);
    json_object *js = field(root, "stacks", json_type_array);
    if (!jf || !js) {
        scry_errmsg(msg, msglen, "it has no \"stacks\" (written by an older scry?)");
        return SCRY_E_CORRUPT;
    }
    size_t nf = json_object_array_length(jf), ns = json_object_array_length(js);
    if (nf > DIFF_MAX_ITEMS || ns > DIFF_MAX_ITEMS) {
        scry_errmsg(msg, msglen, "more than 4000000 stacks or frames (%zu)", nf > ns ? nf : ns);
        return SCRY_E_TOOBIG;
    }
    report_meta_t meta = {.pid = s->pid, .command = s->command};
    scry_frame_t *frames = malloc((nf + 1) * sizeof *frames);
    scry_frame_t *stack = malloc(REPORT__MAX_DEPTH * sizeof *stack);
    int rc = SCRY_E_NOMEM;
    if (!frames || !stack || !(s->prof = report_profile_new(&meta)))
        goto out;
    for (size_t i = 0; i < nf; i++)
        if ((rc = get_loc(d, json_object_array_get_idx(jf, i), &frames[i])) < 0) {
            scry_errmsg(msg, msglen, "stack_frames[%zu] is not a frame", i);
            goto out;
        }
    for (size_t i = 0; i < ns; i++) {
        json_object *e = json_object_array_get_idx(js, i);
        json_object *ids = field(e, "frames", json_type_array);
        int64_t count, value;
        rc = SCRY_E_CORRUPT;
        if (!ids || get_int(e, "samples", 0, (int64_t)DIFF_MAX_COUNT, &count) < 0 ||
            get_int(e, "value", 0, INT64_MAX / 4, &value) < 0) {
            scry_errmsg(msg, msglen, "stacks[%zu] is not a stack", i);
            goto out;
        }
        size_t depth = json_object_array_length(ids);
        if (depth > REPORT__MAX_DEPTH) {
            scry_errmsg(msg, msglen, "stacks[%zu] is deeper than 4096 frames", i);
            goto out;
        }
        for (size_t k = 0; k < depth; k++) {
            json_object *x = json_object_array_get_idx(ids, k);
            int64_t id = json_object_is_type(x, json_type_int) ? json_object_get_int64(x) : -1;
            if (id < 0 || (uint64_t)id >= nf) {
                scry_errmsg(msg, msglen, "stacks[%zu] names a frame that does not exist", i);
                goto out;
            }
            stack[depth - 1 - k] = frames[id]; /* the file is root first, samples leaf first */
        }
        if (!count)
            continue;
        scry_sample_t smp = {.metric = SCRY_METRIC_CPU,
                             .nframes = (uint32_t)depth,
                             .frames = stack,
                             .thread_name = ""};
        if ((rc = report__profile_add_cpu(s->prof, &smp, (uint64_t)count, (uint64_t)value)) < 0) {
            scry_errmsg(msg, msglen, "stacks[%zu]: totals too large or out of memory", i);
            goto out;
        }
    }
    rc = 0;
out:
    free(frames);
    free(stack);
    return rc;
}

static int load_lines(report_diff_t *d, diff_side_t *s, int which, json_object *root, char *msg,
                      size_t msglen)
{
    json_object *jl = field(root, "lines", json_type_array);
    if (!jl) {
        scry_errmsg(msg, msglen, "it has no \"lines\"");
        return SCRY_E_CORRUPT;
    }
    size_t n = json_object_array_length(jl);
    if (n > DIFF_MAX_ITEMS) {
        scry_errmsg(msg, msglen, "more than 4000000 lines (%zu)", n);
        return SCRY_E_TOOBIG;
    }
    if (!(s->lines = malloc((n + 1) * sizeof *s->lines)))
        return SCRY_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(jl, i);
        json_object *p = field(e, "total_pct", json_type_double);
        if (!p)
            p = field(e, "total_pct", json_type_int);
        scry_frame_t f;
        int rc = get_loc(d, e, &f);
        double pct = p ? json_object_get_double(p) : NAN;
        if (rc < 0 || !(pct >= 0 && pct <= 101)) {
            scry_errmsg(msg, msglen, "lines[%zu] is not a line", i);
            return rc < 0 ? rc : SCRY_E_CORRUPT;
        }
        s->lines[s->nlines++] =
            (diff_line_t){f.file, f.function, f.line, f.kind, (uint8_t)which, pct};
    }
    return 0;
}

int report_diff_load(report_diff_t *d, int which, const char *text, size_t len, char *msg,
                     size_t msglen)
{
    if (msg && msglen)
        msg[0] = 0;
    if (!d || !text || (which != 0 && which != 1) || d->side[which].loaded)
        return SCRY_E_INVAL;
    if (len > REPORT_DIFF_MAX_BYTES || len > INT32_MAX) {
        scry_errmsg(msg, msglen, "larger than 256 MB (%zu bytes)", len);
        return SCRY_E_TOOBIG;
    }
    diff_side_t *s = &d->side[which];
    int rc = SCRY_E_NOMEM;
    json_object *root;
    enum json_tokener_error jerr;
    size_t used;
    if (report_json_parse(text, len, DIFF_DEPTH, &root, &jerr, &used) != 0)
        return rc;
    while (used < len &&
           (text[used] == ' ' || text[used] == '\n' || text[used] == '\t' || text[used] == '\r'))
        used++;
    if (!root || jerr != json_tokener_success || used != len) {
        scry_errmsg(msg, msglen, "not valid JSON (%s, at byte %zu)",
                    !root && jerr == json_tokener_success ? "empty"
                    : jerr == json_tokener_continue       ? "incomplete"
                    : jerr != json_tokener_success        ? json_tokener_error_desc(jerr)
                                                          : "text after the document",
                    used);
        rc = SCRY_E_CORRUPT;
        goto out;
    }
    json_object *fmt = field(root, "format", json_type_string);
    int64_t version, pid = 0, samples = 0;
    if (!fmt || strcmp(json_object_get_string(fmt), "scry-report") != 0 ||
        get_int(root, "version", 0, 1000, &version) < 0) {
        scry_errmsg(msg, msglen, "not a scry JSON report (scry record -f json)");
        rc = SCRY_E_CORRUPT;
        goto out;
    }
    if (version != 1) {
        scry_errmsg(msg, msglen, "report version %" PRId64 " is not 1", version);
        rc = SCRY_E_UNSUPPORTED;
        goto out;
    }
    json_object *target = field(root, "target", json_type_object);
    if (target)
        get_int(target, "pid", 0, INT32_MAX, &pid);
    if (get_int(root, "samples", 0, INT64_MAX, &samples) < 0) {
        scry_errmsg(msg, msglen, "its \"samples\" is not a count");
        rc = SCRY_E_CORRUPT;
        goto out;
    }
    s->pid = (int32_t)pid;
    s->samples = (uint64_t)samples;
    s->command = "";
    if (target && field(target, "command", json_type_string) &&
        (rc = get_str(d, target, "command", &s->command)) < 0) {
        scry_errmsg(msg, msglen, "its command line is not a string of at most 64 KB");
        goto out;
    }
    if ((rc = load_lines(d, s, which, root, msg, msglen)) < 0 ||
        (rc = load_stacks(d, s, root, msg, msglen)) < 0)
        goto out;
    s->loaded = 1;
    rc = 0;
out:
    if (rc < 0) {
        report_profile_free(s->prof);
        s->prof = NULL;
        free(s->lines);
        s->lines = NULL;
        s->nlines = 0;
    }
    json_object_put(root);
    return rc;
}

/* --- the text list --- */

static int key_cmp(const diff_line_t *a, const diff_line_t *b)
{
    int c = strcmp(a->file, b->file);
    if (c)
        return c;
    if (a->line != b->line)
        return a->line < b->line ? -1 : 1;
    if ((c = strcmp(a->function, b->function)))
        return c;
    return a->kind < b->kind ? -1 : a->kind > b->kind;
}

static int by_key(const void *x, const void *y)
{
    const diff_line_t *a = x, *b = y;
    int c = key_cmp(a, b);
    return c ? c : a->side - b->side;
}

typedef struct diff_row {
    const diff_line_t *l;
    double base, new_;
} diff_row_t;

static int by_change(const void *x, const void *y)
{
    const diff_row_t *a = x, *b = y;
    double da = fabs(a->new_ - a->base), db = fabs(b->new_ - b->base);
    if (da != db)
        return da > db ? -1 : 1;
    return key_cmp(a->l, b->l);
}

static void put_side(report__sb_t *b, const char *what, const diff_side_t *s)
{
    report__sb_printf(b, "%s pid %d, %" PRIu64 " samples", what, (int)s->pid, s->samples);
    if (s->command && s->command[0]) {
        report__sb_puts(b, ": ");
        const char *c = s->command;
        for (size_t n = 0; *c && n < 100; n++) {
            uint32_t cp = report__utf8_next(&c);
            report__sb_put_cp(b, cp < 0x20 || cp == 0x7f ? '?' : cp);
        }
    }
    report__sb_putc(b, '\n');
}

static int write_text(report_diff_t *d, FILE *out, const report_options_t *o)
{
    size_t n = (size_t)d->side[0].nlines + d->side[1].nlines;
    diff_line_t *all = malloc((n + 1) * sizeof *all);
    diff_row_t *rows = malloc((n + 1) * sizeof *rows);
    report__sb_t b = {0};
    int rc = SCRY_E_NOMEM;
    if (!all || !rows)
        goto out;
    memcpy(all, d->side[0].lines, d->side[0].nlines * sizeof *all);
    memcpy(all + d->side[0].nlines, d->side[1].lines, d->side[1].nlines * sizeof *all);
    qsort(all, n, sizeof *all, by_key);
    size_t nrows = 0;
    for (size_t i = 0; i < n;) {
        diff_row_t r = {&all[i], 0, 0};
        size_t j = i;
        for (; j < n && key_cmp(&all[i], &all[j]) == 0; j++)
            *(all[j].side ? &r.new_ : &r.base) += all[j].pct;
        rows[nrows++] = r;
        i = j;
    }
    qsort(rows, nrows, sizeof *rows, by_change);
    put_side(&b, "base:", &d->side[0]);
    put_side(&b, "new: ", &d->side[1]);
    int top = o->top_lines > 0 ? o->top_lines : DIFF_TOP_LINES;
    report__sb_puts(&b, "\nLines whose share changed most (% of each profile's total)\n"
                        "    base      new   change  line\n");
    for (size_t k = 0; k < nrows && k < (size_t)top; k++) {
        const diff_row_t *r = &rows[k];
        double ch = r->new_ - r->base;
        if (fabs(ch) < 0.0005)
            break;
        report__sb_printf(&b, "%7.2f%% %7.2f%% ", r->base, r->new_);
        if (o->color)
            report__sb_puts(&b, ch > 0 ? "\x1b[1;31m" : "\x1b[1;34m");
        report__sb_printf(&b, "%+7.2f%%", ch);
        if (o->color)
            report__sb_puts(&b, "\x1b[0m");
        report__sb_puts(&b, "  ");
        scry_frame_t f = {r->l->function, r->l->file, r->l->line, r->l->kind};
        report__frame_t rf = {f.function, f.file, f.line, f.kind};
        report__sb_t name = {0};
        report__sb_frame(&name, &rf);
        const char *c = name.oom ? "" : name.buf;
        for (size_t m = 0; c && *c && m < 200; m++) {
            uint32_t cp = report__utf8_next(&c);
            report__sb_put_cp(&b, cp < 0x20 || cp == 0x7f ? '?' : cp);
        }
        report__sb_free(&name);
        report__sb_putc(&b, '\n');
    }
    rc = report__sb_flush(&b, out);
out:
    free(all);
    free(rows);
    report__sb_free(&b);
    return rc;
}

int report_diff_write(report_diff_t *d, enum report_format fmt, FILE *out,
                      const report_options_t *opt)
{
    static const report_options_t defaults = {.metric = -1};
    if (!d || !out || !d->side[0].loaded || !d->side[1].loaded)
        return SCRY_E_INVAL;
    if (!opt)
        opt = &defaults;
    int rc;
    if (fmt == REPORT_FORMAT_TEXT)
        rc = write_text(d, out, opt);
    else if (fmt == REPORT_FORMAT_FLAMEGRAPH)
        rc = report__write_flamegraph_diff(d->side[1].prof, d->side[0].prof, out, opt);
    else
        return SCRY_E_INVAL;
    if (rc == 0 && (fflush(out) != 0 || ferror(out)))
        rc = SCRY_E_IO;
    return rc;
}
