/* pidfile.c - the one reader of small /proc files, and the process-level facts scry reads
 * from them (parsed by parse.c): identity (start time and comm, from stat), owner (real uid,
 * from status), executable, user namespace. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scry_err.h"
#include "scry_proc.h"

long proc_read_file(pid_t pid, pid_t tid, const char *name, char *buf, size_t cap)
{
    if (!name || !buf || cap < 2 || pid < 0 || tid < 0 || (tid > 0 && pid == 0))
        return SCRY_E_INVAL;
    char path[256];
    int w = pid == 0  ? snprintf(path, sizeof path, "/proc/%s", name)
            : tid > 0 ? snprintf(path, sizeof path, "/proc/%d/task/%d/%s", (int)pid, (int)tid, name)
                      : snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    if (w < 0 || (size_t)w >= sizeof path)
        return SCRY_E_INVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ESRCH ? SCRY_E_GONE : scry_err_from_errno(errno);
    size_t got = 0;
    int err = 0;
    while (got + 1 < cap) { /* a /proc file may come in several reads (cmdline, cgroup) */
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err = errno == ESRCH ? SCRY_E_GONE : scry_err_from_errno(errno);
            break;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (err && got == 0)
        return err;
    buf[got] = '\0';
    return (long)got;
}

long proc_read_exe(pid_t pid, char *buf, size_t cap)
{
    if (!buf || cap < 2 || pid <= 0)
        return SCRY_E_INVAL;
    buf[0] = '\0';
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, buf, cap - 1);
    if (n < 0)
        return errno == ENOENT ? SCRY_E_NOTFOUND : scry_err_from_errno(errno);
    buf[n] = '\0';
    return (long)n;
}

int proc_read_identity(pid_t pid, uint64_t *start_time, char *comm, size_t commlen)
{
    char buf[1024];
    long n = proc_read_file(pid, 0, "stat", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    return proc_parse_stat_identity(buf, (size_t)n, start_time, comm, commlen);
}

int proc_read_exec_mark(pid_t pid, uint64_t *mark)
{
    char buf[1024];
    long n = proc_read_file(pid, 0, "stat", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    return proc_parse_stat_u64(buf, (size_t)n, 28, mark); /* startstack */
}

int proc_read_uid(pid_t pid, uid_t *uid)
{
    char buf[4096];
    long n = proc_read_file(pid, 0, "status", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    return proc_parse_status_uid(buf, (size_t)n, uid);
}

int proc_userns_maps_uid(pid_t pid, uint32_t host_uid)
{
    char buf[8192]; /* the kernel allows 340 lines of at most 3 x 10 digits */
    long n = proc_read_file(pid, 0, "uid_map", buf, sizeof buf - 1);
    if (n < 0)
        return (int)n;
    buf[n] = 0;
    char *p = buf;
    for (int line = 0; line < 340 && *p; line++) {
        unsigned long long v[3];
        for (int i = 0; i < 3; i++) {
            while (*p == ' ' || *p == '\t')
                p++;
            char *end;
            errno = 0;
            v[i] = strtoull(p, &end, 10);
            if (end == p || errno || v[i] > UINT32_MAX)
                return SCRY_E_CORRUPT;
            p = end;
        }
        if (*p == '\n')
            p++;
        else if (*p)
            return SCRY_E_CORRUPT;
        if (host_uid >= v[1] && host_uid - v[1] < v[2])
            return 1;
    }
    return 0;
}

int proc_other_userns(pid_t pid)
{
    char mine[1024], theirs[1024];
    long a = proc_read_file(0, 0, "self/uid_map", mine, sizeof mine);
    if (a < 0)
        return (int)a;
    long b = proc_read_file(pid, 0, "uid_map", theirs, sizeof theirs);
    if (b < 0)
        return (int)b;
    return a != b || memcmp(mine, theirs, (size_t)a) != 0;
}
