/* recording.c - one recording: open, sample, drain, end (recording.h). */
#include "recording.h"
#include "recording_internal.h"

#include "asyncio.h"
#include "launch.h"
#include "procinfo.h"
#include "scry_err.h"
#include "scry_time.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void recording__note(const recording_t *r, const char *fmt, ...)
{
    FILE *log = r->opts.log ? r->opts.log : stderr;
    va_list ap;
    va_start(ap, fmt);
    fputs("scry: ", log);
    vfprintf(log, fmt, ap);
    fputc('\n', log);
    va_end(ap);
}

/* Keeps ERR's reason (FMT) for recording_error, and logs it unless a layer below already
 * printed it (LOG 0). Returns ERR. */
static int fail(recording_t *r, int err, int log, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    if (log)
        recording__note(r, "%s", r->error);
    return err;
}

/* Launch mode with one process: the launched program's pid, whose exit ends the recording
 * at once (the sampler would notice only at its next thread listing, up to a second at low
 * rates: `scry record -- python3 -c pass` took 0.2 s more than the program). */
static volatile sig_atomic_t launched_child;
static volatile sig_atomic_t *launched_stop;

static void on_child(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (launched_child && si->si_pid == launched_child &&
        (si->si_code == CLD_EXITED || si->si_code == CLD_KILLED || si->si_code == CLD_DUMPED))
        *launched_stop = 1;
}

/* While sampling a launched program (CHILD > 0): its exit sets *STOP, which interrupts the
 * sampler's wait (the signal) and ends the recording. CHILD 0 restores the default. */
static void watch_child(pid_t child, volatile sig_atomic_t *stop)
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
    launched_stop = stop;
    launched_child = child;
    sigaction(SIGCHLD, &sa, NULL);
    siginfo_t si = {0};
    /* exited before the handler was there: not reaped here (WNOWAIT), only seen */
    if (child > 0 && waitid(P_PID, (id_t)child, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        si.si_pid == child)
        *stop = 1;
}

static volatile sig_atomic_t *signal_flag;

static void on_stop_signal(int sig)
{
    (void)sig;
    *signal_flag = 1;
}

void recording_stop_on_signals(volatile sig_atomic_t *flag, int quit)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    signal_flag = flag;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (quit)
        sigaction(SIGQUIT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

recording_t *recording_new(const recording_opts_t *opts)
{
    recording_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->opts = *opts;
    r->stop = opts->stop ? opts->stop : &r->own_stop;
    return r;
}

/* Goes on without memory profiling, saying WHY. */
static void drop_memory(recording_t *r, const char *why)
{
    recording__note(r, "%s; going on with CPU profiling only", why);
    memprof_free(r->mem);
    r->mem = NULL;
}

/* Launch mode: as soon as the launched program is recognised as Python, its layout goes
 * into the ring and recording starts (the preloaded shim holds the program before main()
 * until then). On failure memory profiling is dropped. */
static void start_memory(pystate_target_t *t, void *ctx)
{
    recording_t *r = ctx;
    if (r->mem && memprof_start(r->mem, t) != 0)
        drop_memory(r, "cannot start memory recording");
}

/* Launch mode: once the child's pid is known and before it execs, only the program scry
 * launched (and the programs it execs into) may claim the ring. */
static void ring_for_child(pid_t child, void *ctx)
{
    recording_t *r = ctx;
    int err = memprof_set_target(r->mem, child);
    if (err)
        recording__note(r, "cannot prepare the memory ring: %s", scry_strerror(err));
}

/* Launch mode: starts the command (with the shim preloaded for --memory) and waits until
 * it is a Python process scry can read. Returns 0 or a negative code (recording_error). */
static int open_launched(recording_t *r)
{
    const recording_opts_t *o = &r->opts;
    if (r->mem && memprof_create_ring(r->mem, NULL) != 0)
        drop_memory(r, "cannot create the memory ring");
    int err = launch_start(o->argv, r->mem ? memprof_launch_env(r->mem) : NULL,
                           r->mem ? memprof_ring_fd(r->mem) : -1, r->mem ? ring_for_child : NULL, r,
                           &r->child);
    if (err)
        return fail(r, err, 0, "cannot run '%s': %s", o->argv[0], scry_strerror(err));
    proc_join_argv(o->argv, r->command, sizeof r->command);
    /* --subprocesses: the command is one more process of the family, tried as Python like
     * its descendants (a shell, a wrapper, a delayed start are followed). With --memory it
     * is waited for 1 s first, so that a Python command's preloaded shim starts with it. */
    if (o->subprocesses && !r->mem)
        return 0;
    char msg[1024] = "";
    err = launch_wait_python(r->child, r->strings, o->subprocesses ? 1.0 : 10.0,
                             &o->sampler.open_opts, r->mem ? start_memory : NULL, r, &r->t,
                             &r->child_status, msg, sizeof msg);
    if (err == SCRY_E_GONE) {
        r->child_reaped = 1;
        return fail(r, err, 1, "'%s' exited before scry could read it as Python (status %d)",
                    o->argv[0], WIFEXITED(r->child_status) ? WEXITSTATUS(r->child_status) : -1);
    }
    if (err && o->subprocesses && err != SCRY_E_UNSUPPORTED && err != SCRY_E_PERM) {
        /* not Python (yet): its Python descendants get the shim injected instead */
        memprof_free(r->mem);
        r->mem = NULL;
        return 0;
    }
    if (err) {
        r->end_child = 1; /* rather than wait for a program scry was to profile */
        return fail(r, err, 1, "%s", msg[0] ? msg : scry_strerror(err));
    }
    char mmsg[600] = "";
    if (r->mem && memprof_launch_fallback(r->mem, r->t, mmsg, sizeof mmsg) != 0)
        drop_memory(r, mmsg[0] ? mmsg : "cannot start memory recording");
    return 0;
}

/* Attach mode: opens opts.pid (injecting the shim for --memory). Returns 0 or a negative
 * code (recording_error). */
static int open_attached(recording_t *r)
{
    pid_t pid = r->opts.pid;
    char why[2048];
    int err = sampler_open_target_msg(pid, r->strings, &r->opts.sampler.open_opts, &r->t, why,
                                      sizeof why);
    if (err)
        return fail(r, err, 1, "%s", why);
    proc_cmdline(pid, r->command, sizeof r->command);
    char msg[600] = "";
    if (r->mem && memprof_inject(r->mem, r->t, msg, sizeof msg))
        drop_memory(r, msg);
    else if (r->mem && memprof_start(r->mem, r->t) != 0)
        drop_memory(r, "cannot start memory recording");
    return 0;
}

/* The empty profile of the open target, and the source reader the report will use.
 * Returns 0 or SCRY_E_NOMEM. */
static int new_profile(recording_t *r)
{
    const recording_opts_t *o = &r->opts;
    const sampler_opts_t *so = &o->sampler;
    const pystate_info_t *info = r->t ? pystate_target_info(r->t) : NULL;
    pid_t pid = recording_pid(r);
    /* Pin the target's root and credentials now, while it lives: the report reads source
     * files through them only (never through scry's own root, never as root). */
    int serr = 0;
    r->src = srcread_new_pid(pid, &serr);
    if (r->src && o->source_creds)
        srcread_set_creds(r->src, o->source_creds);
    if (!r->src && !o->quiet)
        recording__note(r, "the report will show no source: %s", scry_strerror(serr));
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    r->in_container = recording_container(pid, &r->ct, &r->rct);
    report_meta_t meta = {
        .pid = pid,
        .ns_pid = info && info->ns_pid != info->pid ? info->ns_pid : 0,
        .container = r->in_container ? &r->rct : NULL,
        .python_version = info ? info->version : NULL,
        .command = r->command,
        .rate_hz = so->rate_hz,
        .start_unix_ns = (int64_t)wall.tv_sec * 1000000000ll + wall.tv_nsec,
        .start_mono_ns = scry_now_ns(),
        .flags = (so->threads ? REPORT_F_THREADS : 0) | (so->idle ? REPORT_F_IDLE : 0) |
                 (so->native ? REPORT_F_NATIVE : 0) | (so->gil ? REPORT_F_GIL : 0) |
                 (o->memory ? REPORT_F_MEMORY : 0) | (o->all_lines ? REPORT_F_ALL_LINES : 0),
        .include = o->include,
        .ninclude = o->ninclude,
        .exclude = o->exclude,
        .nexclude = o->nexclude,
    };
    r->prof = report_profile_new(&meta);
    return r->prof ? 0 : fail(r, SCRY_E_NOMEM, 1, "out of memory");
}

/* The sampler for one process, or the family (--subprocesses, with a ring per member for
 * --memory). Returns 0 or a negative code (recording_error). */
static int new_sampler(recording_t *r)
{
    const recording_opts_t *o = &r->opts;
    if (o->subprocesses) {
        family_hooks_t hooks = {0};
        if (o->memory) {
            /* the launch ring, if any, is the root's */
            r->fm = fammem_new(o->memory_sample_bytes, o->inject, o->quiet, o->log, r->mem);
            r->mem = NULL;
            if (r->fm)
                fammem_hooks(r->fm, &hooks);
        }
        r->fam = family_new(recording_pid(r), r->t, &o->sampler, r->strings, 1,
                            r->fm ? &hooks : NULL, NULL, 0);
    } else {
        r->smp = sampler_new(&o->sampler, r->t, r->strings);
    }
    if (r->smp || r->fam)
        return 0;
    if (sampler_refused(&o->sampler)) /* the message was printed */
        return fail(r, SCRY_E_UNSUPPORTED, 0, "the sampler '%s' was refused",
                    o->sampler.backend ? o->sampler.backend : "auto");
    return fail(r, SCRY_E_NOMEM, 1, "out of memory");
}

int recording_open(recording_t *r)
{
    const recording_opts_t *o = &r->opts;
    if (r->opened)
        return fail(r, SCRY_E_INVAL, 0, "the recording is open already");
    if (!o->argv && o->pid <= 0)
        return fail(r, SCRY_E_INVAL, 0, "a recording needs a pid or a command");
    r->opened = 1;
    if (!(r->strings = strtab_new()))
        return fail(r, SCRY_E_NOMEM, 1, "out of memory");
    /* --memory without the shim is refused (memprof_new said why): never a CPU-only
     * profile where memory was asked for */
    if (o->memory && !(r->mem = memprof_new(o->memory_sample_bytes, 0)))
        return fail(r, SCRY_E_NOTFOUND, 0, "--memory needs the allocator shim");
    if (r->mem && o->inject)
        memprof_set_inject(r->mem, fammem_inject_how(o->inject, MEMPROF_INJECT_AUTO));
    int err = o->argv ? open_launched(r) : open_attached(r);
    if (!err && !o->emit)
        err = new_profile(r);
    r->emit = o->emit ? o->emit : recording__emit;
    r->emit_ctx = o->emit ? o->emit_ctx : r->prof;
    if (!err && o->async_tasks && r->t) {
        char why[400];
        if (pystate_async_check(r->t, why, sizeof why) != 0)
            err = fail(r, SCRY_E_UNSUPPORTED, 1, "--async: %s", why);
    }
    return err ? err : new_sampler(r);
}

int recording_drain(recording_t *r)
{
    if (!r->mem)
        return 0;
    int n = memprof_drain(r->mem, r->t, recording__emit_memory, r);
    if (n < 0) {
        recording__note(r, "memory recording stopped: %s", scry_strerror(n));
        memprof_free(r->mem);
        r->mem = NULL;
        return SCRY_E_CORRUPT;
    }
    return 0;
}

/* Launch mode, after sampling: a program that still runs after --duration is ended by
 * recording_free, after the profile is written (as py-spy does), rather than waited for;
 * one interrupted got the same Ctrl-C and is waited for. */
static void after_sampling(recording_t *r)
{
    if (!r->child || r->opts.emit)
        return;
    if (waitpid(r->child, &r->child_status, WNOHANG) == r->child)
        r->child_reaped = 1;
    else if (!*r->stop && r->opts.duration_s > 0)
        r->end_child = 2;
}

int recording_run(recording_t *r)
{
    const recording_opts_t *o = &r->opts;
    if ((!r->smp && !r->fam) || r->ran)
        return fail(r, SCRY_E_INVAL, 0, "the recording is not open, or ran already");
    r->ran = 1;
    recording__progress_start(r);
    int watch = r->child && !r->fam && !o->emit;
    if (watch)
        watch_child(r->child, r->stop);
    r->stopped_by = r->fam ? family_run(r->fam, o->duration_s, r->stop, r->emit, r->emit_ctx,
                                        recording__family_tick, r)
                           : sampler_run(r->smp, o->duration_s, r->stop, r->emit, r->emit_ctx,
                                         recording__tick, r);
    if (watch)
        watch_child(0, r->stop);
    if (r->fam)
        family_end(r->fam); /* the members' last memory events */
    r->elapsed_s = (double)(scry_now_ns() - r->start_ns) / 1e9;
    recording_drain(r); /* what the shim wrote since the last tick */
    recording__progress_end(r);
    after_sampling(r);
    return 0;
}

report_profile_t *recording_profile(const recording_t *r)
{
    return r->prof;
}

int recording_write(recording_t *r, enum report_format fmt, FILE *out, const report_options_t *opts)
{
    /* metric -1: automatic (CPU when there are CPU samples) */
    report_options_t ropt = opts ? *opts : (report_options_t){.metric = -1};
    ropt.read_source = r->src ? srcread_file_cb : NULL;
    ropt.source_ctx = r->src;
    if (!r->ended)
        return fail(r, SCRY_E_INVAL, 0, "the recording has not ended");
    return report_write(r->prof, fmt, out, &ropt);
}

pid_t recording_pid(const recording_t *r)
{
    return r->t ? pystate_target_info(r->t)->pid : r->child;
}

int recording_stopped_by(const recording_t *r)
{
    return r->stopped_by;
}

int recording_stats(const recording_t *r, sampler_stats_t *st)
{
    if (!r->smp && !r->fam)
        return SCRY_E_INVAL;
    uint64_t torn;
    recording__run_stats(r, st, &torn);
    return 0;
}

family_t *recording_family(const recording_t *r)
{
    return r->fam;
}

const pystate_info_t *recording_info(const recording_t *r)
{
    return r->t ? pystate_target_info(r->t) : NULL;
}

const char *recording_command(const recording_t *r)
{
    return r->command;
}

const char *recording_error(const recording_t *r)
{
    return r->error;
}

/* Ends the launched program CHILD, which still runs although the recording is over (WHY:
 * --duration elapsed, or it never became a Python process scry can read): SIGTERM, then
 * SIGKILL if it has not exited within 3 s, and says so. Returns 1 once it is reaped (its
 * status in *STATUS), 0 if waitpid failed. */
static int end_launched(const recording_t *r, const char *why, int *status)
{
    pid_t child = r->child;
    recording__note(r, "%s: ending the launched program (pid %d, SIGTERM)", why, (int)child);
    kill(child, SIGTERM);
    uint64_t give_up = scry_now_ns() + 3000000000ull;
    for (;;) {
        pid_t w = waitpid(child, status, WNOHANG);
        if (w == child)
            return 1;
        if (w < 0)
            return 0;
        if (scry_now_ns() >= give_up)
            break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    recording__note(r, "pid %d did not exit within 3 s of SIGTERM: SIGKILL", (int)child);
    kill(child, SIGKILL);
    return waitpid(child, status, 0) == child;
}

/* Launch mode: ends the program when scry cannot profile it or --duration elapsed, else
 * waits for it, so that it is not left a zombie. */
static void finish_child(recording_t *r)
{
    if (!r->child || r->child_reaped)
        return;
    if (r->opts.emit) { /* a live view's program: reaped when over, else left be */
        waitpid(r->child, &r->child_status, WNOHANG);
        return;
    }
    if (r->end_child) {
        char why[64] = "scry cannot profile it";
        if (r->end_child == 2)
            snprintf(why, sizeof why, "--duration %g s elapsed", r->opts.duration_s);
        r->child_reaped = end_launched(r, why, &r->child_status);
    }
    if (!r->child_reaped)
        waitpid(r->child, &r->child_status, 0);
}

void recording_free(recording_t *r)
{
    if (!r)
        return;
    finish_child(r);
    srcread_free(r->src);
    memprof_free(r->mem); /* disables the ring: the shim passes through from now on */
    sampler_free(r->smp);
    family_free(r->fam);
    fammem_free(r->fm);
    free(r->procs);
    report_profile_free(r->prof);
    pystate_target_free(r->t);
    strtab_free(r->strings);
    free(r);
}
