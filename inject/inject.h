/* inject.h - running code inside a live process: remote function calls and dlopen.
 *
 * scry's attach mode loads libscry-shim.so into a running Python and calls its entry point.
 * This module is the generic mechanism: it borrows ONE thread of the target for the duration
 * of the call(s), makes it call a function, and puts it back exactly where it was (all
 * general registers, RFLAGS, the x87/SSE/AVX state, and an interrupted system call, which
 * is restarted). The other threads keep running. See docs/injection.md for the design and
 * its residual risks.
 *
 * Safety properties:
 * - Every return path restores the thread and detaches: the target is never left stopped.
 * - The borrowed thread runs a self-restoring trampoline: if scry dies at any moment (even
 *   SIGKILL), the kernel detaches the thread and it finishes the call and returns to its own
 *   code by itself.
 * - Signals that arrive for the borrowed thread meanwhile are held and re-sent afterwards.
 * - Remote calls are bounded by a timeout (default 2 s); a call that does not return in time
 *   is abandoned and the thread restored.
 *
 * Threading: all calls on one session must come from the same thread of the caller (ptrace
 * ties a tracee to the tracer thread). Only x86-64 targets are supported.
 */
#ifndef INJECT_H
#define INJECT_H

#include <stdint.h>
#include <sys/types.h>

#include "rmem.h"

#define INJECT_DEFAULT_TIMEOUT_MS 2000
#define INJECT_DEFAULT_ATTEMPTS   10
#define INJECT_MAX_ARGS           6

typedef struct inject_opts {
    int timeout_ms;   /* per remote call; 0 = INJECT_DEFAULT_TIMEOUT_MS */
    int max_attempts; /* thread-selection rounds over all threads; 0 = default (10) */
    pid_t tid;        /* use exactly this thread; 0 = choose a safe one */
} inject_opts_t;

/* What happened, for logs and the tests. Filled by every entry point that takes one (may be
 * NULL). */
typedef struct inject_report {
    pid_t tid;            /* thread that ran the call(s); 0 when none was borrowed */
    int attempts;         /* threads stopped and examined before one was accepted */
    int in_syscall;       /* that thread was inside a system call (restarted afterwards) */
    long syscall_nr;      /* its number, -1 when it was running user code */
    raddr_t cave;         /* where the trampoline was written */
    uint64_t stopped_ns;  /* how long the thread was kept away from its own code */
    uint64_t call_ns;     /* time spent inside the remote function(s) */
    int syscall_stops;    /* ptrace syscall stops seen during the calls */
    int signals_deferred; /* signals that arrived during the call: left pending in the kernel
                           * (the thread's mask blocked them) or held and re-sent */
    char error[256];      /* detail of the failure ("" when none), e.g. the dlerror() text */
} inject_report_t;

typedef struct inject_session inject_session_t;

/* Borrows a thread of process PID: chooses one that is safe to run foreign code on (not
 * inside the dynamic loader or malloc; a thread blocked in sleep/read/poll is preferred),
 * stops it, saves its registers and writes the trampoline into the target. On success
 * *OUT is a session the caller must end with inject_session_close. REP (may be NULL) must
 * stay valid until then; it receives the details.
 * Returns 0, SCRY_E_INVAL, SCRY_E_NOPROC (no such process), SCRY_E_PERM (cannot trace it),
 * SCRY_E_NOSYS (not x86-64), SCRY_E_NOTFOUND (no room for the trampoline), SCRY_E_AGAIN (no
 * safe thread found within the attempts, or the process is stopped), SCRY_E_GONE, SCRY_E_NOMEM
 * or SCRY_E_IO. On failure nothing is left behind in the target. */
int inject_session_open(pid_t pid, const inject_opts_t *opts, inject_report_t *rep,
                        inject_session_t **out);

/* Copies the NUL-terminated string STR into the target (next to the trampoline; read-only for
 * the target) and stores its remote address in *ADDR. Valid until the session is closed.
 * Returns 0, SCRY_E_INVAL, or SCRY_E_NOMEM (no room left in the code cave: a few KiB in all). */
int inject_session_string(inject_session_t *s, const char *str, raddr_t *addr);

/* Calls FUNC(args[0], .., args[NARGS-1]) (integer/pointer arguments, NARGS <= 6) on the
 * borrowed thread and stores its RAX in *RET (may be NULL). Returns 0; SCRY_E_TIMEOUT (the
 * call did not return within the timeout: abandoned, thread restored); SCRY_E_FAULT (the call
 * crashed: the fault was suppressed and the thread restored); SCRY_E_GONE; SCRY_E_AGAIN
 * (inject_abort_all was called: the thread was released to finish the call on its own). After
 * any error the session is finished (the thread was given back); only close is allowed. */
int inject_session_call(inject_session_t *s, raddr_t func, const uint64_t *args, int nargs,
                        uint64_t *ret);

/* dlopen(LIB_PATH, RTLD_NOW) in the target (or __libc_dlopen_mode on glibc < 2.34). On
 * success *HANDLE (may be NULL) is the handle; when dlopen returned NULL the result is
 * SCRY_E_NOTFOUND and the report's error holds the target's dlerror() text. Returns also
 * SCRY_E_NOSYS when the target has no dynamic loader entry point, or a call error. */
int inject_session_dlopen(inject_session_t *s, const char *lib_path, uint64_t *handle);

/* Finds SYMBOL in the object OBJECT currently mapped in the session's process (see
 * inject_find_symbol). */
int inject_session_symbol(inject_session_t *s, const char *object, const char *symbol,
                          raddr_t *addr);

/* Restores the borrowed thread exactly (registers, vector state, interrupted syscall), erases
 * the trampoline, detaches, re-sends held signals and frees S. Returns 0 or the first error
 * (the thread is detached whatever happens; SCRY_E_GONE when it vanished). NULL is a no-op. */
int inject_session_close(inject_session_t *s);

/* The borrowed thread's id. */
pid_t inject_session_tid(const inject_session_t *s);

/* Finds the runtime address of function or object SYMBOL defined by the file mapped in PID
 * whose path, as PID sees it, is OBJECT (when OBJECT contains a '/') or whose file name starts with
 * OBJECT
 * ("libc.so", "libscry-shim.so"). Uses the .dynsym/.symtab of the file and its load bias.
 * Returns 0, SCRY_E_NOTFOUND (no such object mapped, or no such symbol in it), SCRY_E_PERM
 * (OBJECT is mapped but its file cannot be opened, e.g. deleted while map_files needs
 * CAP_SYS_ADMIN), SCRY_E_NOPROC, or another elfsym error. */
int inject_find_symbol(pid_t pid, const char *object, const char *symbol, raddr_t *addr);

/* As inject_find_symbol; a mapping of OBJECT whose file scry cannot open (deleted, and
 * /proc/PID/map_files needs CAP_SYS_ADMIN: a private copy of the shim removed after the
 * target loaded it, looked for by a user without that capability) is read from FILE
 * (may be NULL: none) when FILE's GNU build-id is the one mapped. */
int inject_find_symbol_as(pid_t pid, const char *object, const char *symbol, const char *file,
                          raddr_t *addr);

/* One-shot helpers: open a session, do one thing, close it. REP may be NULL. */

/* Calls FUNC with NARGS integer ARGS in PID; *RET (may be NULL) gets the return value. */
int inject_call_function(pid_t pid, raddr_t func, const uint64_t *args, int nargs, uint64_t *ret,
                         inject_report_t *rep);

/* dlopen(LIB_PATH, RTLD_NOW) in PID; *HANDLE_OUT (may be NULL) gets the handle. */
int inject_call_dlopen(pid_t pid, const char *lib_path, uint64_t *handle_out, inject_report_t *rep);

/* The attach path of scry: in one borrowing of one thread, dlopen LIB_PATH, then call its
 * exported FUNC_NAME(STR_ARG) (STR_ARG may be NULL: then FUNC_NAME() with no argument) and
 * store its return value in *RET_OUT (may be NULL). OPTS may be NULL. Returns 0, the errors
 * above, or SCRY_E_NOTFOUND when FUNC_NAME is not exported by the loaded library. */
int inject_load_and_call(pid_t pid, const char *lib_path, const char *func_name,
                         const char *str_arg, const inject_opts_t *opts, uint64_t *handle_out,
                         uint64_t *ret_out, inject_report_t *rep);

/* Async-signal-safe: asks every call in progress in this process to stop as soon as
 * possible (for scry's SIGINT/SIGTERM path). A thread inside a remote function is
 * detached and left to finish the function and restore itself; a thread not yet sent there is
 * restored at once. Sticky: later sessions fail with SCRY_E_AGAIN until inject_abort_clear. */
void inject_abort_all(void);
void inject_abort_clear(void);

#endif
