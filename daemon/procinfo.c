#include "procinfo.h"

#include "scry_err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "scry_time.h"

#define PROCINFO_SLOTS 8192 /* open thread files kept (power of two) */

int procinfo_exists(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    return access(path, F_OK) == 0 ? 0 : SCRY_E_NOPROC;
}

static int read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    return (int)n;
}

void procinfo_describe(pid_t pid, char *buf, size_t len)
{
    char path[64], comm[64] = "?", exe[512] = "?";
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    if (read_small(path, comm, sizeof comm) > 0)
        comm[strcspn(comm, "\n")] = 0;
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n > 0)
        exe[n] = 0;
    else
        snprintf(exe, sizeof exe, "executable not readable");
    snprintf(buf, len, "%s (%s)", comm, exe);
}

void procinfo_cmdline(pid_t pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    int n = read_small(path, buf, len);
    if (n <= 0) {
        buf[0] = 0;
        return;
    }
    for (int i = 0; i + 1 < n; i++)
        if (buf[i] == 0)
            buf[i] = ' ';
}

void procinfo_join_argv(char **argv, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; argv && argv[i] && off + 1 < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " " : "", argv[i]);
}

void procinfo_permission_hint(pid_t pid, char *buf, size_t len)
{
    char scope[16] = "";
    int has = read_small("/proc/sys/kernel/yama/ptrace_scope", scope, sizeof scope) > 0;
    scope[strcspn(scope, "\n")] = 0;
    snprintf(buf, len,
             "reading process %d needs root or the CAP_SYS_PTRACE capability%s%s%s "
             "(in Docker: --cap-add SYS_PTRACE)",
             (int)pid, has ? "; kernel.yama.ptrace_scope is " : "", has ? scope : "",
             has ? (scope[0] == '0' ? "" : ", so a non-root user may only trace its own children")
                 : "");
}

typedef struct thread_files {
    pid_t tid; /* 0 = empty */
    int stat_fd;
    int sched_fd;
    uint64_t last_cpu_ns;  /* 0 = not read yet */
    uint64_t last_seen_ns; /* CLOCK_MONOTONIC of the last state read asking for it */
} thread_files_t;

struct procinfo_threads {
    pid_t pid;
    thread_files_t slots[PROCINFO_SLOTS];
};

procinfo_threads_t *procinfo_threads_new(pid_t pid)
{
    procinfo_threads_t *p = calloc(1, sizeof *p);
    if (p)
        p->pid = pid;
    return p;
}

void procinfo_threads_free(procinfo_threads_t *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < PROCINFO_SLOTS; i++) {
        if (!p->slots[i].tid)
            continue;
        if (p->slots[i].stat_fd >= 0)
            close(p->slots[i].stat_fd);
        if (p->slots[i].sched_fd >= 0)
            close(p->slots[i].sched_fd);
    }
    free(p);
}

static thread_files_t *thread_slot(procinfo_threads_t *p, pid_t tid)
{
    size_t i = ((uint32_t)tid * 2654435761u) & (PROCINFO_SLOTS - 1);
    thread_files_t *s = &p->slots[i];
    if (s->tid == tid)
        return s;
    if (s->tid) { /* evict: another thread hashed here */
        if (s->stat_fd >= 0)
            close(s->stat_fd);
        if (s->sched_fd >= 0)
            close(s->sched_fd);
    }
    char path[96];
    s->tid = tid;
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)p->pid, (int)tid);
    s->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)p->pid, (int)tid);
    s->sched_fd = open(path, O_RDONLY | O_CLOEXEC);
    s->last_cpu_ns = 0;
    s->last_seen_ns = 0;
    return s;
}

char procinfo_thread_state(procinfo_threads_t *p, pid_t tid, uint64_t *wall_delta_ns)
{
    if (wall_delta_ns)
        *wall_delta_ns = PROCINFO_NO_DELTA;
    if (tid <= 0)
        return 0;
    thread_files_t *s = thread_slot(p, tid);
    char buf[512];
    char state = 0;
    ssize_t n = s->stat_fd >= 0 ? pread(s->stat_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) {
        /* The thread is gone (or the tid was reused): drop the files. */
        if (s->stat_fd >= 0)
            close(s->stat_fd);
        if (s->sched_fd >= 0)
            close(s->sched_fd);
        s->tid = 0;
        return 0;
    }
    buf[n] = 0;
    char *rp = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
    if (rp && rp[1] == ' ')
        state = rp[2];
    if (wall_delta_ns) {
        uint64_t now = scry_now_ns();
        if (s->last_seen_ns && now >= s->last_seen_ns)
            *wall_delta_ns = now - s->last_seen_ns;
        s->last_seen_ns = now;
    }
    return state;
}

int procinfo_thread_cpu(procinfo_threads_t *p, pid_t tid, uint64_t *cpu_delta_ns)
{
    *cpu_delta_ns = PROCINFO_NO_DELTA;
    if (tid <= 0)
        return SCRY_E_GONE;
    thread_files_t *s = thread_slot(p, tid);
    char buf[128];
    ssize_t n = s->sched_fd >= 0 ? pread(s->sched_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0)
        return SCRY_E_GONE;
    buf[n] = 0;
    uint64_t cpu = strtoull(buf, NULL, 10);
    if (s->last_cpu_ns && cpu >= s->last_cpu_ns)
        *cpu_delta_ns = cpu - s->last_cpu_ns;
    s->last_cpu_ns = cpu ? cpu : 1;
    return 0;
}

void procinfo_thread_name(pid_t pid, pid_t tid, char *buf, size_t len)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)pid, (int)tid);
    if (read_small(path, buf, len) <= 0) {
        buf[0] = 0;
        return;
    }
    buf[strcspn(buf, "\n")] = 0;
}
