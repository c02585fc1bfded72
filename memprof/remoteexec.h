/* remoteexec.h - PEP 768 (CPython 3.14+): asking a live interpreter to run a Python script
 * at its next safe point, as sys.remote_exec does, through the fields the target's
 * _Py_DebugOffsets names (debugger_support): the script's path into the main thread's
 * _PyRemoteDebuggerSupport.debugger_script_path, debugger_pending_call = 1, and
 * _PY_EVAL_PLEASE_STOP_BIT (1 << 5) in its eval_breaker. Nothing is stopped or traced; the
 * interpreter runs the file itself between two bytecodes (docs/injection.md).
 */
#ifndef SCRY_REMOTEEXEC_H
#define SCRY_REMOTEEXEC_H

#include "rmem.h"

#include <stddef.h>
#include <sys/types.h>

typedef struct rexec rexec_t;

/* Prepares a request to process PID whose _PyRuntime is at RUNTIME_ADDR. Fails with
 * SCRY_E_UNSUPPORTED and a reason in WHY (WHYLEN bytes) when the target cannot take one: a
 * version without the fields (before 3.14), no main thread yet, or remote debugging off
 * (PYTHON_DISABLE_REMOTE_DEBUG, -X disable_remote_debug, a --without-remote-debug build:
 * config.remote_debug != 1); other read errors as rmem_read. *OUT on success. */
int rexec_open(pid_t pid, raddr_t runtime_addr, rexec_t **out, char *why, size_t whylen);

/* Writes the request: SCRIPT (a path the target can open, shorter than the version's
 * buffer), then the pending flag, then the eval breaker bit. Returns 0, SCRY_E_TRUNC for a
 * path too long, or a write error. */
int rexec_request(rexec_t *r, const char *script);

/* 1 while the request waits for the target's safe point, 0 once the target took it, or a
 * negative code. */
int rexec_pending(rexec_t *r);

/* Withdraws a request not taken yet: the script's path emptied (a take from then on runs
 * nothing), then the pending flag back to 0. Returns 0 (withdrawn: the target never runs
 * the script), 1 (the target had taken it already: the script may run), or a negative
 * code. */
int rexec_cancel(rexec_t *r);

/* Frees R (NULL is a no-op). */
void rexec_free(rexec_t *r);

#endif
