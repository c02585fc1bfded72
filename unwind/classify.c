/* classify.c - the Python / native / system attribution rules (see classify.h). */
#include "classify.h"

#include <string.h>

#include "sample.h"
#include "scry_err.h"

#define SYS_FUTEX_X86_64 202

int unwind_syscall_blocks(long nr)
{
    switch (nr) {
    case 0:   /* read */
    case 1:   /* write (pipes, sockets, terminals) */
    case 7:   /* poll */
    case 17:  /* pread64 */
    case 18:  /* pwrite64 */
    case 19:  /* readv */
    case 20:  /* writev */
    case 23:  /* select */
    case 34:  /* pause */
    case 35:  /* nanosleep */
    case 42:  /* connect */
    case 43:  /* accept */
    case 44:  /* sendto */
    case 45:  /* recvfrom */
    case 46:  /* sendmsg */
    case 47:  /* recvmsg */
    case 61:  /* wait4 */
    case 65:  /* semop */
    case 70:  /* msgrcv */
    case 73:  /* flock */
    case 74:  /* fsync */
    case 75:  /* fdatasync */
    case 128: /* rt_sigtimedwait */
    case 130: /* rt_sigsuspend */
    case 162: /* sync */
    case 202: /* futex */
    case 208: /* io_getevents */
    case 220: /* semtimedop */
    case 230: /* clock_nanosleep */
    case 232: /* epoll_wait */
    case 242: /* mq_timedsend */
    case 243: /* mq_timedreceive */
    case 247: /* waitid */
    case 270: /* pselect6 */
    case 271: /* ppoll */
    case 281: /* epoll_pwait */
    case 288: /* accept4 */
    case 299: /* recvmmsg */
    case 307: /* sendmmsg */
    case 426: /* io_uring_enter */
    case 441: /* epoll_pwait2 */
    case 449: /* futex_waitv */
        return 1;
    default:
        return 0;
    }
}

/* The C runtime: its frames say nothing about who asked for the work. */
int unwind_frame_is_runtime(const unwind_frame_t *f)
{
    if (!f)
        return 0;
    static const char *const libs[] = {"libc.so", "libc-", "libpthread", "ld-linux", "libm.so",
                                       "libm-",   "libdl", "librt",      "[vdso]",   "linux-vdso"};
    if (!f->lib)
        return 0;
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++)
        if (strncmp(f->lib, libs[i], strlen(libs[i])) == 0)
            return 1;
    return 0;
}

static int is_gil_symbol(const char *s)
{
    static const char *const names[] = {
        "take_gil",
        "drop_gil",
        "PyCOND_WAIT",
        "PyCOND_TIMEDWAIT",
        "PyEval_RestoreThread",
        "PyEval_AcquireThread",
        "PyEval_AcquireLock",
        "PyGILState_Ensure",
        "_PyEval_EvalFrameDefault",
        "_Py_HandlePending",
        "eval_frame_handle_pending",
        "_PyEval_AcquireLock",
        "PyEval_EvalFrameEx",
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        size_t n = strlen(names[i]);
        if (strncmp(s, names[i], n) == 0 && (s[n] == '\0' || s[n] == '.'))
            return 1;
    }
    return 0;
}

/* True when the leaf frames in the C runtime include a function that blocks. */
static int in_runtime_wait(const unwind_frame_t *native, size_t nn)
{
    static const char *const waits[] = {
        "futex",     "cond_wait", "cond_timedwait", "lll_lock_wait", "sem_wait", "sem_timedwait",
        "nanosleep", "__poll",    "epoll_wait",     "__select",      "pselect",  "sigtimedwait",
        "accept",    "recv",      "waitpid",        "wait4"};
    for (size_t i = 0; i < nn && i < 8 && unwind_frame_is_runtime(&native[i]); i++) {
        const char *sym = native[i].symbol;
        for (size_t k = 0; sym && k < sizeof waits / sizeof *waits; k++)
            if (strstr(sym, waits[k]))
                return 1;
    }
    return 0;
}

int unwind_is_gil_wait(const unwind_frame_t *native, size_t nn)
{
    if (!native)
        return 0;
    /* Above the runtime's futex/condvar frames, skip CPython frames without a name (the
     * static take_gil of a stripped python), and judge the first named frame. */
    for (size_t i = 0; i < nn && i < 16; i++) {
        const unwind_frame_t *f = &native[i];
        if (unwind_frame_is_runtime(f))
            continue;
        if (!f->symbol) {
            if (f->in_python)
                continue;
            return 0;
        }
        /* An unnamed part of a split eval loop (symbolize.c) says nothing: the unnamed
         * frames skipped below it may be any C function it called (time.sleep). */
        if (f->is_eval && strcmp(f->symbol, UNWIND_EVAL_PART_NAME) == 0)
            return 0;
        return is_gil_symbol(f->symbol);
    }
    return 0;
}

int unwind_classify(const unwind_task_t *task, const unwind_frame_t *native, size_t nn, int opclass,
                    unwind_classification_t *out)
{
    if (!task || !out)
        return SCRY_E_INVAL;
    if (!native)
        nn = 0;
    memset(out, 0, sizeof *out);
    long nr = task->sc.nr;
    int in_syscall = nr >= 0 && unwind_syscall_blocks(nr);
    /* 't' is a ptrace stop: most likely our own, so it says nothing; judge by the rest. */
    int off_cpu = task->state && task->state != 'R' && task->state != 't';
    if (off_cpu || in_syscall) {
        out->cls = SCRY_CLASS_SYSTEM;
        if (nr >= 0) {
            out->flags |= UNWIND_CLASSIFY_SYSCALL;
            out->syscall = nr;
        }
        if ((nr == SYS_FUTEX_X86_64 || nr == PROC_SYSCALL_UNKNOWN) &&
            unwind_is_gil_wait(native, nn))
            out->flags |= UNWIND_CLASSIFY_GIL_WAIT;
        return 0;
    }
    if (nn > 0) {
        /* Runnable but parked in a C-runtime wait (a futex, condition variable, sleep or
         * poll): the thread is waking up or about to sleep, not working. */
        if (in_runtime_wait(native, nn)) {
            out->cls = SCRY_CLASS_SYSTEM;
            if (unwind_is_gil_wait(native, nn))
                out->flags |= UNWIND_CLASSIFY_GIL_WAIT;
            return 0;
        }
        /* The leaf frame plays the sampled instruction pointer: the same rule as the perf
         * sampler's, so a line's split does not depend on --native or the sampler. */
        return unwind_classify_ip(unwind_ip_kind(0, &native[0]), opclass, out);
    }
    out->flags |= UNWIND_CLASSIFY_NOSTACK;
    /* Running Python code needs the GIL: a running thread that does not hold it runs C
     * code that released it (BLAS under a @, a numpy ufunc), whatever the instruction. */
    if (task->gil == UNWIND_GIL_RELEASED && (task->state == 'R' || task->state == 0)) {
        out->cls = SCRY_CLASS_NATIVE;
        return 0;
    }
    out->cls = opclass == UNWIND_OP_CALL ? SCRY_CLASS_NATIVE : SCRY_CLASS_PYTHON;
    return 0;
}

int unwind_ip_kind(int kernel, const unwind_frame_t *leaf)
{
    if (kernel)
        return UNWIND_IP_KERNEL;
    if (!leaf || leaf->in_python)
        return UNWIND_IP_CPYTHON;
    return UNWIND_IP_NATIVE;
}

int unwind_classify_ip(int ip_kind, int opclass, unwind_classification_t *out)
{
    if (!out)
        return SCRY_E_INVAL;
    *out = (unwind_classification_t){.cls = SCRY_CLASS_PYTHON};
    if (ip_kind == UNWIND_IP_KERNEL)
        out->cls = SCRY_CLASS_SYSTEM;
    else if (ip_kind == UNWIND_IP_NATIVE || opclass == UNWIND_OP_CALL)
        out->cls = SCRY_CLASS_NATIVE;
    return 0;
}

int unwind_read_task(pid_t pid, pid_t tid, unwind_task_t *task)
{
    if (!task)
        return SCRY_E_INVAL;
    task->state = 0;
    task->sc.nr = PROC_SYSCALL_UNKNOWN;
    int rc = proc_read_task_state(pid, tid, &task->state);
    if (rc != 0)
        return rc;
    if (proc_read_task_syscall(pid, tid, &task->sc) != 0)
        task->sc.nr = PROC_SYSCALL_UNKNOWN;
    return 0;
}
