/* sampler.h - the sampling loop shared by 'record', 'top', 'dump' and 'serve'.
 *
 * A sampler turns pystate snapshots into scry_sample_t, one per sampled thread per tick,
 * and hands them to a callback. It paces itself on absolute deadlines and counts how
 * late it ran. It never stops the target unless asked to (--blocking), and then always
 * resumes every thread before returning.
 */
#ifndef SCRY_SAMPLER_H
#define SCRY_SAMPLER_H

#include "pystate.h"
#include "sample.h"
#include "strtab.h"

#include <signal.h>
#include <stdint.h>

typedef struct sampler sampler_t;
typedef struct sampler_bpf_share sampler_bpf_share_t;

/* What to sample and how; zero is a valid default (100 Hz, auto back end, on-CPU threads
 * only, nothing stopped). */
typedef struct sampler_opts {
    double rate_hz;                /* rounds per second; <= 0: 100 */
    const char *backend;           /* "perf", "ptrace", "bpf", "auto" or NULL (= auto) */
    int instant;                   /* one instant of every thread (dump): auto chooses ptrace */
    int idle;                      /* threads off CPU too */
    int threads;                   /* a root frame per thread (its name) */
    int blocking;                  /* stop the threads while reading (consistent stacks) */
    int native;                    /* native frames merged with Python's */
    int gil;                       /* only threads holding the GIL */
    int async_labels;              /* asyncio task root frames (record --async) */
    int partial;                   /* a stack that stayed torn (pystate_thread_t.torn) is
                                    * emitted: the part read whole under a root frame
                                    * "<changed while reading>", the sample's torn set (dump,
                                    * top); else it is left out (counted in pystate's stats) */
    int tick_charge;               /* perf back end, a caller that reads only on its ticks (scry
                                    * serve): a thread's CPU is held until a tick finds it on a
                                    * CPU while its stack is read, and charged there (never to
                                    * the line where it waits); not with --native or --idle */
    double list_every_s;           /* perf back end: the thread list reread this often (<= 0: every
                                    * 20 ticks, 0.2 to 1 s; scry serve, which needs no new thread
                                    * sooner than its targets, says 1); bpf: likewise (<= 0: every
                                    * 0.2 s; a changed thread count relists at once) */
    pystate_open_opts_t open_opts; /* how to open the program a target execs */
    /* bpf back end: the loaded programs the samplers of one process share (scry serve), or
     * NULL: its own */
    sampler_bpf_share_t *bpf_share;
} sampler_opts_t;

/* What several bpf samplers of one process share (scry serve's targets): one loaded program,
 * thread map and ring per interpreter layout instead of one per target (each costs about
 * 2.5 MiB of kernel memory, the ring mapped in scry too, and a run of the verifier). A tick
 * of any of them drains the ring and hands every record to the sampler whose target the
 * thread belongs to, through the emit function that sampler was last ticked with. Returns
 * NULL when out of memory. Free it after every sampler that used it. */
sampler_bpf_share_t *sampler_bpf_share_new(void);
void sampler_bpf_share_free(sampler_bpf_share_t *sh);

typedef void (*sampler_emit_fn)(const scry_sample_t *sample, void *ctx);

typedef struct sampler_stats {
    uint64_t ticks;   /* rounds attempted */
    uint64_t samples; /* thread samples emitted */
    uint64_t errors;  /* rounds or threads lost to errors */
    uint64_t late;    /* rounds that started more than half an interval late */
    uint64_t late_total_ns;
    uint64_t late_max_ns;
    uint64_t busy_ns;       /* time spent sampling (CPU cost) */
    uint64_t gil_ticks;     /* rounds where some thread held the GIL */
    uint64_t lost;          /* perf back end: records the kernel dropped or scry rejected */
    uint64_t execs;         /* times the process exec'd a new Python program, followed */
    uint64_t read_records;  /* perf back end: records whose Python stack was read, and */
    uint64_t read_delay_ns; /* the time from each record to that read, summed */
    uint64_t read_delay_max_ns;
    uint64_t held;            /* samples not taken because the thread was off CPU while its
                               * stack was read (tick_charge; perf: its records carried over) */
    uint64_t held_dropped_ns; /* CPU time over the carry's cap, not charged */
    uint64_t syscall_stops;   /* stops (--blocking, --native with ptrace) caught at a system
                               * call's exit beyond the thread's system time: not counted */
    int finalizing;           /* the interpreter was tearing down at the last tick */
    int target_exited;
} sampler_stats_t;

/* Where samples come from. */
enum sampler_backend {
    SAMPLER_PTRACE = 1, /* a wall-clock tick reads /proc per thread; --native stops threads */
    SAMPLER_PERF = 2,   /* perf events: the kernel's CPU clock per thread; nothing stopped */
    SAMPLER_BPF = 3,    /* perf events whose BPF program walks the Python frames at each tick */
};

/* Creates a sampler over target T (not owned) with OPTS (copied). The back end is
 * OPTS->backend ("perf", "ptrace"), or when NULL/"auto": perf where perf_event_open is
 * allowed and the run samples over time (not OPTS->instant, not blocking), else ptrace.
 * Returns NULL when out of memory, or when "perf" was forced and perf events are refused
 * (a message saying why has been printed to stderr). */
sampler_t *sampler_new(const sampler_opts_t *opts, pystate_target_t *t, strtab_t *strings);

/* True when OPTS forces the perf or bpf back end: a NULL from sampler_new then means it
 * was refused (and the message was printed), not a lack of memory. */
int sampler_refused(const sampler_opts_t *opts);

/* Opens PID for reading (pystate_target_open_opts with OPTS, may be NULL), printing a
 * clear message to stderr on failure (no such process, not Python, permission,
 * unsupported version). Returns 0 and *OUT, or the negative code. */
int sampler_open_target(pid_t pid, strtab_t *strings, const pystate_open_opts_t *opts,
                        pystate_target_t **out);

/* sampler_open_target with the message (without "scry: ") in WHY, WHYLEN bytes, instead of
 * on stderr; WHY is untouched on success. */
int sampler_open_target_msg(pid_t pid, strtab_t *strings, const pystate_open_opts_t *opts,
                            pystate_target_t **out, char *why, size_t whylen);

/* The back end in use (enum sampler_backend). */
int sampler_backend(const sampler_t *s);

/* The target read now: the caller's, or the program the process exec'd into since
 * (stats.execs). Valid while S lives. */
const pystate_target_t *sampler_target(const sampler_t *s);

/* A short description of the back end for the summary, e.g. "perf events (task-clock)" or
 * "ptrace and /proc (perf events refused: ...)". Valid while S lives. */
const char *sampler_backend_desc(const sampler_t *s);

/* The name of thread TID of the target as the last tick saw it: its Python name
 * (threading) when it has one, else the OS one (comm); "" when unknown. For samples that
 * come from elsewhere and carry no name (the memory shim's). The string lives as long as
 * the sampler's string table. */
const char *sampler_thread_name(sampler_t *s, pid_t tid);
void sampler_free(sampler_t *s);

/* Makes the sampler's rate RATE_HZ (0.01 to 100000) from now on: its ticks (sampler_run)
 * and, with the perf and bpf back ends, the CPU time between two records of a thread. Returns 0,
 * SCRY_E_INVAL, or the code of the kernel's refusal for some thread's event. */
int sampler_set_rate(sampler_t *s, double rate_hz);

/* The rate in use (the options' or the last sampler_set_rate's; 100 for a default). */
double sampler_rate_hz(const sampler_t *s);

/* Takes one round of samples now. Returns 0, SCRY_E_GONE when the target exited, or
 * another negative code for an error that ends the run. */
int sampler_tick(sampler_t *s, sampler_emit_fn emit, void *ctx);

/* Job control (Ctrl-Z): installs a SIGTSTP handler that only asks sampler_run to suspend.
 * sampler_run then stops scry itself (SIGSTOP) between rounds, after every thread it
 * stopped has been let go (timed-out stops included: it waits up to 2 s for them), so a
 * suspended scry never holds a thread of the target. BEFORE_STOP and AFTER_CONT, when not
 * NULL, run around the suspension (a terminal UI restores and redraws the screen). A plain
 * SIGSTOP cannot be caught: with the perf sampler nothing is ever stopped; with --blocking
 * or the ptrace sampler's --native a thread may stay stopped until scry is continued. */
void sampler_handle_job_control(void (*before_stop)(void), void (*after_cont)(void));

/* Samples at the configured rate until *STOP becomes non-zero, DURATION_S elapses (0: no
 * limit) or the target exits. TICK_CB, when not NULL, runs after each round (for progress
 * and live views); a non-zero return ends the loop. Returns 0 or a negative code. */
int sampler_run(sampler_t *s, double duration_s, volatile sig_atomic_t *stop, sampler_emit_fn emit,
                void *ctx, int (*tick_cb)(sampler_t *, void *), void *tick_ctx);

const sampler_stats_t *sampler_stats(const sampler_t *s);

#endif
