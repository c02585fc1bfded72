/* inroot.c - opening a target's files inside the target's root (openat2 RESOLVE_IN_ROOT). */
#include "inroot.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int inroot_openat(int dirfd, const char *path, int flags, uint64_t resolve)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (uint64_t)(flags | O_CLOEXEC);
    how.resolve = resolve | RESOLVE_NO_MAGICLINKS;
    while (*path == '/')
        path++;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

size_t inroot_proc_root_len(const char *path)
{
    if (!path || strncmp(path, "/proc/", 6) != 0)
        return 0;
    const char *p = path + 6, *digits = p;
    while (*p >= '0' && *p <= '9' && p - digits < 10)
        p++;
    if (p == digits || strncmp(p, "/root/", 6) != 0)
        return 0;
    return (size_t)(p + 5 - path);
}

int inroot_open_path(const char *path, int flags)
{
    size_t rl = inroot_proc_root_len(path);
    if (rl == 0)
        return open(path, flags | O_CLOEXEC);
    char root[32];
    if (rl >= sizeof root) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(root, path, rl);
    root[rl] = '\0';
    int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return -1;
    int fd = inroot_openat(rootfd, path + rl, flags, RESOLVE_IN_ROOT);
    int saved = errno;
    close(rootfd);
    errno = saved;
    return fd;
}

int inroot_stat_path(const char *path, struct stat *st)
{
    int fd = inroot_open_path(path, O_PATH);
    if (fd < 0)
        return -1;
    int rc = fstat(fd, st);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}
