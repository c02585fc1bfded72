/* dump.c - 'scry dump': every thread's stack, now. A thin front end over the sampler:
 * one tick with every thread included (idle ones too), printed instead of aggregated. */
#include "commands.h"

#include "procinfo.h"
#include "report.h"
#include "sampler.h"
#include "scry_err.h"

#include <stdio.h>
#include <string.h>

#define DUMP_MAX_THREADS 8192

typedef struct dump_thread {
    int32_t tid;
    const char *name;
    uint8_t gil, running, truncated, cls, gil_wait;
    uint32_t nframes;
    scry_frame_t *frames;
} dump_thread_t;

typedef struct dump_state {
    dump_thread_t *threads;
    size_t n;
    int oom;
} dump_state_t;

static void collect(const scry_sample_t *s, void *ctx)
{
    dump_state_t *d = ctx;
    if (d->n >= DUMP_MAX_THREADS)
        return;
    dump_thread_t *t = &d->threads[d->n];
    t->frames = malloc((s->nframes ? s->nframes : 1) * sizeof *t->frames);
    if (!t->frames) {
        d->oom = 1;
        return;
    }
    memcpy(t->frames, s->frames, s->nframes * sizeof *t->frames);
    t->tid = s->tid;
    t->name = s->thread_name;
    t->gil = s->gil;
    t->running = s->running;
    t->truncated = s->truncated;
    t->cls = s->cls;
    t->gil_wait = s->gil_wait;
    t->nframes = s->nframes;
    d->n++;
}

static const char *state_word(const dump_thread_t *t)
{
    if (t->gil_wait)
        return "waiting for the GIL";
    return t->running ? "running" : "idle";
}

static void dump_text(const pystate_info_t *info, const dump_state_t *d)
{
    char what[600];
    procinfo_describe(info->pid, what, sizeof what);
    printf("Process %d: %s\nPython v%s (%s; runtime found by %s)\n", (int)info->pid, what,
           info->version, info->interp_path, info->how_found);
    for (size_t i = 0; i < d->n; i++) {
        const dump_thread_t *t = &d->threads[i];
        printf("\nThread %d (%s%s): \"%s\"%s\n", (int)t->tid, state_word(t), t->gil ? "+gil" : "",
               t->name, t->truncated ? " [truncated]" : "");
        for (uint32_t k = 0; k < t->nframes; k++) {
            const scry_frame_t *f = &t->frames[k];
            if (f->kind == SCRY_FRAME_NATIVE)
                printf("    %s (%s)\n", f->function, f->file);
            else if (f->kind == SCRY_FRAME_PYTHON)
                printf("    %s (%s:%d)\n", f->function, f->file, (int)f->line);
            else
                printf("    %s\n", f->function);
        }
    }
}

static void dump_json(const pystate_info_t *info, const dump_state_t *d)
{
    printf("{\"pid\": %d, \"python_version\": ", (int)info->pid);
    report_json_fputs(stdout, info->version);
    printf(", \"threads\": [");
    for (size_t i = 0; i < d->n; i++) {
        const dump_thread_t *t = &d->threads[i];
        printf("%s\n  {\"tid\": %d, \"name\": ", i ? "," : "", (int)t->tid);
        report_json_fputs(stdout, t->name);
        printf(", \"gil\": %s, \"state\": \"%s\", \"truncated\": %s, \"frames\": [",
               t->gil ? "true" : "false", t->running ? "running" : "idle",
               t->truncated ? "true" : "false");
        for (uint32_t k = 0; k < t->nframes; k++) {
            const scry_frame_t *f = &t->frames[k];
            printf("%s{\"function\": ", k ? ", " : "");
            report_json_fputs(stdout, f->function);
            printf(", \"file\": ");
            report_json_fputs(stdout, f->file);
            printf(", \"line\": %d, \"kind\": \"%s\"}", (int)f->line,
                   f->kind == SCRY_FRAME_NATIVE   ? "native"
                   : f->kind == SCRY_FRAME_PYTHON ? "python"
                                                  : "other");
        }
        printf("]}");
    }
    printf("\n]}\n");
}

int cmd_dump(const scry_config_t *cfg)
{
    strtab_t *strings = strtab_new();
    pystate_target_t *t = NULL;
    sampler_t *smp = NULL;
    dump_state_t d = {0};
    int rc = 1;
    if (!strings || !(d.threads = calloc(DUMP_MAX_THREADS, sizeof *d.threads))) {
        fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    if (cmd_open_target(cfg->pid, strings, cfg->assume_minor, &t) != 0)
        goto out;
    scry_config_t one = *cfg;
    one.idle = 1; /* every thread, whatever it is doing */
    one.gil = 0;
    smp = sampler_new(&one, t, strings);
    if (!smp) {
        if (!sampler_refused(cfg))
            fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    int err = sampler_tick(smp, collect, &d);
    if (err || d.oom) {
        fprintf(stderr, "scry: could not read the threads of process %d: %s\n", (int)cfg->pid,
                d.oom ? "out of memory" : scry_strerror(err));
        goto out;
    }
    if (cfg->json)
        dump_json(pystate_target_info(t), &d);
    else
        dump_text(pystate_target_info(t), &d);
    rc = 0;
out:
    for (size_t i = 0; i < d.n; i++)
        free(d.threads[i].frames);
    free(d.threads);
    sampler_free(smp);
    pystate_target_free(t);
    strtab_free(strings);
    return rc;
}
