/* classify.h - was a thread running Python, native code, or off CPU (issue 3)?
 *
 * Pure functions over data the caller supplies (no ptrace here); the /proc files they
 * need are read by proc/ (scry_proc.h). Read stat and syscall BEFORE stopping the thread for a
 * native unwind: once stopped, the thread shows state 't'.
 *
 * Rules (docs/native.md):
 *  1. state is not R (S, D, T, t, Z...), or /proc syscall shows the thread blocked in a
 *     system call -> SYSTEM. A futex wait whose first frame above libc is the GIL's
 *     (take_gil, PyCOND_WAIT, PyEval_RestoreThread, PyEval_AcquireThread,
 *     PyGILState_Ensure, or the eval loop itself dropping/taking the GIL) is flagged
 *     UNWIND_CLASSIFY_GIL_WAIT;
 *  2. R with a native stack: leaf frames in a C-runtime wait (futex, condition variable,
 *     sleep, poll) -> SYSTEM; else the leaf frame decides as the perf sampler's
 *     instruction pointer does (unwind_ip_kind + unwind_classify_ip): in libpython / the
 *     python executable -> NATIVE when the leaf Python instruction is a call, else
 *     PYTHON; anywhere else (an extension, BLAS, the C runtime's memcpy) -> NATIVE;
 *  3. R without a native stack: the GIL known to be released by this thread (it runs C
 *     code that let go of it) -> NATIVE; the current instruction is a call
 *     (PYSTATE_OP_CALL) -> NATIVE; else (MAYCALL, OTHER, UNKNOWN) -> PYTHON.
 */
#ifndef SCRY_UNWIND_CLASSIFY_H
#define SCRY_UNWIND_CLASSIFY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "scry_proc.h"
#include "unwind.h"

/* Opcode classes are pystate/opcodes.h's (a public header of scry_pystate, passed as int);
 * only CALL matters here. */
#include "opcodes.h"
#define UNWIND_OP_CALL PYSTATE_OP_CALL

/* unwind_task_t.gil: what the target's GIL says about the thread. */
enum unwind_gil {
    UNWIND_GIL_UNKNOWN = 0,  /* not read (or no GIL) */
    UNWIND_GIL_HELD = 1,     /* the thread holds the GIL */
    UNWIND_GIL_RELEASED = 2, /* read, and the thread does not hold it */
};

typedef struct unwind_task {
    char state;        /* /proc/.../stat state: 'R', 'S', 'D', 'T', 't', 'Z'...; 0 unknown */
    proc_syscall_t sc; /* .nr = PROC_SYSCALL_UNKNOWN when not read */
    uint8_t gil;       /* enum unwind_gil */
} unwind_task_t;

/* Flags of unwind_classification_t. */
#define UNWIND_CLASSIFY_GIL_WAIT 1u /* off CPU waiting for the GIL */
#define UNWIND_CLASSIFY_SYSCALL  2u /* in a blocking system call (see .syscall) */
#define UNWIND_CLASSIFY_NOSTACK  4u /* decided without a native stack (opcode rule) */

typedef struct unwind_classification {
    uint8_t cls;   /* enum scry_class */
    uint8_t flags; /* UNWIND_CLASSIFY_* */
    long syscall;  /* the syscall number when UNWIND_CLASSIFY_SYSCALL */
} unwind_classification_t;

/* Classifies one thread. TASK may have state 0 / nr UNKNOWN (then treated as running);
 * NATIVE (leaf first, may be NULL with NN 0) is its native stack when unwound; OPCLASS is
 * the leaf Python instruction's class (PYSTATE_OP_*). Returns 0 and
 * fills OUT, or SCRY_E_INVAL (NULL TASK or OUT). */
int unwind_classify(const unwind_task_t *task, const unwind_frame_t *native, size_t nn, int opclass,
                    unwind_classification_t *out);

/* What the instruction pointer of a sample taken by the kernel (perf events) says. */
enum unwind_ip_kind {
    UNWIND_IP_KERNEL = 1,  /* in the kernel: a system call, a page fault, an interrupt */
    UNWIND_IP_NATIVE = 2,  /* in code outside CPython (an extension, BLAS, libcrypto,
                              libz..., and the C runtime: the memcpy of bytes * n) */
    UNWIND_IP_CPYTHON = 3, /* in libpython / the python executable, or unknown */
};

/* The kind of IP from the kernel's flag KERNEL and LEAF, the IP described by
 * unwind_describe_ip (may be NULL: CPYTHON). */
int unwind_ip_kind(int kernel, const unwind_frame_t *leaf);

/* Classifies a running sample from its IP kind (enum unwind_ip_kind) and the leaf Python
 * instruction's class OPCLASS (PYSTATE_OP_*), the same with or without a native stack:
 * KERNEL -> SYSTEM; NATIVE -> NATIVE; CPYTHON -> NATIVE when the leaf instruction is a call
 * (a C function called from Python, e.g. sorted, str, list.sort), else PYTHON (the
 * interpreter's own work: the eval loop and the helpers it calls for an instruction).
 * Returns 0, or SCRY_E_INVAL for a NULL OUT. */
int unwind_classify_ip(int ip_kind, int opclass, unwind_classification_t *out);

/* True when F is in the C runtime (libc, libpthread, ld.so, libm, libdl, librt, vdso). */
int unwind_frame_is_runtime(const unwind_frame_t *f);

/* True when syscall NR (x86-64) usually blocks: waits, sleeps, I/O on pipes, sockets and
 * terminals, poll/select/epoll, futex, wait4, accept... */
int unwind_syscall_blocks(long nr);

/* True when a futex wait at the native stack NATIVE is the GIL's. */
int unwind_is_gil_wait(const unwind_frame_t *native, size_t nn);

/* Reads state and syscall into TASK (syscall failures leave nr UNKNOWN). Returns 0 or
 * the state reader's error. */
int unwind_read_task(pid_t pid, pid_t tid, unwind_task_t *task);

#endif
