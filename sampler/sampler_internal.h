/* sampler_internal.h - what the sampler's back ends share; not part of the public API.
 *
 * Two back ends feed one emitter: the ptrace//proc path (sampler.c: /proc per thread per
 * tick, threads stopped for --native and --blocking) and the perf-event path
 * (sampler_perf.c: the kernel's clock says which threads ran, where, and with --native
 * copies their registers and stack top; nothing is stopped).
 */
#ifndef SCRY_SAMPLER_INTERNAL_H
#define SCRY_SAMPLER_INTERNAL_H

#include "asyncio.h"
#include "merge.h"
#include "perfev.h"
#include "sampler.h"
#include "tasks.h"
#include "unwind.h"

#define SAMPLER_MAX_FRAMES (PYSTATE_MAX_DEPTH + UNWIND_MAX_DEPTH + 3 + PYSTATE_ASYNC_LABEL_DEPTH)
#define SAMPLER_LABELS     1024
/* The longest wait of the perf back end for a record, without --idle (sampler_run). */
#define SAMPLER_QUIET_WAIT_NS 20000000ull

typedef struct thread_label {
    pid_t tid;
    uint64_t stamp;
    const char *pyname; /* the Python name it was made from (interned), or NULL */
    const char *name;
    const char *label;
} thread_label_t;

typedef struct sampler_perf sampler_perf_t;
typedef struct sampler_bpf sampler_bpf_t;

struct sampler {
    sampler_opts_t opts;
    pystate_target_t *target;
    strtab_t *strings;
    pystate_snapshot_t *snap;
    proc_tasks_t *tasks;
    unwind_t *unwind;              /* --native */
    pystate_async_labels_t *async; /* record --async: task root frames */
    unwind_frame_t native[UNWIND_MAX_DEPTH];
    scry_frame_t frames[SAMPLER_MAX_FRAMES];
    sampler_stats_t stats;
    unwind_merge_stats_t merge_stats;
    thread_label_t labels[SAMPLER_LABELS];
    uint64_t interval_ns;
    uint64_t tick_due; /* perf and bpf back ends, --idle: when sampler_run's tick was due
                        * (the moment it stands for; a thread taken off its CPU after it
                        * was on one then: sampler__idle_charge); 0 outside sampler_run */
    const char *s_truncated;
    const char *s_torn; /* "<changed while reading>" */
    const char *s_gil_wait;
    const char *s_empty;
    int backend;              /* enum sampler_backend */
    sampler_perf_t *perf;     /* SAMPLER_PERF */
    sampler_bpf_t *bpf;       /* SAMPLER_BPF */
    const char *backend_note; /* why the fallback was chosen, or NULL */
    pystate_target_t *first;  /* the caller's target (theirs to free) */
    uint64_t exec_mark;       /* proc_read_exec_mark of the program TARGET reads */
    uint64_t start_time;      /* the process's identity with its pid (0 unknown) */
    char container[48];       /* " [docker:0123456789ab]" for a target in a container, else
                                 "": the end of its thread root frames' labels */
    int gone;                 /* the pid names another process now (reused): the target is gone */
    uint64_t exec_checked_ns;
    char note[300];
    char desc[400]; /* sampler_backend_desc */
};

/* Emits one sample of thread TH: its Python frames merged with NAT[0..NN) (may be empty),
 * classified CLS (+ GIL-wait flag in FLAGS), weighing WEIGHT ns, at TIME_NS. */
void sampler__emit(sampler_t *s, const pystate_thread_t *th, const unwind_frame_t *nat, size_t nn,
                   uint8_t cls, uint8_t flags, uint64_t weight, int running, uint64_t time_ns,
                   sampler_emit_fn emit, void *ctx);

/* tick_charge (scry serve), perf back end: a thread's CPU (its records) is carried until a
 * tick finds it on a CPU while its stack is read, and charged to that stack then (the
 * ptrace back end samples instead: an interval for each tick that finds it on a CPU). A
 * carry holds at most SAMPLER_HELD_INTERVALS intervals of CPU (the rest is counted in
 * stats.held_dropped_ns), and one finding charges at most sampler__charge_count of the intervals
 * (records) carried: a carry built up while the thread was not found is spread over its next
 * findings, so a short window's share of a thread follows its CPU in that window, not a bunch of
 * seconds of it. */
#define SAMPLER_HELD_INTERVALS 100
#define SAMPLER_CHARGE_MIN     4            /* intervals a finding charges whole, */
#define SAMPLER_CHARGE_WHOLE   250000000ull /* or this much CPU when that is more */

/* How many of the N intervals (records) a thread carries, CARRIED_NS of CPU in all, a
 * finding charges: all of them up to SAMPLER_CHARGE_WHOLE ns (at least SAMPLER_CHARGE_MIN
 * intervals), else as many as make up that much, or a quarter of them when that is more:
 * the carry then lags by at most four times what a finding brings on average, and no CPU is
 * lost. Counted in CPU time, not records: after a change of rate the records carried from
 * the old one weigh what they stand for. */
uint32_t sampler__charge_count(const sampler_t *s, uint32_t n, uint64_t carried_ns);

/* Emits AMOUNT ns of CPU of thread TH, class CLS, at its stack as N (>= 1) samples of equal
 * weight: the count-based formats (collapsed) and "samples per CPU second" stay the rate's. */
void sampler__emit_split(sampler_t *s, const pystate_thread_t *th, uint8_t cls, uint64_t amount,
                         uint32_t n, uint64_t time_ns, sampler_emit_fn emit, void *ctx);

/* 1 (and S->gone set) when the target's pid names another process now (its start time
 * changed: the target exited while scry was stopped and the pid was given again), else 0.
 * One read of /proc/PID/stat. */
int sampler__reused(sampler_t *s);

/* One pystate_sample of the target into s->snap that reads the stacks only of the threads
 * FN(CTX, tid) accepts (FN NULL: all; pystate_set_thread_filter), both back ends' way of
 * not reading the stacks of threads that will not be sampled. Returns as pystate_sample. */
int sampler__sample_threads(sampler_t *s, pystate_thread_filter_fn fn, void *ctx);

/* After a sample into s->snap: records in s->stats whether the target is finalizing and
 * returns 1 when some thread of the snapshot holds the GIL, else 0. */
int sampler__snapshot_gil(sampler_t *s);

/* 1 when thread TH of the last snapshot is emitted: it has Python frames (or the depth
 * bound cut them), or it stayed torn and S emits partial stacks (sampler_opts_t.partial). */
int sampler__stack_wanted(const sampler_t *s, const pystate_thread_t *th);

/* After a failed read, and every 500 ms otherwise: when the process exec'd (its exec
 * mark changed) and is a Python program scry can read, makes TARGET that program (the
 * readers, unwinders and asyncio labels follow) and returns 1; else 0. Checks at most
 * every 100 ms. A changed mark with a changed start time is not an exec but another
 * process that got the pid (scry was stopped while the target exited): sets S->gone. */
int sampler__follow_exec(sampler_t *s, int after_error);

/* Between rounds: when Ctrl-Z asked (sampler_handle_job_control), lets go of every held
 * thread, stops scry and returns 1 once continued; else returns 0 at once. */
int sampler__suspend_if_requested(void);

/* Asks the kernel for a 100 us slice (sched_setattr; ignored before Linux 6.12) so that a
 * read woken by a perf record preempts the target at once (sampler.c says why). */
void sampler__ask_short_slice(void);

/* --idle with the back ends driven by the kernel's CPU clock (sampler/idle.c; perf and bpf):
 * a thread's time off a CPU sampled at ticks (docs/accuracy.md, "Wall time"). Their events
 * are opened with perfev_opts.switches. */
typedef struct sampler_idle sampler_idle_t;
#define SAMPLER_IP_KINDS 4 /* enum unwind_ip_kind + 1 */

/* A table for the threads of process PID; NULL when out of memory. Free with
 * sampler__idle_free (NULL: a no-op). */
sampler_idle_t *sampler__idle_new(pid_t pid);
void sampler__idle_free(sampler_idle_t *d);

/* At a tick, before the rings of EV are drained: the CPU clock of each thread of the list
 * TIDS[0..N) and the wall time since its previous tick (one interval for a thread new to the
 * list, at most SAMPLER_HELD_INTERVALS of them). Threads not in TIDS are forgotten. */
void sampler__idle_probe(sampler_t *s, sampler_idle_t *d, const perfev_t *ev, const pid_t *tids,
                         size_t n, uint64_t now);

/* Thread TID's latest records: their leaf Python frame LEAF (NULL: ignored) and the CPU ns
 * they carried per IP kind (enum unwind_ip_kind): the class of its runnable time on that line
 * when a tick finds it preempted there. */
void sampler__idle_records(sampler_idle_t *d, pid_t tid, const scry_frame_t *leaf,
                           const uint64_t by_kind[SAMPLER_IP_KINDS]);

/* After the drain of EV's rings that followed the probe, and a read of thread TH's stack:
 * when TH was off its CPU at the tick's moment (s->tick_due, else NOW), emits one sample of
 * the wall time since its previous tick at TH's stack, classified as docs/accuracy.md says
 * (its switch records, its scheduler state: one pread of its stat file). A tick falls at a
 * moment that has nothing to do with what the thread does: the share of ticks that find it
 * waiting on a line, each weighing its interval, is an unbiased estimate of its time off a
 * CPU there. */
void sampler__idle_charge(sampler_t *s, sampler_idle_t *d, const perfev_t *ev,
                          const pystate_thread_t *th, uint64_t now, sampler_emit_fn emit,
                          void *ctx);

/* The perf back end (sampler_perf.c). sampler__perf_new returns 0 and sets S->perf, or a
 * negative code (SCRY_E_PERM/SCRY_E_NOSYS: perf events refused) after writing why into
 * WHY. */
int sampler__perf_new(sampler_t *s, char *why, size_t whylen);
void sampler__perf_free(sampler_perf_t *p);
int sampler__perf_tick(sampler_t *s, sampler_emit_fn emit, void *ctx);
/* A read between two ticks, woken by a record: drains the rings and reads the Python stacks
 * of the threads that ran while they are still the ones sampled. Returns as the tick. */
int sampler__perf_read_early(sampler_t *s, sampler_emit_fn emit, void *ctx);
/* Waits for a record or DEADLINE_NS (perfev_wait); 1 when a record woke it. */
int sampler__perf_wait(sampler_t *s, uint64_t deadline_ns);
/* The descriptor that polls readable when a record would wake sampler__perf_wait
 * (perfev_wait_fd), or -1 (not the perf back end, no thread). */
int sampler__perf_wait_fd(const sampler_t *s);
/* The process exec'd: the IP describer reads the new program's objects. */
void sampler__perf_exec(sampler_t *s);
/* The threads' events sample every 1/RATE_HZ s of CPU from now on (perfev_set_rate). */
int sampler__perf_set_rate(sampler_perf_t *p, double rate_hz);
/* Counters of the perf back end: records lost by the kernel, rejected. */
void sampler__perf_counts(const sampler_perf_t *p, uint64_t *lost, uint64_t *bad);

/* The bpf back end (sampler_bpf.c). sampler__bpf_new returns 0 and sets S->bpf, or a
 * negative code after writing why into WHY (not built, not allowed, a version or an option
 * it does not handle yet). A tick drains the kernel's records and emits them. */
int sampler__bpf_new(sampler_t *s, char *why, size_t whylen);
/* The first option of O the bpf back end does not handle ("--native", ...), or NULL. */
const char *sampler__bpf_unsupported(const sampler_opts_t *o);
void sampler__bpf_free(sampler_bpf_t *p);
int sampler__bpf_tick(sampler_t *s, sampler_emit_fn emit, void *ctx);
/* The process exec'd: the program walks the new interpreter's layout (or hands every
 * record to user space), the map is made anew. */
void sampler__bpf_exec(sampler_t *s);
/* The threads' events sample every 1/RATE_HZ s of CPU from now on (perfev_set_rate); the
 * records drained later weigh the period of their time. */
int sampler__bpf_set_rate(sampler_bpf_t *p, double rate_hz);
/* The summary's description, with what was read in the kernel and in user space. */
const char *sampler__bpf_desc(sampler_t *s);
/* The ring batches the samples: the bpf back end's ticks come at most this often. */
#define SAMPLER_BPF_DRAIN_NS 20000000ull

#endif
