/* blocking.h - stopping every thread of a process for an exact snapshot (--blocking).
 *
 * Each thread is stopped with PTRACE_SEIZE + PTRACE_INTERRUPT and always resumed
 * (PTRACE_DETACH) by blocking_resume_all, also on every error path. A thread that does
 * not stop within a few milliseconds is left running and sampled as it is.
 */
#ifndef SCRY_BLOCKING_H
#define SCRY_BLOCKING_H

#include "procinfo.h"

#include <sys/types.h>

typedef struct blocking_set blocking_set_t;

/* Creates an empty set for process PID. NULL when out of memory. */
blocking_set_t *blocking_set_new(pid_t pid);

/* Resumes anything still stopped, then frees. NULL is a no-op. */
void blocking_set_free(blocking_set_t *b);

/* Reads each thread's scheduler state, then stops every thread it can. Returns how many
 * were stopped. */
size_t blocking_stop_all(blocking_set_t *b, procinfo_threads_t *states);

/* Resumes every thread stopped by blocking_stop_all. */
void blocking_resume_all(blocking_set_t *b);

/* The state letter thread TID had when blocking_stop_all ran (0 when unknown). */
char blocking_state_of(const blocking_set_t *b, pid_t tid);

#endif
