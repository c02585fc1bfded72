/* ptrace.c - every ptrace stop scry makes (scry_proc.h): the primitives (seize, interrupt,
 * bounded wait, resume, detach), the wait for an interrupt's stop that lets signals through,
 * and stopping single threads for the time of a read with the bookkeeping that never leaves
 * one stopped. What a tracer does to a stopped thread (registers, signal masks: inject/) is
 * not here. */
#include "scry_proc.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
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

int proc_interrupt_wait(pid_t tid, int timeout_ms)
{
    if (timeout_ms < 0)
        return SCRY_E_INVAL;
    int rc = proc_interrupt(tid);
    if (rc)
        return rc;
    uint64_t start = scry_now_ns();
    for (int guard = 0; guard < 10000; guard++) {
        uint64_t el = (scry_now_ns() - start) / 1000000u;
        if (el >= (uint64_t)timeout_ms)
            break;
        proc_stop_t st;
        rc = proc_wait(tid, (int)((uint64_t)timeout_ms - el), &st);
        if (rc)
            return rc;
        switch (st.kind) {
        case PROC_EXITED:
            return SCRY_E_GONE;
        case PROC_STOP_EVENT:
            return proc_stop_is_group(&st) ? 1 : 0;
        case PROC_STOP_SIGNAL:
            /* Not ours yet: the signal is delivered now, in its order, as without us (the
             * interrupt stays pending and stops the thread right after). */
            rc = proc_cont(tid, st.sig);
            break;
        default:
            rc = proc_cont(tid, 0);
            break;
        }
        if (rc)
            return rc;
    }
    return SCRY_E_TIMEOUT;
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

/* ---- stopping one thread for the time of a read ---------------------------------------- */

/* Threads traced by this scry thread: stopped ones (with the signal to give back when
 * detaching) and pending ones (seized, stop timed out, or exited and not yet reaped). */
typedef struct traced {
    pid_t tid;
    int sig;     /* signal to re-inject on detach */
    int pending; /* 0: stopped now; 1: not stopped yet (detach when it stops) */
} traced_t;

static _Thread_local traced_t tab[PROC_MAX_PENDING];
static _Thread_local int ntab;
static _Thread_local int npending;

static traced_t *find(pid_t tid)
{
    for (int i = 0; i < ntab; i++)
        if (tab[i].tid == tid)
            return &tab[i];
    return NULL;
}

static void drop(traced_t *t)
{
    if (t->pending)
        npending--;
    *t = tab[--ntab];
}

/* The signal a ptrace-stop asks to re-inject: none for our interrupt (or a group stop,
 * which stays in force after the detach) or another event stop (we set no options, so
 * unexpected), the signal for a signal-delivery-stop. */
static int stop_signal(int status)
{
    proc_stop_t st;
    proc_stop_classify(status, &st);
    return st.kind == PROC_STOP_SIGNAL ? st.sig : 0;
}

int proc_reap_pending(void)
{
    if (npending == 0)
        return 0;
    for (int i = 0; i < ntab;) {
        traced_t *t = &tab[i];
        if (!t->pending) {
            i++;
            continue;
        }
        int status = 0;
        pid_t r = waitpid(t->tid, &status, __WALL | WNOHANG);
        if (r == 0) {
            i++;
            continue;
        }
        if (r == t->tid && WIFSTOPPED(status))
            proc_detach(t->tid, stop_signal(status));
        /* Stopped and detached, exited and reaped, or not ours any more (ECHILD). */
        drop(t);
    }
    return npending;
}

int proc_stop_thread_timeout(pid_t tid, int timeout_ms)
{
    if (tid <= 0 || timeout_ms < 0)
        return SCRY_E_INVAL;
    proc_reap_pending();
    traced_t *t = find(tid);
    if (t && !t->pending)
        return SCRY_E_INVAL; /* already stopped by this thread */
    if (!t) {
        if (ntab >= PROC_MAX_PENDING)
            return SCRY_E_AGAIN;
        int err = proc_seize(tid, 0);
        if (err != 0)
            return err == SCRY_E_NOPROC ? SCRY_E_GONE : err;
        t = &tab[ntab++];
        *t = (traced_t){.tid = tid, .sig = 0, .pending = 1};
        npending++;
        if (proc_interrupt(tid) != 0) {
            /* Seized but the thread vanished: reap it later (it is a traced zombie). */
            proc_reap_pending();
            return SCRY_E_GONE;
        }
    }
    /* else: an earlier stop of TID timed out and its interrupt is still under way: wait
     * for that one. */
    proc_stop_t st;
    int err = proc_wait(tid, timeout_ms, &st);
    if (err == 0 && st.kind != PROC_EXITED) {
        t->sig = st.kind == PROC_STOP_SIGNAL ? st.sig : 0;
        t->pending = 0;
        npending--;
        return 0;
    }
    if (err != SCRY_E_TIMEOUT) {
        drop(t); /* exited and reaped, or not ours any more */
        return SCRY_E_GONE;
    }
    /* Not stopped in time. It cannot be detached while running: it stays pending, and is
     * detached the moment it reaches the interrupt stop. */
    proc_reap_pending();
    return SCRY_E_TIMEOUT;
}

int proc_stop_thread(pid_t tid)
{
    return proc_stop_thread_timeout(tid, PROC_STOP_TIMEOUT_MS);
}

int proc_resume_thread(pid_t tid)
{
    traced_t *t = find(tid);
    if (!t || t->pending)
        return SCRY_E_INVAL;
    int sig = t->sig;
    drop(t);
    if (proc_detach(tid, sig) == 0)
        return 0;
    /* ESRCH: killed while stopped (a SIGKILL ends the stop). Its exit must be reaped by
     * us, the tracer: now if it is already a zombie, else by proc_reap_pending. */
    int status;
    if (waitpid(tid, &status, __WALL | WNOHANG) == 0 && ntab < PROC_MAX_PENDING) {
        tab[ntab++] = (traced_t){.tid = tid, .sig = 0, .pending = 1};
        npending++;
    }
    return SCRY_E_GONE;
}
