/* bpfsamp.h - Python stacks read in the kernel at the sample instant (`--sampler bpf`).
 *
 * A bpfsamp_t holds the loaded BPF program scry_walk.bpf.c and its maps. The caller opens
 * the target threads' task-clock perf events (perfev/, with opts.bpf_prog_fd set to
 * bpfsamp_prog_fd so each event runs the program at each of its ticks), says which thread
 * state each thread has (bpfsamp_set_threads), and drains the records the program wrote
 * (bpfsamp_read): per sample the thread, the CPU time it stands for, the instruction
 * pointer and the Python frames as (code object address, instruction offset), leaf first.
 * Code objects are resolved in user space (pystate_resolve_code).
 *
 * Built only when clang (BPF target), bpftool and libbpf were found at build time; else
 * every function that could load it returns SCRY_E_NOSYS and says why. Not thread-safe.
 */
#ifndef SCRY_BPFSAMP_H
#define SCRY_BPFSAMP_H

#include "bpfsamp_abi.h"
#include "layout.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BPFSAMP_MAX_CPUS 4096 /* possible CPUs whose lost counts are summed */
/* The ring with --native (else 2 MiB): about 240 records of 32 KiB stack, 12 threads
 * busy at 1 kHz between two drains (20 ms); a power of two. */
#define BPFSAMP_NATIVE_RING (8u << 20)

typedef struct bpfsamp bpfsamp_t;

/* Fills *OUT with the offsets the program walks for layout L. Returns 0, or
 * SCRY_E_UNSUPPORTED (and a sentence in WHY) for a frame layout the program does not walk
 * yet (before 3.11's _PyInterpreterFrame chains, and versions not tested with it). */
int bpfsamp_cfg_for(const pystate_layout_t *L, struct bpfsamp_cfg *out, char *why, size_t whylen);

/* Loads the program with CFG. Returns 0 and *OUT (free with bpfsamp_free), or a negative
 * code after writing why into WHY: SCRY_E_NOSYS (not built in, or the kernel lacks BPF
 * ring buffers or perf-event programs), SCRY_E_PERM (needs root, or CAP_BPF and
 * CAP_PERFMON), SCRY_E_NOMEM, another code when the kernel refused it. With CFG->native
 * the ring is BPFSAMP_NATIVE_RING bytes (kernel memory held while B is open). */
int bpfsamp_open(const struct bpfsamp_cfg *cfg, bpfsamp_t **out, char *why, size_t whylen);

/* Unloads the program (events it is attached to stop running it once closed). NULL is a
 * no-op. */
void bpfsamp_free(bpfsamp_t *b);

/* Makes CFG the layout the program walks (another interpreter after an exec). Returns 0
 * or a negative code. */
int bpfsamp_set_cfg(bpfsamp_t *b, const struct bpfsamp_cfg *cfg);

/* The program's descriptor, for PERF_EVENT_IOC_SET_BPF on each thread's event. */
int bpfsamp_prog_fd(const bpfsamp_t *b);

/* Makes the program's thread map TIDS[i] -> TSTATES[i] for i < N (host tids), dropping
 * every other entry. At most BPFSAMP_MAX_THREADS. Returns 0 or a negative code. */
int bpfsamp_set_threads(bpfsamp_t *b, const pid_t *tids, const uint64_t *tstates, size_t n);

/* For a program shared by several targets' threads (scry serve): adds or updates the
 * entries TIDS[i] -> TSTATES[i] for i < N, leaving the others. Returns 0 or a negative code
 * (SCRY_E_NOMEM-like codes when the map is full: those threads' records are then read in
 * user space). */
int bpfsamp_put_threads(bpfsamp_t *b, const pid_t *tids, const uint64_t *tstates, size_t n);

/* Removes the entries of TIDS[i] for i < N (absent ones are ignored). */
void bpfsamp_drop_threads(bpfsamp_t *b, const pid_t *tids, size_t n);

/* One record, checked: NFRAMES frames fit in what the kernel wrote. Valid only during the
 * callback. */
typedef void (*bpfsamp_record_fn)(const struct bpfsamp_record *r, void *ctx);

/* --native: the user registers and stack copy of record R (checked: stack_len bytes of
 * stack are there), or NULL when R has none (cfg.native off, a sample in the kernel, or
 * no room in the ring for it then). Valid as R is. */
const struct bpfsamp_native *bpfsamp_record_native(const struct bpfsamp_record *r);

/* Delivers every record waiting in the ring to CB, oldest first. Returns the count (>= 0)
 * or a negative code. No record is lost by reading; records the ring had no room for
 * are lost in the kernel. */
int bpfsamp_read(bpfsamp_t *b, bpfsamp_record_fn cb, void *ctx);

/* Counters (each may be NULL): records delivered, rejected (shorter than their frame
 * count says), and lost in the kernel (the ring was full). */
void bpfsamp_counts(const bpfsamp_t *b, uint64_t *records, uint64_t *bad, uint64_t *lost);

/* How many times the program ran and its CPU time in the target threads' context (the
 * kernel's BPF run-time statistics, enabled while B is open). Returns 0, or SCRY_E_NOSYS
 * when the kernel keeps none. */
int bpfsamp_kernel_time(const bpfsamp_t *b, uint64_t *runs, uint64_t *ns);

#endif
