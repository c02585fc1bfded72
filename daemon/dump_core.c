/* dump_core.c - 'scry dump --core FILE': the threads of a process that is gone, from its
 * core file. The core is a source of target memory like a live process (core/core.h): the
 * same pystate readers find the interpreter and read every thread's Python stack; the core's
 * notes add what /proc and ptrace would have told (thread registers, the fatal signal). */
#include "commands.h"

#include "core.h"
#include "recording.h"
#include "classify.h"
#include "merge.h"
#include "scry_err.h"
#include "unwind.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CORE_DUMP_MAX_FRAMES (PYSTATE_MAX_DEPTH + UNWIND_MAX_DEPTH)
#define CORE_DUMP_STACK_MAX  (8u << 20) /* bytes of a thread's stack given to the unwinder */

typedef struct core_dump {
    core_t *core;
    pystate_target_t *t;
    strtab_t *strings;
    unwind_t *unwind;       /* --native */
    unwind_frame_t *native; /* --native: UNWIND_MAX_DEPTH frames of scratch */
    uint8_t *stack;         /* --native: a thread's stack bytes, CORE_DUMP_STACK_MAX */
    report_dump_thread_t *threads;
    size_t n;
} core_dump_t;

/* What si_code says for the fatal signals, in words. */
static const char *sig_reason(int signo, int code)
{
    if (code == SI_USER)
        return "sent by kill";
    if (code == SI_TKILL)
        return "sent by tkill or raise";
    if (code == SI_QUEUE)
        return "sent by sigqueue";
    if (code == SI_KERNEL)
        return "sent by the kernel";
    if (signo == SIGSEGV)
        return code == SEGV_MAPERR   ? "address not mapped"
               : code == SEGV_ACCERR ? "no permission"
                                     : "";
    if (signo == SIGBUS)
        return code == BUS_ADRALN   ? "misaligned address"
               : code == BUS_ADRERR ? "nonexistent physical address"
               : code == BUS_OBJERR ? "object-specific hardware error"
                                    : "";
    if (signo == SIGFPE)
        return code == FPE_INTDIV ? "integer divide by zero" : "";
    if (signo == SIGILL)
        return code == ILL_ILLOPC ? "illegal opcode" : "";
    return "";
}

static void describe_signal(const core_siginfo_t *si, const char *file, char *name, size_t len,
                            report_dump_core_t *out)
{
    const char *abbrev = si->signo ? sigabbrev_np(si->signo) : NULL;
    if (abbrev)
        snprintf(name, len, "SIG%s", abbrev);
    else
        snprintf(name, len, "signal %d", (int)si->signo);
    int faults =
        si->signo == SIGSEGV || si->signo == SIGBUS || si->signo == SIGILL || si->signo == SIGFPE;
    *out = (report_dump_core_t){.file = file,
                                .signo = si->signo,
                                .signal = name,
                                .reason = si->signo ? sig_reason(si->signo, si->code) : "",
                                .addr = si->addr,
                                .has_addr = faults && si->code > 0,
                                .tid = si->tid};
}

/* --native: the thread's native stack unwound from the core's registers and the stack the
 * core holds, merged with its Python frames into FRAMES. Returns 0 with *N, or a code. */
static int native_frames(core_dump_t *d, const core_thread_t *ct, const pystate_thread_t *pt,
                         scry_frame_t *frames, size_t max, size_t *n, int *gil_wait)
{
    const core_regs_t *r = &ct->regs;
    unwind_regs_t regs = {.ax = r->ax,
                          .bx = r->bx,
                          .cx = r->cx,
                          .dx = r->dx,
                          .si = r->si,
                          .di = r->di,
                          .bp = r->bp,
                          .sp = r->sp,
                          .ip = r->ip,
                          .r8 = r->r8,
                          .r9 = r->r9,
                          .r10 = r->r10,
                          .r11 = r->r11,
                          .r12 = r->r12,
                          .r13 = r->r13,
                          .r14 = r->r14,
                          .r15 = r->r15};
    /* the stack from sp up to the end of what the core holds there */
    long got = rmem_read_partial(pystate_target_mem(d->t), r->sp, d->stack, CORE_DUMP_STACK_MAX);
    size_t nn = 0;
    int rc = unwind_copied(d->unwind, ct->tid, &regs, d->stack, got > 0 ? (size_t)got : 0,
                           d->native, UNWIND_MAX_DEPTH, &nn);
    if (rc)
        return rc;
    /* a thread waiting in the kernel in the GIL's futex: the live dump's marker leaf */
    *gil_wait = ct->in_syscall && unwind_is_gil_wait(d->native, nn);
    size_t at = 0;
    if (*gil_wait) {
        const char *mark = strtab_intern(d->strings, "<waiting for the GIL>");
        const char *empty = strtab_intern(d->strings, "");
        if (!mark || !empty)
            return SCRY_E_NOMEM;
        frames[at++] = (scry_frame_t){mark, empty, 0, SCRY_FRAME_OTHER};
    }
    const pystate_info_t *info = pystate_target_info(d->t);
    rc =
        unwind_merge(d->native, nn, pt ? pt->frames : NULL, pt ? pt->entry : NULL,
                     pt ? pt->nframes : 0, info->minor, d->strings, frames + at, max - at, n, NULL);
    *n += at;
    return rc == SCRY_E_TRUNC ? 0 : rc;
}

/* --locals of thread PT into TH (one entry per frame of TH, Python frames read). */
static int thread_locals(core_dump_t *d, const pystate_thread_t *pt, report_dump_thread_t *th,
                         pystate_local_t *buf)
{
    report_dump_locals_t *ls = calloc(th->nframes ? th->nframes : 1, sizeof *ls);
    if (!ls)
        return SCRY_E_NOMEM;
    th->locals = ls;
    uint32_t py = 0;
    int err = 0;
    for (uint32_t k = 0; k < th->nframes && !err && pt; k++) {
        const scry_frame_t *f = &th->frames[k];
        if (f->kind != SCRY_FRAME_PYTHON || py >= pt->nframes)
            continue;
        err = recording_frame_locals(d->t, d->strings, pt->frame_addrs[py++], buf, &ls[k]);
    }
    return err;
}

/* One thread of the dump: core thread CT (NULL: a Python thread the core has no registers
 * for) and its Python state PT (NULL: a thread with no Python frames). */
static int add_thread(core_dump_t *d, const scry_config_t *cfg, const core_thread_t *ct,
                      const pystate_thread_t *pt, pystate_local_t *buf)
{
    report_dump_thread_t *th = &d->threads[d->n];
    scry_frame_t *frames = malloc(CORE_DUMP_MAX_FRAMES * sizeof *frames);
    if (!frames)
        return SCRY_E_NOMEM;
    size_t n = 0;
    int gil_wait = 0;
    if (pt && pt->torn) {
        /* its frames do not read whole from the core (a page the core lacks, or written as
         * zeros): the part that did, then a mark, rather than the thread left out */
        const char *mark = strtab_intern(d->strings, "<Python stack not readable in the core>");
        const char *empty = strtab_intern(d->strings, "");
        if (!mark || !empty) {
            free(frames);
            return SCRY_E_NOMEM;
        }
        n = pt->nframes < CORE_DUMP_MAX_FRAMES - 1 ? pt->nframes : CORE_DUMP_MAX_FRAMES - 1;
        if (n)
            memcpy(frames, pt->frames, n * sizeof *frames);
        frames[n++] = (scry_frame_t){mark, empty, 0, SCRY_FRAME_OTHER};
    } else if (!cfg->native || !ct ||
               native_frames(d, ct, pt, frames, CORE_DUMP_MAX_FRAMES, &n, &gil_wait) != 0) {
        /* the Python frames alone (no native stack asked for, or none could be read) */
        gil_wait = 0;
        n = pt ? pt->nframes : 0;
        if (n)
            memcpy(frames, pt->frames, n * sizeof *frames);
    }
    const core_siginfo_t *si = core_siginfo(d->core);
    *th = (report_dump_thread_t){.tid = ct ? ct->tid : (pt ? pt->tid : 0),
                                 .name = pt ? pt->name : NULL,
                                 .gil = pt ? pt->gil : 0,
                                 .running = ct ? !ct->in_syscall : 0,
                                 .gil_wait = (uint8_t)gil_wait,
                                 .truncated = pt ? pt->truncated : 0,
                                 .crashed = si->signo && ct && ct->tid == si->tid,
                                 .nframes = (uint32_t)n,
                                 .frames = frames};
    d->n++;
    return cfg->locals ? thread_locals(d, pt, th, buf) : 0;
}

static const pystate_thread_t *python_thread(const pystate_snapshot_t *snap, int32_t tid)
{
    for (size_t k = 0; k < pystate_snapshot_count(snap); k++) {
        const pystate_thread_t *pt = pystate_snapshot_thread(snap, k);
        if (pt->tid == tid)
            return pt;
    }
    return NULL;
}

/* Every thread in the core's order (the crashing one first), each with its Python frames;
 * threads the interpreter does not know (C threads) when they crashed, or with --native
 * (their native stacks). Then Python threads the core has no registers for (none in a
 * complete core). */
static int collect_threads(core_dump_t *d, const scry_config_t *cfg, const pystate_snapshot_t *snap)
{
    size_t nct = core_nthreads(d->core), npy = pystate_snapshot_count(snap);
    pystate_local_t *buf = cfg->locals ? malloc(PYSTATE_LOCALS_MAX * sizeof *buf) : NULL;
    d->threads = calloc(nct + npy + 1, sizeof *d->threads);
    if (!d->threads || (cfg->locals && !buf)) {
        free(buf);
        return SCRY_E_NOMEM;
    }
    int err = 0;
    const core_siginfo_t *si = core_siginfo(d->core);

    for (size_t i = 0; i < nct && !err; i++) {
        const core_thread_t *ct = core_thread(d->core, i);
        const pystate_thread_t *pt = python_thread(snap, ct->tid);
        if (pt || (si->signo && ct->tid == si->tid) || cfg->native)
            err = add_thread(d, cfg, ct, pt, buf);
    }
    for (size_t k = 0; k < npy && !err; k++) {
        const pystate_thread_t *pt = pystate_snapshot_thread(snap, k);
        int seen = 0;
        for (size_t i = 0; i < nct && !seen; i++)
            seen = core_thread(d->core, i)->tid == pt->tid;
        if (!seen)
            err = add_thread(d, cfg, NULL, pt, buf);
    }
    free(buf);
    return err;
}

/* Opens the interpreter in the core: a reader and a fixed thread map over its threads. */
static int open_target(core_dump_t *d, const scry_config_t *cfg)
{
    size_t nct = core_nthreads(d->core);
    pid_t *tids = malloc((nct ? nct : 1) * sizeof *tids);
    if (!tids)
        return SCRY_E_NOMEM;
    for (size_t i = 0; i < nct; i++)
        tids[i] = core_thread(d->core, i)->tid;
    proc_tidmap_t *map =
        proc_tidmap_new_fixed(core_pid(d->core) > 0 ? core_pid(d->core) : 1, tids, nct);
    free(tids);
    rmem_t *src = core_reader(d->core);
    char err[1024];
    int rc = pystate_target_open_src(src, map, d->strings, &cfg->open_opts, &d->t, err, sizeof err);
    if (rc) {
        const char *why = core_problems(d->core);
        fprintf(stderr, "scry: %s: %s\n", cfg->core, err[0] ? err : scry_strerror(rc));
        if (!core_exe(d->core)[0])
            fprintf(stderr, "scry: the core names no executable (no NT_FILE note): give it with "
                            "--exe PATH\n");
        if (why[0])
            fprintf(stderr,
                    "scry: files the core maps that scry did not read (missing, or another build "
                    "than the one the core holds; --sysroot DIR names where they are):\n%s",
                    why);
        return rc;
    }
    if (cfg->native && (!(d->unwind = unwind_new_src(core_reader(d->core))) ||
                        !(d->native = malloc(UNWIND_MAX_DEPTH * sizeof *d->native)) ||
                        !(d->stack = malloc(CORE_DUMP_STACK_MAX)))) {
        fprintf(stderr, "scry: out of memory\n");
        return SCRY_E_NOMEM;
    }
    return 0;
}

/* "NAME (EXE): ARGS" of the process the core was taken from, into WHAT. */
static void describe_process(const core_dump_t *d, char *what, size_t len)
{
    const pystate_info_t *info = pystate_target_info(d->t);
    snprintf(what, len, "%s (%s)%s%s", core_comm(d->core), info->exe_path[0] ? info->exe_path : "?",
             core_args(d->core)[0] ? ": " : "", core_args(d->core));
}

/* "FUNCTION (LIBRARY)" at the pc of the thread that took the fatal signal, into BUF
 * ("?? (LIBRARY)" for an unnamed function); NULL when no signal or the pc is in no object. */
static const char *fault_function(core_dump_t *d, char *buf, size_t len)
{
    const core_siginfo_t *si = core_siginfo(d->core);
    const core_thread_t *ct = core_thread(d->core, 0);
    if (!si->signo || !ct || ct->tid != si->tid)
        return NULL;
    unwind_t *u = d->unwind ? d->unwind : unwind_new_src(core_reader(d->core));
    unwind_frame_t f;
    const char *got = NULL;
    if (u && unwind_describe_ip(u, ct->regs.ip, &f) == 0 && (f.symbol || f.lib)) {
        /* as a native frame of the dump names it (unwind_merge) */
        snprintf(buf, len, "%s (%s)", f.symbol ? f.symbol : "??", f.lib ? f.lib : "");
        got = buf;
    }
    if (u != d->unwind)
        unwind_free(u);
    return got;
}

static int write_dump(core_dump_t *d, const scry_config_t *cfg)
{
    const pystate_info_t *info = pystate_target_info(d->t);
    char what[600], signame[32], where[512];
    describe_process(d, what, sizeof what);
    report_dump_core_t crash;
    describe_signal(core_siginfo(d->core), cfg->core, signame, sizeof signame, &crash);
    crash.where = fault_function(d, where, sizeof where);
    report_dump_t doc = {.pid = core_pid(d->core),
                         .process = what,
                         .version = info->version,
                         .interp_path = info->interp_path,
                         .how_found = info->how_found,
                         .core = &crash,
                         .threads = d->threads,
                         .nthreads = d->n};
    int err = report_dump_write(&doc, cfg->json ? REPORT_DUMP_JSON : REPORT_DUMP_TEXT, stdout);
    if (err)
        fprintf(stderr, "scry: could not write the dump: %s\n", scry_strerror(err));
    return err;
}

int cmd_dump_core(const scry_config_t *cfg)
{
    core_dump_t d = {0};
    pystate_snapshot_t *snap = NULL;
    int rc = 1, err;
    char why[1024] = "";
    core_opts_t opts = {.sysroot = cfg->sysroot, .exe = cfg->exe};
    if (!(d.strings = strtab_new()) || !(snap = pystate_snapshot_new())) {
        fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    if (!(d.core = core_open(cfg->core, &opts, &err, why, sizeof why))) {
        fprintf(stderr, "scry: cannot read the core %s: %s\n", cfg->core, why);
        goto out;
    }
    if (open_target(&d, cfg) != 0)
        goto out;
    if (cfg->async_tasks) {
        char what[600];
        describe_process(&d, what, sizeof what);
        rc = dump_async_target(d.t, what, cfg->json, stdout);
        goto out;
    }
    if ((err = pystate_sample(d.t, snap)) != 0) {
        fprintf(stderr, "scry: cannot read the threads in the core %s: %s\n", cfg->core,
                scry_strerror(err));
        goto out;
    }
    if ((err = collect_threads(&d, cfg, snap)) != 0) {
        fprintf(stderr, "scry: cannot read the threads in the core %s: %s\n", cfg->core,
                scry_strerror(err));
        goto out;
    }
    rc = write_dump(&d, cfg) ? 1 : 0;
out:
    for (size_t i = 0; i < d.n; i++) {
        recording_free_locals(&d.threads[i]);
        free((void *)d.threads[i].frames);
    }
    free(d.threads);
    pystate_snapshot_free(snap);
    unwind_free(d.unwind);
    free(d.native);
    free(d.stack);
    pystate_target_free(d.t);
    core_free(d.core);
    strtab_free(d.strings);
    return rc;
}
