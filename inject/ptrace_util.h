/* ptrace_util.h - what the injector does to a thread it holds stopped: registers, signal
 * masks, signals to re-deliver. Stopping and resuming it is proc/ptrace.c's (scry_proc.h:
 * seize, interrupt, wait, detach), never done here.
 *
 * Threads are addressed by TID (a thread's kernel id; the main thread's TID is the PID).
 * The calling thread becomes the tracer: every later ptrace call on that TID must come from
 * the same thread of the calling process.
 */
#ifndef INJECT_PTRACE_UTIL_H
#define INJECT_PTRACE_UTIL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "scry_proc.h"

/* Reads the siginfo of the current signal-delivery-stop. Returns 0 or SCRY_E_GONE/IO. */
int ptr_getsiginfo(pid_t tid, siginfo_t *si);

/* True when SI describes a fault raised by the thread's own instruction (SIGSEGV, SIGBUS,
 * SIGILL, SIGFPE, SIGTRAP or SIGSYS with a kernel si_code > 0), as opposed to a signal sent by
 * someone (kill, tgkill, sigqueue, timers). */
int ptr_siginfo_is_fault(const siginfo_t *si);

/* The complete user-visible register state of one thread: general registers and the
 * FPU/SSE/AVX state (NT_X86_XSTATE, or the legacy 512-byte FXSAVE area when the kernel has no
 * xstate regset). */
#define PTR_XSTATE_MAX 16384
typedef struct ptr_regs {
    struct user_regs_struct gpr;
    size_t xstate_len; /* bytes valid in xstate */
    int xstate_kind;   /* 1 = NT_X86_XSTATE, 2 = NT_PRFPREG (FXSAVE) */
    uint8_t xstate[PTR_XSTATE_MAX] __attribute__((aligned(64)));
} ptr_regs_t;

/* Saves the registers of stopped tracee TID into *R. Returns 0, SCRY_E_GONE or SCRY_E_IO. */
int ptr_regs_save(pid_t tid, ptr_regs_t *r);

/* Writes back the FP/vector state of R (first) and then its general registers. Writing the
 * vector state first matters: if the tracer dies in between, the general registers still
 * describe the point the thread was at. Returns 0, SCRY_E_GONE or SCRY_E_IO. */
int ptr_regs_restore(pid_t tid, const ptr_regs_t *r);

/* Writes only the FP/vector state, or only the general registers. Same returns. */
int ptr_xstate_restore(pid_t tid, const ptr_regs_t *r);
int ptr_gpr_write(pid_t tid, const struct user_regs_struct *gpr);
int ptr_gpr_read(pid_t tid, struct user_regs_struct *gpr);

/* Reads / sets the blocked-signal mask of stopped tracee TID (PTRACE_GETSIGMASK /
 * PTRACE_SETSIGMASK, Linux 3.11+; bit N-1 is signal N, as in the kernel's sigset). SIGKILL
 * and SIGSTOP can never be blocked: the kernel drops those bits. Returns 0, SCRY_E_GONE or
 * SCRY_E_IO. */
int ptr_sigmask_get(pid_t tid, uint64_t *mask);
int ptr_sigmask_set(pid_t tid, uint64_t mask);

/* Counts the signals queued for stopped tracee TID (its own queue and its process's shared
 * queue; PTRACE_PEEKSIGINFO: nothing is dequeued) whose bit is set in MASK. Counts at most
 * 65536. Returns the count, or a negative code. */
int ptr_sigpending_count(pid_t tid, uint64_t mask);

/* Signals that arrived while we held a thread and that must reach the program afterwards.
 * Only signals that cannot be blocked get here while a borrowed thread's mask blocks the
 * rest (inject.c), so the queue stays tiny; standard signals are merged. */
#define PTR_SIGQ_MAX 32
typedef struct ptr_sigq {
    int n;
    int dropped; /* arrivals beyond PTR_SIGQ_MAX (duplicates of standard signals are merged) */
    siginfo_t info[PTR_SIGQ_MAX];
} ptr_sigq_t;

/* Remembers signal SI (a signal-delivery-stop's siginfo) to re-send later. A standard
 * (non-realtime) signal already queued is merged, as the kernel would. */
void ptr_sigq_push(ptr_sigq_t *q, const siginfo_t *si);

/* Re-sends every remembered signal to thread TID of process PID, after it was detached:
 * rt_tgsigqueueinfo for sigqueue()-style signals (keeps the value), tgkill otherwise.
 * Returns how many were sent; empties Q. */
int ptr_sigq_redeliver(ptr_sigq_t *q, pid_t pid, pid_t tid);

#endif
