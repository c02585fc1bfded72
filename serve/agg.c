/* agg.c - a service's window: re-interned samples, a stack cap, rendering. */
#include "agg.h"
#include "scry_err.h"
#include "strtab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AGG_MAX_FRAMES 4096

struct serve_agg {
    strtab_t *strings;
    report_profile_t *profile;
    char *service, *container, *host;
    uint32_t max_stacks;
    uint64_t *set; /* open addressing of stack hashes (0 = empty) */
    size_t set_cap;
    const char *s_other, *s_empty;
    scry_frame_t frames[AGG_MAX_FRAMES];
    serve_agg_stats_t stats;
};

serve_agg_t *serve_agg_new(const serve_agg_meta_t *m)
{
    serve_agg_t *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->max_stacks = m->max_stacks ? m->max_stacks : 10000;
    a->set_cap = 16;
    while (a->set_cap < (size_t)a->max_stacks * 2)
        a->set_cap *= 2;
    a->strings = strtab_new();
    a->set = calloc(a->set_cap, sizeof *a->set);
    a->service = strdup(m->service ? m->service : "python");
    a->container = m->container ? strdup(m->container) : NULL;
    a->host = strdup(m->host ? m->host : "");
    if (!a->strings || !a->set || !a->service || !a->host || (m->container && !a->container))
        goto fail;
    a->s_other = strtab_intern(a->strings, "<other>");
    a->s_empty = strtab_intern(a->strings, "");
    report_meta_t rm = {.pid = 0,
                        .command = a->service,
                        .rate_hz = m->rate_hz,
                        .start_unix_ns = m->start_unix_s * 1000000000ll,
                        .start_mono_ns = m->start_mono_ns};
    a->profile = report_profile_new(&rm);
    if (!a->s_other || !a->s_empty || !a->profile)
        goto fail;
    return a;
fail:
    serve_agg_free(a);
    return NULL;
}

void serve_agg_free(serve_agg_t *a)
{
    if (!a)
        return;
    report_profile_free(a->profile);
    strtab_free(a->strings);
    free(a->set);
    free(a->service);
    free(a->container);
    free(a->host);
    free(a);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

/* Returns 1 when the stack hash H is (now) in the set, 0 when the set is full. */
static int set_insert(serve_agg_t *a, uint64_t h)
{
    if (h == 0)
        h = 1;
    size_t mask = a->set_cap - 1;
    for (size_t i = h & mask, probes = 0; probes < a->set_cap; i = (i + 1) & mask, probes++) {
        if (a->set[i] == h)
            return 1;
        if (a->set[i] == 0) {
            if (a->stats.stacks >= a->max_stacks)
                return 0;
            a->set[i] = h;
            a->stats.stacks++;
            return 1;
        }
    }
    return 0;
}

static void note_pid(serve_agg_t *a, pid_t pid, const char *pyver)
{
    size_t i = 0;
    while (i < a->stats.n_pids && a->stats.pids[i] != pid)
        i++;
    if (i == a->stats.n_pids && a->stats.n_pids < SERVE_AGG_MAX_PIDS)
        a->stats.pids[a->stats.n_pids++] = pid;
    if (pyver && !a->stats.python[0])
        snprintf(a->stats.python, sizeof a->stats.python, "%s", pyver);
}

int serve_agg_add(serve_agg_t *a, const scry_sample_t *s, pid_t pid, const char *pyver)
{
    if (!a || !s || (s->nframes && !s->frames))
        return SCRY_E_INVAL;
    uint32_t n = s->nframes < AGG_MAX_FRAMES ? s->nframes : AGG_MAX_FRAMES;
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t i = 0; i < n; i++) {
        const scry_frame_t *f = &s->frames[i];
        scry_frame_t *o = &a->frames[i];
        o->function = strtab_intern(a->strings, f->function ? f->function : "");
        o->file = strtab_intern(a->strings, f->file ? f->file : "");
        if (!o->function || !o->file)
            return SCRY_E_NOMEM;
        o->line = f->line;
        o->kind = f->kind;
        h = mix(h, (uint64_t)(uintptr_t)o->function);
        h = mix(h, (uint64_t)(uintptr_t)o->file);
        h = mix(h, ((uint64_t)(uint32_t)o->line << 8) | o->kind);
    }
    scry_sample_t c = *s;
    c.frames = a->frames;
    c.nframes = n;
    c.thread_name = strtab_intern(a->strings, s->thread_name ? s->thread_name : "");
    if (!c.thread_name)
        return SCRY_E_NOMEM;
    if (!set_insert(a, h)) {
        a->frames[0] = (scry_frame_t){a->s_other, a->s_empty, 0, SCRY_FRAME_OTHER};
        c.nframes = 1;
        a->stats.other_samples++;
    }
    int err = report_profile_add(a->profile, &c);
    if (err)
        return err;
    a->stats.samples++;
    a->stats.weight_ns += s->weight_ns;
    note_pid(a, pid, pyver);
    return 0;
}

int serve_agg_render(serve_agg_t *a, enum report_format fmt, const report_end_t *end, char **out,
                     size_t *len)
{
    *out = NULL;
    *len = 0;
    if (end) {
        /* the window's processes: the report names them (never "pid 0") */
        report_process_t procs[SERVE_AGG_MAX_PIDS];
        report_end_t e = *end;
        for (size_t i = 0; i < a->stats.n_pids; i++)
            procs[i] = (report_process_t){.pid = a->stats.pids[i], .command = a->service};
        e.processes = procs;
        e.nprocesses = a->stats.n_pids;
        report_profile_set_end(a->profile, &e);
    }
    char title[256];
    snprintf(title, sizeof title, "%s%s%.12s on %s", a->service, a->container ? " in " : "",
             a->container ? a->container : "", a->host);
    report_options_t opt = {.metric = -1, .title = title};
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return SCRY_E_NOMEM;
    int err = report_write(a->profile, fmt, f, &opt);
    if (fclose(f) != 0 && err == 0)
        err = SCRY_E_IO;
    if (err) {
        free(buf);
        return err;
    }
    *out = buf;
    *len = n;
    return 0;
}

const serve_agg_stats_t *serve_agg_stats(const serve_agg_t *a)
{
    return &a->stats;
}

void serve_agg_set_rate(serve_agg_t *a, double rate_hz)
{
    if (a)
        report_profile_set_rate(a->profile, rate_hz);
}
