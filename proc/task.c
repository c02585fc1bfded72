/* task.c - /proc/PID/task: listing, readers of stat, status, syscall and schedstat (parsed by
 * parse.c), and the per-thread files the sampler keeps open. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scry_proc.h"
#include "scry_err.h"
#include "scry_time.h"

#define TASK_FILE_MAX 1024 /* these files are a few hundred bytes at most */

int proc_read_task_state(pid_t pid, pid_t tid, char *state)
{
    char buf[TASK_FILE_MAX];
    long n = proc_read_file(pid, tid, "stat", buf, sizeof buf);
    return n < 0 ? (int)n : proc_parse_stat_state(buf, (size_t)n, state);
}

int proc_read_task_syscall(pid_t pid, pid_t tid, proc_syscall_t *out)
{
    char buf[TASK_FILE_MAX];
    long n = proc_read_file(pid, tid, "syscall", buf, sizeof buf);
    return n < 0 ? (int)n : proc_parse_syscall(buf, (size_t)n, out);
}

int proc_read_task_schedstat(pid_t pid, pid_t tid, uint64_t *run_ns, uint64_t *wait_ns)
{
    char buf[TASK_FILE_MAX];
    long n = proc_read_file(pid, tid, "schedstat", buf, sizeof buf);
    return n < 0 ? (int)n : proc_parse_schedstat(buf, (size_t)n, run_ns, wait_ns, NULL);
}

int proc_read_task_nspid(pid_t pid, pid_t tid, pid_t *ids, size_t cap, size_t *n)
{
    char buf[4096]; /* status is about 1.5 KiB */
    long got = proc_read_file(pid, tid, "status", buf, sizeof buf);
    return got < 0 ? (int)got : proc_parse_status_nspid(buf, (size_t)got, ids, cap, n);
}

int proc_read_task_switches(pid_t pid, pid_t tid, uint64_t *vol, uint64_t *nonvol)
{
    char buf[4096]; /* status is about 1.5 KiB */
    long got = proc_read_file(pid, tid, "status", buf, sizeof buf);
    return got < 0 ? (int)got : proc_parse_status_switches(buf, (size_t)got, vol, nonvol);
}

static int cmp_tid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return x < y ? -1 : x > y;
}

int proc_count_tasks(pid_t pid)
{
    char path[48];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    if (stat(path, &st) != 0 || st.st_nlink < 3)
        return SCRY_E_GONE;
    return (int)(st.st_nlink - 2); /* ".", ".." and one link per thread */
}

int proc_list_tasks(pid_t pid, pid_t *tids, size_t cap)
{
    if (!tids || pid <= 0)
        return SCRY_E_INVAL;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return SCRY_E_GONE;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap && n < INT32_MAX) {
        char *endp;
        long tid = strtol(de->d_name, &endp, 10);
        if (*endp == 0 && tid > 0 && tid <= INT32_MAX)
            tids[n++] = (pid_t)tid;
    }
    closedir(d);
    qsort(tids, n, sizeof tids[0], cmp_tid);
    return (int)n;
}

#define PROC_THREAD_SLOTS 8192 /* open thread files kept (power of two) */

typedef struct thread_files {
    pid_t tid; /* 0 = empty */
    int stat_fd;
    int sched_fd;
    int status_fd;         /* opened by the first proc_threads_on_cpu (-1: not yet) */
    uint64_t last_cpu_ns;  /* 0 = not read yet */
    uint64_t last_slices;  /* its arrivals on a CPU at that read (schedstat) */
    uint64_t last_seen_ns; /* CLOCK_MONOTONIC of the last state read asking for it */
} thread_files_t;

struct proc_threads {
    pid_t pid;
    thread_files_t slots[PROC_THREAD_SLOTS];
};

proc_threads_t *proc_threads_new(pid_t pid)
{
    proc_threads_t *p = calloc(1, sizeof *p);
    if (p)
        p->pid = pid;
    return p;
}

static void close_files(thread_files_t *s)
{
    if (s->stat_fd >= 0)
        close(s->stat_fd);
    if (s->sched_fd >= 0)
        close(s->sched_fd);
    if (s->status_fd >= 0)
        close(s->status_fd);
    s->tid = 0;
}

void proc_threads_free(proc_threads_t *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < PROC_THREAD_SLOTS; i++)
        if (p->slots[i].tid)
            close_files(&p->slots[i]);
    free(p);
}

static thread_files_t *thread_slot(proc_threads_t *p, pid_t tid)
{
    size_t i = ((uint32_t)tid * 2654435761u) & (PROC_THREAD_SLOTS - 1);
    thread_files_t *s = &p->slots[i];
    if (s->tid == tid)
        return s;
    if (s->tid) /* evict: another thread hashed here */
        close_files(s);
    char path[96];
    s->tid = tid;
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)p->pid, (int)tid);
    s->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)p->pid, (int)tid);
    s->sched_fd = open(path, O_RDONLY | O_CLOEXEC);
    s->status_fd = -1;
    s->last_cpu_ns = 0;
    s->last_slices = 0;
    s->last_seen_ns = 0;
    return s;
}

char proc_threads_state(proc_threads_t *p, pid_t tid, uint64_t *wall_delta_ns)
{
    return proc_threads_state_times(p, tid, wall_delta_ns, NULL, NULL);
}

char proc_threads_state_times(proc_threads_t *p, pid_t tid, uint64_t *wall_delta_ns,
                              uint64_t *utime, uint64_t *stime)
{
    if (wall_delta_ns)
        *wall_delta_ns = PROC_NO_DELTA;
    if (utime)
        *utime = 0;
    if (stime)
        *stime = 0;
    if (!p || tid <= 0)
        return 0;
    thread_files_t *s = thread_slot(p, tid);
    char buf[TASK_FILE_MAX];
    char state = 0;
    ssize_t n = s->stat_fd >= 0 ? pread(s->stat_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0 || proc_parse_stat_state(buf, (size_t)n, &state) != 0) {
        /* The thread is gone (or the tid was reused): drop the files. */
        close_files(s);
        return 0;
    }
    if (utime && proc_parse_stat_u64(buf, (size_t)n, 14, utime) != 0)
        *utime = 0;
    if (stime && proc_parse_stat_u64(buf, (size_t)n, 15, stime) != 0)
        *stime = 0;
    if (wall_delta_ns) {
        uint64_t now = scry_now_ns();
        if (s->last_seen_ns && now >= s->last_seen_ns)
            *wall_delta_ns = now - s->last_seen_ns;
        s->last_seen_ns = now;
    }
    return state;
}

int proc_threads_cpu(proc_threads_t *p, pid_t tid, uint64_t *cpu_delta_ns)
{
    *cpu_delta_ns = PROC_NO_DELTA;
    if (!p || tid <= 0)
        return SCRY_E_GONE;
    thread_files_t *s = thread_slot(p, tid);
    char buf[128];
    uint64_t cpu = 0;
    ssize_t n = s->sched_fd >= 0 ? pread(s->sched_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0 || proc_parse_schedstat(buf, (size_t)n, &cpu, NULL, &s->last_slices) != 0)
        return SCRY_E_GONE;
    if (s->last_cpu_ns && cpu >= s->last_cpu_ns)
        *cpu_delta_ns = cpu - s->last_cpu_ns;
    s->last_cpu_ns = cpu ? cpu : 1;
    return 0;
}

int proc_threads_on_cpu(proc_threads_t *p, pid_t tid)
{
    if (!p || tid <= 0)
        return SCRY_E_GONE;
    thread_files_t *s = thread_slot(p, tid);
    if (!s->last_cpu_ns)
        return SCRY_E_INVAL; /* no schedstat read to compare with */
    if (!s->last_slices)
        return SCRY_E_NOSYS; /* the kernel counts no arrivals (sched_info off) */
    if (s->status_fd < 0) {
        char path[96];
        snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)p->pid, (int)tid);
        s->status_fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    char buf[4096]; /* status is about 1.5 KiB */
    uint64_t vol = 0, nonvol = 0;
    ssize_t n = s->status_fd >= 0 ? pread(s->status_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0)
        return SCRY_E_GONE;
    int err = proc_parse_status_switches(buf, (size_t)n, &vol, &nonvol);
    if (err)
        return err == SCRY_E_NOTFOUND ? SCRY_E_NOSYS : err;
    /* arrivals then minus departures now: 1 only when it was on a CPU then and has not
     * left it since (it cannot have arrived again without leaving first) */
    return s->last_slices == vol + nonvol + 1;
}
