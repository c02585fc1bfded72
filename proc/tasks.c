#include "tasks.h"

#include "scry_err.h"
#include "scry_proc.h"
#include "scry_time.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TASKS_STOP_MS         20
#define TASKS_SHARE_MIN_TICKS 10 /* CPU clock ticks before a thread's system share is used */

struct proc_tasks {
    pid_t pid;
    proc_threads_t *files;
    uint64_t listed_ns;
    int stale;
    int stops; /* proc_tasks_stop was called: from then on each refresh reads the CPU times */
    int one_cpu_shared; /* the process may run on one CPU only, the only one scry may use */
    size_t n;
    proc_task_t list[PROC_TASKS_MAX];
    proc_task_t old[PROC_TASKS_MAX]; /* the previous listing, while a new one is merged */
};

proc_tasks_t *proc_tasks_new(pid_t pid)
{
    proc_tasks_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->pid = pid;
    t->files = proc_threads_new(pid);
    if (!t->files) {
        free(t);
        return NULL;
    }
    return t;
}

void proc_tasks_free(proc_tasks_t *t)
{
    if (!t)
        return;
    proc_tasks_resume_all(t);
    proc_threads_free(t->files);
    free(t);
}

/* Whether process PID may run on one CPU only and that CPU is the only one the calling
 * thread may use (affinity masks, which a cpuset cgroup narrows too): then whenever scry
 * runs, the process does not. 0 when either mask cannot be read. */
static int one_cpu_shared(pid_t pid)
{
    cpu_set_t theirs, ours;
    if (sched_getaffinity(pid, sizeof theirs, &theirs) != 0 ||
        sched_getaffinity(0, sizeof ours, &ours) != 0)
        return 0;
    return CPU_COUNT(&theirs) == 1 && CPU_EQUAL(&theirs, &ours);
}

/* Lists /proc/PID/task into T->list (states not read yet). */
static int list_tasks(proc_tasks_t *t)
{
    pid_t tids[PROC_TASKS_MAX];
    int n = proc_list_tasks(t->pid, tids, PROC_TASKS_MAX);
    if (n < 0)
        return n;
    /* Both lists are sorted: a thread listed before keeps its entry (its stop counts). */
    size_t old_n = t->n;
    memcpy(t->old, t->list, old_n * sizeof *t->list);
    size_t j = 0;
    t->n = (size_t)n;
    for (size_t i = 0; i < t->n; i++) {
        while (j < old_n && t->old[j].tid < tids[i])
            j++;
        if (j < old_n && t->old[j].tid == tids[i])
            t->list[i] = t->old[j];
        else
            t->list[i] = (proc_task_t){.tid = tids[i], .utime0 = UINT64_MAX};
    }
    t->listed_ns = scry_now_ns();
    t->stale = 0;
    t->one_cpu_shared = one_cpu_shared(t->pid);
    return 0;
}

int proc_tasks_refresh(proc_tasks_t *t)
{
    proc_tasks_resume_all(t);
    /* A stop that timed out leaves its interrupt queued: once the thread reaches the stop
     * it must be let go at once, or it would sit stopped (and look idle) from then on. */
    proc_reap_pending();
    /* Threads come and go rarely: the directory is listed again every 200 ms, or at once
     * when a thread was seen that the list lacks; in between each tick costs one pread
     * per thread (and one more for the CPU time of the running ones). */
    if (t->n == 0 || t->stale || scry_now_ns() - t->listed_ns > 200000000ull) {
        int err = list_tasks(t);
        if (err)
            return err;
    }
    size_t alive = 0;
    for (size_t i = 0; i < t->n; i++) {
        proc_task_t *ti = &t->list[i];
        ti->stopped = 0;
        ti->on_cpu = 0;
        ti->cpu_delta = PROC_NO_DELTA;
        ti->at_syscall = 0;
        ti->state = t->stops ? proc_threads_state_times(t->files, ti->tid, &ti->wall_delta,
                                                        &ti->utime, &ti->stime)
                             : proc_threads_state(t->files, ti->tid, &ti->wall_delta);
        if (t->stops && ti->utime0 == UINT64_MAX) {
            ti->utime0 = ti->utime;
            ti->stime0 = ti->stime;
        }
        alive += ti->state != 0;
    }
    /* The runnable ones' CPU times last and together: each read starts the span that
     * proc_tasks_on_cpu judges, kept short so a short burst on a CPU is not missed. */
    for (size_t i = 0; i < t->n; i++)
        if (t->list[i].state == 'R')
            proc_threads_cpu(t->files, t->list[i].tid, &t->list[i].cpu_delta);
    if (alive == 0) {
        /* Every thread gone: the process may have exited (or exec'd with new tids). */
        int err = list_tasks(t);
        if (err || t->n == 0)
            return SCRY_E_GONE;
    }
    return (int)t->n;
}

void proc_tasks_mark_stale(proc_tasks_t *t)
{
    t->stale = 1;
}

proc_task_t *proc_tasks_find(proc_tasks_t *t, pid_t tid)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->list[mid].tid == tid)
            return &t->list[mid];
        if (t->list[mid].tid < tid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

proc_task_t *proc_tasks_at(proc_tasks_t *t, size_t i)
{
    return i < t->n ? &t->list[i] : NULL;
}

int proc_tasks_on_cpu(proc_tasks_t *t, const proc_task_t *task)
{
    if (t->one_cpu_shared) /* scry runs: the thread was put off the CPU, or waits for it */
        return task->state == 'R';
    int on = proc_threads_on_cpu(t->files, task->tid);
    if (on == SCRY_E_NOSYS || on == SCRY_E_INVAL)
        return proc_threads_state(t->files, task->tid, NULL) == 'R';
    return on == 1;
}

int proc_tasks_stop(proc_tasks_t *t, proc_task_t *task)
{
    if (task->stopped)
        return 0;
    t->stops = 1;
    int err = proc_stop_thread_timeout(task->tid, TASKS_STOP_MS);
    if (err == 0) {
        task->stopped = 1;
        proc_syscall_t sc;
        task->at_syscall =
            task->state == 'R' && proc_read_task_syscall(t->pid, task->tid, &sc) == 0 && sc.nr >= 0;
    }
    return err;
}

int proc_tasks_stop_counts(proc_task_t *task)
{
    if (!task->stopped || task->state != 'R')
        return 1;
    task->stops_running++;
    if (!task->at_syscall || task->utime0 == UINT64_MAX) /* no CPU times read yet */
        return 1;
    if (task->utime < task->utime0 || task->stime < task->stime0) { /* a tid reused */
        task->utime0 = task->utime;
        task->stime0 = task->stime;
    }
    uint64_t du = task->utime - task->utime0, ds = task->stime - task->stime0;
    double share = du + ds >= TASKS_SHARE_MIN_TICKS ? (double)ds / (double)(du + ds) : 0.0;
    if (task->syscall_kept < share * task->stops_running + 1.0) {
        task->syscall_kept++;
        return 1;
    }
    return 0;
}

size_t proc_tasks_stop_all(proc_tasks_t *t)
{
    size_t count = 0;
    for (size_t i = 0; i < t->n; i++)
        if (proc_tasks_stop(t, &t->list[i]) == 0)
            count++;
    return count;
}

void proc_tasks_resume_all(proc_tasks_t *t)
{
    int any = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->list[i].stopped) {
            proc_resume_thread(t->list[i].tid);
            t->list[i].stopped = 0;
            any = 1;
        }
    }
    (void)any;
    proc_reap_pending();
}
