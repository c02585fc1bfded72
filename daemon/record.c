/* record.c - 'scry record': sample until done, then write the profile. */
#include "commands.h"

#include "asyncio.h"

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

typedef struct progress {
    int tty;
    int idle; /* --idle: every thread is sampled, not only the running ones */
    uint64_t last_ns;
    uint64_t start_ns;
    memprof_t *mem; /* --memory: drained after every tick */
    pystate_target_t *target;
    report_profile_t *prof;
} progress_t;

/* Moves the shim's pending events into the profile. A corrupt ring ends memory
 * recording (CPU sampling goes on). */
static void drain_memory(progress_t *p)
{
    if (!p->mem)
        return;
    int n = memprof_drain(p->mem, p->target, emit_to_profile, p->prof);
    if (n < 0) {
        fprintf(stderr, "scry: memory recording stopped: %s\n", scry_strerror(n));
        memprof_free(p->mem);
        p->mem = NULL;
    }
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
    if (!p->tty)
        return 0;
    uint64_t now = scry_now_ns();
    if (now - p->last_ns < 1000000000ull)
        return 0;
    p->last_ns = now;
    const sampler_stats_t *st = sampler_stats(s);
    double el = (double)(now - p->start_ns) / 1e9;
    fprintf(stderr,
            "\rscry: %.0f s, %llu ticks (%.0f/s), %llu samples of %s threads, %llu errors   ", el,
            (unsigned long long)st->ticks, el > 0 ? (double)st->ticks / el : 0.0,
            (unsigned long long)st->samples, p->idle ? "all" : "running",
            (unsigned long long)st->errors);
    fflush(stderr);
    return 0;
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

int cmd_record(const scry_config_t *cfg)
{
    enum report_format fmt = (enum report_format)cfg->format_id;
    install_signals();
    strtab_t *strings = strtab_new();
    pystate_target_t *t = NULL;
    sampler_t *smp = NULL;
    report_profile_t *prof = NULL;
    memprof_t *mem = NULL;
    srcread_t *src = NULL;
    pid_t child = 0;
    int child_status = 0, child_reaped = 0;
    int end_child = 0; /* 1: not profilable, 2: --duration elapsed */
    int rc = 1;
    char command[4096] = "";
    if (!strings)
        goto out;
    if (cfg->memory && !(mem = memprof_new(cfg->memory_sample_bytes, 0)))
        fprintf(stderr, "scry: going on without memory profiling\n");
    if (cfg->argv) {
        if (mem && memprof_create_ring(mem, NULL) != 0) {
            fprintf(stderr, "scry: cannot create the memory ring; going on without memory "
                            "profiling\n");
            memprof_free(mem);
            mem = NULL;
        }
        if (launch_start(cfg->argv, mem ? memprof_launch_env(mem) : NULL,
                         mem ? memprof_ring_fd(mem) : -1, mem ? ring_for_child : NULL, mem,
                         &child) != 0)
            goto out;
        char msg[1024] = "";
        int err =
            launch_wait_python(child, strings, 10.0, &cfg->open_opts, mem ? start_memory : NULL,
                               &mem, &t, &child_status, msg, sizeof msg);
        if (err == SCRY_E_GONE) {
            child_reaped = 1;
            fprintf(stderr, "scry: '%s' exited before scry could read it as Python (status %d)\n",
                    cfg->argv[0], WIFEXITED(child_status) ? WEXITSTATUS(child_status) : -1);
            goto out;
        }
        if (err) {
            fprintf(stderr, "scry: %s\n", msg[0] ? msg : scry_strerror(err));
            end_child = 1; /* rather than wait for a program scry was to profile */
            goto out;
        }
        if (mem) {
            char mmsg[600] = "";
            if (memprof_launch_fallback(mem, t, mmsg, sizeof mmsg) != 0) {
                fprintf(stderr, "scry: %s; going on with CPU profiling only\n",
                        mmsg[0] ? mmsg : "cannot start memory recording");
                memprof_free(mem);
                mem = NULL;
            }
        }
        procinfo_join_argv(cfg->argv, command, sizeof command);
    } else {
        if (sampler_open_target(cfg->pid, strings, &cfg->open_opts, &t) != 0)
            goto out;
        procinfo_cmdline(cfg->pid, command, sizeof command);
        if (mem) {
            char msg[600] = "";
            int merr = memprof_inject(mem, cfg->pid, pystate_target_layout(t), msg, sizeof msg);
            if (merr) {
                fprintf(stderr, "scry: %s; going on with CPU profiling only\n", msg);
                memprof_free(mem);
                mem = NULL;
            }
        }
    }
    if (mem && !cfg->argv && memprof_start(mem, t) != 0) {
        fprintf(stderr, "scry: cannot start memory recording; going on with CPU profiling only\n");
        memprof_free(mem);
        mem = NULL;
    }
    const pystate_info_t *info = pystate_target_info(t);
    /* Pin the target's root and credentials now, while it lives: the report reads source
     * files through them only (never through scry's own root, never as root). */
    int serr = 0;
    src = srcread_new_pid(info->pid, &serr);
    if (!src && !cfg->quiet)
        fprintf(stderr, "scry: the report will show no source: %s\n", scry_strerror(serr));
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    proc_container_t ct;
    report_container_t rct;
    int in_container = cmd_container(info->pid, &ct, &rct);
    report_meta_t meta = {
        .pid = info->pid,
        .ns_pid = info->ns_pid != info->pid ? info->ns_pid : 0,
        .container = in_container ? &rct : NULL,
        .python_version = info->version,
        .command = command,
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
    prof = report_profile_new(&meta);
    if (cfg->async_tasks) {
        char why[400];
        if (pystate_async_check(t, why, sizeof why) != 0) {
            fprintf(stderr, "scry: --async: %s\n", why);
            goto out;
        }
    }
    sampler_opts_t so;
    options_sampler(cfg, &so);
    smp = sampler_new(&so, t, strings);
    if (!prof || !smp) {
        if (!sampler_refused(&so))
            fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    progress_t prog = {.tty = isatty(2) && !cfg->quiet,
                       .idle = cfg->idle,
                       .start_ns = scry_now_ns(),
                       .mem = mem,
                       .target = t,
                       .prof = prof};
    prog.last_ns = prog.start_ns;
    uint64_t t0 = scry_now_ns();
    int err = sampler_run(smp, cfg->duration_s, &record_stop, emit_to_profile, prof, show_progress,
                          &prog);
    double elapsed = (double)(scry_now_ns() - t0) / 1e9;
    drain_memory(&prog); /* what the shim wrote since the last tick */
    mem = prog.mem;
    if (prog.tty)
        fprintf(stderr, "\r\033[K");
    const sampler_stats_t *st = sampler_stats(smp);
    if (err)
        fprintf(stderr, "scry: sampling stopped: %s\n", scry_strerror(err));
    if (child) {
        /* Interrupted: the program got the same Ctrl-C and is waited for at the end. After
         * --duration, if it still runs, the profile is written first and then the program
         * is ended (as py-spy does), rather than waiting for a program that may never
         * exit. */
        if (waitpid(child, &child_status, WNOHANG) == child)
            child_reaped = 1;
        else if (!record_stop && cfg->duration_s > 0)
            end_child = 2;
    }
    report_end_t end = {
        .duration_s = elapsed,
        .ticks = st->ticks,
        .errors = st->errors + pystate_target_stats(sampler_target(smp)).dropped,
        .err_rounds = st->errors,
        .err_torn = pystate_target_stats(sampler_target(smp)).dropped,
        .rate_achieved_hz = elapsed > 0 ? (double)st->ticks / elapsed : 0,
        .late = st->late,
        .late_mean_ms = st->late ? (double)st->late_total_ns / (double)st->late / 1e6 : 0,
        .late_max_ms = (double)st->late_max_ns / 1e6,
        .target_exited = st->target_exited && !child,
        .gil_fraction = st->ticks ? (double)st->gil_ticks / (double)st->ticks : -1,
    };
    char memline[256] = "";
    if (mem) {
        uint64_t events = 0, dropped = 0, bad = 0;
        memprof_counts(mem, &events, &dropped, &bad);
        end.dropped = dropped;
        end.errors += bad;
        end.err_records = bad;
        memprof_describe(mem, memline, sizeof memline);
    }
    report_profile_set_end(prof, &end);

    char outname[600];
    const char *path = cfg->output;
    if (!path) {
        char stamp[32];
        time_t now = time(NULL);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
        snprintf(outname, sizeof outname, "scry-%d-%s.%s", (int)info->pid, stamp,
                 report_format_extension(fmt));
        path = outname;
    }
    FILE *out = NULL;
    if (strcmp(path, "-") == 0) {
        out = stdout;
    } else if (path == outname) {
        /* A name of our own making, perhaps in a shared directory: create it, never follow
         * or reuse what someone put there first. */
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        out = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (fd >= 0 && !out)
            close(fd);
    } else {
        out = fopen(path, "w");
    }
    if (!out) {
        fprintf(stderr, "scry: cannot write %s: %s\n", path, strerror(errno));
        goto out;
    }
    /* metric_id -1: automatic (CPU when there are CPU samples) */
    report_options_t ropt = {.color = out == stdout && isatty(1),
                             .metric = cfg->metric_id,
                             .read_source = src ? srcread_file_cb : NULL,
                             .source_ctx = src};
    int werr = report_write(prof, fmt, out, &ropt);
    if (out != stdout && fclose(out) != 0)
        werr = werr ? werr : SCRY_E_IO;
    else if (out == stdout)
        fflush(stdout);
    if (werr) {
        fprintf(stderr, "scry: writing %s failed: %s\n", path, scry_strerror(werr));
        goto out;
    }
    if (!cfg->quiet) {
        char lostbuf[256] = "";
        size_t ll = 0;
        if (st->lost)
            ll += (size_t)snprintf(lostbuf, sizeof lostbuf, ", %llu records lost",
                                   (unsigned long long)st->lost);
        if (st->execs && ll < sizeof lostbuf)
            ll += (size_t)snprintf(lostbuf + ll, sizeof lostbuf - ll,
                                   ", followed %llu exec%s (now Python %s)",
                                   (unsigned long long)st->execs, st->execs > 1 ? "s" : "",
                                   pystate_target_info(sampler_target(smp))->version);
        if (st->read_records && ll < sizeof lostbuf)
            snprintf(lostbuf + ll, sizeof lostbuf - ll,
                     ", Python stacks read %.0f us after their record (max %.1f ms)",
                     (double)st->read_delay_ns / (double)st->read_records / 1e3,
                     (double)st->read_delay_max_ns / 1e6);
        double busy_us = st->ticks ? (double)st->busy_ns / (double)st->ticks / 1e3 : 0;
        char errs[160] = "";
        if (end.errors)
            snprintf(errs, sizeof errs,
                     " (%llu unreadable ticks, %llu torn stacks dropped, %llu bad memory records)",
                     (unsigned long long)end.err_rounds, (unsigned long long)end.err_torn,
                     (unsigned long long)end.err_records);
        char where[128] = "";
        if (in_container)
            snprintf(where, sizeof where, " in container %s%s%.12s", ct.runtime,
                     ct.runtime[0] ? ":" : "", ct.id);
        fprintf(stderr,
                "scry: %llu samples in %.1f s at %.0f Hz (%.0f Hz achieved) from pid %d%s (Python "
                "%s), %llu errors%s, late %llu of %llu ticks (max %.1f ms), %.1f us per tick; "
                "sampler: %s%s%s; wrote %s\n",
                (unsigned long long)st->samples, elapsed, cfg->rate_hz, end.rate_achieved_hz,
                (int)info->pid, where, info->version, (unsigned long long)end.errors, errs,
                (unsigned long long)st->late, (unsigned long long)st->ticks, end.late_max_ms,
                busy_us, sampler_backend_desc(smp), lostbuf,
                end.target_exited ? "; the target exited while sampling, kept what was collected"
                                  : "",
                strcmp(path, "-") == 0 ? "to standard output" : path);
        if (memline[0])
            fprintf(stderr, "scry: %s\n", memline);
    }
    rc = 0;
out:
    if (child && !child_reaped && end_child) {
        char why[64] = "scry cannot profile it";
        if (end_child == 2)
            snprintf(why, sizeof why, "--duration %g s elapsed", cfg->duration_s);
        child_reaped = end_launched(child, why, &child_status);
    }
    if (child && !child_reaped) {
        /* Wait for the launched program so it is not left a zombie. */
        waitpid(child, &child_status, 0);
    }
    srcread_free(src);
    memprof_free(mem); /* disables the ring: the shim passes through from now on */
    sampler_free(smp);
    report_profile_free(prof);
    pystate_target_free(t);
    strtab_free(strings);
    return rc;
}
