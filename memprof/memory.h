/* memory.h - scry's side of --memory: the shared ring, the shim in the target
 * (preloaded at launch or injected into a live process), and turning the shim's events
 * into memory samples (alloc, free, copy) with their Python lines.
 */
#ifndef SCRY_MEMORY_H
#define SCRY_MEMORY_H

#include "pystate.h"
#include "sample.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct memprof memprof_t;

/* Where memory samples go (the same signature as the sampler's sampler_emit_fn, so one
 * callback takes both). */
typedef void (*memprof_emit_fn)(const scry_sample_t *sample, void *ctx);

/* Prepares a recording: finds libscry-shim.so (SCRY_SHIM, then
 * next to the scry executable: ../shim/, ../lib/scry/, ./). ALLOC_MEAN and COPY_MEAN are
 * the mean bytes between samples (0 = the shim's defaults). Returns NULL and prints why
 * when the shim cannot be found or memory runs out. */
memprof_t *memprof_new(uint64_t alloc_mean, uint64_t copy_mean);

/* Disables the ring (the shim becomes a pass-through), frees. */
void memprof_free(memprof_t *m);

/* Launch mode, before the program is started: creates the ring, disabled, as a sealed
 * memfd (nothing named in any file system, whenever scry dies) that the launched program
 * inherits (memprof_ring_fd; memprof_launch_env names it). LAYOUT may be NULL (published
 * later by memprof_start). Returns 0 or a negative code. */
int memprof_create_ring(memprof_t *m, const pystate_layout_t *layout);

/* Launch mode: only process PID (the launched child, and what it execs) may claim the
 * ring; call before it execs. Returns 0 or a negative code. */
int memprof_set_target(memprof_t *m, pid_t pid);

/* The ring's descriptor the launched program must inherit (-1 when there is none). */
int memprof_ring_fd(const memprof_t *m);

/* The "LD_PRELOAD=..." and "SCRY_RING=fd:N" entries for a launched program (valid while M
 * lives; LD_PRELOAD keeps what the environment already had). After memprof_create_ring. */
char **memprof_launch_env(memprof_t *m);

/* Attach mode: injects the shim into T's process (PEP 768 or ptrace: memprof_set_inject),
 * which makes the ring in its own memory (a sealed memfd: no file anywhere, nothing left
 * behind whenever scry dies); takes a copy of its descriptor (pidfd_getfd) and publishes
 * T's layout into it, disabled until
 * memprof_start. Do not call memprof_create_ring in this mode. On failure writes why into
 * MSG and returns a negative code; the target is left as it was (a ring the shim made is
 * released by the shim itself). */
int memprof_inject(memprof_t *m, pystate_target_t *t, char *msg, size_t len);

/* How memprof_inject loads the shim (docs/injection.md): */
enum {
    MEMPROF_INJECT_AUTO = 0,    /* PEP 768 remote execution where the target allows it
                                 * (3.14+, remote debugging on, reaches a safe point within
                                 * the bounded wait), else the ptrace trampoline */
    MEMPROF_INJECT_PTRACE,      /* always the ptrace trampoline (inject/) */
    MEMPROF_INJECT_REMOTE_EXEC, /* only PEP 768; refused with a reason where unsupported */
};

/* Chooses HOW (MEMPROF_INJECT_*) for later memprof_inject calls (default AUTO). */
void memprof_set_inject(memprof_t *m, int how);

/* Launch mode, once the program runs as Python (T): when its preloaded shim never claimed
 * the ring (the program changed its root, e.g. chroot or a container's mount namespace,
 * so scry's path of the shim does not exist there), drops the launch ring and injects the
 * shim as memprof_inject does, then starts recording. Returns 0 (also when nothing had to
 * be done) or a negative code with MSG filled (memory profiling should then be dropped). */
int memprof_launch_fallback(memprof_t *m, pystate_target_t *t, char *msg, size_t len);

/* Publishes the target's layout (launch mode) and enables recording. Returns 0 or a
 * negative code. */
int memprof_start(memprof_t *m, pystate_target_t *t);

/* Beats the heartbeat and turns every pending event into a sample for EMIT (frames
 * resolved through T's code cache). Returns the number of events, or a negative code when
 * the ring is corrupt (recording stops; CPU profiling goes on). */
int memprof_drain(memprof_t *m, pystate_target_t *t, memprof_emit_fn emit, void *ctx);

/* Stops recording (the shim passes through from now on); events already queued are still
 * drained. (The shim itself stops at the interpreter's teardown, exactly.) */
void memprof_stop(memprof_t *m);

/* Events dropped by the shim (ring full) and records rejected by validation. */
void memprof_counts(const memprof_t *m, uint64_t *events, uint64_t *dropped, uint64_t *bad);

/* One line for the summary: whether the shim attached, hooks, totals. */
void memprof_describe(const memprof_t *m, char *buf, size_t len);

#endif
