/* ptrace.c - the ptrace primitives of scry_proc.h: seize, interrupt, bounded wait, resume. */
#include "scry_proc.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

#include "scry_err.h"
#include "scry_time.h"

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

static int err_of(int e)
{
    return e == ESRCH ? SCRY_E_GONE : scry_err_from_errno(e);
}

int proc_seize(pid_t tid, unsigned long options)
{
    if (tid <= 0)
        return SCRY_E_INVAL;
    if (ptrace(PTRACE_SEIZE, tid, 0, (void *)options) == 0)
        return 0;
    if (errno == ESRCH)
        return SCRY_E_NOPROC;
    return scry_err_from_errno(errno);
}

int proc_interrupt(pid_t tid)
{
    return ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0 ? 0 : err_of(errno);
}

void proc_stop_classify(int status, proc_stop_t *out)
{
    out->status = status;
    out->sig = 0;
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        out->kind = PROC_EXITED;
        return;
    }
    int sig = WSTOPSIG(status);
    int event = (status >> 16) & 0xff;
    out->sig = sig;
    if (sig == (SIGTRAP | 0x80))
        out->kind = PROC_STOP_SYSCALL;
    else if (event == PTRACE_EVENT_STOP)
        out->kind = PROC_STOP_EVENT;
    else if (event != 0)
        out->kind = PROC_STOP_OTHER;
    else
        out->kind = PROC_STOP_SIGNAL;
}

int proc_wait(pid_t tid, int timeout_ms, proc_stop_t *out)
{
    uint64_t start = scry_now_ns();
    uint64_t limit = (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
    long delay_ns = 50000;
    for (unsigned spin = 0;; spin++) {
        int status = 0;
        pid_t r = waitpid(tid, &status, WNOHANG | __WALL);
        if (r == tid) {
            proc_stop_classify(status, out);
            return 0;
        }
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return SCRY_E_GONE;
        }
        uint64_t spent = scry_now_ns() - start;
        if (spent >= limit)
            return SCRY_E_TIMEOUT;
        if (spent < 200000u || spin < 16) { /* a stop is usually this quick */
            sched_yield();
            continue;
        }
        /* 50 us steps for the first 2 ms (a sampler's stop), then doubling to 1 ms (an
         * injected call that runs for a while). */
        if (spent > 2000000u && delay_ns < 1000000)
            delay_ns *= 2;
        long d = (uint64_t)delay_ns > limit - spent ? (long)(limit - spent) : delay_ns;
        struct timespec ts = {0, d};
        nanosleep(&ts, NULL);
    }
}

int proc_stop_is_group(const proc_stop_t *st)
{
    return st->kind == PROC_STOP_EVENT &&
           (st->sig == SIGSTOP || st->sig == SIGTSTP || st->sig == SIGTTIN || st->sig == SIGTTOU);
}

int proc_cont(pid_t tid, int sig)
{
    return ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig) == 0 ? 0 : err_of(errno);
}

int proc_cont_syscall(pid_t tid, int sig)
{
    return ptrace(PTRACE_SYSCALL, tid, 0, (void *)(long)sig) == 0 ? 0 : err_of(errno);
}

int proc_detach(pid_t tid, int sig)
{
    return ptrace(PTRACE_DETACH, tid, 0, (void *)(long)sig) == 0 ? 0 : err_of(errno);
}
