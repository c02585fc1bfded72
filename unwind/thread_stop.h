/* thread_stop.h - stopping one thread of a live process for the time of a read.
 *
 * unwind_stop_thread seizes thread TID (PTRACE_SEIZE, no options: in particular no
 * PTRACE_O_EXITKILL, so if scry dies the kernel detaches and the target runs on),
 * interrupts it (PTRACE_INTERRUPT) and waits, bounded, for the stop. Only that thread
 * stops; the rest of the process runs. unwind_resume_thread detaches it again.
 *
 * ptrace belongs to the calling thread: the same thread must stop, read (unwind_thread)
 * and resume. The bookkeeping (a signal to re-inject, threads whose stop timed out) is
 * thread-local. Never leave a thread stopped: every successful stop must be followed by
 * unwind_resume_thread, and a scry thread that stops threads should call
 * unwind_reap_pending now and then (it is also called at every stop).
 */
#ifndef SCRY_UNWIND_THREAD_STOP_H
#define SCRY_UNWIND_THREAD_STOP_H

#include <sys/types.h>

#define UNWIND_STOP_TIMEOUT_MS 50 /* default bound on the wait for the stop */
#define UNWIND_MAX_PENDING     64 /* threads remembered per scry thread */

/* Stops thread TID (any thread of any process scry may trace) and waits up to
 * UNWIND_STOP_TIMEOUT_MS for it. Returns 0 when TID is stopped and traced by the calling
 * thread (then call unwind_resume_thread), SCRY_E_INVAL (TID is already stopped by this
 * thread), SCRY_E_GONE (the thread exited meanwhile; it
 * is not stopped), SCRY_E_PERM (no permission, or another tracer such as gdb holds it),
 * SCRY_E_TIMEOUT (it did not stop in time, e.g. in uninterruptible sleep or not
 * scheduled on a loaded machine: it is NOT stopped now; the next unwind_stop_thread of
 * TID waits for that same stop, and unwind_reap_pending detaches it when it arrives),
 * SCRY_E_AGAIN (the bookkeeping table is full: nothing was done), SCRY_E_IO. */
int unwind_stop_thread(pid_t tid);

/* Same with an explicit bound in milliseconds (0 = only poll once). */
int unwind_stop_thread_timeout(pid_t tid, int timeout_ms);

/* Lets TID run again (PTRACE_DETACH, re-injecting a signal that arrived during the stop).
 * Returns 0, SCRY_E_GONE (it exited while stopped; it was reaped) or SCRY_E_INVAL (TID
 * was not stopped by unwind_stop_thread in this thread). */
int unwind_resume_thread(pid_t tid);

/* Detaches threads whose stop timed out once they have stopped, and reaps threads that
 * exited while traced. Returns how many are still pending (0 when none). Cheap when none
 * is pending. */
int unwind_reap_pending(void);

#endif
