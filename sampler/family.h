/* family.h - a process and its descendants sampled as one program (--subprocesses).
 *
 * A family starts from one process (the one launched or attached to) and follows every
 * descendant: present at the start or forked later, through shells and wrappers that are
 * not Python themselves. The kernel's process-events connector says at once when a member
 * forks (where scry may subscribe: CAP_NET_ADMIN in the initial network namespace);
 * otherwise, and once a second as a safety net, a scan of /proc finds children by their
 * parent (field 4 of /proc/PID/stat) every 50 ms. Each descendant that is a Python scry
 * can read gets its own sampler; a member that is not Python (a shell, a compiler) is
 * tried again when it execs. Every sample carries a root frame "process PID (command)"
 * (SCRY_FRAME_PROCESS) above its thread root. A member's exit keeps what it gave.
 * family_new raises the process's soft RLIMIT_NOFILE to its hard limit.
 */
#ifndef SCRY_FAMILY_H
#define SCRY_FAMILY_H

#include "sampler.h"

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#define FAMILY_MAX_PROCS 512 /* processes followed at once (members past it: counted) */

typedef struct family family_t;

/* What the summary says of one process of the family. */
typedef struct family_proc_info {
    pid_t pid;
    const char *command; /* its command line (interned) */
    const char *version; /* "3.12.1", or "" when it never ran Python scry could read */
    const char *why;     /* "" or why it was not sampled (unsupported version, ...) */
    uint64_t samples;
    uint64_t ticks;
    uint64_t errors;
    uint64_t weight_ns; /* the CPU time its samples stand for */
    int sampled;        /* it was sampled at some point */
    int exited;         /* it exited (or exec'd out of Python) during the recording */
    int is_root;
} family_proc_info_t;

/* What a front end does per member beside sampling (record's --memory): START when a
 * member gets its sampler (its pid, target, sampler, and whether it is the root); it
 * returns the member's context, or NULL to leave it be. ROUND after each of that member's
 * ticks, END once when it is let go (exit, an exec out of Python, family_end), both with
 * the member's current target and sampler and an EMIT/EMIT_CTX that adds its process root
 * frame. Any of them may be NULL. */
typedef struct family_hooks {
    void *(*start)(void *ctx, pid_t pid, pystate_target_t *t, sampler_t *smp, int is_root);
    void (*round)(void *ctx, void *mctx, pystate_target_t *t, sampler_t *smp, sampler_emit_fn emit,
                  void *emit_ctx);
    void (*end)(void *ctx, void *mctx, pystate_target_t *t, sampler_t *smp, sampler_emit_fn emit,
                void *emit_ctx);
    void *ctx;
} family_hooks_t;

/* Creates the family of ROOT. ROOT_TARGET, when not NULL, is ROOT opened (the caller's,
 * not freed here); when NULL, ROOT is tried like any other member (a launched shell).
 * OPTS and STRINGS are used for every member's sampler. USE_CONNECTOR asks for the kernel's
 * process-events connector (else /proc scans only); without permission scans are used and
 * WHY says so. Returns NULL when out of memory or when ROOT_TARGET's sampler cannot be made
 * (a message said why). HOOKS (copied) may be NULL. EMIT of the members' samples is
 * family_run's. */
family_t *family_new(pid_t root, pystate_target_t *root_target, const sampler_opts_t *opts,
                     strtab_t *strings, int use_connector, const family_hooks_t *hooks, char *why,
                     size_t whylen);

/* After family_run: lets every member go (their END hooks run, with family_run's EMIT),
 * keeping what family_procs and family_stats say. */
void family_end(family_t *f);

/* Frees every member's sampler and target (not ROOT_TARGET). NULL is a no-op. */
void family_free(family_t *f);

/* Samples every member at the configured rate until *STOP becomes non-zero, DURATION_S
 * elapses (0: no limit) or every member has exited and no descendant is left. TICK_CB, when
 * not NULL, runs after each round (a non-zero return ends the loop). Job control as
 * sampler_run. Returns 0 or a negative code. */
int family_run(family_t *f, double duration_s, volatile sig_atomic_t *stop, sampler_emit_fn emit,
               void *ctx, int (*tick_cb)(family_t *, void *), void *tick_ctx);

/* The processes the family met, the root first, then in the order they appeared; at most
 * FAMILY_MAX_PROCS. Fills *OUT (valid while F lives) and returns the count. Non-Python
 * members that never became Python (shells) are left out. */
size_t family_procs(const family_t *f, const family_proc_info_t **out);

/* The root's sampler while the root is sampled, else NULL (its stats, its back end). */
sampler_t *family_root_sampler(family_t *f);

/* Totals over every member: ticks and lateness of the family loop; samples, errors, busy
 * time, execs, perf counters summed over the members; torn stacks the members' readers
 * dropped in *TORN; processes past FAMILY_MAX_PROCS in *OVERFLOW. */
void family_stats(const family_t *f, sampler_stats_t *out, uint64_t *torn, uint64_t *overflow);

/* A short description of the way children are found, e.g. "process-events connector" or
 * "/proc scans every 50 ms (connector refused: ...)". */
const char *family_discovery_desc(const family_t *f);

/* "" or a sentence saying that new child processes were not followed because scry's
 * descriptors ran short (family_new raises the soft RLIMIT_NOFILE to the hard limit; a
 * new member is followed only while an eighth of it, at least 48, stays free for the
 * members followed already, so they and the root are never lost to it). Valid while F
 * lives; it changes as more are skipped. */
const char *family_limit_note(const family_t *f);

/* 1 once every member has exited (the whole program is gone). */
int family_done(const family_t *f);

/* The back end of the members' samplers (sampler_backend_desc of the first one made). */
const char *family_backend_desc(const family_t *f);

#endif
