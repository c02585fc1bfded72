/* procinfo.h - small facts about a process from /proc, for messages and the sampler. */
#ifndef SCRY_PROCINFO_H
#define SCRY_PROCINFO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Returns 0 when PID exists, SCRY_E_NOPROC otherwise. */
int proc_exists(pid_t pid);

/* Writes into BUF why PID, which could not be opened as a process, is not one scry can read:
 * "process N is a zombie ...", "process N is a kernel thread ...", or "no such process: N". */
void proc_why_unreadable(pid_t pid, char *buf, size_t len);

/* Writes "NAME (EXE)" describing PID into BUF, e.g. "bash (/usr/bin/bash)". */
void proc_describe(pid_t pid, char *buf, size_t len);

/* Writes PID's command line into BUF (arguments joined by spaces; "" when unreadable). */
void proc_cmdline(pid_t pid, char *buf, size_t len);

/* Joins the NULL-terminated ARGV with spaces into BUF (truncated to LEN). */
void proc_join_argv(char **argv, char *buf, size_t len);

/* Writes a sentence saying what tracing PID needs (root or CAP_SYS_PTRACE, and the Yama
 * ptrace_scope value when the kernel has it). */
void proc_permission_hint(pid_t pid, char *buf, size_t len);

/* Writes the name (comm, without its newline) of thread TID of PID, or of process PID when
 * TID is 0, into BUF; "" when unknown. */
void proc_read_comm(pid_t pid, pid_t tid, char *buf, size_t len);

#endif
