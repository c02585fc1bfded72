/* fmt_pprof.c - the pprof protocol buffer (report/pprof/profile.proto), gzip-compressed.
 *
 * Encoded with protobuf-c from the code protoc-c generates at build time. One pprof
 * sample per (stack, class) with any value; one location per frame (leaf first in each
 * sample), one function per (name, file). Layout in docs/output-formats.md. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "scry_err.h"

typedef Perftools__Profiles__Profile pb_profile_t;
typedef Perftools__Profiles__ValueType pb_vtype_t;
typedef Perftools__Profiles__Sample pb_sample_t;
typedef Perftools__Profiles__Label pb_label_t;
typedef Perftools__Profiles__Location pb_loc_t;
typedef Perftools__Profiles__Line pb_line_t;
typedef Perftools__Profiles__Function pb_func_t;
typedef Perftools__Profiles__Mapping pb_map_t;

#define PP_MAX_TYPES  5
#define PP_MAX_LABELS 4
#define PP_CHUNK      65536
#define PP_STR_MAX    (1u << 20) /* bytes of one string kept (longer ones are cut) */

enum pp_type { T_SAMPLES, T_CPU, T_ALLOC, T_COPY, T_INUSE };

/* --- string table: index 0 is "", every string valid UTF-8 --- */

typedef struct pp_strs {
    char **v;
    uint32_t n, cap;
    uint32_t *slots; /* index + 1; 0 = empty */
    uint32_t scap;
    int oom;
} pp_strs_t;

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static uint64_t strs_hash_of(const void *ctx, uint32_t id)
{
    const pp_strs_t *t = ctx;
    return str_hash(t->v[id]);
}

/* Returns the index of S (NULL as "") in the table, adding it; 0 when out of memory (then
 * t->oom is set). Invalid UTF-8 becomes U+FFFD: proto3 strings must be valid UTF-8. */
static int64_t pp_str(pp_strs_t *t, const char *s)
{
    report__sb_t b = {0};
    const char *p = s ? s : "";
    while (*p && b.len < PP_STR_MAX)
        report__sb_put_cp(&b, report__utf8_next(&p));
    const char *key = b.buf ? b.buf : "";
    if (b.oom || ((t->n + 1) * 2 > t->scap &&
                  report__rehash(t, &t->slots, &t->scap, t->n, 1024, strs_hash_of) < 0))
        goto oom;
    uint32_t mask = t->scap - 1;
    uint32_t j = (uint32_t)str_hash(key) & mask;
    for (uint32_t slot; (slot = t->slots[j]) != 0; j = (j + 1) & mask) {
        if (strcmp(t->v[slot - 1], key) == 0) {
            report__sb_free(&b);
            return slot - 1;
        }
    }
    char **nv = report__grow(t->v, &t->cap, sizeof *nv, t->n + 1, 256);
    if (!nv)
        goto oom;
    t->v = nv;
    char *copy = strdup(key);
    if (!copy)
        goto oom;
    t->v[t->n] = copy;
    t->slots[j] = ++t->n;
    report__sb_free(&b);
    return t->n - 1;
oom:
    report__sb_free(&b);
    t->oom = 1;
    return 0;
}

static void strs_free(pp_strs_t *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        free(t->v[i]);
    free(t->v);
    free(t->slots);
}

/* --- the document --- */

typedef struct pp {
    const report_profile_t *p;
    report__view_t view;
    pp_strs_t strs;
    int ntypes;
    enum pp_type types[PP_MAX_TYPES];
    int64_t period_ns;

    pb_func_t *funcs;
    pb_func_t **funcp;
    uint32_t nfuncs;
    uint32_t *frame_func; /* frame id -> function index */

    pb_loc_t *locs;
    pb_loc_t **locp;
    pb_line_t *lines;
    pb_line_t **linep;
    uint32_t nlocs;

    pb_sample_t *samples;
    pb_sample_t **samplep;
    size_t nsamples;
    uint64_t *locids;
    int64_t *values;
    pb_label_t *labels;
    pb_label_t **labelp;
} pp_t;

static uint64_t ptr_hash(const void *a, const void *b)
{
    uint64_t h = (uint64_t)(uintptr_t)a * 0x9E3779B97F4A7C15ULL;
    h ^= (uint64_t)(uintptr_t)b * 0xC2B2AE3D27D4EB4FULL;
    return h ^ (h >> 31);
}

static const char *frame_name(const report__frame_t *f)
{
    return f->function && f->function[0] ? f->function : "<unknown>";
}

/* One function per (name, file) of the frames, one location per frame. */
static int build_functions(pp_t *x)
{
    const report_profile_t *p = x->p;
    uint32_t n = p->nframes;
    uint32_t cap = 64;
    while (cap < n * 2 + 2)
        cap *= 2;
    uint32_t *slots = calloc(cap, sizeof *slots);
    x->funcs = calloc((size_t)n + 1, sizeof *x->funcs);
    x->funcp = calloc((size_t)n + 1, sizeof *x->funcp);
    x->frame_func = calloc((size_t)n + 1, sizeof *x->frame_func);
    x->locs = calloc((size_t)n + 1, sizeof *x->locs);
    x->locp = calloc((size_t)n + 1, sizeof *x->locp);
    x->lines = calloc((size_t)n + 1, sizeof *x->lines);
    x->linep = calloc((size_t)n + 1, sizeof *x->linep);
    if (!slots || !x->funcs || !x->funcp || !x->frame_func || !x->locs || !x->locp || !x->lines ||
        !x->linep) {
        free(slots);
        return SCRY_E_NOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        const report__frame_t *f = &p->frames[i];
        uint32_t mask = cap - 1, j = (uint32_t)ptr_hash(f->function, f->file) & mask;
        uint32_t fid = REPORT__NONE;
        for (uint32_t s; (s = slots[j]) != 0; j = (j + 1) & mask) {
            const report__frame_t *o = &p->frames[s - 1];
            if (o->function == f->function && o->file == f->file) {
                fid = x->frame_func[s - 1];
                break;
            }
        }
        if (fid == REPORT__NONE) {
            fid = x->nfuncs++;
            slots[j] = i + 1;
            pb_func_t *fn = &x->funcs[fid];
            perftools__profiles__function__init(fn);
            fn->id = fid + 1;
            fn->name = pp_str(&x->strs, frame_name(f));
            /* only native symbols get a system name: pprof demangles names equal to it
             * (C++ rules), which would blank Python names such as "<module>" */
            fn->system_name = f->kind == SCRY_FRAME_NATIVE ? fn->name : 0;
            fn->filename = pp_str(&x->strs, f->file);
            fn->start_line = f->line > 0 ? f->line : 0;
            x->funcp[fid] = fn;
        } else if (f->line > 0 &&
                   (x->funcs[fid].start_line <= 0 || f->line < x->funcs[fid].start_line)) {
            x->funcs[fid].start_line = f->line;
        }
        x->frame_func[i] = fid;
        pb_line_t *ln = &x->lines[i];
        perftools__profiles__line__init(ln);
        ln->function_id = fid + 1;
        ln->line = f->line > 0 ? f->line : 0;
        x->linep[i] = ln;
        pb_loc_t *loc = &x->locs[i];
        perftools__profiles__location__init(loc);
        loc->id = (uint64_t)i + 1;
        loc->mapping_id = 1;
        loc->n_line = 1;
        loc->line = &x->linep[i];
        x->locp[i] = loc;
    }
    x->nlocs = n;
    free(slots);
    return x->strs.oom ? SCRY_E_NOMEM : 0;
}

/* Location of the synthetic "<unknown>" frame of stacks without frames (added lazily). */
static uint64_t unknown_location(pp_t *x)
{
    uint32_t i = x->p->nframes;
    if (x->nlocs > i)
        return (uint64_t)i + 1;
    pb_func_t *fn = &x->funcs[x->nfuncs];
    perftools__profiles__function__init(fn);
    fn->id = x->nfuncs + 1;
    fn->name = pp_str(&x->strs, "<unknown>");
    x->funcp[x->nfuncs++] = fn;
    perftools__profiles__line__init(&x->lines[i]);
    x->lines[i].function_id = fn->id;
    x->linep[i] = &x->lines[i];
    perftools__profiles__location__init(&x->locs[i]);
    x->locs[i].id = (uint64_t)i + 1;
    x->locs[i].mapping_id = 1;
    x->locs[i].n_line = 1;
    x->locs[i].line = &x->linep[i];
    x->locp[i] = &x->locs[i];
    x->nlocs = i + 1;
    return (uint64_t)i + 1;
}

static int64_t clamp64(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* Value of type T for class C of stack ST. */
static int64_t stack_type_value(const pp_t *x, const report__stack_t *st, enum pp_type t, int c)
{
    switch (t) {
    case T_SAMPLES:
        return clamp64(st->count[SCRY_METRIC_CPU][c]);
    case T_CPU:
        if (x->view.use_weight)
            return clamp64(st->value[SCRY_METRIC_CPU][c]);
        return clamp64(st->count[SCRY_METRIC_CPU][c] * (uint64_t)x->period_ns);
    case T_ALLOC:
        return clamp64(st->value[SCRY_METRIC_ALLOC][c]);
    case T_COPY:
        return clamp64(st->value[SCRY_METRIC_COPY][c]);
    case T_INUSE: {
        /* the line's live bytes, apportioned to its stacks by their share of its
         * allocations */
        const report__line_t *l = &x->p->lines[st->line];
        if (l->net <= 0 || !l->alloc_bytes)
            return 0;
        double v =
            (double)l->net * (double)st->value[SCRY_METRIC_ALLOC][c] / (double)l->alloc_bytes;
        return v >= 9.2e18 ? INT64_MAX : (int64_t)llround(v);
    }
    }
    return 0;
}

static const char *class_name(int c)
{
    return c == SCRY_CLASS_PYTHON ? "python" : c == SCRY_CLASS_NATIVE ? "native" : "system";
}

/* Fills label NL of a sample's LB (pointed to by LP[NL]): KEY with the number NUM or the
 * string STR (a string table index; 0 for none). Returns the next label's index. */
static size_t add_label(pb_label_t *lb, pb_label_t **lp, size_t nl, int64_t key, int64_t num,
                        int64_t str)
{
    perftools__profiles__label__init(&lb[nl]);
    lb[nl].key = key;
    lb[nl].num = num;
    lb[nl].str = str;
    lp[nl] = &lb[nl];
    return nl + 1;
}

static int build_samples(pp_t *x)
{
    const report_profile_t *p = x->p;
    uint32_t *order = report__sorted_stacks(p, 1);
    if (!order)
        return SCRY_E_NOMEM;
    /* first pass: how many samples and location ids */
    size_t ns = 0, nids = 0;
    for (uint32_t k = 0; k < p->nstacks; k++) {
        const report__stack_t *st = &p->stacks[order[k]];
        for (int c = 0; c < REPORT__NCLASS; c++) {
            for (int t = 0; t < x->ntypes; t++) {
                if (stack_type_value(x, st, x->types[t], c)) {
                    ns++;
                    nids += st->depth ? st->depth : 1;
                    break;
                }
            }
        }
    }
    int rc = SCRY_E_NOMEM;
    x->samples = calloc(ns + 1, sizeof *x->samples);
    x->samplep = calloc(ns + 1, sizeof *x->samplep);
    x->locids = calloc(nids + 1, sizeof *x->locids);
    x->values = calloc((ns + 1) * (size_t)x->ntypes, sizeof *x->values);
    x->labels = calloc((ns + 1) * PP_MAX_LABELS, sizeof *x->labels);
    x->labelp = calloc((ns + 1) * PP_MAX_LABELS, sizeof *x->labelp);
    if (!x->samples || !x->samplep || !x->locids || !x->values || !x->labels || !x->labelp)
        goto out;
    int64_t k_tid = pp_str(&x->strs, "thread_id"), k_tname = pp_str(&x->strs, "thread_name");
    /* Every sample of a containerised target carries its container id (a label, so
     * profiles of several containers can be merged and split again). */
    int64_t k_container = pp_str(&x->strs, "container_id");
    int64_t v_container = p->meta.container ? pp_str(&x->strs, p->meta.container->id) : 0;
    int64_t k_class = pp_str(&x->strs, "class"), v_class[REPORT__NCLASS];
    for (int c = 0; c < REPORT__NCLASS; c++)
        v_class[c] = pp_str(&x->strs, class_name(c));
    int32_t cur_tid = 0;
    int64_t cur_name = 0;
    int have_tid = 0;
    size_t si = 0, ii = 0;
    for (uint32_t k = 0; k < p->nstacks && si < ns; k++) {
        const report__stack_t *st = &p->stacks[order[k]];
        if (!have_tid || st->tid != cur_tid) {
            cur_tid = st->tid;
            cur_name = pp_str(&x->strs, report__thread_name(p, st->tid));
            have_tid = 1;
        }
        for (int c = 0; c < REPORT__NCLASS && si < ns; c++) {
            int64_t *vals = x->values + si * (size_t)x->ntypes;
            int any = 0;
            for (int t = 0; t < x->ntypes; t++)
                any |= (vals[t] = stack_type_value(x, st, x->types[t], c)) != 0;
            if (!any)
                continue;
            pb_sample_t *s = &x->samples[si];
            perftools__profiles__sample__init(s);
            s->value = vals;
            s->n_value = (size_t)x->ntypes;
            s->location_id = x->locids + ii;
            if (st->depth) {
                const uint32_t *ids = p->ids + st->off;
                for (uint32_t d = 0; d < st->depth; d++) /* leaf first, as stored */
                    x->locids[ii++] = (uint64_t)ids[d] + 1;
                s->n_location_id = st->depth;
            } else {
                x->locids[ii++] = unknown_location(x);
                s->n_location_id = 1;
            }
            pb_label_t *lb = x->labels + si * PP_MAX_LABELS;
            pb_label_t **lp = x->labelp + si * PP_MAX_LABELS;
            size_t nl = add_label(lb, lp, 0, k_tid, st->tid, 0);
            if (cur_name)
                nl = add_label(lb, lp, nl, k_tname, 0, cur_name);
            nl = add_label(lb, lp, nl, k_class, 0, v_class[c]);
            if (v_container)
                nl = add_label(lb, lp, nl, k_container, 0, v_container);
            s->label = lp;
            s->n_label = nl;
            x->samplep[si++] = s;
        }
    }
    x->nsamples = si;
    rc = x->strs.oom ? SCRY_E_NOMEM : 0;
out:
    free(order);
    return rc;
}

static const char *type_name(enum pp_type t)
{
    static const char *const names[] = {"samples", "cpu", "alloc_space", "copy_space",
                                        "inuse_space"};
    return names[t];
}

static const char *type_unit(enum pp_type t)
{
    return t == T_SAMPLES ? "count" : t == T_CPU ? "nanoseconds" : "bytes";
}

/* Gzips LEN bytes of BUF to OUT. Returns 0, SCRY_E_NOMEM or SCRY_E_IO. */
static int gzip_write(const uint8_t *buf, size_t len, FILE *out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    /* 15 + 16: gzip wrapper (header with mtime 0: the output stays deterministic) */
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return SCRY_E_NOMEM;
    unsigned char *chunk = malloc(PP_CHUNK);
    int rc = 0;
    if (!chunk) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    z.next_in = (unsigned char *)(uintptr_t)buf;
    size_t left = len;
    int zr;
    do {
        uInt take = left > (1u << 30) ? (1u << 30) : (uInt)left;
        if (z.avail_in == 0 && take) {
            z.next_in = (unsigned char *)(uintptr_t)(buf + (len - left));
            z.avail_in = take;
            left -= take;
        }
        z.next_out = chunk;
        z.avail_out = PP_CHUNK;
        zr = deflate(&z, left || z.avail_in ? Z_NO_FLUSH : Z_FINISH);
        if (zr == Z_STREAM_ERROR) {
            rc = SCRY_E_NOMEM;
            goto out;
        }
        size_t have = PP_CHUNK - z.avail_out;
        if (have && fwrite(chunk, 1, have, out) != have) {
            rc = SCRY_E_IO;
            goto out;
        }
    } while (zr != Z_STREAM_END);
out:
    deflateEnd(&z);
    free(chunk);
    return rc;
}

static void pp_free(pp_t *x)
{
    strs_free(&x->strs);
    report__view_free(&x->view);
    free(x->funcs);
    free(x->funcp);
    free(x->frame_func);
    free(x->locs);
    free(x->locp);
    free(x->lines);
    free(x->linep);
    free(x->samples);
    free(x->samplep);
    free(x->locids);
    free(x->values);
    free(x->labels);
    free(x->labelp);
}

int report__write_pprof(report_profile_t *p, FILE *out, const report_options_t *o)
{
    (void)o;
    pp_t x;
    memset(&x, 0, sizeof x);
    x.p = p;
    uint8_t *buf = NULL;
    int rc = report__view_build(&x.view, p);
    if (rc < 0)
        return rc;
    rc = SCRY_E_NOMEM;
    pp_str(&x.strs, ""); /* string_table[0] must be "" */

    uint64_t mem = p->metric_count[SCRY_METRIC_ALLOC] + p->metric_count[SCRY_METRIC_FREE] +
                   p->metric_count[SCRY_METRIC_COPY];
    if (p->metric_count[SCRY_METRIC_CPU] || !mem) {
        x.types[x.ntypes++] = T_SAMPLES;
        x.types[x.ntypes++] = T_CPU;
    }
    if (mem) {
        x.types[x.ntypes++] = T_ALLOC;
        x.types[x.ntypes++] = T_COPY;
        if (p->metric_count[SCRY_METRIC_FREE]) /* frees seen: the net is meaningful */
            x.types[x.ntypes++] = T_INUSE;
    }
    double rate = p->meta.rate_hz > 0 && isfinite(p->meta.rate_hz) ? p->meta.rate_hz : 0;
    x.period_ns = rate >= 1e-3 ? (int64_t)llround(1e9 / rate) : 0;

    if ((rc = build_functions(&x)) < 0 || (rc = build_samples(&x)) < 0)
        goto out;

    pb_profile_t prof;
    perftools__profiles__profile__init(&prof);
    pb_vtype_t vt[PP_MAX_TYPES], *vtp[PP_MAX_TYPES];
    for (int t = 0; t < x.ntypes; t++) {
        perftools__profiles__value_type__init(&vt[t]);
        vt[t].type = pp_str(&x.strs, type_name(x.types[t]));
        vt[t].unit = pp_str(&x.strs, type_unit(x.types[t]));
        vtp[t] = &vt[t];
    }
    prof.sample_type = vtp;
    prof.n_sample_type = (size_t)x.ntypes;
    prof.default_sample_type = vt[0].type;
    for (int t = 0; t < x.ntypes; t++)
        if (x.types[t] == T_CPU)
            prof.default_sample_type = vt[t].type;
    pb_vtype_t period_type;
    perftools__profiles__value_type__init(&period_type);
    period_type.type = pp_str(&x.strs, "cpu");
    period_type.unit = pp_str(&x.strs, "nanoseconds");
    prof.period_type = &period_type;
    prof.period = x.period_ns;
    prof.time_nanos = p->meta.start_unix_ns > 0 ? p->meta.start_unix_ns : 0;
    prof.duration_nanos = x.view.duration_s > 0 ? (int64_t)llround(x.view.duration_s * 1e9) : 0;

    int64_t comments[2];
    size_t ncomments = 0;
    {
        report__sb_t c = {0};
        report__sb_t who = {0};
        report__sb_target(&who, p);
        report__sb_printf(&c, "scry%s%s", who.len && !who.oom ? ": " : "",
                          who.len && !who.oom ? who.buf : "");
        report__sb_free(&who);
        if (p->meta.python_version)
            report__sb_printf(&c, ", Python %s", p->meta.python_version);
        comments[ncomments++] = pp_str(&x.strs, c.oom ? "scry" : c.buf);
        report__sb_free(&c);
        if (p->meta.command && p->meta.command[0])
            comments[ncomments++] = pp_str(&x.strs, p->meta.command);
    }
    prof.comment = comments;
    prof.n_comment = ncomments;

    /* One mapping, the target's program, already symbolized: consumers then neither try
     * to symbolize the (address-less) locations nor complain about a missing binary. */
    pb_map_t map, *mapp = &map;
    perftools__profiles__mapping__init(&map);
    map.id = 1;
    map.has_functions = map.has_filenames = map.has_line_numbers = 1;
    {
        const char *cmd = p->meta.command ? p->meta.command : "";
        size_t n = strcspn(cmd, " \t");
        char exe[256];
        snprintf(exe, sizeof exe, "%.*s", (int)(n < sizeof exe ? n : sizeof exe - 1), cmd);
        map.filename = pp_str(&x.strs, exe[0] ? exe : "python");
    }
    prof.mapping = &mapp;
    prof.n_mapping = 1;
    prof.sample = x.samplep;
    prof.n_sample = x.nsamples;
    prof.location = x.locp;
    prof.n_location = x.nlocs;
    prof.function = x.funcp;
    prof.n_function = x.nfuncs;
    if (x.strs.oom) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    prof.string_table = x.strs.v;
    prof.n_string_table = x.strs.n;

    size_t len = perftools__profiles__profile__get_packed_size(&prof);
    buf = malloc(len + 1);
    if (!buf) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    if (perftools__profiles__profile__pack(&prof, buf) != len) {
        rc = SCRY_E_INVAL;
        goto out;
    }
    rc = gzip_write(buf, len, out);
out:
    free(buf);
    pp_free(&x);
    return rc;
}
