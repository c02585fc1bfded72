/* ptrace_util.c - registers and signal state of a stopped tracee (see ptrace_util.h). */
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
#include "scry_time.h"

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

static int err_of(int e)
{
    return e == ESRCH ? SCRY_E_GONE : scry_err_from_errno(e);
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
