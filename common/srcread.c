/* srcread.c - a target's source files, opened by a helper process with the target's
 * credentials inside the target's root (see srcread.h for the contract). */
#include "srcread.h"

#include "inroot.h"
#include "scry_err.h"
#include "scry_time.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STATUS_MAX (64u << 10) /* bytes of /proc/PID/status read */

struct srcread {
    int rootfd, cwdfd; /* O_PATH directories pinned at creation; cwdfd may be -1 */
    srcread_creds_t creds;
    pid_t helper; /* 0: none running */
    int sock;     /* our end of the helper's socket; -1 when none */
    int64_t budget_ns;
};

/* The reply header the helper sends before LEN bytes of file content. */
typedef struct reply {
    int32_t err;
    uint32_t len;
} reply_t;

/* --- /proc/PID/status ---------------------------------------------------------------- */

/* Parses up to MAX unsigned decimal numbers separated by blanks from [S, END). Returns the
 * count, or -1 on anything else (overflow, stray characters). */
static int parse_ids(const char *s, const char *end, uint32_t *out, uint32_t max, uint32_t *total)
{
    uint32_t n = 0, all = 0;
    while (s < end) {
        if (*s == ' ' || *s == '\t') {
            s++;
            continue;
        }
        if (*s < '0' || *s > '9')
            return -1;
        uint64_t v = 0;
        while (s < end && *s >= '0' && *s <= '9') {
            v = v * 10 + (uint64_t)(*s++ - '0');
            if (v > UINT32_MAX)
                return -1;
        }
        if (n < max)
            out[n++] = (uint32_t)v;
        all++;
    }
    if (total)
        *total = all;
    return (int)n;
}

int srcread_parse_status(const char *text, size_t len, srcread_creds_t *out)
{
    int have = 0; /* 1 uid, 2 gid, 4 groups */
    if (!text || !out)
        return SCRY_E_INVAL;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        uint32_t ids[4], total = 0;
        if (eol - p >= 4 && (!memcmp(p, "Uid:", 4) || !memcmp(p, "Gid:", 4))) {
            if (parse_ids(p + 4, eol, ids, 4, &total) != 4 || total != 4)
                return SCRY_E_CORRUPT;
            if (p[0] == 'U')
                out->uid = ids[3], have |= 1;
            else
                out->gid = ids[3], have |= 2;
        } else if (eol - p >= 7 && !memcmp(p, "Groups:", 7)) {
            int n = parse_ids(p + 7, eol, out->groups, SRCREAD_MAX_GROUPS, NULL);
            if (n < 0)
                return SCRY_E_CORRUPT;
            out->ngroups = (uint32_t)n;
            have |= 4;
        }
        p = nl ? nl + 1 : end;
    }
    return have == 7 ? 0 : SCRY_E_CORRUPT;
}

/* --- construction --------------------------------------------------------------------- */

static srcread_t *alloc_reader(void)
{
    srcread_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->rootfd = r->cwdfd = r->sock = -1;
    r->budget_ns = (int64_t)SRCREAD_BUDGET_MS * 1000000;
    return r;
}

srcread_t *srcread_new_pid(pid_t pid, int *err)
{
    char path[64], *buf = NULL;
    int dirfd = -1, fd = -1, e = SCRY_E_NOMEM;
    srcread_t *r = alloc_reader();
    if (!r)
        goto fail;
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    /* Every file below is opened relative to one /proc/PID directory: the same process. */
    if (pid <= 0 || (dirfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
        e = SCRY_E_NOPROC;
        goto fail;
    }
    r->rootfd = openat(dirfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (r->rootfd < 0) {
        e = errno == ENOENT || errno == ESRCH ? SCRY_E_NOPROC : SCRY_E_PERM;
        goto fail;
    }
    r->cwdfd = openat(dirfd, "cwd", O_PATH | O_DIRECTORY | O_CLOEXEC); /* -1 is fine */
    if ((fd = openat(dirfd, "status", O_RDONLY | O_CLOEXEC)) < 0 || !(buf = malloc(STATUS_MAX))) {
        e = fd < 0 ? SCRY_E_NOPROC : SCRY_E_NOMEM;
        goto fail;
    }
    size_t n = 0;
    for (;;) {
        ssize_t k = read(fd, buf + n, STATUS_MAX - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
        if (n == STATUS_MAX)
            break;
    }
    if ((e = srcread_parse_status(buf, n, &r->creds)) < 0)
        goto fail;
    free(buf);
    close(fd);
    close(dirfd);
    return r;
fail:
    free(buf);
    if (fd >= 0)
        close(fd);
    if (dirfd >= 0)
        close(dirfd);
    srcread_free(r);
    if (err)
        *err = e;
    return NULL;
}

srcread_t *srcread_new_dir(const char *root, const srcread_creds_t *creds, int *err)
{
    srcread_t *r = alloc_reader();
    int e = SCRY_E_NOMEM;
    if (!r)
        goto fail;
    if (!root || !creds || creds->ngroups > SRCREAD_MAX_GROUPS) {
        e = SCRY_E_INVAL;
        goto fail;
    }
    if ((r->rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        (r->cwdfd = fcntl(r->rootfd, F_DUPFD_CLOEXEC, 0)) < 0) {
        e = errno == ENOENT ? SCRY_E_NOTFOUND : SCRY_E_PERM;
        goto fail;
    }
    r->creds = *creds;
    return r;
fail:
    srcread_free(r);
    if (err)
        *err = e;
    return NULL;
}

static void stop_helper(srcread_t *r)
{
    if (r->sock >= 0)
        close(r->sock); /* an idle helper sees EOF and exits */
    r->sock = -1;
    if (r->helper > 0) {
        /* Never block here: a helper stuck in a hung file system may not die at once. */
        kill(r->helper, SIGKILL);
        for (int i = 0; i < 100; i++) {
            if (waitpid(r->helper, NULL, WNOHANG) != 0)
                break;
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
    }
    r->helper = 0;
}

void srcread_set_creds(srcread_t *r, const srcread_creds_t *creds)
{
    r->creds = *creds;
}

void srcread_free(srcread_t *r)
{
    if (!r)
        return;
    stop_helper(r);
    if (r->rootfd >= 0)
        close(r->rootfd);
    if (r->cwdfd >= 0)
        close(r->cwdfd);
    free(r);
}

/* --- the helper process ------------------------------------------------------------------
 * It runs after fork() in a possibly multi-threaded scry: only system calls from here on
 * (no malloc, no stdio, no locks). */

static int err_of(int e)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        return SCRY_E_NOTFOUND;
    case EACCES:
    case EPERM:
    case EXDEV: /* would leave the root or the current directory */
    case ELOOP: /* a magic link, or too many symlinks */
        return SCRY_E_PERM;
    case ENOSYS:
        return SCRY_E_NOSYS;
    case ENAMETOOLONG:
        return SCRY_E_INVAL;
    case ENOMEM:
        return SCRY_E_NOMEM;
    default:
        return SCRY_E_IO;
    }
}

static int full_io(int fd, void *buf, size_t len, int out)
{
    char *p = buf;
    while (len) {
        ssize_t k = out ? send(fd, p, len, MSG_NOSIGNAL) : read(fd, p, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

/* Closes every descriptor from 3 up except the (up to) three in KEEP. */
static void close_others(int keep0, int keep1, int keep2)
{
    int k[3] = {keep0, keep1, keep2};
    for (int i = 0; i < 3; i++) /* sort, -1 first */
        for (int j = i + 1; j < 3; j++)
            if (k[j] < k[i]) {
                int t = k[i];
                k[i] = k[j];
                k[j] = t;
            }
    unsigned lo = 3;
    for (int i = 0; i < 3; i++) {
        if (k[i] < (int)lo)
            continue;
        if ((unsigned)k[i] > lo)
            syscall(SYS_close_range, lo, (unsigned)k[i] - 1, 0);
        lo = (unsigned)k[i] + 1;
    }
    syscall(SYS_close_range, lo, ~0u, 0);
}

static int drop_to(const srcread_creds_t *c)
{
    gid_t groups[SRCREAD_MAX_GROUPS];
    for (uint32_t i = 0; i < c->ngroups; i++)
        groups[i] = c->groups[i];
    if (syscall(SYS_setgroups, (size_t)c->ngroups, groups) != 0 ||
        syscall(SYS_setresgid, c->gid, c->gid, c->gid) != 0 ||
        syscall(SYS_setresuid, c->uid, c->uid, c->uid) != 0)
        return -1;
    if (getuid() != c->uid || geteuid() != c->uid || getegid() != c->gid)
        return -1;
    /* Not ptrace-able or /proc-readable by the target's user, which it now is. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return 0;
}

static int is_pseudo_fs(int fd)
{
    struct statfs fs;
    if (fstatfs(fd, &fs) != 0)
        return 1;
    switch ((unsigned long)fs.f_type) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case BPF_FS_MAGIC:
        return 1;
    default:
        return 0;
    }
}

/* Opens and reads NAME (NUL-terminated) into BUF (SRCREAD_MAX_BYTES + 1 bytes). Returns the
 * length or a negative scry code. */
static long helper_read(const srcread_t *r, const char *name, char *buf)
{
    uint64_t resolve = RESOLVE_IN_ROOT;
    int dirfd = r->rootfd;
    if (name[0] == '/') {
        while (name[0] == '/')
            name++;
    } else {
        dirfd = r->cwdfd;
        resolve = RESOLVE_BENEATH;
    }
    if (!name[0] || dirfd < 0)
        return name[0] ? SCRY_E_NOTFOUND : SCRY_E_NOTFILE;
    int pfd = inroot_openat(dirfd, name, O_PATH, resolve);
    if (pfd < 0)
        return err_of(errno);
    struct stat st, st2;
    long ret;
    int fd = -1;
    if (fstat(pfd, &st) != 0) {
        ret = err_of(errno);
        goto out;
    }
    if (!S_ISREG(st.st_mode) || is_pseudo_fs(pfd)) {
        ret = SCRY_E_NOTFILE;
        goto out;
    }
    if (st.st_size > (off_t)SRCREAD_MAX_BYTES) {
        ret = SCRY_E_TOOBIG;
        goto out;
    }
    /* Reopen the very inode found (not the name again), with our permissions checked. */
    char self[32] = "/proc/self/fd/";
    size_t n = strlen(self);
    char digits[12];
    int nd = 0;
    for (unsigned v = (unsigned)pfd; nd == 0 || v; v /= 10)
        digits[nd++] = (char)('0' + v % 10);
    while (nd)
        self[n++] = digits[--nd];
    self[n] = 0;
    fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        ret = err_of(errno);
        goto out;
    }
    if (fstat(fd, &st2) != 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino ||
        !S_ISREG(st2.st_mode)) {
        ret = SCRY_E_NOTFILE;
        goto out;
    }
    size_t got = 0;
    while (got <= SRCREAD_MAX_BYTES) {
        ssize_t k = read(fd, buf + got, SRCREAD_MAX_BYTES + 1 - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            ret = err_of(errno);
            goto out;
        }
        if (k == 0)
            break;
        got += (size_t)k;
    }
    ret = got > SRCREAD_MAX_BYTES ? SCRY_E_TOOBIG : (long)got;
out:
    if (fd >= 0)
        close(fd);
    close(pfd);
    return ret;
}

static void helper_main(const srcread_t *r, int sock, pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
        _exit(1);
    close_others(sock, r->rootfd, r->cwdfd);
    if (drop_to(&r->creds) != 0)
        _exit(2);
    char *buf = mmap(NULL, SRCREAD_MAX_BYTES + 1, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (buf == MAP_FAILED)
        _exit(3);
    char name[SRCREAD_MAX_PATH + 1];
    for (;;) {
        uint32_t len;
        if (full_io(sock, &len, sizeof len, 0) != 0 || len == 0 || len > SRCREAD_MAX_PATH ||
            full_io(sock, name, len, 0) != 0)
            _exit(0);
        name[len] = 0;
        long got = helper_read(r, name, buf);
        reply_t rep = {.err = got < 0 ? (int32_t)got : 0, .len = got < 0 ? 0 : (uint32_t)got};
        if (full_io(sock, &rep, sizeof rep, 1) != 0 || full_io(sock, buf, rep.len, 1) != 0)
            _exit(0);
    }
}

static int start_helper(srcread_t *r)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return scry_err_from_errno(errno);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return scry_err_from_errno(errno);
    }
    if (pid == 0) {
        helper_main(r, sv[1], parent);
        _exit(0);
    }
    close(sv[1]);
    r->helper = pid;
    r->sock = sv[0];
    return 0;
}

/* --- requests ------------------------------------------------------------------------- */

/* Reads LEN bytes from the helper before DEADLINE. Returns 0, SCRY_E_TIMEOUT or SCRY_E_IO. */
static int recv_until(int fd, void *buf, size_t len, int64_t deadline)
{
    char *p = buf;
    while (len) {
        int64_t left = deadline - (int64_t)scry_now_ns();
        if (left <= 0)
            return SCRY_E_TIMEOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int k = poll(&pfd, 1, (int)((left + 999999) / 1000000));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return SCRY_E_IO;
        if (k == 0)
            continue;
        ssize_t got = recv(fd, p, len, MSG_DONTWAIT);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got <= 0)
            return SCRY_E_IO;
        p += got;
        len -= (size_t)got;
    }
    return 0;
}

int srcread_file(srcread_t *r, const char *file, char **data, size_t *len)
{
    if (!r || !file || !data || !len)
        return SCRY_E_INVAL;
    size_t n = strlen(file);
    if (n == 0 || n > SRCREAD_MAX_PATH)
        return SCRY_E_INVAL;
    if (r->budget_ns <= 0)
        return SCRY_E_TIMEOUT;
    int rc;
    if (!r->helper && (rc = start_helper(r)) < 0)
        return rc;
    int64_t t0 = (int64_t)scry_now_ns();
    int64_t limit = (int64_t)SRCREAD_TIMEOUT_MS * 1000000;
    int64_t deadline = t0 + (limit < r->budget_ns ? limit : r->budget_ns);
    uint32_t n32 = (uint32_t)n;
    reply_t rep;
    char *buf = NULL;
    if (full_io(r->sock, &n32, sizeof n32, 1) != 0 || full_io(r->sock, (void *)file, n, 1) != 0) {
        rc = SCRY_E_IO;
        goto broken;
    }
    if ((rc = recv_until(r->sock, &rep, sizeof rep, deadline)) < 0)
        goto broken;
    if (rep.len > SRCREAD_MAX_BYTES || (rep.err && rep.len)) {
        rc = SCRY_E_IO;
        goto broken;
    }
    if (!(buf = malloc((size_t)rep.len + 1))) {
        rc = SCRY_E_NOMEM;
        goto broken;
    }
    if ((rc = recv_until(r->sock, buf, rep.len, deadline)) < 0)
        goto broken;
    r->budget_ns -= (int64_t)scry_now_ns() - t0;
    if (rep.err < 0) {
        free(buf);
        return strcmp(scry_err_name(rep.err), "SCRY_E_UNKNOWN") ? rep.err : SCRY_E_IO;
    }
    buf[rep.len] = 0;
    *data = buf;
    *len = rep.len;
    return 0;
broken: /* the helper is gone, stuck or confused: end it; the next call starts another */
    free(buf);
    stop_helper(r);
    r->budget_ns -= (int64_t)scry_now_ns() - t0;
    return rc;
}

int srcread_file_cb(void *r, const char *file, char **data, size_t *len)
{
    return srcread_file(r, file, data, len);
}
