/* stop.c - stopping single threads for a read, on the primitives of ptrace.c (scry_proc.h). */
#include "scry_proc.h"

#include <stdint.h>
#include <sys/wait.h>

#include "scry_err.h"

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
