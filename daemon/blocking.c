#include "blocking.h"

#include "thread_stop.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#define BLOCKING_MAX_THREADS 8192
#define BLOCKING_STOP_MS 20

struct blocking_set {
    pid_t pid;
    size_t n;
    pid_t tids[BLOCKING_MAX_THREADS];
    char states[BLOCKING_MAX_THREADS];
    uint8_t stopped[BLOCKING_MAX_THREADS];
};

blocking_set_t *blocking_set_new(pid_t pid)
{
    blocking_set_t *b = calloc(1, sizeof *b);
    if (b)
        b->pid = pid;
    return b;
}

void blocking_set_free(blocking_set_t *b)
{
    if (!b)
        return;
    blocking_resume_all(b);
    free(b);
}

size_t blocking_stop_all(blocking_set_t *b, procinfo_threads_t *states)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)b->pid);
    b->n = 0;
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)) && b->n < BLOCKING_MAX_THREADS) {
        pid_t tid = (pid_t)atoi(de->d_name);
        if (tid > 0) {
            b->tids[b->n] = tid;
            b->states[b->n] = procinfo_thread_state(states, tid, NULL);
            b->stopped[b->n] = 0;
            b->n++;
        }
    }
    closedir(d);
    size_t count = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (unwind_stop_thread_timeout(b->tids[i], BLOCKING_STOP_MS) == 0) {
            b->stopped[i] = 1;
            count++;
        }
    }
    return count;
}

void blocking_resume_all(blocking_set_t *b)
{
    for (size_t i = 0; i < b->n; i++) {
        if (b->stopped[i]) {
            unwind_resume_thread(b->tids[i]);
            b->stopped[i] = 0;
        }
    }
    unwind_reap_pending();
}

char blocking_state_of(const blocking_set_t *b, pid_t tid)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->tids[i] == tid)
            return b->states[i];
    return 0;
}
