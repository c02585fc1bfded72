/* recording.h - one recording as a library: open a target (a running process, a launched
 * command, or either with its Python descendants), sample it for a duration or until
 * stopped, drain the memory the shim recorded, end, and hand the profile to report/.
 *
 * The front ends only parse and call: `scry record` (daemon/record.c), `scry top` (a live
 * view: opts.emit takes the samples, no profile) and `scry serve`'s ctl record. The steps,
 * in order:
 *
 *   recording_new(&opts) -> recording_open -> recording_run -> recording_end
 *     -> recording_write (any number of times, any format) -> recording_summary
 *     -> recording_free (ends or waits for a launched program)
 *
 * Errors come back as negative codes (scry_err.h) with a message (recording_error); the
 * notes a recording makes on the way (memory recording dropped, the launched program ended)
 * go to opts.log as "scry: MESSAGE" lines. Some layers under it still print their details
 * to stderr (launch_start, memprof_new without the shim, a forced sampler back end refused);
 * recording_error then says what failed in short.
 */
#ifndef SCRY_RECORDING_H
#define SCRY_RECORDING_H

#include "report.h"
#include "family.h"
#include "pyrepr.h"
#include "sampler.h"
#include "scry_proc.h"
#include "srcread.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct recording recording_t;

/* What to record. Zero is not a valid recording (it names no target): set pid or argv. */
typedef struct recording_opts {
    pid_t pid;                    /* attach to this process; 0 with argv */
    char **argv;                  /* or launch this command (NULL-terminated, PATH searched) */
    int subprocesses;             /* the target's Python descendants too (family.h) */
    sampler_opts_t sampler;       /* rate, back end, idle, threads, native, gil, open_opts */
    double duration_s;            /* stop after this long; 0 = until stopped or the target ends */
    int async_tasks;              /* asyncio task labels: refused when the target has none */
    int memory;                   /* per-line memory through the shim (launch or inject) */
    uint64_t memory_sample_bytes; /* the shim's sampling interval; 0 = its default */
    const char *inject;           /* "ptrace", "remote-exec", "auto" or NULL (the default) */
    int all_lines;                /* the report's line views charge the leaf Python line */
    const char *const *include;   /* the report's user-code patterns (borrowed) */
    unsigned ninclude;
    const char *const *exclude;
    unsigned nexclude;
    const srcread_creds_t *source_creds; /* read the target's source as these (borrowed);
                                            NULL: as the target */
    int quiet;                           /* no notes that are only informative */
    int progress;                        /* a progress line once a second when stderr is a tty */
    volatile sig_atomic_t *stop;         /* non-zero ends sampling (a signal handler sets it); NULL:
                                            only the duration and the target's end stop it */
    FILE *log;                           /* where notes and errors go; NULL: stderr */
    /* A live view (scry top) instead of a profile: every sample goes to EMIT (no profile is
     * made: recording_end, _write and _summary refuse), TICK runs after each round (a
     * non-zero return ends sampling), and a launched program is left running at the end. */
    sampler_emit_fn emit;
    void *emit_ctx;
    int (*tick)(void *ctx);
    void *tick_ctx;
} recording_opts_t;

/* A recording of what OPTS describes (copied; the pointers in it are borrowed and must
 * outlive the recording). Nothing is opened yet. Returns NULL when out of memory. */
recording_t *recording_new(const recording_opts_t *opts);

/* Opens the target: attaches to opts.pid, or launches opts.argv and waits until it is a
 * Python process scry can read (with opts.subprocesses, a command that is not Python is
 * followed to its Python descendants), sets up memory recording, creates the empty profile
 * and the sampler (or the family's). Memory recording that cannot start is dropped with a
 * note (CPU sampling goes on); --memory without the shim is refused. Returns 0, or a
 * negative code with the reason in recording_error: SCRY_E_INVAL when called twice or
 * without a target, SCRY_E_UNSUPPORTED for --async on a target without tasks or a sampler
 * back end refused, the target's open error, SCRY_E_NOMEM. */
int recording_open(recording_t *r);

/* Samples the open target until opts.duration_s elapses, *opts.stop becomes non-zero,
 * opts.tick asks, or the target (every process of the family) exits, draining memory after
 * every tick and once more at the end. Returns 0, also when the sampler stopped on an
 * error (what was collected is kept; the error is recording_stopped_by's), or SCRY_E_INVAL
 * when not open or run before. */
int recording_run(recording_t *r);

/* Moves what the shim recorded since the last drain into the profile (nothing without
 * --memory or with --subprocesses, whose members drain on their own rounds). Called by
 * recording_run after every tick; callable between ticks by a caller with its own loop.
 * Returns 0; a corrupt ring ends memory recording with a note and returns SCRY_E_CORRUPT. */
int recording_drain(recording_t *r);

/* Ends the recording: the profile gets its end (duration, counts, processes, memory
 * summary). Returns 0, or SCRY_E_INVAL when the recording did not run. */
int recording_end(recording_t *r);

/* The profile (owned by R, valid until recording_free), for report/; NULL before
 * recording_open succeeded. */
report_profile_t *recording_profile(const recording_t *r);

/* Writes the ended profile in FMT to OUT through report_write with OPTS (NULL: defaults),
 * the target's source read through the recording's pinned reader. Returns 0 or the
 * negative code of report_write (OUT is neither flushed nor closed). */
int recording_write(recording_t *r, enum report_format fmt, FILE *out,
                    const report_options_t *opts);

/* The pid the recording is about (the attached process, or the launched command); 0
 * before recording_open. */
pid_t recording_pid(const recording_t *r);

/* Writes the summary of the ended recording to OUT: samples, errors, lateness, the
 * sampler's cost, WROTE ("-": standard output) as where the profile went; the memory line
 * and, with --subprocesses, a line per process. Returns 0, or SCRY_E_INVAL when the
 * recording has not ended. */
int recording_summary(const recording_t *r, const char *wrote, FILE *out);

/* The error that ended sampling early (the sampler's: the target unreadable, ...), or 0. */
int recording_stopped_by(const recording_t *r);

/* The sampler's counters (the family's totals with --subprocesses) into *ST. Returns 0, or
 * SCRY_E_INVAL before recording_open succeeded. */
int recording_stats(const recording_t *r, sampler_stats_t *st);

/* The family being sampled (--subprocesses; owned by R), else NULL. */
family_t *recording_family(const recording_t *r);

/* The open target's facts (version, pid), or NULL when there is no Python target (yet): a
 * launched command followed to its descendants. Owned by R. */
const pystate_info_t *recording_info(const recording_t *r);

/* The target's command line, arguments joined by spaces ("" unknown). Owned by R. */
const char *recording_command(const recording_t *r);

/* The last error's message ("" when none); valid until the next call on R. */
const char *recording_error(const recording_t *r);

/* Frees R. A launched program still running is ended (after --duration, or when it never
 * became Python: SIGTERM, then SIGKILL after 3 s, noted in the log) or waited for (it got
 * the same Ctrl-C). The memory ring is disabled: the shim passes through from then on.
 * NULL is a no-op. */
void recording_free(recording_t *r);

/* For a front end: SIGINT, SIGTERM, SIGHUP (and SIGQUIT when QUIT) set *FLAG (to give as
 * opts.stop: the recording ends cleanly, what was collected is kept); SIGPIPE is ignored
 * (a closed output is an error of the write, not the end of scry). One FLAG per process:
 * a second call replaces the first. */
void recording_stop_on_signals(volatile sig_atomic_t *flag, int quit);

/* The container PID runs in, for the report: fills *CT and *OUT (pointing into *CT) and
 * returns 1 when /proc/PID/cgroup names a container id, else 0 (*OUT untouched). */
int recording_container(pid_t pid, proc_container_t *ct, report_container_t *out);

/* One read of every thread's stack now (snapshot.c): `scry dump`, `scry ctl dump`. */
/* Writes the dump of every thread of the open target T (one sampler tick with every thread,
 * idle ones too, over OPTS otherwise; STRINGS is T's string table) to OUT in FMT, through
 * report_dump_write: what 'scry dump' prints, also answered by scry serve (ctl dump).
 * Returns 0, or a negative code with why in MSG (empty when sampler_new already printed it:
 * a forced perf back end refused). LOCALS: each Python frame's arguments and locals too
 * (--locals; read after the stacks, shown where a thread's stack did not change since).
 * A stack that changes while it is read is read again, up to DUMP_TORN_RETRIES times, then
 * shown with the part read whole (report_dump_thread_t.partial). No thread with a stack to
 * show: SCRY_E_AGAIN, MSG says so (a dump is never empty). */
int recording_dump_write(pystate_target_t *t, strtab_t *strings, const sampler_opts_t *opts,
                         int locals, enum report_dump_format fmt, FILE *out, char *msg,
                         size_t msglen);
/* Opens process PID for one dump: a new string table in *STRINGS and the target in *T, read
 * with OPTS (sampler_open_target). Returns 0, or 1 after a message with whatever was made
 * left in *STRINGS and *T for the caller to free (pystate_target_free, strtab_free; both
 * accept NULL). */
int recording_dump_open(pid_t pid, const pystate_open_opts_t *opts, strtab_t **strings,
                        pystate_target_t **t);
/* --locals of one frame: read at ADDR into L (strings interned in STRINGS; BUF holds
 * PYSTATE_LOCALS_MAX entries of scratch). Returns 0, SCRY_E_NOMEM, or a fatal read error
 * (SCRY_E_GONE, SCRY_E_PERM); a torn frame leaves L unread. */
int recording_frame_locals(pystate_target_t *t, strtab_t *strings, raddr_t addr,
                           pystate_local_t *buf, report_dump_locals_t *l);
/* Frees the locals of TH (recording_frame_locals' variables and the array). */
void recording_free_locals(report_dump_thread_t *th);

#endif
