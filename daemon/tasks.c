#include "tasks.h"

#include "scry_err.h"
#include "thread_stop.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TASKS_STOP_MS 20

struct tasks {
    pid_t pid;
    procinfo_threads_t *files;
    size_t n;
    task_info_t list[TASKS_MAX];
};

tasks_t *tasks_new(pid_t pid)
{
    tasks_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->pid = pid;
    t->files = procinfo_threads_new(pid);
    if (!t->files) {
        free(t);
        return NULL;
    }
    return t;
}

void tasks_free(tasks_t *t)
{
    if (!t)
        return;
    tasks_resume_all(t);
    procinfo_threads_free(t->files);
    free(t);
}

static int cmp_tid(const void *a, const void *b)
{
    pid_t x = ((const task_info_t *)a)->tid, y = ((const task_info_t *)b)->tid;
    return x < y ? -1 : x > y;
}

int tasks_refresh(tasks_t *t)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)t->pid);
    DIR *d = opendir(path);
    if (!d)
        return SCRY_E_GONE;
    tasks_resume_all(t);
    t->n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && t->n < TASKS_MAX) {
        pid_t tid = (pid_t)atoi(de->d_name);
        if (tid <= 0)
            continue;
        task_info_t *ti = &t->list[t->n++];
        ti->tid = tid;
        ti->stopped = 0;
        ti->state = procinfo_thread_state(t->files, tid, &ti->cpu_delta);
    }
    closedir(d);
    qsort(t->list, t->n, sizeof t->list[0], cmp_tid);
    return (int)t->n;
}

task_info_t *tasks_find(tasks_t *t, pid_t tid)
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

task_info_t *tasks_at(tasks_t *t, size_t i)
{
    return i < t->n ? &t->list[i] : NULL;
}

int tasks_stop(tasks_t *t, task_info_t *task)
{
    (void)t;
    if (task->stopped)
        return 0;
    int err = unwind_stop_thread_timeout(task->tid, TASKS_STOP_MS);
    if (err == 0)
        task->stopped = 1;
    return err;
}

size_t tasks_stop_all(tasks_t *t)
{
    size_t count = 0;
    for (size_t i = 0; i < t->n; i++)
        if (tasks_stop(t, &t->list[i]) == 0)
            count++;
    return count;
}

void tasks_resume_all(tasks_t *t)
{
    int any = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->list[i].stopped) {
            unwind_resume_thread(t->list[i].tid);
            t->list[i].stopped = 0;
            any = 1;
        }
    }
    if (any)
        unwind_reap_pending();
}
