/* record.c - 'scry record': sample until done, then write the profile. */
#include "commands.h"

#include "asyncio.h"
#include "family.h"
#include "family_memory.h"

#include "launch.h"
#include "memory.h"
#include "procinfo.h"
#include "report.h"
#include "sampler.h"
#include "scry_err.h"
#include "scry_proc.h"
#include "scry_time.h"
#include "srcread.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t record_stop;

static void on_signal(int sig)
{
    (void)sig;
    record_stop = 1;
}

/* Launch mode with one process: the launched program's pid, whose exit ends the recording
 * at once (the sampler would notice only at its next thread listing, up to a second at low
 * rates: `scry record -- python3 -c pass` took 0.2 s more than the program). */
static volatile sig_atomic_t launched_child;

static void on_child(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (launched_child && si->si_pid == launched_child &&
        (si->si_code == CLD_EXITED || si->si_code == CLD_KILLED || si->si_code == CLD_DUMPED))
        record_stop = 1;
}

/* While sampling a launched program (CHILD > 0): its exit stops the sampler's wait (the
 * signal interrupts it) and the recording. CHILD 0 restores the default. */
static void watch_child(pid_t child)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (child > 0) {
        sa.sa_sigaction = on_child;
        sa.sa_flags = SA_SIGINFO | SA_NOCLDSTOP | SA_RESTART;
    } else {
        sa.sa_handler = SIG_DFL;
    }
    launched_child = child;
    sigaction(SIGCHLD, &sa, NULL);
    siginfo_t si = {0};
    /* exited before the handler was there: not reaped here (WNOWAIT), only seen */
    if (child > 0 && waitid(P_PID, (id_t)child, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        si.si_pid == child)
        record_stop = 1;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    sampler_handle_job_control(NULL, NULL);
}

static void emit_to_profile(const scry_sample_t *s, void *ctx)
{
    report_profile_add(ctx, s);
}

/* Launch mode: as soon as the launched program is recognised as Python, its layout goes
 * into the ring and recording starts (the preloaded shim holds the program before main()
 * until then). On failure memory profiling is dropped. */
static void start_memory(pystate_target_t *t, void *ctx)
{
    memprof_t **mem = ctx;
    if (*mem && memprof_start(*mem, t) != 0) {
        fprintf(stderr, "scry: cannot start memory recording; going on with CPU profiling only\n");
        memprof_free(*mem);
        *mem = NULL;
    }
}

/* Launch mode: once the child's pid is known and before it execs, only the program scry
 * launched (and the programs it execs into) may claim the ring. */
static void ring_for_child(pid_t child, void *ctx)
{
    int err = memprof_set_target(ctx, child);
    if (err)
        fprintf(stderr, "scry: cannot prepare the memory ring: %s\n", scry_strerror(err));
}

/* --memory: a memory sample carries no thread name; the sampler knows it. */
typedef struct memory_sink {
    sampler_t *smp;
    report_profile_t *prof;
} memory_sink_t;

static void emit_memory(const scry_sample_t *s, void *ctx)
{
    memory_sink_t *k = ctx;
    scry_sample_t named = *s;
    if (k->smp && (!named.thread_name || !named.thread_name[0]))
        named.thread_name = sampler_thread_name(k->smp, named.tid);
    report_profile_add(k->prof, &named);
}

typedef struct progress {
    int tty;
    int idle; /* --idle: every thread is sampled, not only the running ones */
    uint64_t last_ns;
    uint64_t start_ns;
    memprof_t *mem; /* --memory: drained after every tick */
    pystate_target_t *target;
    memory_sink_t sink;
    int limit_said; /* --subprocesses: family_limit_note printed */
} progress_t;

/* Moves the shim's pending events into the profile. A corrupt ring ends memory
 * recording (CPU sampling goes on). */
static void drain_memory(progress_t *p)
{
    if (!p->mem)
        return;
    int n = memprof_drain(p->mem, p->target, emit_memory, &p->sink);
    if (n < 0) {
        fprintf(stderr, "scry: memory recording stopped: %s\n", scry_strerror(n));
        memprof_free(p->mem);
        p->mem = NULL;
    }
}

/* After each round: drains memory, and on a terminal prints the counters once a second. */
static int progress_round(progress_t *p, const sampler_stats_t *st, size_t nprocs)
{
    if (!p->tty)
        return 0;
    uint64_t now = scry_now_ns();
    if (now - p->last_ns < 1000000000ull)
        return 0;
    p->last_ns = now;
    double el = (double)(now - p->start_ns) / 1e9;
    char procs[48] = "";
    if (nprocs)
        snprintf(procs, sizeof procs, " in %zu process%s", nprocs, nprocs > 1 ? "es" : "");
    fprintf(stderr,
            "\rscry: %.0f s, %llu ticks (%.0f/s), %llu samples of %s threads%s, %llu errors   ", el,
            (unsigned long long)st->ticks, el > 0 ? (double)st->ticks / el : 0.0,
            (unsigned long long)st->samples, p->idle ? "all" : "running", procs,
            (unsigned long long)st->errors);
    fflush(stderr);
    return 0;
}

static int show_progress(sampler_t *s, void *ctx)
{
    progress_t *p = ctx;
    /* Memory is recorded until the interpreter starts its teardown (the frees of
     * Py_Finalize would otherwise bring every line's net to zero): the shim stops itself
     * at that instant; scry drains what came before and then disables the ring. */
    drain_memory(p);
    if (p->mem && sampler_stats(s)->finalizing)
        memprof_stop(p->mem);
    return progress_round(p, sampler_stats(s), 0);
}

static int show_family_progress(family_t *f, void *ctx)
{
    sampler_stats_t st;
    uint64_t torn, overflow;
    family_stats(f, &st, &torn, &overflow);
    const family_proc_info_t *procs;
    size_t n = 0, live = family_procs(f, &procs);
    for (size_t i = 0; i < live; i++)
        n += procs[i].sampled && !procs[i].exited;
    progress_t *p = ctx;
    if (!p->limit_said && family_limit_note(f)[0]) { /* at once; the count at the end */
        p->limit_said = 1;
        fprintf(stderr,
                "%sscry: --subprocesses: descriptors run short (RLIMIT_NOFILE): new child "
                "processes are no longer followed; those followed go on (the count at the end)\n",
                p->tty ? "\r\033[K" : "");
    }
    return progress_round(p, &st, n);
}

/* Ends the launched program CHILD, which still runs although the recording is over (WHY:
 * --duration elapsed, or it never became a Python process scry can read): SIGTERM, then
 * SIGKILL if it has not exited within 3 s, and says so. Returns 1 once it is reaped (its
 * status in *STATUS), 0 if waitpid failed. */
static int end_launched(pid_t child, const char *why, int *status)
{
    fprintf(stderr, "scry: %s: ending the launched program (pid %d, SIGTERM)\n", why, (int)child);
    kill(child, SIGTERM);
    uint64_t give_up = scry_now_ns() + 3000000000ull;
    for (;;) {
        pid_t r = waitpid(child, status, WNOHANG);
        if (r == child)
            return 1;
        if (r < 0)
            return 0;
        if (scry_now_ns() >= give_up)
            break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "scry: pid %d did not exit within 3 s of SIGTERM: SIGKILL\n", (int)child);
    kill(child, SIGKILL);
    return waitpid(child, status, 0) == child;
}

/* One recording, from opening the target to the written file. */
typedef struct recording {
    const scry_config_t *cfg;
    strtab_t *strings;
    pystate_target_t *t; /* NULL: a launched command not (yet) Python (--subprocesses) */
    sampler_t *smp;
    family_t *fam;           /* --subprocesses */
    fammem_t *fm;            /* --subprocesses --memory: a ring per process */
    report_process_t *procs; /* --subprocesses: what the report lists */
    report_profile_t *prof;
    memprof_t *mem;
    srcread_t *src;
    pid_t child; /* launch mode: the program scry started */
    int child_status, child_reaped;
    int end_child; /* 1: not profilable, 2: --duration elapsed */
    char command[4096];
    proc_container_t ct;
    report_container_t rct;
    int in_container;
    char outname[600]; /* the output's name when scry made it up (no --output) */
} recording_t;

/* Goes on without memory profiling, saying WHY. */
static void drop_memory(recording_t *r, const char *why)
{
    fprintf(stderr, "scry: %s; going on with CPU profiling only\n", why);
    memprof_free(r->mem);
    r->mem = NULL;
}

/* Launch mode: starts the command (with the shim preloaded for --memory) and waits until
 * it is a Python process scry can read. Returns 0, or -1 having said why. */
static int open_launched(recording_t *r)
{
    const scry_config_t *cfg = r->cfg;
    if (r->mem && memprof_create_ring(r->mem, NULL) != 0)
        drop_memory(r, "cannot create the memory ring");
    if (launch_start(cfg->argv, r->mem ? memprof_launch_env(r->mem) : NULL,
                     r->mem ? memprof_ring_fd(r->mem) : -1, r->mem ? ring_for_child : NULL, r->mem,
                     &r->child) != 0)
        return -1;
    proc_join_argv(cfg->argv, r->command, sizeof r->command);
    /* --subprocesses: the command is one more process of the family, tried as Python like
     * its descendants (a shell, a wrapper, a delayed start are followed). With --memory it
     * is waited for 1 s first, so that a Python command's preloaded shim starts with it. */
    if (cfg->subprocesses && !r->mem)
        return 0;
    char msg[1024] = "";
    int err = launch_wait_python(r->child, r->strings, cfg->subprocesses ? 1.0 : 10.0,
                                 &cfg->open_opts, r->mem ? start_memory : NULL, &r->mem, &r->t,
                                 &r->child_status, msg, sizeof msg);
    if (err == SCRY_E_GONE) {
        r->child_reaped = 1;
        fprintf(stderr, "scry: '%s' exited before scry could read it as Python (status %d)\n",
                cfg->argv[0], WIFEXITED(r->child_status) ? WEXITSTATUS(r->child_status) : -1);
        return -1;
    }
    if (err && cfg->subprocesses && err != SCRY_E_UNSUPPORTED && err != SCRY_E_PERM) {
        /* not Python (yet): its Python descendants get the shim injected instead */
        memprof_free(r->mem);
        r->mem = NULL;
        return 0;
    }
    if (err) {
        fprintf(stderr, "scry: %s\n", msg[0] ? msg : scry_strerror(err));
        r->end_child = 1; /* rather than wait for a program scry was to profile */
        return -1;
    }
    char mmsg[600] = "";
    if (r->mem && memprof_launch_fallback(r->mem, r->t, mmsg, sizeof mmsg) != 0)
        drop_memory(r, mmsg[0] ? mmsg : "cannot start memory recording");
    return 0;
}

/* Attach mode: opens --pid (injecting the shim for --memory). Returns 0, or -1 having said
 * why. */
static int open_attached(recording_t *r)
{
    const scry_config_t *cfg = r->cfg;
    if (sampler_open_target(cfg->pid, r->strings, &cfg->open_opts, &r->t) != 0)
        return -1;
    proc_cmdline(cfg->pid, r->command, sizeof r->command);
    char msg[600] = "";
    if (r->mem && memprof_inject(r->mem, r->t, msg, sizeof msg))
        drop_memory(r, msg);
    else if (r->mem && memprof_start(r->mem, r->t) != 0)
        drop_memory(r, "cannot start memory recording");
    return 0;
}

/* The empty profile of the open target, and the source reader the report will use.
 * Returns 0, or -1 when out of memory. */
static int new_profile(recording_t *r)
{
    const scry_config_t *cfg = r->cfg;
    const pystate_info_t *info = r->t ? pystate_target_info(r->t) : NULL;
    pid_t pid = info ? info->pid : r->child;
    /* Pin the target's root and credentials now, while it lives: the report reads source
     * files through them only (never through scry's own root, never as root). */
    int serr = 0;
    r->src = srcread_new_pid(pid, &serr);
    if (r->src && cfg->source_creds)
        srcread_set_creds(r->src, cfg->source_creds);
    if (!r->src && !cfg->quiet)
        fprintf(stderr, "scry: the report will show no source: %s\n", scry_strerror(serr));
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    r->in_container = cmd_container(pid, &r->ct, &r->rct);
    report_meta_t meta = {
        .pid = pid,
        .ns_pid = info && info->ns_pid != info->pid ? info->ns_pid : 0,
        .container = r->in_container ? &r->rct : NULL,
        .python_version = info ? info->version : NULL,
        .command = r->command,
        .rate_hz = cfg->rate_hz,
        .start_unix_ns = (int64_t)wall.tv_sec * 1000000000ll + wall.tv_nsec,
        .start_mono_ns = scry_now_ns(),
        .flags = (cfg->threads ? REPORT_F_THREADS : 0) | (cfg->idle ? REPORT_F_IDLE : 0) |
                 (cfg->native ? REPORT_F_NATIVE : 0) | (cfg->gil ? REPORT_F_GIL : 0) |
                 (cfg->memory ? REPORT_F_MEMORY : 0) | (cfg->all_lines ? REPORT_F_ALL_LINES : 0),
        .include = cfg->include.pat,
        .ninclude = cfg->include.n,
        .exclude = cfg->exclude.pat,
        .nexclude = cfg->exclude.n,
    };
    r->prof = report_profile_new(&meta);
    return r->prof ? 0 : -1;
}

/* Opens the output: stdout for "-"; a name of scry's own making (no --output, kept in
 * R->outname) is created, never followed or reused. *PATH is set to the name used. Returns
 * NULL having said why. */
static FILE *open_output(recording_t *r, const char **path)
{
    char *name = r->outname;
    size_t len = sizeof r->outname;
    *path = r->cfg->output;
    if (!*path) {
        char stamp[32];
        time_t now = time(NULL);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
        snprintf(name, len, "scry-%d-%s.%s",
                 (int)(r->t ? pystate_target_info(r->t)->pid : r->child), stamp,
                 report_format_extension((enum report_format)r->cfg->format_id));
        *path = name;
    }
    FILE *out = NULL;
    if (strcmp(*path, "-") == 0) {
        out = stdout;
    } else if (*path == name) {
        /* perhaps in a shared directory: create it, never follow or reuse what someone put
         * there first */
        int fd = open(*path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        out = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (fd >= 0 && !out)
            close(fd);
    } else {
        out = fopen(*path, "w");
    }
    if (!out)
        fprintf(stderr, "scry: cannot write %s: %s\n", *path, strerror(errno));
    return out;
}

/* Writes the profile to its output. Returns 0, or -1 having said why. */
static int write_profile(recording_t *r, const char **path)
{
    FILE *out = open_output(r, path);
    if (!out)
        return -1;
    /* metric_id -1: automatic (CPU when there are CPU samples) */
    report_options_t ropt = {.color = out == stdout && isatty(1),
                             .metric = r->cfg->metric_id,
                             .read_source = r->src ? srcread_file_cb : NULL,
                             .source_ctx = r->src};
    int werr = report_write(r->prof, (enum report_format)r->cfg->format_id, out, &ropt);
    if (out != stdout && fclose(out) != 0)
        werr = werr ? werr : SCRY_E_IO;
    else if (out == stdout)
        fflush(stdout);
    if (werr) {
        fprintf(stderr, "scry: writing %s failed: %s\n", *path, scry_strerror(werr));
        return -1;
    }
    return 0;
}

/* The end of the recording as the report states it (ELAPSED seconds of sampling); MEMLINE
 * gets the memory summary line ("" without --memory). */
/* The sampler's counters, or the family's totals (--subprocesses); torn stacks in *TORN. */
static void run_stats(const recording_t *r, sampler_stats_t *st, uint64_t *torn)
{
    uint64_t overflow;
    if (r->fam) {
        family_stats(r->fam, st, torn, &overflow);
        return;
    }
    *st = *sampler_stats(r->smp);
    *torn = pystate_target_stats(sampler_target(r->smp)).dropped;
}

/* --subprocesses: the processes as the report lists them (in R->procs). */
static size_t list_processes(recording_t *r)
{
    const family_proc_info_t *fp;
    size_t n = family_procs(r->fam, &fp);
    free(r->procs);
    if (!n || !(r->procs = calloc(n, sizeof *r->procs)))
        return 0;
    for (size_t i = 0; i < n; i++)
        r->procs[i] = (report_process_t){.pid = fp[i].pid,
                                         .command = fp[i].command,
                                         .python_version = fp[i].version,
                                         .note = fp[i].why,
                                         .samples = fp[i].samples,
                                         .cpu_ns = fp[i].weight_ns,
                                         .exited = fp[i].exited};
    return n;
}

static report_end_t end_of(recording_t *r, double elapsed, char *memline, size_t len)
{
    sampler_stats_t stats;
    uint64_t dropped;
    run_stats(r, &stats, &dropped);
    const sampler_stats_t *st = &stats;
    report_end_t end = {
        .duration_s = elapsed,
        .ticks = st->ticks,
        .errors = st->errors + dropped,
        .err_rounds = st->errors,
        .err_torn = dropped,
        .rate_achieved_hz = elapsed > 0 ? (double)st->ticks / elapsed : 0,
        .late = st->late,
        .late_mean_ms = st->late ? (double)st->late_total_ns / (double)st->late / 1e6 : 0,
        .late_max_ms = (double)st->late_max_ns / 1e6,
        .target_exited = st->target_exited && !r->child,
        .gil_fraction = -1, /* the report's: the share of the samples that held it */
    };
    if (r->fam) {
        end.nprocesses = list_processes(r);
        end.processes = r->procs;
    }
    memline[0] = 0;
    uint64_t events = 0, mdropped = 0, bad = 0;
    if (r->fm) {
        fammem_counts(r->fm, &events, &mdropped, &bad);
        fammem_describe(r->fm, memline, len);
    } else if (r->mem) {
        memprof_counts(r->mem, &events, &mdropped, &bad);
        memprof_describe(r->mem, memline, len);
    }
    end.dropped = mdropped;
    end.errors += bad;
    end.err_records = bad;
    return end;
}

/* The summary line on stderr. */
/* --subprocesses: a line per process under the summary. */
static void print_processes(const report_end_t *end)
{
    for (size_t i = 0; i < end->nprocesses; i++) {
        const report_process_t *q = &end->processes[i];
        fprintf(stderr, "scry:   pid %d%s%s%s: %llu samples, %.2f s of CPU%s%s%s: %.120s\n",
                (int)q->pid, q->python_version[0] ? " (Python " : "", q->python_version,
                q->python_version[0] ? ")" : "", (unsigned long long)q->samples,
                (double)q->cpu_ns / 1e9, q->exited ? ", exited" : "",
                q->note[0] ? ", not sampled: " : "", q->note, q->command);
    }
}

static void print_summary(const recording_t *r, const report_end_t *end, const char *path,
                          const char *memline)
{
    sampler_stats_t stats;
    uint64_t torn;
    run_stats(r, &stats, &torn);
    const sampler_stats_t *st = &stats;
    const sampler_t *smp = r->fam ? family_root_sampler(r->fam) : r->smp;
    const pystate_info_t *info = r->t ? pystate_target_info(r->t) : NULL;
    char lostbuf[256] = "";
    size_t ll = 0;
    if (st->lost)
        ll += (size_t)snprintf(lostbuf, sizeof lostbuf, ", %llu records lost",
                               (unsigned long long)st->lost);
    if (st->syscall_stops && ll < sizeof lostbuf)
        ll += (size_t)snprintf(lostbuf + ll, sizeof lostbuf - ll,
                               ", %llu stops at a system call's exit not counted",
                               (unsigned long long)st->syscall_stops);
    if (st->execs && smp && ll < sizeof lostbuf)
        ll += (size_t)snprintf(lostbuf + ll, sizeof lostbuf - ll,
                               ", followed %llu exec%s (now Python %s)",
                               (unsigned long long)st->execs, st->execs > 1 ? "s" : "",
                               pystate_target_info(sampler_target(smp))->version);
    if (r->fam && ll < sizeof lostbuf)
        ll += (size_t)snprintf(lostbuf + ll, sizeof lostbuf - ll, "; %s",
                               family_discovery_desc(r->fam));
    if (st->read_records && ll < sizeof lostbuf)
        snprintf(lostbuf + ll, sizeof lostbuf - ll,
                 ", Python stacks read %.0f us after their record (max %.1f ms)",
                 (double)st->read_delay_ns / (double)st->read_records / 1e3,
                 (double)st->read_delay_max_ns / 1e6);
    double busy_us = st->ticks ? (double)st->busy_ns / (double)st->ticks / 1e3 : 0;
    char errs[160] = "";
    if (end->errors)
        snprintf(errs, sizeof errs,
                 " (%llu unreadable ticks, %llu torn stacks dropped, %llu bad memory records)",
                 (unsigned long long)end->err_rounds, (unsigned long long)end->err_torn,
                 (unsigned long long)end->err_records);
    char where[128] = "";
    if (r->in_container)
        snprintf(where, sizeof where, " in container %s%s%.12s", r->ct.runtime,
                 r->ct.runtime[0] ? ":" : "", r->ct.id);
    char from[200];
    size_t nproc = 0;
    for (size_t i = 0; i < end->nprocesses; i++)
        nproc += end->processes[i].samples > 0;
    if (r->fam)
        snprintf(from, sizeof from, "pid %d%s and its children (%zu Python process%s sampled)",
                 (int)(info ? info->pid : r->child), where, nproc, nproc == 1 ? "" : "es");
    else
        snprintf(from, sizeof from, "pid %d%s (Python %s)", (int)info->pid, where, info->version);
    fprintf(stderr,
            "scry: %llu samples in %.1f s at %.0f Hz (%.0f Hz achieved) from %s, %llu errors%s, "
            "late %llu of %llu ticks (max %.1f ms), %.1f us per tick; sampler: %s%s%s; wrote %s\n",
            (unsigned long long)st->samples, end->duration_s, r->cfg->rate_hz,
            end->rate_achieved_hz, from, (unsigned long long)end->errors, errs,
            (unsigned long long)st->late, (unsigned long long)st->ticks, end->late_max_ms, busy_us,
            r->fam ? family_backend_desc(r->fam) : sampler_backend_desc(r->smp), lostbuf,
            end->target_exited ? "; the target exited while sampling, kept what was collected" : "",
            strcmp(path, "-") == 0 ? "to standard output" : path);
    if (memline[0])
        fprintf(stderr, "scry: %s\n", memline);
    if (r->fam && family_limit_note(r->fam)[0])
        fprintf(stderr, "scry: %s\n", family_limit_note(r->fam));
    print_processes(end);
}

/* Samples until --duration, Ctrl-C or the target's exit. Returns 0, or -1 having said why
 * (--async refused, out of memory). */
static int sample(recording_t *r, double *elapsed)
{
    const scry_config_t *cfg = r->cfg;
    if (cfg->async_tasks && r->t) {
        char why[400];
        if (pystate_async_check(r->t, why, sizeof why) != 0) {
            fprintf(stderr, "scry: --async: %s\n", why);
            return -1;
        }
    }
    sampler_opts_t so;
    options_sampler(cfg, &so);
    if (cfg->subprocesses) {
        family_hooks_t hooks = {0};
        if (cfg->memory) {
            r->fm = fammem_new(cfg, r->mem); /* the launch ring, if any, is the root's */
            r->mem = NULL;
            if (r->fm)
                fammem_hooks(r->fm, &hooks);
        }
        r->fam = family_new(r->t ? pystate_target_info(r->t)->pid : r->child, r->t, &so, r->strings,
                            1, r->fm ? &hooks : NULL, NULL, 0);
    } else
        r->smp = sampler_new(&so, r->t, r->strings);
    if (!r->smp && !r->fam) {
        if (!sampler_refused(&so))
            fprintf(stderr, "scry: out of memory\n");
        return -1;
    }
    progress_t prog = {.tty = isatty(2) && !cfg->quiet,
                       .idle = cfg->idle,
                       .start_ns = scry_now_ns(),
                       .mem = r->mem,
                       .target = r->t,
                       .sink = {r->smp, r->prof}};
    prog.last_ns = prog.start_ns;
    if (r->child && !r->fam)
        watch_child(r->child);
    int err = r->fam ? family_run(r->fam, cfg->duration_s, &record_stop, emit_to_profile, r->prof,
                                  show_family_progress, &prog)
                     : sampler_run(r->smp, cfg->duration_s, &record_stop, emit_to_profile, r->prof,
                                   show_progress, &prog);
    if (r->child && !r->fam)
        watch_child(0);
    if (r->fam)
        family_end(r->fam); /* the members' last memory events */
    *elapsed = (double)(scry_now_ns() - prog.start_ns) / 1e9;
    drain_memory(&prog); /* what the shim wrote since the last tick */
    r->mem = prog.mem;
    if (prog.tty)
        fprintf(stderr, "\r\033[K");
    if (err)
        fprintf(stderr, "scry: sampling stopped: %s\n", scry_strerror(err));
    if (r->child) {
        /* Interrupted: the program got the same Ctrl-C and is waited for at the end. After
         * --duration, if it still runs, the profile is written first and then the program
         * is ended (as py-spy does), rather than waiting for a program that may never
         * exit. */
        if (waitpid(r->child, &r->child_status, WNOHANG) == r->child)
            r->child_reaped = 1;
        else if (!record_stop && cfg->duration_s > 0)
            r->end_child = 2;
    }
    return 0;
}

/* Launch mode: ends the program when scry cannot profile it or --duration elapsed, else
 * waits for it, so that it is not left a zombie. */
static void finish_child(recording_t *r)
{
    if (!r->child || r->child_reaped)
        return;
    if (r->end_child) {
        char why[64] = "scry cannot profile it";
        if (r->end_child == 2)
            snprintf(why, sizeof why, "--duration %g s elapsed", r->cfg->duration_s);
        r->child_reaped = end_launched(r->child, why, &r->child_status);
    }
    if (!r->child_reaped)
        waitpid(r->child, &r->child_status, 0);
}

int cmd_record(const scry_config_t *cfg)
{
    install_signals();
    recording_t r = {.cfg = cfg, .strings = strtab_new()};
    int rc = 1;
    double elapsed = 0;
    const char *path = NULL;
    if (!r.strings)
        goto out;
    /* --memory without the shim is refused (memprof_new said why): never a CPU-only
     * profile where memory was asked for */
    if (cfg->memory && !(r.mem = memprof_new(cfg->memory_sample_bytes, 0)))
        goto out;
    if (r.mem && cfg->inject)
        memprof_set_inject(r.mem, !strcmp(cfg->inject, "ptrace")        ? MEMPROF_INJECT_PTRACE
                                  : !strcmp(cfg->inject, "remote-exec") ? MEMPROF_INJECT_REMOTE_EXEC
                                                                        : MEMPROF_INJECT_AUTO);
    if ((cfg->argv ? open_launched(&r) : open_attached(&r)) != 0)
        goto out;
    if (new_profile(&r) != 0) {
        fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    if (sample(&r, &elapsed) != 0)
        goto out;
    char memline[256];
    report_end_t end = end_of(&r, elapsed, memline, sizeof memline);
    report_profile_set_end(r.prof, &end);
    if (write_profile(&r, &path) != 0)
        goto out;
    if (!cfg->quiet)
        print_summary(&r, &end, path, memline);
    rc = 0;
out:
    finish_child(&r);
    srcread_free(r.src);
    memprof_free(r.mem); /* disables the ring: the shim passes through from now on */
    sampler_free(r.smp);
    family_free(r.fam);
    fammem_free(r.fm);
    free(r.procs);
    report_profile_free(r.prof);
    pystate_target_free(r.t);
    strtab_free(r.strings);
    return rc;
}
