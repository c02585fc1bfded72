/* task.c - /proc/PID/task: listing, parsers and readers of stat, status, syscall, schedstat. */
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

int proc_parse_stat_state(const char *buf, size_t len, char *state)
{
    if (!buf || !state)
        return SCRY_E_INVAL;
    /* "pid (comm) S ...": comm may hold spaces and parentheses, so use the LAST ')'. */
    size_t close = len;
    for (size_t i = len; i > 0; i--)
        if (buf[i - 1] == ')') {
            close = i - 1;
            break;
        }
    if (close == len || close + 2 >= len || buf[close + 1] != ' ')
        return SCRY_E_CORRUPT;
    char c = buf[close + 2];
    if (c < 'A' || c > 'z')
        return SCRY_E_CORRUPT;
    *state = c;
    return 0;
}

/* Parses a decimal (optionally negative) or 0x-hex number at *P; advances past spaces. */
static int parse_num(const char **p, const char *end, int64_t *out, int *neg_seen)
{
    while (*p < end && (**p == ' ' || **p == '\t'))
        (*p)++;
    int neg = 0;
    if (*p < end && **p == '-') {
        neg = 1;
        (*p)++;
    }
    uint64_t v = 0;
    int digits = 0, base = 10;
    if (end - *p >= 2 && (*p)[0] == '0' && ((*p)[1] == 'x' || (*p)[1] == 'X')) {
        base = 16;
        *p += 2;
    }
    while (*p < end && digits < 20) {
        char c = **p;
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (base == 16 && c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (base == 16 && c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            break;
        v = v * (uint64_t)base + (uint64_t)d;
        digits++;
        (*p)++;
    }
    if (!digits)
        return -1;
    /* Negate in unsigned arithmetic: "-9223372036854775808" and wrapped values stay defined. */
    *out = (int64_t)(neg ? (uint64_t)0 - v : v);
    if (neg_seen)
        *neg_seen = neg;
    return 0;
}

int proc_parse_syscall(const char *buf, size_t len, proc_syscall_t *out)
{
    if (!buf || !out)
        return SCRY_E_INVAL;
    memset(out, 0, sizeof *out);
    out->nr = PROC_SYSCALL_UNKNOWN;
    if (len >= 7 && memcmp(buf, "running", 7) == 0) {
        out->nr = PROC_SYSCALL_RUNNING;
        return 0;
    }
    const char *p = buf, *end = buf + len;
    int64_t v[9];
    size_t n = 0;
    while (n < 9 && parse_num(&p, end, &v[n], NULL) == 0)
        n++;
    if (n == 3 && v[0] == -1) { /* "-1 sp pc": in the kernel, not in a syscall */
        out->nr = PROC_SYSCALL_NONE;
        out->sp = (uint64_t)v[1];
        out->pc = (uint64_t)v[2];
        return 0;
    }
    if (n == 9 && v[0] >= 0 && v[0] < 4096) {
        out->nr = (long)v[0];
        for (int i = 0; i < 6; i++)
            out->args[i] = (uint64_t)v[1 + i];
        out->sp = (uint64_t)v[7];
        out->pc = (uint64_t)v[8];
        return 0;
    }
    if (n == 1 && v[0] == -1) { /* older kernels: "-1" alone */
        out->nr = PROC_SYSCALL_NONE;
        return 0;
    }
    return SCRY_E_CORRUPT;
}

int proc_parse_schedstat(const char *buf, size_t len, uint64_t *run_ns, uint64_t *wait_ns,
                         uint64_t *slices)
{
    if (!buf)
        return SCRY_E_INVAL;
    const char *p = buf, *end = buf + len;
    int64_t v[3];
    int neg[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++)
        if (parse_num(&p, end, &v[i], &neg[i]) != 0 || neg[i])
            return SCRY_E_CORRUPT;
    if (run_ns)
        *run_ns = (uint64_t)v[0];
    if (wait_ns)
        *wait_ns = (uint64_t)v[1];
    if (slices)
        *slices = (uint64_t)v[2];
    return 0;
}

int proc_read_task_state(pid_t pid, pid_t tid, char *state)
{
    char buf[TASK_FILE_MAX];
    long n = proc_read_file(pid, tid, "stat", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    return proc_parse_stat_state(buf, (size_t)n, state);
}

int proc_read_task_syscall(pid_t pid, pid_t tid, proc_syscall_t *out)
{
    char buf[TASK_FILE_MAX];
    long n = proc_read_file(pid, tid, "syscall", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    return proc_parse_syscall(buf, (size_t)n, out);
}

int proc_read_task_schedstat(pid_t pid, pid_t tid, uint64_t *run_ns, uint64_t *wait_ns)
{
    char buf[TASK_FILE_MAX];
    long n = proc_read_file(pid, tid, "schedstat", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    return proc_parse_schedstat(buf, (size_t)n, run_ns, wait_ns, NULL);
}

int proc_parse_status_nspid(const char *buf, size_t len, pid_t *ids, size_t cap, size_t *n)
{
    if (!buf || !ids || !n)
        return SCRY_E_INVAL;
    *n = 0;
    const char *end = buf + len;
    for (const char *line = buf; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            eol = end;
        if (eol - line >= 6 && memcmp(line, "NSpid:", 6) == 0) {
            const char *p = line + 6;
            size_t count = 0;
            int64_t v;
            while (parse_num(&p, eol, &v, NULL) == 0) {
                if (v <= 0 || v > INT32_MAX || count >= cap || count >= PROC_NSPID_MAX)
                    return SCRY_E_CORRUPT;
                ids[count++] = (pid_t)v;
            }
            while (p < eol && (*p == ' ' || *p == '\t'))
                p++;
            if (count == 0 || p != eol)
                return SCRY_E_CORRUPT;
            *n = count;
            return 0;
        }
        line = eol + 1;
    }
    return SCRY_E_NOTFOUND;
}

int proc_read_task_nspid(pid_t pid, pid_t tid, pid_t *ids, size_t cap, size_t *n)
{
    char buf[4096]; /* status is about 1.5 KiB */
    long got = proc_read_file(pid, tid, "status", buf, sizeof buf);
    if (got < 0)
        return (int)got;
    return proc_parse_status_nspid(buf, (size_t)got, ids, cap, n);
}

int proc_parse_status_switches(const char *buf, size_t len, uint64_t *vol, uint64_t *nonvol)
{
    if (!buf || !vol || !nonvol)
        return SCRY_E_INVAL;
    static const char kv[] = "voluntary_ctxt_switches:", kn[] = "nonvoluntary_ctxt_switches:";
    int seen = 0;
    const char *end = buf + len;
    for (const char *line = buf; line < end && seen != 3;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            eol = end;
        size_t ll = (size_t)(eol - line);
        const char *p = NULL;
        uint64_t *to = NULL;
        if (ll > sizeof kv - 1 && memcmp(line, kv, sizeof kv - 1) == 0) {
            p = line + sizeof kv - 1;
            to = vol;
            seen |= 1;
        } else if (ll > sizeof kn - 1 && memcmp(line, kn, sizeof kn - 1) == 0) {
            p = line + sizeof kn - 1;
            to = nonvol;
            seen |= 2;
        }
        int64_t v;
        if (to && (parse_num(&p, eol, &v, NULL) != 0 || v < 0))
            return SCRY_E_CORRUPT;
        if (to)
            *to = (uint64_t)v;
        line = eol + 1;
    }
    return seen == 3 ? 0 : SCRY_E_NOTFOUND;
}

int proc_read_task_switches(pid_t pid, pid_t tid, uint64_t *vol, uint64_t *nonvol)
{
    char buf[4096]; /* status is about 1.5 KiB */
    long got = proc_read_file(pid, tid, "status", buf, sizeof buf);
    if (got < 0)
        return (int)got;
    return proc_parse_status_switches(buf, (size_t)got, vol, nonvol);
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
