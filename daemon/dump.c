/* dump.c - 'scry dump': every thread's stack, now. A thin front end over the sampler:
 * one tick with every thread included (idle ones too), printed instead of aggregated. */
#include "commands.h"

#include "procinfo.h"
#include "report.h"
#include "sampler.h"
#include "scry_err.h"
#include "scry_proc.h"

#include <stdio.h>
#include <string.h>

#define DUMP_MAX_THREADS 8192

typedef struct dump_state {
    report_dump_thread_t *threads;
    size_t n;
    int oom;
} dump_state_t;

static void collect(const scry_sample_t *s, void *ctx)
{
    dump_state_t *d = ctx;
    if (d->n >= DUMP_MAX_THREADS)
        return;
    report_dump_thread_t *t = &d->threads[d->n];
    scry_frame_t *frames = malloc((s->nframes ? s->nframes : 1) * sizeof *frames);
    if (!frames) {
        d->oom = 1;
        return;
    }
    memcpy(frames, s->frames, s->nframes * sizeof *frames);
    t->frames = frames;
    t->tid = s->tid;
    t->ns_tid = s->ns_tid;
    t->name = s->thread_name;
    t->gil = s->gil;
    t->running = s->running;
    t->truncated = s->truncated;
    t->gil_wait = s->gil_wait;
    t->nframes = s->nframes;
    d->n++;
}

int cmd_dump(const scry_config_t *cfg)
{
    strtab_t *strings = strtab_new();
    pystate_target_t *t = NULL;
    sampler_t *smp = NULL;
    dump_state_t d = {0};
    int rc = 1;
    if (cfg->async_tasks) {
        strtab_free(strings);
        return cmd_dump_async(cfg);
    }
    if (!strings || !(d.threads = calloc(DUMP_MAX_THREADS, sizeof *d.threads))) {
        fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    if (cmd_open_target(cfg->pid, strings, &cfg->open_opts, &t) != 0)
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
    const pystate_info_t *info = pystate_target_info(t);
    char what[600];
    procinfo_describe(info->pid, what, sizeof what);
    proc_container_t ct;
    report_container_t rct;
    int in_container = procinfo_container(info->pid, &ct, &rct);
    report_dump_t doc = {.pid = info->pid,
                         .ns_pid = info->ns_pid != info->pid ? info->ns_pid : 0,
                         .container = in_container ? &rct : NULL,
                         .process = what,
                         .version = info->version,
                         .interp_path = info->interp_path,
                         .how_found = info->how_found,
                         .threads = d.threads,
                         .nthreads = d.n};
    err = report_dump_write(&doc, cfg->json ? REPORT_DUMP_JSON : REPORT_DUMP_TEXT, stdout);
    if (err) {
        fprintf(stderr, "scry: could not write the dump: %s\n", scry_strerror(err));
        goto out;
    }
    rc = 0;
out:
    for (size_t i = 0; i < d.n; i++)
        free((void *)d.threads[i].frames);
    free(d.threads);
    sampler_free(smp);
    pystate_target_free(t);
    strtab_free(strings);
    return rc;
}
