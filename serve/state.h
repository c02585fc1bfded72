/* state.h - the state of `scry serve`, shared by its files (loop.c: the loop, windows,
 * reload; targets.c: discovery and sampling of targets; ctl_requests.c: the
 * control-socket requests). Single-threaded, apart from the push thread inside serve/push.c.
 */
#ifndef SCRY_SERVE_STATE_H
#define SCRY_SERVE_STATE_H

#include "agg.h"
#include "config.h"
#include "ctl.h"
#include "discover.h"
#include "perfev.h"
#include "pystate.h"
#include "push.h"
#include "sampler.h"
#include "store.h"
#include "strtab.h"

#include <stdint.h>
#include <sys/types.h>

#define SERVE_IDLE_CHECK_NS 1000000000ull /* an idle target is looked at once a second */
#define SERVE_WHORAN_HZ     49            /* the per-CPU clock that says who ran */
#define SERVE_WHORAN_RECHECK_NS                                                                    \
    10000000000ull /* with it, an idle target not seen on a CPU is looked at every 10 s */
#define SERVE_PENDING_MAX_NS 10000000000ull /* a new process has 10 s to become readable */
#define SERVE_MAX_TARGETS    4096
#define SERVE_MAX_RAN        65536 /* per-CPU records looked at per tick (the rest: counted) */
#define SERVE_MAX_PENDING    1024
#define SERVE_MAX_WINDOWS    1024

typedef struct serve_target {
    pid_t pid;
    uint64_t start_time; /* /proc/PID/stat field 22: PID reuse changes it */
    uid_t uid;
    char comm[32];
    char service[65];
    char container[65];
    double rule_rate_hz; /* from the rule; 0: global */
    double set_rate_hz;  /* from `scry ctl set-rate PID`; 0: none */
    strtab_t *strings;   /* this target's own strings: freed with it */
    pystate_target_t *py;
    sampler_t *sampler;
    int stat_fd;            /* /proc/PID/stat, kept open: one pread per check */
    uint64_t cpu_ticks;     /* utime+stime at the last check */
    uint64_t cpu_ticks_w0;  /* at the start of the window */
    double cpu_pct;         /* over the last window */
    int busy;               /* used CPU at the last check */
    uint64_t unsampled;     /* CPU ticks seen since the last sampled check */
    uint64_t taken;         /* what its sampler took so far (sampler_taken) */
    uint64_t busy_until_ns; /* stays at its rate until then after it last used CPU */
    uint64_t last_sample_ns;
    uint64_t opened_ns;  /* when its opening began: an exec before it is the program read */
    uint64_t next_ns;    /* next check (CLOCK_MONOTONIC) */
    uint64_t checked_ns; /* last look at its CPU time */
    int seen;            /* the per-CPU clock saw it on a CPU since that look */
    uint64_t samples, errors;
    struct serve_win *win; /* its window in the current interval (cache) */
} serve_target_t;

typedef struct serve_pending {
    pid_t pid;
    uint64_t start_time;
    uint64_t first_ns, next_ns;
    int tries;
} serve_pending_t;

typedef struct serve_win {
    char service[65];
    char container[65];
    serve_agg_t *agg;
    int live_targets;
    double rate_hz; /* the highest rate its targets sampled at in it (0: none yet) */
} serve_win_t;

/* A process the connector reported (exec, or fork of a target): looked at a little later,
 * once its program is loaded; most short-lived processes of a busy host are gone by then
 * and cost nothing. */
typedef struct serve_fresh {
    pid_t pid;
    int exec;
    uint64_t exec_ns; /* the kernel's time of its (last) exec; 0: unknown */
    uint64_t due_ns;
} serve_fresh_t;

#define SERVE_FRESH_DELAY_NS 100000000ull /* 100 ms */
#define SERVE_MAX_FRESH      4096

typedef struct serve_rejected {
    pid_t pid;
    uint64_t start_time;
    uint32_t comm_hash;
    int maps_checked; /* all-python: its maps were searched for libpython */
} serve_rejected_t;

/* A `scry ctl record` under way: a child process of scry serve records the target through
 * recording/ and answers the client itself (ctl_requests.c). */
typedef struct serve_record {
    pid_t child;
    pid_t target;
    volatile int *answered; /* a page shared with the child: 1 once its reply is sent (then
                               the recording is over, whether or not the child is reaped) */
} serve_record_t;

#define SERVE_MAX_RECORDS 4

typedef struct serve_state {
    serve_config_t *cfg;
    int argc;
    char **argv;
    serve_store_t *store;
    serve_push_t *push;
    serve_ctl_t *ctl;
    proc_discover_t *disc;
    int sigfd;
    serve_target_t *targets[SERVE_MAX_TARGETS];
    size_t n_targets;
    serve_pending_t pending[SERVE_MAX_PENDING];
    size_t n_pending;
    serve_win_t *wins[SERVE_MAX_WINDOWS];
    size_t n_wins;
    serve_fresh_t fresh[SERVE_MAX_FRESH];
    size_t n_fresh;
    serve_rejected_t *rejected; /* sorted by pid */
    size_t n_rejected;
    int64_t win_from;         /* Unix seconds of the current window's start */
    uint64_t win_end_real_ns; /* CLOCK_REALTIME end of the current window */
    uint64_t next_scan_ns;
    int scan_requested;
    double rate_factor; /* <= 1: lowered by the CPU budget */
    uint64_t budget_t0_ns, budget_cpu0_ns;
    double self_cpu_pct; /* scry serve's own CPU over the last budget period */
    uint64_t windows_written, samples_total;
    int flush_requested, reload_requested, stop;
    long clk_tck;
    serve_record_t records[SERVE_MAX_RECORDS];
    size_t n_records;
    perfev_t *whoran;         /* one cpu-clock event per CPU: who ran (NULL: /proc every second) */
    pid_t ran[SERVE_MAX_RAN]; /* pids of the records read this tick (scratch) */
    size_t n_ran;
    uint64_t whoran_records, idle_checks_skipped;
    size_t trim_mark;      /* targets at the last malloc_trim, or the most since */
    uint64_t trim_last_ns; /* when it ran */
    /* sampler = bpf: the targets' loaded programs (made at the first bpf target, freed after
     * the last target) */
    sampler_bpf_share_t *bpf_share;
} serve_state_t;

/* targets.c */

/* Evaluates PID (new, exec'd, or found by a scan): when it is selected it becomes pending
 * (opened once it is a readable Python process); a known target whose identity changed
 * (exec, PID reuse) is dropped first. With MAPS (scans), all-python also looks for a
 * mapped libpython (embedded interpreters), once per process; without (connector events:
 * most are short-lived processes of a busy host), only names count. */
void serve_targets_consider(serve_state_t *st, pid_t pid, int exec, int maps);

/* Notes a process the connector reported (EXEC: it exec'd at EXEC_NS, the kernel's time, 0
 * when unknown; else a fork of PARENT); it is considered SERVE_FRESH_DELAY_NS later, unless
 * it exits first. A fork of a process that was not selected is ignored (same program: its
 * exec, if any, is reported), unless that process exec'd its program within the delay (not
 * considered yet: a program that forks at once). An exec older than the opening of the target of
 * that pid (a scan found it first, the event was read later) is not an exec of the target. */
void serve_targets_notice(serve_state_t *st, pid_t pid, int exec, pid_t parent, uint64_t now,
                          uint64_t exec_ns);

/* Considers the noticed processes that are due; returns the next due time. */
uint64_t serve_targets_fresh(serve_state_t *st, uint64_t now);

/* Drops target PID (exited), if known. */
void serve_targets_exited(serve_state_t *st, pid_t pid);

/* Scans /proc for processes not seen yet. */
void serve_targets_scan(serve_state_t *st);

/* Tries to open the pending processes that are due. */
void serve_targets_open_pending(serve_state_t *st, uint64_t now);

/* Opens the per-CPU "who ran" clock (perfev cpu_wide at SERVE_WHORAN_HZ) when the kernel
 * allows it, and says in the log which way idle targets are watched. */
void serve_whoran_open(serve_state_t *st);

/* Checks the targets that are due and samples those that used CPU. With the per-CPU
 * clock, an idle target that was not seen on a CPU is looked at only every
 * SERVE_WHORAN_RECHECK_NS (CPU used in bursts between its ticks is still found then).
 * Returns the next time anything is due. */
uint64_t serve_targets_tick(serve_state_t *st, uint64_t now);

/* Re-applies the selection rules to every target (after a reload). */
void serve_targets_reselect(serve_state_t *st);

/* The effective rate of target T. */
double serve_target_rate(const serve_state_t *st, const serve_target_t *t);

/* Frees target T (its sampler, reader, strings, files). */
void serve_target_free(serve_target_t *t);

/* loop.c */

/* The window of (SERVICE, CONTAINER) in the current interval, created when missing.
 * NULL when out of memory or when there are too many services. */
serve_win_t *serve_window_get(serve_state_t *st, const char *service, const char *container);

/* ctl_requests.c */

/* Answers one control request (serve/ctl.h's handler). */
int serve_ctl_handle(void *ctx, const serve_ctl_req_t *req, const serve_ctl_peer_t *peer,
                     json_object *reply);

/* Reaps the record children: SERVE_REAP_ENDED those that ended (never waits);
 * SERVE_REAP_ANSWERED those too and the ones that answered their client (waiting for their
 * _exit, which is all they have left); SERVE_REAP_STOP (scry serve stops) asks each to end
 * now (SIGTERM: it answers its client with what it recorded) and waits for them all. */
enum { SERVE_REAP_ENDED = 0, SERVE_REAP_STOP = 1, SERVE_REAP_ANSWERED = 2 };
void serve_records_reap(serve_state_t *st, int how);

#endif
