/* launch.h - start a program and wait until it is a Python process scry can read. */
#ifndef SCRY_LAUNCH_H
#define SCRY_LAUNCH_H

#include "pystate.h"

#include <sys/types.h>

/* Forks and execs ARGV[0] (searched in PATH) with ENV_EXTRA (NULL-terminated "K=V" list,
 * may be NULL) added to the environment. INHERIT_FD (or -1) is a close-on-exec descriptor
 * of scry's the program inherits under the same number (e.g. the memory ring). When
 * BEFORE_EXEC is not NULL it runs in scry with the child's pid while the child waits,
 * before the exec (e.g. to make a ring claimable by that pid only); its failure is the
 * caller's to report, the program runs anyway. Returns 0 and the child's pid, or a
 * negative code after printing why (the program could not be executed). */
int launch_start(char **argv, char **env_extra, int inherit_fd,
                 void (*before_exec)(pid_t child, void *ctx), void *ctx, pid_t *child);

/* Waits until CHILD is a readable Python process with at least one thread, polling
 * quickly (programs that run for milliseconds must still be caught), following execs
 * through wrappers (pyenv shims, shell scripts). ON_OPEN, when not NULL, runs once as soon
 * as the interpreter is recognised (before it may even be initialised: its version and
 * layout are known), e.g. to release a preloaded shim waiting for its layout. Returns 0
 * with *OUT opened, SCRY_E_GONE when the child exited first (*STATUS set), or SCRY_E_NOTPY
 * after TIMEOUT_S seconds without Python (ERRBUF says what the child is). OPTS as
 * pystate_target_open_opts (--assume-version, --discovery; NULL = defaults). */
int launch_wait_python(pid_t child, strtab_t *strings, double timeout_s,
                       const pystate_open_opts_t *opts,
                       void (*on_open)(pystate_target_t *t, void *ctx), void *ctx,
                       pystate_target_t **out, int *status, char *errbuf, size_t errlen);

#endif
