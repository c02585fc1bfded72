/* test_common_rmem.c - the remote reader where a seccomp filter refuses process_vm_readv
 * (Docker's default profile without CAP_SYS_PTRACE): a child under such a filter reads its
 * parent through rmem, which falls back to /proc/PID/mem. Known bytes, batched reads, a
 * read stopping at the end of a mapping, a faulting address. */
#include "rmem.h"
#include "scry_err.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define CHECK_RC(got, want)                                                                        \
    do {                                                                                           \
        long g_ = (got), w_ = (want);                                                              \
        CHECK(g_ == w_, "got %ld (%s), want %ld (%s)", g_, g_ < 0 ? scry_err_name((int)g_) : "",   \
              w_, w_ < 0 ? scry_err_name((int)w_) : "");                                           \
    } while (0)

static char known[64] = "the child's copy";

/* process_vm_readv refused with EPERM, everything else allowed (as Docker's profile). */
static int refuse_vm_readv(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof *f), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* In the child: reads the parent (which changed KNOWN after the fork) at the same
 * addresses. EDGE is the last 8 bytes of a mapping followed by an unmapped page. */
static void child_reads(pid_t parent, const char *edge)
{
    CHECK_INT(refuse_vm_readv(), ==, 0, "seccomp filter: %s", strerror(errno));
    char buf[64];
    struct iovec l = {buf, 8}, r = {known, 8};
    errno = 0;
    CHECK(process_vm_readv(parent, &l, 1, &r, 1, 0) < 0 && errno == EPERM,
          "process_vm_readv not refused (errno %d)", errno);
    rmem_t *m = rmem_open_pid(parent);
    CHECK(m != NULL);
    if (!m)
        return;
    memset(buf, 0, sizeof buf);
    CHECK_RC(rmem_read(m, (raddr_t)(uintptr_t)known, buf, sizeof known), 0);
    CHECK_STR(buf, ==, "the parent's bytes", "read");
    /* a batch: two regions, then one in the unmapped page (ends the batch) */
    char a[8] = {0}, b[8] = {0}, c[8] = {0};
    rmem_iov_t iov[3] = {{(raddr_t)(uintptr_t)known, a, 7},
                         {(raddr_t)(uintptr_t)edge, b, 8},
                         {(raddr_t)(uintptr_t)edge + 8, c, 8}};
    CHECK_RC(rmem_readv(m, iov, 3), 2);
    CHECK(memcmp(a, "the par", 7) == 0 && memcmp(b, "EDGEedge", 8) == 0, "batch: %.7s %.8s", a, b);
    /* up to the end of the mapping, and not a byte beyond */
    CHECK_RC(rmem_read_partial(m, (raddr_t)(uintptr_t)edge, buf, 32), 8);
    CHECK_RC(rmem_read(m, (raddr_t)(uintptr_t)edge + 8, buf, 8), SCRY_E_FAULT);
    char s[32];
    CHECK_RC(rmem_read_cstr(m, (raddr_t)(uintptr_t)known, s, sizeof s), 18);
    CHECK_STR(s, ==, "the parent's bytes", "cstr");
    CHECK(rmem_stats(m).faults >= 2, "faults %llu", (unsigned long long)rmem_stats(m).faults);
    rmem_free(m);
}

int main(void)
{
    long page = sysconf(_SC_PAGESIZE);
    char *map =
        mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED);
    if (map == MAP_FAILED)
        return check_summary("test_common_rmem");
    munmap(map + page, (size_t)page); /* the page after EDGE is unmapped */
    char *edge = map + page - 8;
    memcpy(edge, "EDGEedge", 8);
    int go[2];
    CHECK(pipe(go) == 0);
    pid_t kid = fork();
    if (kid == 0) {
        char x;
        close(go[1]);
        if (read(go[0], &x, 1) != 1)
            _exit(2);
        child_reads(getppid(), edge);
        _exit(check_summary("test_common_rmem (child)"));
    }
    CHECK(kid > 0);
    prctl(PR_SET_PTRACER, kid, 0, 0, 0); /* Yama's ptrace_scope 1 (EINVAL without Yama) */
    strcpy(known, "the parent's bytes");
    (void)!write(go[1], "x", 1);
    int st = 0;
    CHECK(waitpid(kid, &st, 0) == kid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's checks failed (status %d)", st);
    return check_summary("test_common_rmem");
}
