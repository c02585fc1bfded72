/* snapshot.c - one read of every thread's stack now (what `scry dump` prints and scry serve
 * answers to `scry ctl dump`): one sampler tick with every thread included, idle ones too,
 * handed to report/'s dump writer; a stack that changes while read is read again. */
#include "recording.h"

#include "procinfo.h"
#include "pyrepr.h"
#include "report.h"
#include "sampler.h"
#include "scry_err.h"
#include "scry_proc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DUMP_MAX_THREADS 8192
/* Rereads of a stack that changed while it was read: each costs a system call per frame up
 * to 3.10 (tens of microseconds for 20 frames), a few per stack from 3.11, so a dump gives
 * up on a thread that never stays put after some milliseconds (at most about 40), and then
 * prints the part read whole. 256 left 0-6% of the dumps of a 20-deep recursion partial on
 * 3.14d (Py_DEBUG) at a load of 15 on 2 cores. */
#define DUMP_TORN_RETRIES 1024

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
    t->partial = s->torn;
    t->gil_wait = s->gil_wait;
    t->nframes = s->nframes;
    d->n++;
}

int recording_frame_locals(pystate_target_t *t, strtab_t *strings, raddr_t addr,
                           pystate_local_t *buf, report_dump_locals_t *l)
{
    size_t n = 0;
    int err = pystate_frame_locals(t, addr, buf, PYSTATE_LOCALS_MAX, &n);
    if (err)
        return err == SCRY_E_GONE || err == SCRY_E_PERM ? err : 0;
    report_dump_local_t *vars = calloc(n ? n : 1, sizeof *vars);
    if (!vars)
        return SCRY_E_NOMEM;
    for (size_t j = 0; j < n; j++) {
        vars[j] = (report_dump_local_t){.name = strtab_intern(strings, buf[j].name),
                                        .type = strtab_intern(strings, buf[j].value.type),
                                        .repr = strtab_intern(strings, buf[j].value.repr),
                                        .len = buf[j].value.len,
                                        .is_arg = buf[j].is_arg,
                                        .kind = buf[j].kind,
                                        .unbound = buf[j].unbound};
        if (!vars[j].name || !vars[j].type || !vars[j].repr) {
            free(vars);
            return SCRY_E_NOMEM;
        }
    }
    l->vars = vars;
    l->n = (uint32_t)n;
    l->read = 1;
    return 0;
}

/* --locals: reads the threads' stacks again with their frame addresses and, where a
 * thread's Python frames are still the ones D shows (same functions, same order), each
 * frame's arguments and locals. A thread that ran on in between keeps its frames without
 * locals. Returns 0, SCRY_E_NOMEM or a fatal read error. */
static int add_locals(pystate_target_t *t, strtab_t *strings, dump_state_t *d)
{
    pystate_snapshot_t *snap = pystate_snapshot_new();
    pystate_local_t *buf = malloc(PYSTATE_LOCALS_MAX * sizeof *buf);
    int err = SCRY_E_NOMEM;
    if (!snap || !buf)
        goto out;
    if ((err = pystate_sample(t, snap)) != 0)
        goto out;
    for (size_t i = 0; i < d->n && !err; i++) {
        report_dump_thread_t *th = &d->threads[i];
        report_dump_locals_t *ls = calloc(th->nframes ? th->nframes : 1, sizeof *ls);
        if (!ls) {
            err = SCRY_E_NOMEM;
            break;
        }
        th->locals = ls;
        const pystate_thread_t *pt = NULL;
        for (size_t k = 0; k < pystate_snapshot_count(snap); k++)
            if (pystate_snapshot_thread(snap, k)->tid == th->tid)
                pt = pystate_snapshot_thread(snap, k);
        if (!pt || pt->torn || th->partial)
            continue;
        uint32_t py = 0, npy = 0;
        for (uint32_t k = 0; k < th->nframes; k++)
            npy += th->frames[k].kind == SCRY_FRAME_PYTHON;
        if (npy != pt->nframes)
            continue; /* the stack changed */
        for (uint32_t k = 0; k < th->nframes && !err; k++) {
            const scry_frame_t *f = &th->frames[k];
            if (f->kind != SCRY_FRAME_PYTHON)
                continue;
            const scry_frame_t *g = &pt->frames[py];
            if (g->function == f->function && g->file == f->file)
                err = recording_frame_locals(t, strings, pt->frame_addrs[py], buf, &ls[k]);
            py++;
        }
    }
out:
    free(buf);
    pystate_snapshot_free(snap);
    return err;
}

void recording_free_locals(report_dump_thread_t *th)
{
    if (!th->locals)
        return;
    for (uint32_t k = 0; k < th->nframes; k++)
        free((void *)th->locals[k].vars);
    free((void *)th->locals);
}

/* Frees the threads D collected and empties it. */
static void dump_state_clear(dump_state_t *d)
{
    for (size_t i = 0; i < d->n; i++) {
        recording_free_locals(&d->threads[i]);
        free((void *)d->threads[i].frames);
    }
    memset(d->threads, 0, d->n * sizeof *d->threads);
    d->n = 0;
    d->oom = 0;
}

/* Reads every thread of T at one instant into D (empty) with sampler options SO. Returns 0
 * or a negative code; *REFUSED is set when the sampler was refused (sampler_new said why). */
static int read_threads(pystate_target_t *t, strtab_t *strings, const sampler_opts_t *so,
                        dump_state_t *d, int *refused)
{
    sampler_t *smp = sampler_new(so, t, strings);
    *refused = !smp && sampler_refused(so);
    if (!smp)
        return *refused ? SCRY_E_PERM : SCRY_E_NOMEM;
    int err = sampler_tick(smp, collect, d);
    sampler_free(smp);
    return err ? err : d->oom ? SCRY_E_NOMEM : 0;
}

static int any_partial(const dump_state_t *d)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->threads[i].partial)
            return 1;
    return 0;
}

/* A thread whose stack changed under every reread is read once more with the threads
 * stopped (--blocking's exact snapshot: each thread stopped for its read, then resumed), as
 * py-spy's dump always does; where they cannot be stopped, what was read stays. */
static void reread_stopped(pystate_target_t *t, strtab_t *strings, const sampler_opts_t *so,
                           dump_state_t *d)
{
    if (so->blocking || !any_partial(d))
        return;
    dump_state_t again = {.threads = calloc(DUMP_MAX_THREADS, sizeof *again.threads)};
    sampler_opts_t sb = *so;
    sb.blocking = 1;
    int refused;
    if (again.threads && read_threads(t, strings, &sb, &again, &refused) == 0 && again.n > 0) {
        dump_state_clear(d);
        free(d->threads);
        *d = again;
        return;
    }
    if (again.threads)
        dump_state_clear(&again);
    free(again.threads);
}

int recording_dump_write(pystate_target_t *t, strtab_t *strings, const sampler_opts_t *opts,
                         int locals, enum report_dump_format fmt, FILE *out, char *msg,
                         size_t msglen)
{
    dump_state_t d = {0};
    sampler_opts_t so = *opts;
    so.instant = 1; /* one instant */
    so.idle = 1;    /* every thread, whatever it is doing */
    so.gil = 0;
    so.partial = 1; /* a thread whose stack never read whole is shown with what was */
    msg[0] = 0;
    pystate_set_torn_retries(t, DUMP_TORN_RETRIES);
    int err = SCRY_E_NOMEM;
    if (!(d.threads = calloc(DUMP_MAX_THREADS, sizeof *d.threads))) {
        snprintf(msg, msglen, "out of memory");
        goto out;
    }
    int refused;
    err = read_threads(t, strings, &so, &d, &refused);
    if (refused)
        goto out;
    if (err) {
        snprintf(msg, msglen, "could not read the threads of process %d: %s",
                 (int)pystate_target_info(t)->pid, scry_strerror(err));
        goto out;
    }
    reread_stopped(t, strings, &so, &d);
    if (d.n == 0) {
        /* every thread of a live interpreter has a Python frame, or is shown torn: none
         * means the process is starting, finishing, or not what it seems */
        err = SCRY_E_AGAIN;
        snprintf(msg, msglen,
                 "no thread of process %d has a Python stack to show (starting up, shutting "
                 "down, or no Python code running)",
                 (int)pystate_target_info(t)->pid);
        goto out;
    }
    if (locals && (err = add_locals(t, strings, &d)) != 0) {
        snprintf(msg, msglen, "could not read the locals of process %d: %s",
                 (int)pystate_target_info(t)->pid, scry_strerror(err));
        goto out;
    }
    const pystate_info_t *info = pystate_target_info(t);
    char what[600];
    proc_describe(info->pid, what, sizeof what);
    proc_container_t ct;
    report_container_t rct;
    int in_container = recording_container(info->pid, &ct, &rct);
    report_dump_t doc = {.pid = info->pid,
                         .ns_pid = info->ns_pid != info->pid ? info->ns_pid : 0,
                         .container = in_container ? &rct : NULL,
                         .process = what,
                         .version = info->version,
                         .interp_path = info->interp_path,
                         .how_found = info->how_found,
                         .threads = d.threads,
                         .nthreads = d.n};
    err = report_dump_write(&doc, fmt, out);
    if (err)
        snprintf(msg, msglen, "could not write the dump: %s", scry_strerror(err));
out:
    if (d.threads)
        dump_state_clear(&d);
    free(d.threads);
    pystate_set_torn_retries(t, 0); /* T may be a sampler's too (ctl dump) */
    return err;
}

int recording_dump_open(pid_t pid, const pystate_open_opts_t *opts, strtab_t **strings,
                        pystate_target_t **t)
{
    *t = NULL;
    if (!(*strings = strtab_new())) {
        fprintf(stderr, "scry: out of memory\n");
        return 1;
    }
    return sampler_open_target(pid, *strings, opts, t) != 0;
}
