/* procinfo.h - small facts about a process from /proc, for messages and the sampler. */
#ifndef SCRY_PROCINFO_H
#define SCRY_PROCINFO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Returns 0 when PID exists, SCRY_E_NOPROC otherwise. */
int procinfo_exists(pid_t pid);

/* Writes "NAME (EXE)" describing PID into BUF, e.g. "bash (/usr/bin/bash)". */
void procinfo_describe(pid_t pid, char *buf, size_t len);

/* Writes PID's command line into BUF (arguments joined by spaces; "" when unreadable). */
void procinfo_cmdline(pid_t pid, char *buf, size_t len);

/* Joins the NULL-terminated ARGV with spaces into BUF (truncated to LEN). */
void procinfo_join_argv(char **argv, char *buf, size_t len);

/* Writes a sentence saying what tracing PID needs (root or CAP_SYS_PTRACE, and the Yama
 * ptrace_scope value when the kernel has it). */
void procinfo_permission_hint(pid_t pid, char *buf, size_t len);

/* Per-thread /proc files kept open between samples so each read is one pread. */
typedef struct procinfo_threads procinfo_threads_t;

procinfo_threads_t *procinfo_threads_new(pid_t pid);
void procinfo_threads_free(procinfo_threads_t *p);

/* The scheduler state letter of thread TID ('R', 'S', 'D', ...), or 0 when unknown. When
 * WALL_DELTA_NS is not NULL it receives the wall time since the previous call that asked
 * for it (CLOCK_MONOTONIC), or PROCINFO_NO_DELTA on the first such call. */
char procinfo_thread_state(procinfo_threads_t *p, pid_t tid, uint64_t *wall_delta_ns);

#define PROCINFO_NO_DELTA UINT64_MAX

/* The CPU time (schedstat) thread TID used since the previous call for it, or
 * PROCINFO_NO_DELTA on the first call. Returns 0 or SCRY_E_GONE. */
int procinfo_thread_cpu(procinfo_threads_t *p, pid_t tid, uint64_t *cpu_delta_ns);

/* The thread's name (comm), interned by the caller; writes "" when unknown. */
void procinfo_thread_name(pid_t pid, pid_t tid, char *buf, size_t len);

#endif
