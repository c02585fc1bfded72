/* test_common_srcread.c - reading a target's source files: as its user, inside its root,
 * regular files only, bounded; /proc/PID/status credentials parsed strictly. Needs root for
 * the cases that read as another user (skipped otherwise). */
#include "scry_err.h"
#include "srcread.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "scry_time.h"

/* A return code compared as names (both printed). */
#define CHECK_RC(got, want)                                                                        \
    do {                                                                                           \
        int g_ = (got), w_ = (want);                                                               \
        CHECK(g_ == w_, "got %s, want %s", scry_err_name(g_), scry_err_name(w_));                  \
    } while (0)

static char top[64];  /* a scratch directory: root/ is the fake target root, out/ is not */
static char root[96]; /* top/root */

static void put(const char *dir, const char *rel, const char *text, mode_t mode)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    check_write_file(p, text);
    chmod(p, mode);
}

/* Reads FILE through R and returns the error; on success compares with WANT. */
static int rd(srcread_t *r, const char *file, const char *want)
{
    char *data = NULL;
    size_t len = 0;
    int rc = srcread_file(r, file, &data, &len);
    if (rc == 0) {
        CHECK(data && strlen(data) == len);
        if (want && data && strcmp(data, want) != 0) {
            fprintf(stderr, "%s: read '%s', want '%s'\n", file, data, want);
            check_failures++;
        }
    } else {
        CHECK(data == NULL);
    }
    free(data);
    return rc;
}

static void test_parse(void)
{
    srcread_creds_t c;
    const char ok[] = "Name:\tx\nUid:\t1000\t1001\t1002\t1003\nGid:\t5\t6\t7\t8\n"
                      "Groups:\t4 24 27 \nNgid:\t0\n";
    CHECK_RC(srcread_parse_status(ok, sizeof ok - 1, &c), 0);
    CHECK(c.uid == 1003 && c.gid == 8 && c.ngroups == 3 && c.groups[2] == 27);
    const char nogroups[] = "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n";
    CHECK_RC(srcread_parse_status(nogroups, sizeof nogroups - 1, &c), 0);
    CHECK(c.ngroups == 0);
    const char *bad[] = {
        "Uid:\t1\t2\t3\nGid:\t0\t0\t0\t0\nGroups:\n",              /* three ids */
        "Uid:\t1\t2\t3\t4\t5\nGid:\t0\t0\t0\t0\nGroups:\n",        /* five */
        "Uid:\t1\t2\t3\t99999999999\nGid:\t0\t0\t0\t0\nGroups:\n", /* overflow */
        "Uid:\t1\t2\t3\t-4\nGid:\t0\t0\t0\t0\nGroups:\n",          /* sign */
        "Uid:\t1\t2\t3\t4\nGroups:\n",                             /* no Gid */
        "Uid:\t1\t2\t3\t4\nGid:\t0\t0\t0\t0\n",                    /* no Groups */
        "Uid:\t1\t2\t3\t4\nGid:\t0\t0\t0\t0\nGroups:\t1 x\n",      /* junk */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_RC(srcread_parse_status(bad[i], strlen(bad[i]), &c), SCRY_E_CORRUPT);
    /* more groups than kept: the rest dropped, not an error */
    char many[8192] = "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:";
    for (int i = 0; i < 400; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), " %d", i);
    CHECK_RC(srcread_parse_status(many, strlen(many), &c), 0);
    CHECK(c.ngroups == SRCREAD_MAX_GROUPS);
}

static void test_as(const srcread_creds_t *c, int as_root)
{
    int err = 0;
    srcread_t *r = srcread_new_dir(root, c, &err);
    CHECK(r != NULL);
    if (!r)
        return;
    CHECK_RC(rd(r, "/srv/app.py", "print('app')\n"), 0);
    CHECK_RC(rd(r, "srv/app.py", "print('app')\n"), 0); /* relative: beneath the cwd */
    CHECK_RC(rd(r, "/srv/secret.py", "secret\n"), as_root ? 0 : SCRY_E_PERM);
    CHECK_RC(rd(r, "/srv/locked/open.py", "open\n"), as_root ? 0 : SCRY_E_PERM); /* dir 0700 */
    /* never outside the root: absolute symlinks, "..", names only scry's root has */
    char outside[160];
    snprintf(outside, sizeof outside, "%s/out/host.py", top);
    CHECK_RC(rd(r, outside, NULL), SCRY_E_NOTFOUND);
    CHECK_RC(rd(r, "/srv/abs_link.py", NULL), SCRY_E_NOTFOUND); /* -> TOP/out/host.py */
    CHECK_RC(rd(r, "/srv/rel_link.py", "print('app')\n"), 0);   /* -> app.py, inside */
    CHECK_RC(rd(r, "/../../../../out/host.py", NULL), SCRY_E_NOTFOUND);
    CHECK_RC(rd(r, "../out/host.py", NULL), SCRY_E_PERM);
    CHECK_RC(rd(r, "srv/up_link.py", NULL), SCRY_E_PERM); /* -> ../../out/host.py */
    /* regular files only, and never opened otherwise: a FIFO returns at once */
    uint64_t t0 = scry_now_ns();
    CHECK_RC(rd(r, "/srv/fifo.py", NULL), SCRY_E_NOTFILE);
    CHECK_UINT(scry_now_ns() - t0, <, 2000000000ull);
    CHECK_RC(rd(r, "/srv", NULL), SCRY_E_NOTFILE);
    CHECK_RC(rd(r, "/", NULL), SCRY_E_NOTFILE);
    CHECK_RC(rd(r, "/srv/big.py", NULL), SCRY_E_TOOBIG);
    CHECK_RC(rd(r, "", NULL), SCRY_E_INVAL);
    srcread_free(r);

    /* the host's root as the root: pseudo files and devices refused */
    r = srcread_new_dir("/", c, &err);
    CHECK(r != NULL);
    if (r) {
        CHECK_RC(rd(r, "/proc/self/status", NULL), SCRY_E_NOTFILE);
        CHECK_RC(rd(r, "/proc/self/root/etc/hostname", NULL), SCRY_E_PERM); /* magic link */
        CHECK_RC(rd(r, "/dev/null", NULL), SCRY_E_NOTFILE);
        CHECK_RC(rd(r, "/sys/kernel/mm/transparent_hugepage/enabled", NULL), SCRY_E_NOTFILE);
        if (!as_root)
            CHECK_RC(rd(r, "/etc/shadow", NULL), SCRY_E_PERM);
        srcread_free(r);
    }
}

static void test_pid(void)
{
    int err = 0;
    srcread_t *r = srcread_new_pid(getpid(), &err);
    CHECK(r != NULL);
    if (r) {
        char p[160];
        snprintf(p, sizeof p, "%s/srv/app.py", root);
        CHECK_RC(rd(r, p, "print('app')\n"), 0);
        srcread_free(r);
    }
    CHECK(srcread_new_pid(0, &err) == NULL && err == SCRY_E_NOPROC);
    CHECK(srcread_new_pid(0x3fffffff, &err) == NULL && err == SCRY_E_NOPROC);
}

int main(void)
{
    strcpy(top, "/tmp/scry_srcread_XXXXXX");
    if (!mkdtemp(top)) {
        perror("mkdtemp");
        return 1;
    }
    chmod(top, 0755);
    char d[200];
    snprintf(root, sizeof root, "%s/root", top);
    mkdir(root, 0755);
    snprintf(d, sizeof d, "%s/srv", root);
    mkdir(d, 0755);
    snprintf(d, sizeof d, "%s/srv/locked", root);
    mkdir(d, 0700);
    snprintf(d, sizeof d, "%s/out", top);
    mkdir(d, 0755);
    put(root, "srv/app.py", "print('app')\n", 0644);
    put(root, "srv/secret.py", "secret\n", 0600);
    put(root, "srv/locked/open.py", "open\n", 0644);
    put(top, "out/host.py", "host only\n", 0644);
    char p[200], l[200];
    snprintf(l, sizeof l, "%s/out/host.py", top);
    check_symlink_at(root, "srv/abs_link.py", l);
    check_symlink_at(root, "srv/rel_link.py", "app.py");
    check_symlink_at(root, "srv/up_link.py", "../../out/host.py");
    snprintf(p, sizeof p, "%s/srv/fifo.py", root);
    CHECK(mkfifo(p, 0666) == 0);
    snprintf(p, sizeof p, "%s/srv/big.py", root);
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)SRCREAD_MAX_BYTES + 1) == 0);
    if (fd >= 0)
        close(fd);

    test_parse();
    srcread_creds_t me = {.uid = (uint32_t)getuid(), .gid = (uint32_t)getgid()};
    test_as(&me, getuid() == 0);
    if (getuid() == 0) {
        srcread_creds_t nobody = {.uid = 65534, .gid = 65534};
        test_as(&nobody, 0);
    } else {
        printf("SKIP: reading as another user needs root\n");
    }
    test_pid();

    if (check_rmtree(top) != 0)
        check_failures++;
    return check_summary("test_common_srcread");
}
