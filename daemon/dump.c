/* dump.c - 'scry dump': every thread's stack, now. A thin front end over the sampler:
 * one tick with every thread included (idle ones too), printed instead of aggregated. */
#include "commands.h"
#include "discover.h"

#include "process.h"
#include "pyrepr.h"
#include "recording.h"
#include "procinfo.h"
#include "report.h"
#include "sampler.h"
#include "scry_err.h"
#include "scry_proc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define DUMP_MAX_THREADS 8192
#define DUMP_MAX_PROCS   4096   /* processes of one container, or of one family */
#define DUMP_SCAN_MAX    262144 /* processes listed to find a family */
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

int dump_frame_locals(pystate_target_t *t, strtab_t *strings, raddr_t addr, pystate_local_t *buf,
                      report_dump_locals_t *l)
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
                err = dump_frame_locals(t, strings, pt->frame_addrs[py], buf, &ls[k]);
            py++;
        }
    }
out:
    free(buf);
    pystate_snapshot_free(snap);
    return err;
}

void dump_free_locals(report_dump_thread_t *th)
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
        dump_free_locals(&d->threads[i]);
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

int dump_target_write(pystate_target_t *t, strtab_t *strings, const sampler_opts_t *opts,
                      int locals, enum report_dump_format fmt, FILE *out, char *msg, size_t msglen)
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

int dump_open(pid_t pid, const pystate_open_opts_t *opts, strtab_t **strings, pystate_target_t **t)
{
    *t = NULL;
    if (!(*strings = strtab_new())) {
        fprintf(stderr, "scry: out of memory\n");
        return 1;
    }
    return sampler_open_target(pid, *strings, opts, t) != 0;
}

/* Dumps process PID to OUT (JSON when cfg->json). Returns 0 or 1 after a message. */
static int dump_one(const scry_config_t *cfg, pid_t pid, FILE *out)
{
    if (cfg->async_tasks) {
        scry_config_t one = *cfg;
        one.pid = pid;
        return cmd_dump_async(&one, out);
    }
    strtab_t *strings = NULL;
    pystate_target_t *t = NULL;
    int rc = 1;
    if (dump_open(pid, &cfg->open_opts, &strings, &t) != 0)
        goto out;
    sampler_opts_t so;
    options_sampler(cfg, &so);
    char msg[512];
    if (dump_target_write(t, strings, &so, cfg->locals,
                          cfg->json ? REPORT_DUMP_JSON : REPORT_DUMP_TEXT, out, msg,
                          sizeof msg) != 0) {
        if (msg[0])
            fprintf(stderr, "scry: %s\n", msg);
        goto out;
    }
    rc = 0;
out:
    pystate_target_free(t);
    strtab_free(strings);
    return rc;
}

/* 1 when process PID belongs to the container WHICH: an id prefix or a cgroup path (the
 * process's cgroup is it or below it). */
static int in_container(pid_t pid, const char *which)
{
    proc_container_t ct;
    if (proc_read_container(pid, &ct) != 0)
        return 0;
    if (which[0] != '/')
        return ct.id[0] && strncasecmp(ct.id, which, strlen(which)) == 0;
    size_t n = strlen(which);
    while (n > 1 && which[n - 1] == '/')
        n--;
    const char *paths[2] = {ct.cgroup, ct.id_cgroup};
    for (int i = 0; i < 2; i++)
        if (strncmp(paths[i], which, n) == 0 && (paths[i][n] == 0 || paths[i][n] == '/' || n == 1))
            return 1;
    return 0;
}

/* 1 when PID runs Python by its executable's or comm's name or a mapped libpython (the
 * rule of scry serve, proc_process_read). */
static int is_python(pid_t pid)
{
    static proc_process_t p; /* 12 KiB: not on the stack; dump is single-threaded */
    return proc_process_read(pid, &p, 1) == 0 && p.is_python;
}

/* 1 when process P->pid is still the one listed (start time P->start_time, 0 unknown: not
 * checked), or is gone and GONE_OK (it exited after it was dumped), else 0 after a message
 * naming WHAT was listed. The sampler's pid-reuse test: a pid given to another process
 * has a later start time. */
static int still_listed(const proc_entry_t *p, const char *what, int gone_ok)
{
    uint64_t now = 0;
    int err = proc_read_identity(p->pid, &now, NULL, 0);
    if (err == 0 ? now == p->start_time || !p->start_time : gone_ok)
        return 1;
    if (err == 0)
        fprintf(stderr,
                "scry: process %d is not the one listed in %s: its pid was reused (start "
                "time %llu, listed %llu); not dumped\n",
                (int)p->pid, what, (unsigned long long)now, (unsigned long long)p->start_time);
    else
        fprintf(stderr, "scry: process %d of %s is gone: %s\n", (int)p->pid, what,
                scry_strerror(err));
    return 0;
}

/* Dumps listed process P into a new buffer *BUF (*LEN bytes; the caller frees it, also on
 * failure), and only when P's pid names the listed process (still_listed) before and after
 * the dump (or no process after it: it exited): what is read in between is that
 * process's. Returns 0 or 1 after a message. */
static int dump_listed(const scry_config_t *cfg, const proc_entry_t *p, const char *what,
                       char **buf, size_t *len)
{
    int rc = 1;
    FILE *mem = NULL;
    if (!still_listed(p, what, 0))
        goto out;
    if (!(mem = open_memstream(buf, len))) {
        fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    rc = dump_one(cfg, p->pid, mem);
    if (fclose(mem) != 0 && !rc) {
        fprintf(stderr, "scry: out of memory\n");
        rc = 1;
    }
    if (!rc && !still_listed(p, what, 1))
        rc = 1;
out:
    return rc;
}

/* Dumps each of PROCS[0..N) in turn (a blank line between; with --json one array), each
 * only while its pid names the process WHAT listed (dump_listed). Returns 0 when every
 * dump was written, else 1. */
static int dump_list(const scry_config_t *cfg, const proc_entry_t *procs, size_t n,
                     const char *what)
{
    int rc = 0;
    size_t shown = 0;
    if (cfg->json)
        fputs("[\n", stdout);
    for (size_t i = 0; i < n; i++) {
        char *buf = NULL;
        size_t len = 0;
        int one = dump_listed(cfg, &procs[i], what, &buf, &len);
        if (!one) {
            if (shown++)
                fputs(cfg->json ? ",\n" : "\n", stdout);
            fwrite(buf, 1, len, stdout);
            fflush(stdout);
        }
        free(buf);
        rc |= one;
    }
    if (cfg->json)
        fputs("]\n", stdout);
    return rc;
}

/* Lists every process into ENTS (DUMP_SCAN_MAX entries; NULL: the allocation failed).
 * Returns how many, or -1 after a message. */
static int list_all(proc_entry_t *ents)
{
    if (!ents) {
        fprintf(stderr, "scry: out of memory\n");
        return -1;
    }
    int n = proc_list_all(ents, DUMP_SCAN_MAX);
    if (n < 0) {
        fprintf(stderr, "scry: cannot list /proc: %s\n", scry_strerror(n));
        return -1;
    }
    return n;
}

/* scry dump --container: every Python process of the container, in pid order; with --json
 * one array of dump documents. A process is listed with its start time, read before it is
 * looked at: its dump is printed only while its pid still names it. */
static int dump_container(const scry_config_t *cfg)
{
    proc_entry_t *ents = malloc(DUMP_SCAN_MAX * sizeof *ents);
    int rc = 1;
    int n = list_all(ents);
    if (n < 0)
        goto out;
    size_t k = 0; /* ENTS stays sorted by pid */
    for (int i = 0; i < n && k < DUMP_MAX_PROCS; i++)
        if (ents[i].pid != getpid() && ents[i].state != 'Z' && ents[i].state != 'X' &&
            in_container(ents[i].pid, cfg->container) && is_python(ents[i].pid))
            ents[k++] = ents[i]; /* k <= i: never ahead of the reading */
    if (k == 0) {
        fprintf(stderr, "scry: no Python process in container %s\n", cfg->container);
        goto out;
    }
    char what[300];
    snprintf(what, sizeof what, "container %s", cfg->container);
    rc = dump_list(cfg, ents, k, what);
out:
    free(ents);
    return rc;
}

/* scry dump --subprocesses: the process and each Python descendant, parents first; with
 * --json one array of dump documents (each printed only while its pid names the process
 * listed). */
static int dump_family(const scry_config_t *cfg)
{
    proc_entry_t *ents = malloc(DUMP_SCAN_MAX * sizeof *ents);
    pid_t *desc = malloc(DUMP_MAX_PROCS * sizeof *desc);
    proc_entry_t *procs = malloc(DUMP_MAX_PROCS * sizeof *procs);
    int rc = 1;
    int n = desc && procs ? list_all(ents) : list_all(NULL);
    if (n < 0)
        goto out;
    /* the root even when its name does not say Python (dump_one then says what it is),
     * unless it has Python descendants: a shell or a wrapper */
    size_t nd = proc_descendants(ents, (size_t)n, cfg->pid, desc, DUMP_MAX_PROCS - 1);
    size_t k = 0;
    if (is_python(cfg->pid) || nd == 0)
        procs[k++] = (proc_entry_t){.pid = cfg->pid}; /* start time below */
    for (size_t i = 0; i < nd; i++)
        if (is_python(desc[i]))
            procs[k++] = (proc_entry_t){.pid = desc[i]};
    if (k == 0) {
        fprintf(stderr, "scry: neither process %d nor any of its %zu descendants is Python\n",
                (int)cfg->pid, nd);
        goto out;
    }
    for (size_t i = 0; i < k; i++) {
        const proc_entry_t *e = proc_entry_find(ents, (size_t)n, procs[i].pid);
        procs[i].start_time = e ? e->start_time : 0; /* 0: gone, dump_one says so */
    }
    char what[64];
    snprintf(what, sizeof what, "the family of process %d", (int)cfg->pid);
    rc = dump_list(cfg, procs, k, what);
out:
    free(ents);
    free(desc);
    free(procs);
    return rc;
}

int cmd_dump(const scry_config_t *cfg)
{
    if (cfg->core)
        return cmd_dump_core(cfg);
    if (cfg->container)
        return dump_container(cfg);
    return cfg->subprocesses ? dump_family(cfg) : dump_one(cfg, cfg->pid, stdout);
}
