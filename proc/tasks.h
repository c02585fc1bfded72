/* tasks.h - the threads of the target at one tick: scheduler state, CPU time used since
 * the previous tick, and stopping/resuming a chosen subset (--blocking, --native).
 *
 * States are read before anything is stopped (a stopped thread reads as traced). Every
 * thread stopped by proc_tasks_stop is resumed by proc_tasks_resume_all, also on error paths, and
 * by proc_tasks_free.
 */
#ifndef SCRY_PROC_TASKS_H
#define SCRY_PROC_TASKS_H

#include "scry_proc.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROC_TASKS_MAX 8192

typedef struct proc_tasks proc_tasks_t;

typedef struct proc_task {
    pid_t tid;
    char state;          /* 'R', 'S', ... 0 unknown */
    uint64_t cpu_delta;  /* CPU ns since it was last seen running, PROC_NO_DELTA unknown */
    uint64_t wall_delta; /* wall ns since its previous refresh, PROC_NO_DELTA unknown */
    uint8_t stopped;     /* stopped by proc_tasks_stop */
    uint8_t at_syscall;  /* running when asked, and stopped at a system call's exit */
    /* Kept across refreshes while the thread lives (proc_tasks_stop_counts): */
    uint64_t utime, stime;   /* its user and system CPU so far (clock ticks) */
    uint64_t utime0, stime0; /* the same when first listed */
    uint32_t stops_running;  /* stops of it asked while it ran */
    uint32_t syscall_kept;   /* of those, taken at a system call's exit and counted */
    uint64_t carry_ns;       /* weight of its stops not counted, for its next sample */
    uint8_t on_cpu;          /* tick_charge: on a CPU while its stack was read, this tick */
} proc_task_t;

/* Creates the table for process PID. NULL when out of memory. */
proc_tasks_t *proc_tasks_new(pid_t pid);

/* Resumes anything still stopped, then frees. NULL is a no-op. */
void proc_tasks_free(proc_tasks_t *t);

/* Lists the process's threads with their states and CPU deltas. Returns the count, or a
 * negative code (SCRY_E_GONE when the process is gone). */
int proc_tasks_refresh(proc_tasks_t *t);

/* Makes the next refresh list the threads again (a thread was seen that the list lacks). */
void proc_tasks_mark_stale(proc_tasks_t *t);

/* The entry of thread TID from the last refresh, or NULL. */
proc_task_t *proc_tasks_find(proc_tasks_t *t, pid_t tid);

/* The I-th entry of the last refresh, or NULL past the end. */
proc_task_t *proc_tasks_at(proc_tasks_t *t, size_t i);

/* Whether thread TASK, runnable at the last refresh, has been on a CPU without a break
 * since its CPU time was read then (proc_threads_on_cpu: one pread). Where the kernel
 * counts no arrivals on a CPU, whether it is runnable now (its state read again), which a
 * thread woken up that still waits for a CPU is too. Where the process may run only on the
 * one CPU the caller runs on (a 1-CPU machine, or both pinned to one CPU: checked at each
 * listing), it is never on a CPU while the caller looks: whether it was runnable at the
 * last refresh (put off the CPU by the caller, its stack where it ran; or woken up and not
 * run yet). */
int proc_tasks_on_cpu(proc_tasks_t *t, const proc_task_t *task);

/* Stops thread TID (PTRACE_SEIZE + PTRACE_INTERRUPT, bounded wait). Returns 0 or a
 * negative code; a thread that does not stop in time is left running. */
int proc_tasks_stop(proc_tasks_t *t, proc_task_t *task);

/* Whether a sample of TASK, stopped by proc_tasks_stop, counts. A stop asked of a running
 * thread is taken when the kick reaches its CPU, or at the exit of a system call the thread
 * enters before that: on a VM, where the kick takes microseconds, a line that makes a
 * system call every few dozen microseconds caught several times its share of the stops
 * (docs/accuracy.md, "--blocking"). Which of those stops were in the call already cannot
 * be told apart, but how many there should be can: the thread's system time over its user
 * plus system time (the kernel's own accounting) times its stops while running. Stops at a
 * system call's exit beyond that count are not counted (returns 0; their weight goes to
 * the thread's next sample, carry_ns); every other sample counts (returns 1). */
int proc_tasks_stop_counts(proc_task_t *task);

/* Stops every listed thread. Returns how many stopped. */
size_t proc_tasks_stop_all(proc_tasks_t *t);

/* Resumes every thread this table stopped. */
void proc_tasks_resume_all(proc_tasks_t *t);

#endif
