#include "shimstage.h"

#include "inroot.h"
#include "scry_err.h"
#include "scry_proc.h"
#include "srcread.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SHIMSTAGE_FILE      "libscry-shim.so"
#define SHIMSTAGE_MAX_BYTES (64u << 20) /* the shim is ~100 KiB; anything bigger is wrong */

/* Every name scry creates or removes in a target's root is one component resolved from a
 * descriptor: the parent (the target's /tmp) or the directory scry made in it. Nothing is
 * ever resolved through "dir/file": the target may swap the directory for a symbolic link
 * at any moment, and such a path would follow it in scry's root (issue 24). */
struct shimstage {
    char path[PATH_MAX]; /* what the target opens */
    int copied;
    int parent_fd; /* O_PATH: the target's /tmp (or /var/tmp, /dev/shm) */
    int dir_fd;    /* the directory scry made in it, -1 before */
    char dir[64];  /* .scry-shim-<32 hex> */
    char name[48]; /* libscry-shim.so (or the data's name) */
    uid_t owner;   /* who owns the directory: scry's user, or the target's (stage_as) */
    gid_t owner_gid;
    int janitor_fd; /* write end of the janitor's pipe: EOF = clean up now */
    pid_t janitor;
};

/* openat2(DIRFD, PATH) resolved as the target would: inside DIRFD (its root), with the
 * extra RESOLVE flags. Returns the descriptor or -1 (errno). */
static int open_in_root(int dirfd, const char *path, int flags, uint64_t resolve)
{
    return inroot_openat(dirfd, path, flags, RESOLVE_IN_ROOT | resolve);
}

/* openat2(DIRFD, NAME) for one of scry's own names under DIRFD: beneath it, no symbolic or
 * magic link, no mount point crossed (a bind mount over the name). Async-signal-safe.
 * Returns the descriptor or -1 (errno). */
static int open_beneath(int dirfd, const char *name, int flags)
{
    return inroot_openat(dirfd, name, flags | O_NOFOLLOW,
                         RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
}

/* Opens scry's directory DIR under PARENT_FD (see open_beneath) when it is a directory
 * owned by OWNER (the user scry made it as). Async-signal-safe. Returns the descriptor or -1. */
static int open_own_dir(int parent_fd, const char *dir, uid_t owner)
{
    int fd = open_beneath(parent_fd, dir, O_RDONLY | O_DIRECTORY);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != owner)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Removes NAME from scry's directory (DIR_FD, or DIR opened under PARENT_FD when DIR_FD is
 * -1), then DIR from PARENT_FD while that name still is the very directory: a name the
 * target swapped for a link or another directory is left alone, and nothing is resolved
 * outside the target's root. Async-signal-safe (the janitor calls it). */
static void stage_remove(int parent_fd, int dir_fd, const char *dir, const char *name, uid_t owner)
{
    int fd = dir_fd >= 0 ? dir_fd : open_own_dir(parent_fd, dir, owner);
    if (fd < 0)
        return;
    unlinkat(fd, name, 0);
    struct stat mine, now;
    if (fstat(fd, &mine) == 0 && fstatat(parent_fd, dir, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(now.st_mode) && now.st_dev == mine.st_dev && now.st_ino == mine.st_ino)
        unlinkat(parent_fd, dir, AT_REMOVEDIR);
    if (fd != dir_fd)
        close(fd);
}

/* 1 when the target (root ROOTFD) sees the file HOST_PATH at the same path. */
static int same_file_in_root(int rootfd, const char *host_path)
{
    struct stat mine, theirs;
    if (stat(host_path, &mine) != 0)
        return 0;
    int fd = open_in_root(rootfd, host_path, O_PATH, 0);
    if (fd < 0)
        return 0;
    int same =
        fstat(fd, &theirs) == 0 && theirs.st_dev == mine.st_dev && theirs.st_ino == mine.st_ino;
    close(fd);
    return same;
}

/* The janitor: a child in its own session (not killed with scry's process group) holding
 * only the pipe's read end and the directory's parent. When the pipe reaches EOF (scry
 * finished with the copy, or died, even by SIGKILL) it removes the copy and the
 * directory as stage_remove does (nothing when scry did it already, or when the name is no
 * longer scry's directory) and exits. Async-signal-safe calls only (forked from a process
 * that may have threads). */
static void janitor_run(int rfd, int parent_fd, const char *dir, const char *name, uid_t owner)
{
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, NULL);
    sigaction(SIGTERM, &ign, NULL);
    sigaction(SIGHUP, &ign, NULL);
    sigaction(SIGPIPE, &ign, NULL);
    setsid();
    int lo = rfd < parent_fd ? rfd : parent_fd, hi = rfd < parent_fd ? parent_fd : rfd;
    if (lo > 0)
        syscall(SYS_close_range, 0u, (unsigned)lo - 1, 0u);
    if (hi > lo + 1)
        syscall(SYS_close_range, (unsigned)lo + 1, (unsigned)hi - 1, 0u);
    syscall(SYS_close_range, (unsigned)hi + 1, ~0u, 0u);
    for (;;) {
        char c;
        ssize_t r = read(rfd, &c, 1);
        if (r == 0 || (r < 0 && errno != EINTR))
            break;
    }
    stage_remove(parent_fd, -1, dir, name, owner);
    _exit(0);
}

/* Copies SRC_PATH into DIRFD/SHIMSTAGE_FILE (mode 0644). Returns 0 or a SCRY_E_* code. */
static int copy_shim(const char *src_path, int dirfd, const char *name)
{
    int err = SCRY_E_IO;
    char *buf = NULL;
    int out = -1;
    int in = open(src_path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (in < 0 || fstat(in, &st) != 0) {
        err = SCRY_E_NOTFOUND;
        goto close_in;
    }
    if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > (off_t)SHIMSTAGE_MAX_BYTES) {
        err = SCRY_E_NOTFILE;
        goto close_in;
    }
    buf = malloc(65536);
    if (!buf) {
        err = SCRY_E_NOMEM;
        goto close_in;
    }
    out = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
        err = scry_err_from_errno(errno);
        goto free_buf;
    }
    off_t left = st.st_size;
    while (left > 0) {
        ssize_t n = read(in, buf, 65536);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto close_out;
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                goto close_out;
            done += w;
        }
        left -= n;
    }
    if (fchmod(out, 0644) != 0)
        goto close_out;
    err = 0;
close_out:
    if (close(out) != 0 && !err)
        err = SCRY_E_IO;
free_buf:
    free(buf);
close_in:
    if (in >= 0)
        close(in);
    return err;
}

/* Starts the janitor for S (before anything is created). Returns 0 or a SCRY_E_* code. */
static int janitor_start(shimstage_t *s)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return scry_err_from_errno(errno);
    pid_t pid = fork();
    if (pid < 0) {
        int err = scry_err_from_errno(errno);
        close(p[0]);
        close(p[1]);
        return err;
    }
    if (pid == 0) {
        close(p[1]);
        janitor_run(p[0], s->parent_fd, s->dir, s->name, s->owner);
    }
    /* Its own process group before anything is created (its setsid may not have run
     * yet): a kill of scry's group must not take it along. */
    setpgid(pid, pid);
    close(p[0]);
    s->janitor_fd = p[1];
    s->janitor = pid;
    return 0;
}

static void janitor_end(shimstage_t *s)
{
    if (s->janitor_fd >= 0)
        close(s->janitor_fd);
    s->janitor_fd = -1;
    if (s->janitor <= 0)
        return;
    for (int i = 0; i < 400; i++) { /* it exits at once; never wait more than 2 s */
        pid_t w = waitpid(s->janitor, NULL, WNOHANG);
        if (w == s->janitor || (w < 0 && errno != EINTR))
            break;
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    s->janitor = 0;
}

/* 1 when CREDS (the target's file-system ids) may create entries in a directory of status
 * ST by its mode bits: scry then creates nothing its target could not (a directory of the
 * host the target bind-mounted as its /tmp is not written to by root). */
static int target_may_write(const struct stat *st, const srcread_creds_t *creds)
{
    if (creds->uid == 0 || (st->st_mode & S_IWOTH))
        return 1;
    if (st->st_uid == creds->uid)
        return (st->st_mode & S_IWUSR) != 0;
    int in_group = st->st_gid == creds->gid;
    for (uint32_t i = 0; i < creds->ngroups && !in_group; i++)
        in_group = st->st_gid == creds->groups[i];
    return in_group && (st->st_mode & S_IWGRP);
}

/* Opens a directory of the target (root ROOTFD, credentials CREDS) fit for the copy: no
 * symbolic link on the way, writable by the target, executable files allowed. Returns an
 * O_PATH descriptor or -1; *WHERE gets its target path. */
static int pick_parent(int rootfd, const srcread_creds_t *creds, const char **where)
{
    static const char *const cands[] = {"/tmp", "/var/tmp", "/dev/shm"};
    for (size_t i = 0; i < sizeof cands / sizeof *cands; i++) {
        int fd =
            open_in_root(rootfd, cands[i], O_PATH | O_DIRECTORY | O_NOFOLLOW, RESOLVE_NO_SYMLINKS);
        if (fd < 0)
            continue;
        struct statfs sf;
        struct stat st;
        if (fstatfs(fd, &sf) == 0 && !(sf.f_flags & (ST_NOEXEC | ST_RDONLY)) &&
            fstat(fd, &st) == 0 && target_may_write(&st, creds)) {
            *where = cands[i];
            return fd;
        }
        close(fd);
    }
    return -1;
}

/* The file-system credentials of process PID (/proc/PID/status). Returns 0 or a code. */
static int target_creds(pid_t pid, srcread_creds_t *creds)
{
    char buf[8192];
    long n = proc_read_file(pid, 0, "status", buf, sizeof buf);
    return n < 0 ? (int)n : srcread_parse_status(buf, (size_t)n, creds);
}

/* Writes LEN bytes of DATA as NAME (mode 0644) in DIRFD. Returns 0 or a SCRY_E_* code. */
static int put_data(int dirfd, const char *name, const void *data, size_t len)
{
    int out = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return scry_err_from_errno(errno);
    int err = 0;
    for (size_t done = 0; done < len && !err;) {
        ssize_t w = write(out, (const char *)data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            err = SCRY_E_IO;
        else
            done += (size_t)w;
    }
    if (!err && fchmod(out, 0644) != 0)
        err = SCRY_E_IO;
    if (close(out) != 0 && !err)
        err = SCRY_E_IO;
    return err;
}

/* This thread's file-system ids (what new inodes belong to), set to UID and GID. */
static void stage_as(uid_t uid, gid_t gid)
{
    if ((uid_t)setfsuid((uid_t)-1) != uid) {
        setfsgid(gid);
        setfsuid(uid);
    }
}

static shimstage_t *stage(pid_t pid, const char *host_path, const char *name, const void *data,
                          size_t dlen, int *err, char *msg, size_t len)
{
    int e = SCRY_E_NOMEM;
    shimstage_t *s = calloc(1, sizeof *s);
    int rootfd = -1;
    if (!s)
        goto fail;
    s->parent_fd = s->dir_fd = s->janitor_fd = -1;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/%d/root", (int)pid);
    rootfd = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        e = errno == ENOENT || errno == ESRCH ? SCRY_E_NOPROC : SCRY_E_PERM;
        snprintf(msg, len, "cannot open the root of process %d (%s): %s", (int)pid, proc,
                 strerror(errno));
        goto fail;
    }
    if (host_path && same_file_in_root(rootfd, host_path)) {
        snprintf(s->path, sizeof s->path, "%s", host_path);
        close(rootfd);
        return s;
    }
    /* Another root: a private copy in it. Resolved by openat2 inside the target's root (a
     * container's symbolic links cannot lead us out of it). */
    const char *where = NULL;
    srcread_creds_t creds;
    e = target_creds(pid, &creds);
    if (e) {
        snprintf(msg, len, "cannot read the credentials of process %d: %s", (int)pid,
                 scry_strerror(e));
        goto fail;
    }
    s->parent_fd = pick_parent(rootfd, &creds, &where);
    if (s->parent_fd < 0) {
        e = errno == ENOSYS ? SCRY_E_NOSYS : SCRY_E_NOTFOUND;
        snprintf(msg, len,
                 "process %d has another root (a container?) with no /tmp, /var/tmp "
                 "or /dev/shm to put the memory shim in (a real directory on a "
                 "writable file system that allows execution, writable by the process%s)",
                 (int)pid, errno == ENOSYS ? "; openat2 needs Linux 5.6" : "");
        goto fail;
    }
    unsigned char rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        e = SCRY_E_IO;
        snprintf(msg, len, "getrandom failed: %s", strerror(errno));
        goto fail;
    }
    int n = snprintf(s->dir, sizeof s->dir, ".scry-shim-");
    for (size_t i = 0; i < sizeof rnd; i++)
        n += snprintf(s->dir + n, sizeof s->dir - (size_t)n, "%02x", rnd[i]);
    snprintf(s->name, sizeof s->name, "%s", name);
    if ((size_t)snprintf(s->path, sizeof s->path, "%s/%s/%s", where, s->dir, name) >=
        sizeof s->path) {
        e = SCRY_E_TRUNC;
        goto fail;
    }
    /* A target in a user namespace without host root (a rootless container) may have its
     * file systems mounted in that namespace (podman's overlayfs), where no inode can
     * belong to host root: mkdir fails with EOVERFLOW. There the directory and the copy
     * are made as the target's own user (this thread's fsuid and fsgid, for the creations
     * only); the target could change its copy before loading it, which concerns only it. */
    s->owner = geteuid();
    s->owner_gid = getegid();
    if (s->owner == 0 && creds.uid != 0 && proc_userns_maps_uid(pid, 0) == 0) {
        s->owner = (uid_t)creds.uid;
        s->owner_gid = (gid_t)creds.gid;
    }
    e = janitor_start(s); /* first: from here on nothing can be left behind */
    if (e) {
        snprintf(msg, len, "cannot start the process that cleans up after scry: %s",
                 scry_strerror(e));
        goto fail;
    }
    s->copied = 1;
    stage_as(s->owner, s->owner_gid);
    if (mkdirat(s->parent_fd, s->dir, 0700) != 0) {
        e = scry_err_from_errno(errno);
        snprintf(msg, len, "cannot make %s in the root of process %d: %s", s->path, (int)pid,
                 strerror(errno));
        goto fail;
    }
    /* The directory as it is now (the target may have swapped the name already: then it
     * is refused, or it is another directory of the target's, harmless to write into). */
    s->dir_fd = open_own_dir(s->parent_fd, s->dir, s->owner);
    if (s->dir_fd < 0 || fchmod(s->dir_fd, 0711) != 0) { /* the target may be another user */
        e = SCRY_E_IO;
        snprintf(msg, len,
                 "cannot prepare %s in the root of process %d: %s (did the process replace "
                 "it?)",
                 s->path, (int)pid, strerror(errno));
        goto fail;
    }
    e = host_path ? copy_shim(host_path, s->dir_fd, name) : put_data(s->dir_fd, name, data, dlen);
    if (e) {
        snprintf(msg, len, "cannot copy %s into the root of process %d (as %s): %s",
                 host_path ? host_path : name, (int)pid, s->path, scry_strerror(e));
        goto fail;
    }
    stage_as(geteuid(), getegid());
    close(rootfd);
    return s;
fail:
    stage_as(geteuid(), getegid());
    if (rootfd >= 0)
        close(rootfd);
    shimstage_free(s);
    if (err)
        *err = e;
    return NULL;
}

shimstage_t *shimstage_new(pid_t pid, const char *host_path, int *err, char *msg, size_t len)
{
    return stage(pid, host_path, SHIMSTAGE_FILE, NULL, 0, err, msg, len);
}

shimstage_t *shimstage_new_data(pid_t pid, const char *name, const void *data, size_t dlen,
                                int *err, char *msg, size_t len)
{
    if (!name || !*name || strchr(name, '/') || strlen(name) > 40 || (!data && dlen)) {
        if (err)
            *err = SCRY_E_INVAL;
        snprintf(msg, len, "bad file to stage");
        return NULL;
    }
    return stage(pid, NULL, name, data, dlen, err, msg, len);
}

const char *shimstage_path(const shimstage_t *s)
{
    return s->path;
}

int shimstage_copied(const shimstage_t *s)
{
    return s->copied;
}

void shimstage_free(shimstage_t *s)
{
    if (!s)
        return;
    if (s->copied && s->parent_fd >= 0 && s->dir_fd >= 0)
        stage_remove(s->parent_fd, s->dir_fd, s->dir, s->name, s->owner);
    janitor_end(s); /* it removes what is left when scry could not open its directory */
    if (s->dir_fd >= 0)
        close(s->dir_fd);
    if (s->parent_fd >= 0)
        close(s->parent_fd);
    free(s);
}
