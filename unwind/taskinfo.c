/* taskinfo.c - /proc/PID/task/TID/{stat,syscall,schedstat}: parsers and readers. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "classify.h"
#include "scry_err.h"

#define TASK_FILE_MAX 1024 /* these files are a few hundred bytes at most */

int unwind_parse_stat_state(const char *buf, size_t len, char *state)
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
    *out = neg ? -(int64_t)v : (int64_t)v;
    if (neg_seen)
        *neg_seen = neg;
    return 0;
}

int unwind_parse_syscall(const char *buf, size_t len, unwind_syscall_t *out)
{
    if (!buf || !out)
        return SCRY_E_INVAL;
    memset(out, 0, sizeof *out);
    out->nr = UNWIND_SYSCALL_UNKNOWN;
    if (len >= 7 && memcmp(buf, "running", 7) == 0) {
        out->nr = UNWIND_SYSCALL_RUNNING;
        return 0;
    }
    const char *p = buf, *end = buf + len;
    int64_t v[9];
    size_t n = 0;
    while (n < 9 && parse_num(&p, end, &v[n], NULL) == 0)
        n++;
    if (n == 3 && v[0] == -1) { /* "-1 sp pc": in the kernel, not in a syscall */
        out->nr = UNWIND_SYSCALL_NONE;
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
        out->nr = UNWIND_SYSCALL_NONE;
        return 0;
    }
    return SCRY_E_CORRUPT;
}

int unwind_parse_schedstat(const char *buf, size_t len, uint64_t *run_ns, uint64_t *wait_ns,
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

/* Reads a small /proc file of thread TID into BUF; returns its length or a negative code. */
static long read_task_file(pid_t pid, pid_t tid, const char *name, char *buf, size_t cap)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/%s", (int)pid, (int)tid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ESRCH ? SCRY_E_GONE : scry_err_from_errno(errno);
    ssize_t got = read(fd, buf, cap - 1);
    int err = errno;
    close(fd);
    if (got < 0)
        return err == ESRCH ? SCRY_E_GONE : scry_err_from_errno(err);
    buf[got] = '\0';
    return (long)got;
}

int unwind_read_task_state(pid_t pid, pid_t tid, char *state)
{
    char buf[TASK_FILE_MAX];
    long n = read_task_file(pid, tid, "stat", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    return unwind_parse_stat_state(buf, (size_t)n, state);
}

int unwind_read_task_syscall(pid_t pid, pid_t tid, unwind_syscall_t *out)
{
    char buf[TASK_FILE_MAX];
    long n = read_task_file(pid, tid, "syscall", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    return unwind_parse_syscall(buf, (size_t)n, out);
}

int unwind_read_task_schedstat(pid_t pid, pid_t tid, uint64_t *run_ns, uint64_t *wait_ns)
{
    char buf[TASK_FILE_MAX];
    long n = read_task_file(pid, tid, "schedstat", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    return unwind_parse_schedstat(buf, (size_t)n, run_ns, wait_ns, NULL);
}

int unwind_read_task(pid_t pid, pid_t tid, unwind_task_t *task)
{
    if (!task)
        return SCRY_E_INVAL;
    task->state = 0;
    task->sc.nr = UNWIND_SYSCALL_UNKNOWN;
    int rc = unwind_read_task_state(pid, tid, &task->state);
    if (rc != 0)
        return rc;
    if (unwind_read_task_syscall(pid, tid, &task->sc) != 0)
        task->sc.nr = UNWIND_SYSCALL_UNKNOWN;
    return 0;
}
