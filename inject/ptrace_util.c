/* ptrace_util.c - PTRACE_SEIZE based helpers (see ptrace_util.h). */
#include "ptrace_util.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "scry_err.h"

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

static int err_of(int e)
{
    return e == ESRCH ? SCRY_E_GONE : scry_err_from_errno(e);
}

uint64_t ptr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ptr_seize(pid_t tid)
{
    if (tid <= 0)
        return SCRY_E_INVAL;
    if (ptrace(PTRACE_SEIZE, tid, 0, (void *)(long)PTRACE_O_TRACESYSGOOD) == 0)
        return 0;
    if (errno == ESRCH)
        return SCRY_E_NOPROC;
    return scry_err_from_errno(errno);
}

int ptr_interrupt(pid_t tid)
{
    return ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0 ? 0 : err_of(errno);
}

static void classify(int status, ptr_stop_t *out)
{
    out->status = status;
    out->sig = 0;
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        out->kind = PTR_EXITED;
        return;
    }
    int sig = WSTOPSIG(status);
    int event = (status >> 16) & 0xff;
    out->sig = sig;
    if (sig == (SIGTRAP | 0x80))
        out->kind = PTR_STOP_SYSCALL;
    else if (event == PTRACE_EVENT_STOP)
        out->kind = PTR_STOP_EVENT;
    else if (event != 0)
        out->kind = PTR_STOP_OTHER;
    else
        out->kind = PTR_STOP_SIGNAL;
}

int ptr_wait(pid_t tid, int timeout_ms, ptr_stop_t *out)
{
    uint64_t deadline = ptr_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
    long delay_ns = 20000;
    for (;;) {
        int status = 0;
        pid_t r = waitpid(tid, &status, WNOHANG | __WALL);
        if (r == tid) {
            classify(status, out);
            return 0;
        }
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return SCRY_E_GONE;
        }
        uint64_t now = ptr_now_ns();
        if (now >= deadline)
            return SCRY_E_TIMEOUT;
        if ((uint64_t)delay_ns > deadline - now)
            delay_ns = (long)(deadline - now);
        struct timespec ts = {0, delay_ns};
        nanosleep(&ts, NULL);
        if (delay_ns < 1000000)
            delay_ns *= 2;
    }
}

int ptr_stop_is_group(const ptr_stop_t *st)
{
    return st->kind == PTR_STOP_EVENT &&
           (st->sig == SIGSTOP || st->sig == SIGTSTP || st->sig == SIGTTIN || st->sig == SIGTTOU);
}

int ptr_cont(pid_t tid, int sig)
{
    return ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig) == 0 ? 0 : err_of(errno);
}

int ptr_syscall(pid_t tid, int sig)
{
    return ptrace(PTRACE_SYSCALL, tid, 0, (void *)(long)sig) == 0 ? 0 : err_of(errno);
}

int ptr_detach(pid_t tid, int sig)
{
    return ptrace(PTRACE_DETACH, tid, 0, (void *)(long)sig) == 0 ? 0 : err_of(errno);
}

int ptr_getsiginfo(pid_t tid, siginfo_t *si)
{
    memset(si, 0, sizeof *si);
    return ptrace(PTRACE_GETSIGINFO, tid, 0, si) == 0 ? 0 : err_of(errno);
}

int ptr_siginfo_is_fault(const siginfo_t *si)
{
    switch (si->si_signo) {
    case SIGSEGV:
    case SIGBUS:
    case SIGILL:
    case SIGFPE:
    case SIGTRAP:
    case SIGSYS:
        return si->si_code > 0; /* SI_USER is 0, sigqueue/tgkill/timers are negative */
    default:
        return 0;
    }
}

int ptr_gpr_read(pid_t tid, struct user_regs_struct *gpr)
{
    return ptrace(PTRACE_GETREGS, tid, 0, gpr) == 0 ? 0 : err_of(errno);
}

int ptr_gpr_write(pid_t tid, const struct user_regs_struct *gpr)
{
    return ptrace(PTRACE_SETREGS, tid, 0, gpr) == 0 ? 0 : err_of(errno);
}

int ptr_regs_save(pid_t tid, ptr_regs_t *r)
{
    int rc = ptr_gpr_read(tid, &r->gpr);
    if (rc)
        return rc;
    struct iovec iov = {r->xstate, sizeof r->xstate};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)(long)NT_X86_XSTATE, &iov) == 0) {
        r->xstate_kind = 1;
        r->xstate_len = iov.iov_len;
        return 0;
    }
    if (errno == ESRCH)
        return SCRY_E_GONE;
    if (ptrace(PTRACE_GETFPREGS, tid, 0, r->xstate) != 0)
        return err_of(errno);
    r->xstate_kind = 2;
    r->xstate_len = sizeof(struct user_fpregs_struct);
    return 0;
}

int ptr_xstate_restore(pid_t tid, const ptr_regs_t *r)
{
    if (r->xstate_kind == 1) {
        struct iovec iov = {(void *)r->xstate, r->xstate_len};
        if (ptrace(PTRACE_SETREGSET, tid, (void *)(long)NT_X86_XSTATE, &iov) != 0)
            return err_of(errno);
        return 0;
    }
    if (r->xstate_kind == 2) {
        if (ptrace(PTRACE_SETFPREGS, tid, 0, r->xstate) != 0)
            return err_of(errno);
        return 0;
    }
    return SCRY_E_INVAL;
}

int ptr_regs_restore(pid_t tid, const ptr_regs_t *r)
{
    int rc = ptr_xstate_restore(tid, r);
    if (rc)
        return rc;
    return ptr_gpr_write(tid, &r->gpr);
}

int ptr_sigmask_get(pid_t tid, uint64_t *mask)
{
    *mask = 0;
    return ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof *mask, mask) == 0 ? 0 : err_of(errno);
}

int ptr_sigmask_set(pid_t tid, uint64_t mask)
{
    return ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof mask, &mask) == 0 ? 0 : err_of(errno);
}

int ptr_sigpending_count(pid_t tid, uint64_t mask)
{
    int count = 0;
    for (int shared = 0; shared < 2; shared++) {
        siginfo_t buf[64];
        for (uint64_t off = 0; off < 65536;) {
            struct __ptrace_peeksiginfo_args a = {off, shared ? PTRACE_PEEKSIGINFO_SHARED : 0, 64};
            long n = ptrace(PTRACE_PEEKSIGINFO, tid, &a, buf);
            if (n < 0)
                return err_of(errno);
            for (long i = 0; i < n; i++) {
                int sig = buf[i].si_signo;
                if (sig >= 1 && sig <= 64 && (mask >> (sig - 1) & 1))
                    count++;
            }
            if (n < 64)
                break;
            off += (uint64_t)n;
        }
    }
    return count;
}

void ptr_sigq_push(ptr_sigq_t *q, const siginfo_t *si)
{
    if (si->si_signo < SIGRTMIN) {
        for (int i = 0; i < q->n; i++)
            if (q->info[i].si_signo == si->si_signo)
                return;
    }
    if (q->n >= PTR_SIGQ_MAX) {
        q->dropped++;
        return;
    }
    q->info[q->n++] = *si;
}

int ptr_sigq_redeliver(ptr_sigq_t *q, pid_t pid, pid_t tid)
{
    int sent = 0;
    for (int i = 0; i < q->n; i++) {
        siginfo_t si = q->info[i];
        long r;
        if (si.si_code < 0 && si.si_code != SI_TKILL)
            r = syscall(SYS_rt_tgsigqueueinfo, pid, tid, si.si_signo, &si);
        else
            r = -1;
        if (r != 0)
            r = syscall(SYS_tgkill, pid, tid, si.si_signo);
        if (r != 0) /* the thread is gone: the process still gets it */
            r = kill(pid, si.si_signo);
        if (r == 0)
            sent++;
    }
    q->n = 0;
    return sent;
}

static int read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? SCRY_E_NOPROC : scry_err_from_errno(errno);
    ssize_t n;
    do
        n = read(fd, buf, size - 1);
    while (n < 0 && errno == EINTR);
    int e = errno;
    close(fd);
    if (n < 0)
        return e == ESRCH ? SCRY_E_NOPROC : scry_err_from_errno(e);
    buf[n] = 0;
    return 0;
}

int ptr_thread_state(pid_t pid, pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    if (read_small(path, buf, sizeof buf))
        return 0;
    const char *p = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
    if (!p || p[1] != ' ' || !p[2])
        return 0;
    return (unsigned char)p[2];
}

int ptr_thread_syscall(pid_t pid, pid_t tid, long *nr, uint64_t *pc)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    int rc = read_small(path, buf, sizeof buf);
    *nr = -2;
    *pc = 0;
    if (rc)
        return rc;
    if (strncmp(buf, "running", 7) == 0)
        return 0;
    /* "NR a1 a2 a3 a4 a5 a6 SP PC" or "-1 SP PC" */
    char *end;
    long v = strtol(buf, &end, 10);
    if (end == buf)
        return SCRY_E_IO;
    *nr = v;
    const char *last = strrchr(buf, ' ');
    if (last)
        *pc = strtoull(last + 1, NULL, 16);
    return 0;
}
