/* test_common_inroot.c - a target's files opened inside its root: a child chrooted into a
 * scratch root plants links (absolute and relative, out of the root and inside it); paths
 * /proc/CHILD/root/... never reach the scratch directory's host file. The live cases need
 * root (chroot); skipped otherwise. */
#include "inroot.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static char top[64]; /* scratch: host.txt (a host file) and root/ (the child's root) */

/* What the file at /proc/PID/root/REL holds when opened through inroot_open_path ("" when
 * it cannot be opened; errno then kept in *ERR). */
static const char *read_in_root(pid_t pid, const char *rel, int *err)
{
    static char buf[64];
    char path[256];
    snprintf(path, sizeof path, "/proc/%d/root/%s", (int)pid, rel);
    buf[0] = '\0';
    *err = 0;
    int fd = inroot_open_path(path, O_RDONLY);
    if (fd < 0) {
        *err = errno;
        return buf;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    return buf;
}

static void test_prefix(void)
{
    CHECK_INT(inroot_proc_root_len("/proc/12/root/x"), ==, 13);
    CHECK_INT(inroot_proc_root_len("/proc/12/root/"), ==, 13);
    CHECK_INT(inroot_proc_root_len("/proc/12/root"), ==, 0, "no slash after root");
    CHECK_INT(inroot_proc_root_len("/proc/12/rootx/y"), ==, 0);
    CHECK_INT(inroot_proc_root_len("/proc/self/root/x"), ==, 0);
    CHECK_INT(inroot_proc_root_len("/proc//root/x"), ==, 0);
    CHECK_INT(inroot_proc_root_len("/proc/12/map_files/1-2"), ==, 0);
    CHECK_INT(inroot_proc_root_len("/usr/lib/x.so"), ==, 0);
    CHECK_INT(inroot_proc_root_len(NULL), ==, 0);
}

static void test_live(void)
{
    char root[96], p[256], host[128];
    snprintf(root, sizeof root, "%s/root", top);
    snprintf(host, sizeof host, "%s/host.txt", top);
    mkdir(root, 0755);
    snprintf(p, sizeof p, "%s/dir", root);
    mkdir(p, 0755);
    check_write_file(host, "HOST");
    snprintf(p, sizeof p, "%s/inside", root);
    check_write_file(p, "IN");
    /* The links a target would plant: to the host file by its host name, up and out, and
     * to its own file by an absolute and a relative name. */
    check_symlink_at(root, "abs_out", host);
    check_symlink_at(root, "up_out", "../host.txt");
    check_symlink_at(root, "abs_in", "/inside");
    check_symlink_at(root, "dir/rel_in", "../inside");
    check_symlink_at(root, "magic", "/proc/1/root/etc/hostname");

    pid_t child = fork();
    if (child == 0) {
        check_child_dies_with_test();
        if (chroot(root) != 0 || chdir("/") != 0)
            _exit(1);
        pause();
        _exit(0);
    }
    CHECK(child > 0);
    if (child <= 0)
        return;
    char link[64], seen[256];
    snprintf(link, sizeof link, "/proc/%d/root", (int)child);
    for (int i = 0; i < 200; i++) { /* until the child has chrooted */
        ssize_t n = readlink(link, seen, sizeof seen - 1);
        if (n > 0 && (seen[n] = '\0', strcmp(seen, root) == 0))
            break;
        usleep(10000);
    }
    int err;
    CHECK_STR(read_in_root(child, "abs_out", &err), ==, "", "an absolute link out of the root");
    CHECK_INT(err, ==, ENOENT);
    CHECK_STR(read_in_root(child, "up_out", &err), ==, "", "a relative link up and out");
    CHECK_INT(err, ==, ENOENT);
    CHECK_STR(read_in_root(child, "abs_in", &err), ==, "IN", "an absolute link inside: %d", err);
    CHECK_STR(read_in_root(child, "dir/rel_in", &err), ==, "IN", "a relative link: %d", err);
    CHECK_STR(read_in_root(child, "../../../host.txt", &err), ==, "", "'..' stays in the root");
    CHECK_STR(read_in_root(child, "magic", &err), ==, "", "a link through /proc: %d", err);
    struct stat st;
    snprintf(p, sizeof p, "/proc/%d/root/abs_out", (int)child);
    CHECK(inroot_stat_path(p, &st) != 0, "stat of an absolute link out of the root");
    snprintf(p, sizeof p, "/proc/%d/root/abs_in", (int)child);
    CHECK(inroot_stat_path(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 2);
    /* Any other path opens as open(2) would. */
    int fd = inroot_open_path(host, O_RDONLY);
    CHECK(fd >= 0, "a plain path: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

int main(void)
{
    test_prefix();
    if (geteuid() != 0) {
        fprintf(stderr, "live cases skipped: chroot needs root\n");
        return check_summary("test_common_inroot");
    }
    strcpy(top, "/tmp/scry_inroot_XXXXXX");
    if (!mkdtemp(top)) {
        perror("mkdtemp");
        return 1;
    }
    chmod(top, 0755);
    test_live();
    check_rmtree(top);
    return check_summary("test_common_inroot");
}
