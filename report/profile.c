/* profile.c - the hot path: interning frames and stacks, counting samples. */
#include "report_internal.h"

#include <stdlib.h>
#include <string.h>

#include "scry_err.h"
#include "scry_grow.h"

static const uint64_t K = 0x9E3779B97F4A7C15ULL;

static inline uint64_t rotl5(uint64_t h)
{
    return (h << 5) | (h >> 59);
}

static inline uint64_t fmix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t hash_frame_into(uint64_t h, const char *function, const char *file,
                                       int32_t line, uint8_t kind)
{
    h = (rotl5(h) ^ (uint64_t)(uintptr_t)function) * K;
    h = (rotl5(h) ^ (uint64_t)(uintptr_t)file) * K;
    h = (rotl5(h) ^ (((uint64_t)(uint32_t)line << 8) | kind)) * K;
    return h;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

void *report__grow(void *arr, uint32_t *cap, size_t elem, uint32_t need, uint32_t first)
{
    if (need <= *cap)
        return arr;
    size_t c = *cap;
    void *n = scry_grow(arr, &c, elem, need, first, UINT32_MAX / 2);
    if (n)
        *cap = (uint32_t)c;
    return n;
}

int report__rehash(const void *ctx, uint32_t **slots, uint32_t *cap, uint32_t n, uint32_t first,
                   report__hash_of_fn hash_of)
{
    uint32_t ncap = *cap ? *cap * 2 : first;
    while (ncap < n * 2)
        ncap *= 2;
    uint32_t *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return SCRY_E_NOMEM;
    for (uint32_t id = 0; id < n; id++) {
        uint32_t j = (uint32_t)hash_of(ctx, id) & (ncap - 1);
        while (ns[j])
            j = (j + 1) & (ncap - 1);
        ns[j] = id + 1;
    }
    free(*slots);
    *slots = ns;
    *cap = ncap;
    return 0;
}

static uint64_t frame_hash(const report__frame_t *f)
{
    return fmix(hash_frame_into(0, f->function, f->file, f->line, f->kind));
}

static uint64_t frame_hash_of(const void *ctx, uint32_t id)
{
    const report_profile_t *p = ctx;
    return frame_hash(&p->frames[id]);
}

static uint64_t stack_hash_of(const void *ctx, uint32_t id)
{
    const report_profile_t *p = ctx;
    return p->stacks[id].hash;
}

static uint64_t line_hash(const char *file, const char *function, int32_t line, uint8_t kind)
{
    return fmix(hash_frame_into(1, function, file, line, kind));
}

static uint64_t line_hash_of(const void *ctx, uint32_t id)
{
    const report_profile_t *p = ctx;
    const report__line_t *l = &p->lines[id];
    return line_hash(l->file, l->function, l->line, l->kind);
}

/* Returns the frame id of F, interning it; REPORT__NONE when out of memory. */
static uint32_t intern_frame(report_profile_t *p, const scry_frame_t *f)
{
    if ((p->nframes + 1) * 2 > p->frame_slots_cap &&
        report__rehash(p, &p->frame_slots, &p->frame_slots_cap, p->nframes, 256, frame_hash_of) < 0)
        return REPORT__NONE;
    report__frame_t key = {f->function, f->file, f->line, f->kind};
    uint32_t mask = p->frame_slots_cap - 1;
    uint32_t j = (uint32_t)frame_hash(&key) & mask;
    for (uint32_t s; (s = p->frame_slots[j]) != 0; j = (j + 1) & mask) {
        const report__frame_t *e = &p->frames[s - 1];
        if (e->function == key.function && e->file == key.file && e->line == key.line &&
            e->kind == key.kind)
            return s - 1;
    }
    report__frame_t *nf = report__grow(p->frames, &p->frames_cap, sizeof *nf, p->nframes + 1, 64);
    if (!nf)
        return REPORT__NONE;
    p->frames = nf;
    p->frames[p->nframes] = key;
    p->frame_slots[j] = ++p->nframes;
    return p->nframes - 1;
}

/* Returns the line id for an attribution frame, interning it; REPORT__NONE when OOM. */
static uint32_t intern_line(report_profile_t *p, const report__frame_t *f)
{
    if ((p->nlines + 1) * 2 > p->line_slots_cap &&
        report__rehash(p, &p->line_slots, &p->line_slots_cap, p->nlines, 256, line_hash_of) < 0)
        return REPORT__NONE;
    uint32_t mask = p->line_slots_cap - 1;
    uint32_t j = (uint32_t)line_hash(f->file, f->function, f->line, f->kind) & mask;
    for (uint32_t s; (s = p->line_slots[j]) != 0; j = (j + 1) & mask) {
        const report__line_t *e = &p->lines[s - 1];
        if (e->function == f->function && e->file == f->file && e->line == f->line &&
            e->kind == f->kind)
            return s - 1;
    }
    report__line_t *nl = report__grow(p->lines, &p->lines_cap, sizeof *nl, p->nlines + 1, 64);
    if (!nl)
        return REPORT__NONE;
    p->lines = nl;
    memset(&p->lines[p->nlines], 0, sizeof *nl);
    p->lines[p->nlines].file = f->file;
    p->lines[p->nlines].function = f->function;
    p->lines[p->nlines].line = f->line;
    p->lines[p->nlines].kind = f->kind;
    p->lines[p->nlines].user = f->kind == SCRY_FRAME_PYTHON && report__user_file(p, f->file);
    p->line_slots[j] = ++p->nlines;
    return p->nlines - 1;
}

static report__thread_t *find_thread(report_profile_t *p, int32_t tid);

/* The position plus one of S's --threads frame of a known thread (its root, or just below a
 * --subprocesses process root), else 0: such frames are one per thread whatever its name
 * was at the time (a thread renamed during the recording, or named only once it ran, gets
 * one root, not one per name). Without a tid (a profile read back from a file) the label
 * alone tells threads apart. */
static uint32_t thread_rooted(const scry_sample_t *s, uint32_t depth)
{
    if (depth == 0 || s->tid == 0)
        return 0;
    uint32_t i = depth - 1;
    if (s->frames[i].kind == SCRY_FRAME_PROCESS) {
        if (i == 0)
            return 0;
        i--;
    }
    return s->frames[i].kind == SCRY_FRAME_THREAD ? i + 1 : 0;
}

/* The frame id of S's thread root at position POS - 1 (see thread_rooted), relabelled with
 * S's label: the thread's latest name is the one shown. REPORT__NONE when out of memory. */
static uint32_t thread_root(report_profile_t *p, const scry_sample_t *s, uint32_t pos)
{
    report__thread_t *t = find_thread(p, s->tid);
    if (!t)
        return REPORT__NONE;
    const scry_frame_t *f = &s->frames[pos - 1];
    if (t->root == REPORT__NONE)
        t->root = intern_frame(p, f);
    else
        p->frames[t->root].function = f->function;
    return t->root;
}

/* Creates stack entry for S (depth frames) at slot J. Returns its id or REPORT__NONE. */
static uint32_t new_stack(report_profile_t *p, const scry_sample_t *s, uint32_t depth, uint64_t h,
                          uint32_t j)
{
    if (p->nids + depth > UINT32_MAX)
        return REPORT__NONE;
    if (p->nids + depth > p->ids_cap) { /* a stack may be empty: ids stays NULL */
        uint32_t *n = scry_grow(p->ids, &p->ids_cap, sizeof *n, p->nids + depth, 1024, SIZE_MAX);
        if (!n)
            return REPORT__NONE;
        p->ids = n;
    }
    report__stack_t *ns = report__grow(p->stacks, &p->stacks_cap, sizeof *ns, p->nstacks + 1, 64);
    if (!ns)
        return REPORT__NONE;
    p->stacks = ns;
    uint32_t *ids = p->ids + p->nids;
    uint32_t attr = REPORT__NONE, uattr = REPORT__NONE;
    int all_lines = (p->meta.flags & REPORT_F_ALL_LINES) != 0;
    uint32_t tpos = thread_rooted(s, depth);
    for (uint32_t i = 0; i < depth; i++) {
        ids[i] = i + 1 == tpos ? thread_root(p, s, tpos) : intern_frame(p, &s->frames[i]);
        if (ids[i] == REPORT__NONE)
            return REPORT__NONE;
        if (s->frames[i].kind != SCRY_FRAME_PYTHON)
            continue;
        if (attr == REPORT__NONE)
            attr = i;
        if (uattr == REPORT__NONE && !all_lines && report__user_file(p, s->frames[i].file))
            uattr = i;
    }
    if (attr == REPORT__NONE && depth > 0)
        attr = 0; /* no Python frame: the leaf stands for the line */
    if (uattr == REPORT__NONE)
        uattr = attr; /* no frame of the user's: the innermost Python frame */
    report__frame_t unknown = {strtab_intern(p->strs, "<unknown>"), "", 0, SCRY_FRAME_OTHER};
    if (!unknown.function)
        return REPORT__NONE;
    uint32_t line = intern_line(p, uattr == REPORT__NONE ? &unknown : &p->frames[ids[uattr]]);
    if (line == REPORT__NONE)
        return REPORT__NONE;
    report__stack_t *st = &p->stacks[p->nstacks];
    memset(st, 0, sizeof *st);
    st->hash = h;
    st->off = (uint32_t)p->nids;
    st->depth = depth;
    st->tid = s->tid;
    st->line = line;
    st->attr = attr;
    st->uattr = uattr;
    p->nids += depth;
    p->stack_slots[j] = ++p->nstacks;
    return p->nstacks - 1;
}

/* 1 when F is a native frame with no symbol ("??", named by its library only). */
static int unknown_native(const scry_frame_t *f)
{
    return f->kind == SCRY_FRAME_NATIVE && f->function && strcmp(f->function, "??") == 0;
}

/* 1 when A and B are "??" frames of the same library. */
static int same_unknown(const scry_frame_t *a, const scry_frame_t *b)
{
    return unknown_native(a) && unknown_native(b) && a->file && b->file &&
           strcmp(a->file, b->file) == 0;
}

/* S with each run of consecutive "??" frames of one library folded into one frame (the
 * unwinder gives one per return address; a flame graph would draw a tower of identical
 * boxes): S itself when it has no such run, else TMP over P's scratch frames; NULL when
 * out of memory. */
static const scry_sample_t *fold_unknown(report_profile_t *p, const scry_sample_t *s,
                                         scry_sample_t *tmp)
{
    uint32_t n = s->nframes > REPORT__MAX_DEPTH ? REPORT__MAX_DEPTH : s->nframes;
    const scry_frame_t *f = s->frames;
    uint32_t i = 1;
    while (i < n && !same_unknown(&f[i], &f[i - 1]))
        i++;
    if (i >= n)
        return s;
    if (!p->fold && !(p->fold = malloc(REPORT__MAX_DEPTH * sizeof *p->fold)))
        return NULL;
    uint32_t k = 0;
    for (i = 0; i < n; i++) {
        if (k && same_unknown(&f[i], &p->fold[k - 1]))
            continue;
        p->fold[k++] = f[i];
    }
    *tmp = *s;
    tmp->frames = p->fold;
    tmp->nframes = k;
    return tmp;
}

static uint32_t find_stack(report_profile_t *p, const scry_sample_t *s)
{
    scry_sample_t folded;
    if (!(s = fold_unknown(p, s, &folded)))
        return REPORT__NONE;
    uint32_t depth = s->nframes > REPORT__MAX_DEPTH ? REPORT__MAX_DEPTH : s->nframes;
    /* a thread root matches by tid and kind alone (its label may have changed) */
    uint32_t tpos = thread_rooted(s, depth);
    uint64_t h = (uint64_t)(uint32_t)s->tid * K;
    for (uint32_t i = 0; i < depth; i++) {
        const scry_frame_t *f = &s->frames[i];
        if (i + 1 != tpos)
            h = hash_frame_into(h, f->function, f->file, f->line, f->kind);
    }
    h = fmix(h ^ depth ^ ((uint64_t)tpos << 32));

    if ((p->nstacks + 1) * 2 > p->stack_slots_cap &&
        report__rehash(p, &p->stack_slots, &p->stack_slots_cap, p->nstacks, 256, stack_hash_of) < 0)
        return REPORT__NONE;
    uint32_t mask = p->stack_slots_cap - 1;
    uint32_t j = (uint32_t)h & mask;
    for (uint32_t slot; (slot = p->stack_slots[j]) != 0; j = (j + 1) & mask) {
        const report__stack_t *st = &p->stacks[slot - 1];
        if (st->hash != h || st->depth != depth || st->tid != s->tid)
            continue;
        const uint32_t *ids = p->ids + st->off;
        if (tpos && p->frames[ids[tpos - 1]].kind != SCRY_FRAME_THREAD)
            continue;
        uint32_t i = 0;
        for (; i < depth; i++) {
            if (i + 1 == tpos)
                continue;
            const report__frame_t *e = &p->frames[ids[i]];
            const scry_frame_t *f = &s->frames[i];
            if (e->function != f->function || e->file != f->file || e->line != f->line ||
                e->kind != f->kind)
                break;
        }
        if (i == depth) {
            if (tpos) /* the root shows the thread's latest name */
                p->frames[ids[tpos - 1]].function = s->frames[tpos - 1].function;
            return slot - 1;
        }
    }
    return new_stack(p, s, depth, h, j);
}

static uint64_t thread_hash(int32_t tid)
{
    return fmix((uint64_t)(uint32_t)tid);
}

static uint64_t thread_hash_of(const void *ctx, uint32_t id)
{
    const report_profile_t *p = ctx;
    return thread_hash(p->threads[id].tid);
}

static report__thread_t *find_thread(report_profile_t *p, int32_t tid)
{
    if (p->last_thread < p->nthreads && p->threads[p->last_thread].tid == tid)
        return &p->threads[p->last_thread];
    if ((p->nthreads + 1) * 2 > p->thread_slots_cap &&
        report__rehash(p, &p->thread_slots, &p->thread_slots_cap, p->nthreads, 256,
                       thread_hash_of) < 0)
        return NULL;
    uint32_t mask = p->thread_slots_cap - 1;
    uint32_t j = (uint32_t)thread_hash(tid) & mask;
    for (uint32_t s; (s = p->thread_slots[j]) != 0; j = (j + 1) & mask) {
        if (p->threads[s - 1].tid == tid) {
            p->last_thread = s - 1;
            return &p->threads[s - 1];
        }
    }
    report__thread_t *nt =
        report__grow(p->threads, &p->threads_cap, sizeof *nt, p->nthreads + 1, 64);
    if (!nt)
        return NULL; /* the sample still counts in its stack */
    p->threads = nt;
    memset(&nt[p->nthreads], 0, sizeof *nt);
    nt[p->nthreads].tid = tid;
    nt[p->nthreads].name = "";
    nt[p->nthreads].root = REPORT__NONE;
    p->last_thread = p->nthreads;
    p->thread_slots[j] = ++p->nthreads;
    return &nt[p->nthreads - 1];
}

const char *report__thread_name(const report_profile_t *p, int32_t tid)
{
    for (uint32_t i = 0; i < p->nthreads; i++)
        if (p->threads[i].tid == tid)
            return p->threads[i].name;
    return "";
}

report_profile_t *report_profile_new(const report_meta_t *meta)
{
    if (!meta)
        return NULL;
    report_profile_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->meta = *meta;
    p->meta.python_version = dup_or_null(meta->python_version);
    p->meta.command = dup_or_null(meta->command);
    p->strs = strtab_new();
    p->end.gil_fraction = -1.0;
    p->foot_bucket_ns = 10000000; /* 10 ms, doubled as the run grows */
    int copied = 1;
    if (p->strs && meta->container) {
        p->container.id = strtab_intern(p->strs, meta->container->id ? meta->container->id : "");
        p->container.runtime =
            strtab_intern(p->strs, meta->container->runtime ? meta->container->runtime : "");
        p->container.cgroup =
            strtab_intern(p->strs, meta->container->cgroup ? meta->container->cgroup : "");
        p->meta.container = &p->container;
        copied = p->container.id && p->container.runtime && p->container.cgroup;
    }
    if (!p->strs || !copied || report__scope_copy(p, meta) < 0 ||
        (meta->python_version && !p->meta.python_version) || (meta->command && !p->meta.command)) {
        report_profile_free(p);
        return NULL;
    }
    return p;
}

void report_profile_free(report_profile_t *p)
{
    if (!p)
        return;
    free((char *)p->meta.python_version);
    free((char *)p->meta.command);
    free((void *)p->end.processes);
    strtab_free(p->strs);
    report__scope_free(p);
    free(p->fold);
    free(p->frames);
    free(p->frame_slots);
    free(p->stacks);
    free(p->stack_slots);
    free(p->ids);
    free(p->lines);
    free(p->line_slots);
    free(p->threads);
    free(p->thread_slots);
    free(p->amap);
    free(p);
}

/* CPython 3.12's entry frames (a C function calling Python code) run the interpreter's
 * trampoline code object, "<interpreter trampoline>" in "<shim>". The frame says nothing
 * the stack does not: below it is the Python line that called the C function, above it
 * (when there is one) the Python function entered. As py-spy and Austin do, it is never
 * shown. The reader leaves out those it recognises (owned by the C stack); one can still
 * come out of a stack read while the C function returned (the leaf of 2-7% of a
 * generator-heavy program's stacks, now and then one further down): it is dropped there
 * too, and a sample whose leaf it was is charged to the calling line. docs/usage.md
 * "Entry frames". */
static int is_trampoline(const scry_frame_t *f)
{
    return f->function && f->function[0] == '<' && f->file && strcmp(f->file, "<shim>") == 0 &&
           strcmp(f->function, "<interpreter trampoline>") == 0;
}

/* S without its trampoline frames: S itself when it has none, else *COPY with its frames
 * in BUF (NBUF frames) or, for a deeper stack, in *OWNED (malloc'd: the caller frees it).
 * NULL when out of memory. */
static const scry_sample_t *without_trampoline(const scry_sample_t *s, scry_frame_t *buf,
                                               size_t nbuf, scry_sample_t *copy,
                                               scry_frame_t **owned)
{
    *owned = NULL;
    uint32_t at = 0;
    while (at < s->nframes && !is_trampoline(&s->frames[at]))
        at++;
    if (at == s->nframes)
        return s;
    scry_frame_t *f = buf;
    if (s->nframes > nbuf && !(f = *owned = malloc(s->nframes * sizeof *f)))
        return NULL;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nframes; i++)
        if (!is_trampoline(&s->frames[i]))
            f[n++] = s->frames[i];
    *copy = *s;
    copy->nframes = n;
    copy->frames = f;
    return copy;
}

static int profile_add(report_profile_t *p, const scry_sample_t *s);

int report_profile_add(report_profile_t *p, const scry_sample_t *s)
{
    if (!p || !s || (s->nframes && !s->frames) || s->metric >= REPORT__NMETRIC)
        return SCRY_E_INVAL;
    scry_sample_t copy;
    scry_frame_t buf[128], *owned;
    const scry_sample_t *use = without_trampoline(s, buf, 128, &copy, &owned);
    if (!use)
        return SCRY_E_NOMEM;
    int rc = profile_add(p, use);
    free(owned);
    return rc;
}

static int profile_add(report_profile_t *p, const scry_sample_t *s)
{
    uint32_t id = find_stack(p, s);
    if (id == REPORT__NONE)
        return SCRY_E_NOMEM;
    report__stack_t *st = &p->stacks[id];
    unsigned cls = s->cls < REPORT__NCLASS ? s->cls : SCRY_CLASS_SYSTEM;
    uint64_t v = s->metric == SCRY_METRIC_CPU ? s->weight_ns : s->bytes;
    st->count[s->metric][cls]++;
    st->value[s->metric][cls] += v;
    p->nsamples++;
    p->metric_count[s->metric]++;
    p->metric_value[s->metric] += v;
    if (s->truncated)
        p->truncated++;
    if (p->nsamples == 1 || s->time_ns < p->first_ns)
        p->first_ns = s->time_ns;
    if (s->time_ns > p->last_ns)
        p->last_ns = s->time_ns;

    report__thread_t *t = find_thread(p, s->tid);
    if (t && s->thread_name && s->thread_name[0])
        t->name = s->thread_name;
    if (s->metric == SCRY_METRIC_CPU) {
        if (s->gil) {
            p->gil_count++;
            p->gil_weight += s->weight_ns;
        }
        if (t) {
            t->samples++;
            t->weight += s->weight_ns;
            t->gil += s->gil ? 1 : 0;
            t->running += s->running ? 1 : 0;
        }
        return 0;
    }
    if (t)
        t->mem_samples++;
    return report__mem_add(p, s, id);
}

int report_profile_set_end(report_profile_t *p, const report_end_t *end)
{
    if (!p || !end)
        return SCRY_E_INVAL;
    report_process_t *procs = NULL;
    size_t n = end->processes ? end->nprocesses : 0;
    if (n && !(procs = calloc(n, sizeof *procs)))
        return SCRY_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        procs[i] = end->processes[i];
        procs[i].command =
            strtab_intern(p->strs, end->processes[i].command ? end->processes[i].command : "");
        procs[i].python_version = strtab_intern(
            p->strs, end->processes[i].python_version ? end->processes[i].python_version : "");
        procs[i].note =
            strtab_intern(p->strs, end->processes[i].note ? end->processes[i].note : "");
        if (!procs[i].command || !procs[i].python_version || !procs[i].note) {
            free(procs);
            return SCRY_E_NOMEM;
        }
    }
    free((void *)p->end.processes);
    p->end = *end;
    p->end.processes = procs;
    p->end.nprocesses = n;
    p->have_end = 1;
    return 0;
}

void report_profile_set_rate(report_profile_t *p, double rate_hz)
{
    if (p)
        p->meta.rate_hz = rate_hz;
}

uint64_t report_profile_samples(const report_profile_t *p)
{
    return p ? p->nsamples : 0;
}

int report__profile_add_cpu(report_profile_t *p, const scry_sample_t *s, uint64_t count,
                            uint64_t value)
{
    if (!p || !s || (s->nframes && !s->frames) || !count)
        return SCRY_E_INVAL;
    if (count > UINT64_MAX - p->nsamples || value > UINT64_MAX - p->metric_value[SCRY_METRIC_CPU])
        return SCRY_E_TOOBIG;
    uint32_t id = find_stack(p, s);
    if (id == REPORT__NONE)
        return SCRY_E_NOMEM;
    report__stack_t *st = &p->stacks[id];
    st->count[SCRY_METRIC_CPU][SCRY_CLASS_PYTHON] += count;
    st->value[SCRY_METRIC_CPU][SCRY_CLASS_PYTHON] += value;
    p->nsamples += count;
    p->metric_count[SCRY_METRIC_CPU] += count;
    p->metric_value[SCRY_METRIC_CPU] += value;
    return 0;
}

void report__sb_target(report__sb_t *b, const report_profile_t *p)
{
    size_t n = p->end.processes ? p->end.nprocesses : 0;
    if (p->meta.pid > 0 || n == 1) {
        report__sb_printf(b, "pid %d",
                          p->meta.pid > 0 ? (int)p->meta.pid : (int)p->end.processes[0].pid);
        return;
    }
    if (n == 0)
        return;
    report__sb_printf(b, "%zu processes: pids", n);
    for (size_t i = 0; i < n && i < 8; i++)
        report__sb_printf(b, "%s %d", i ? "," : "", (int)p->end.processes[i].pid);
    if (n > 8)
        report__sb_puts(b, ", ...");
}
