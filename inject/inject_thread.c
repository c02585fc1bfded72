/* inject_thread.c - choosing the thread to borrow, stopping it, and checking it is safe.
 *
 * A thread is safe when running dlopen on it cannot deadlock on a lock it holds itself:
 * it must not be inside the dynamic loader, nor inside the C library's user code (malloc,
 * stdio, ...), except blocked in a system call that does not run under such a lock. Threads
 * blocked in sleep/read/poll-like calls are preferred (the program loses nothing), then
 * running threads (stopped for a few milliseconds), then futex waiters.
 */
#include "inject_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <time.h>

#include "scry_err.h"
#include "scry_time.h"

#define MAX_TASKS       4096
#define STOP_WAIT_HARD  10000 /* we cannot walk away from a seized thread before it stops */
#define ROUND_PAUSE_NS  2000000L
#define LOOKS_PER_SEIZE 40 /* stops of one thread per round while it is at unsafe points */
#define ERESTARTSYS     512
#define ERESTARTNOINTR  513
#define ERESTARTNOHAND  514
#define ERESTART_BLOCK  516

/* Blocking calls whose interruption is invisible (the kernel restarts them) and that do not
 * run under the C library's internal locks. */
static int idle_syscall(long nr)
{
    switch (nr) {
    case SYS_read:
    case SYS_write:
    case SYS_pread64:
    case SYS_readv:
    case SYS_poll:
    case SYS_select:
    case SYS_pause:
    case SYS_nanosleep:
    case SYS_accept:
    case SYS_recvfrom:
    case SYS_recvmsg:
    case SYS_wait4:
    case SYS_rt_sigsuspend:
    case SYS_waitid:
    case SYS_clock_nanosleep:
    case SYS_pselect6:
    case SYS_ppoll:
    case SYS_accept4:
        return 1;
    default:
        return 0;
    }
}

/* Calls made by malloc (under an arena lock) or by the loader: never borrow such a thread. */
static int locked_syscall(long nr)
{
    switch (nr) {
    case SYS_mmap:
    case SYS_mprotect:
    case SYS_munmap:
    case SYS_brk:
    case SYS_mremap:
    case SYS_madvise:
    case SYS_open:
    case SYS_openat:
        return 1;
    default:
        return 0;
    }
}

/* Calls that return EINTR to the program when ptrace interrupts them (epoll_wait,
 * sigtimedwait, ...): avoid, the program would see a spurious error. */
static int eintr_syscall(long nr)
{
    switch (nr) {
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
    case SYS_rt_sigtimedwait:
    case SYS_semop:
    case SYS_semtimedop:
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
#endif
        return 1;
    default:
        return 0;
    }
}

typedef struct cand {
    pid_t tid;
    int tier;
} cand_t;

static int cand_cmp(const void *a, const void *b)
{
    const cand_t *x = a, *y = b;
    if (x->tier != y->tier)
        return x->tier - y->tier;
    return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Lists the threads worth trying, best first. Returns the count or a negative code. */
static int list_candidates(pid_t pid, cand_t *out, int max)
{
    pid_t tids[MAX_TASKS];
    int nt = proc_list_tasks(pid, tids, max < MAX_TASKS ? (size_t)max : MAX_TASKS);
    if (nt < 0)
        return nt == SCRY_E_GONE ? SCRY_E_NOPROC : nt;
    int n = 0;
    for (int i = 0; i < nt; i++) {
        pid_t tid = tids[i];
        char st = 0;
        if (proc_read_task_state(pid, tid, &st) != 0)
            st = 0;
        proc_syscall_t sc;
        if (proc_read_task_syscall(pid, tid, &sc) != 0)
            sc.nr = PROC_SYSCALL_RUNNING;
        long nr = sc.nr;
        int tier;
        if (st == 'R' || nr == PROC_SYSCALL_RUNNING)
            tier = 2;
        else if (st != 'S')
            continue; /* D (uninterruptible: would not stop), T/t (stopped), Z, X */
        else if (idle_syscall(nr))
            tier = 0;
        else if (nr == SYS_futex)
            tier = 4;
        else if (locked_syscall(nr) || eintr_syscall(nr))
            continue;
        else
            tier = 6;
        if (tid == pid)
            tier--; /* the main thread first within a tier */
        out[n].tid = tid;
        out[n].tier = tier;
        n++;
    }
    qsort(out, (size_t)n, sizeof *out, cand_cmp);
    return n;
}

/* Gives back a thread we stopped but did not modify. */
static void let_go(inject_session_t *s, pid_t tid)
{
    proc_detach(tid, 0);
    ptr_sigq_redeliver(&s->sigq, s->pid, tid);
}

/* True when the thread is in a leaf string/memory routine of the C library called straight
 * from outside it: RIP in a local or unnamed stretch of libc (an IFUNC implementation such as
 * __memset_avx2_unaligned_erms: a PLT call lands there directly), and [RSP] a return address
 * just after a call instruction in code outside libc and ld.so. Exported functions (malloc,
 * fwrite, ...) are refused even at their first instruction; a libc-internal function (such
 * as _int_malloc) is refused because its caller is inside libc. Such leaf routines take no
 * lock. */
static int in_libc_leaf(inject_session_t *s)
{
    const struct user_regs_struct *g = &s->orig.gpr;
    uint64_t ret;
    uint8_t insn[6];
    if (inject__mem_read(s->memfd, g->rsp, &ret, sizeof ret) != 0)
        return 0;
    const elfsym_map_t *m = elfsym_maps_find(s->maps, ret);
    if (!m || !(m->perms & ELFSYM_PERM_X) || inject__runtime_kind(m->path))
        return 0;
    if (ret < m->start + 6 || inject__mem_read(s->memfd, ret - 6, insn, 6) != 0)
        return 0;
    if (insn[1] != 0xe8 && !(insn[0] == 0xff && insn[1] == 0x15)) /* call rel32 / [rip+d] */
        return 0;
    return !inject__exported_function_at(s->pid, s->maps, g->rip);
}

/* Where the thread stands: 0 acceptable, 1 not now (inside the loader or libc). */
static int judge(inject_session_t *s, long *nr_out)
{
    const struct user_regs_struct *g = &s->orig.gpr;
    long nr = (long)g->orig_rax;
    int in_sys = 0;
    if (nr >= 0) {
        uint8_t insn[2];
        if (inject__mem_read(s->memfd, g->rip - 2, insn, 2) == 0 && insn[0] == 0x0f &&
            insn[1] == 0x05)
            in_sys = 1;
    }
    *nr_out = in_sys ? nr : -1;
    const elfsym_map_t *m = elfsym_maps_find(s->maps, g->rip);
    int kind = m ? inject__runtime_kind(m->path) : 0;
    if (kind == 2)
        return 1;
    if (kind == 1 && in_sys)
        return locked_syscall(nr);
    if (kind == 1)
        return !in_libc_leaf(s);
    return 0;
}

/* Computes where the thread resumes: what the kernel's syscall restart would do, done in user
 * space so that the self-restoring trampoline can do it too. */
static void compute_resume(inject_session_t *s)
{
    struct user_regs_struct *r = &s->resume;
    *r = s->orig.gpr;
    long nr = (long)r->orig_rax;
    long ax = (long)r->rax;
    s->rep->in_syscall = nr >= 0;
    s->rep->syscall_nr = nr >= 0 ? nr : -1;
    if (nr >= 0) {
        if (ax == -ERESTARTSYS || ax == -ERESTARTNOINTR || ax == -ERESTARTNOHAND) {
            r->rax = (unsigned long long)nr;
            r->rip -= 2;
        } else if (ax == -ERESTART_BLOCK) {
            r->rax = SYS_restart_syscall;
            r->rip -= 2;
        }
    }
    r->orig_rax = (unsigned long long)-1; /* no kernel restart on top of ours */
}

/* Tries one thread. Returns 0 accepted, 1 rejected (given back), or a negative code. */
static int try_thread(inject_session_t *s, pid_t tid)
{
    int rc = proc_seize(tid, PTRACE_O_TRACESYSGOOD);
    if (rc)
        return rc == SCRY_E_NOPROC ? 1 : rc;
    s->rep->attempts++;
    rc = proc_interrupt_wait(tid, STOP_WAIT_HARD);
    if (rc == SCRY_E_TIMEOUT) {
        /* Seized but never stopped (uninterruptible sleep for > 10 s). We cannot detach a
         * running tracee; the kernel will when this process exits. */
        inject__set_error(s, "thread %d did not stop within %d ms", (int)tid, STOP_WAIT_HARD);
        return SCRY_E_TIMEOUT;
    }
    if (rc == 1) {
        let_go(s, tid);
        inject__set_error(s, "the process is stopped (job control)");
        return SCRY_E_AGAIN;
    }
    if (rc == SCRY_E_GONE)
        return 1;
    if (rc) {
        let_go(s, tid);
        return rc;
    }
    /* Not at a safe point: let it run a little (a jittered 50..800 us) and look again, while
     * staying attached, a bounded number of times. */
    unsigned jitter = (unsigned)scry_now_ns() ^ (unsigned)tid;
    for (int look = 0;; look++) {
        s->t_stopped = scry_now_ns();
        rc = ptr_regs_save(tid, &s->orig);
        if (rc) {
            let_go(s, tid);
            return rc == SCRY_E_GONE ? 1 : rc;
        }
        if (s->orig.gpr.cs != 0x33) {
            let_go(s, tid);
            inject__set_error(s, "not a 64-bit thread (cs=%#llx)", s->orig.gpr.cs);
            return SCRY_E_NOSYS;
        }
        long nr;
        if (!judge(s, &nr))
            break;
        if (look >= LOOKS_PER_SEIZE || inject__aborting()) {
            let_go(s, tid);
            return 1;
        }
        rc = proc_cont(tid, 0);
        jitter = jitter * 1103515245u + 12345u;
        struct timespec ts = {0, 50000 + (long)((jitter >> 8) % 750000u)};
        nanosleep(&ts, NULL);
        if (rc == 0)
            rc = proc_interrupt_wait(tid, STOP_WAIT_HARD);
        if (rc == SCRY_E_TIMEOUT) {
            inject__set_error(s, "thread %d did not stop within %d ms", (int)tid, STOP_WAIT_HARD);
            return rc;
        }
        if (rc == 1 || rc == SCRY_E_GONE) {
            if (rc == 1)
                let_go(s, tid);
            return rc == 1 ? SCRY_E_AGAIN : 1;
        }
        if (rc) {
            let_go(s, tid);
            return rc;
        }
        s->rep->attempts++;
    }
    s->tid = tid;
    s->state = INJECT__PARKED;
    /* Its own signal mask: every signal is blocked while it runs our calls (signals sent
     * meanwhile stay pending in the kernel, in order, none dropped), and given back first. */
    s->sigmask_saved = ptr_sigmask_get(tid, &s->sigmask) == 0;
    s->sigmask_taken = 0;
    compute_resume(s);
    s->rep->tid = tid;
    return 0;
}

int inject__borrow_thread(inject_session_t *s, const inject_opts_t *opts)
{
    int rounds = opts && opts->max_attempts > 0 ? opts->max_attempts : INJECT_DEFAULT_ATTEMPTS;
    cand_t *c = calloc(MAX_TASKS, sizeof *c);
    if (!c)
        return SCRY_E_NOMEM;
    int rc = SCRY_E_AGAIN;
    for (int round = 0; round < rounds; round++) {
        if (inject__aborting()) {
            rc = SCRY_E_AGAIN;
            break;
        }
        int n;
        if (opts && opts->tid > 0) {
            c[0].tid = opts->tid;
            c[0].tier = 0;
            n = 1;
        } else {
            n = list_candidates(s->pid, c, MAX_TASKS);
            if (n < 0) {
                rc = n;
                break;
            }
        }
        for (int i = 0; i < n; i++) {
            int r = try_thread(s, c[i].tid);
            if (r == 0) {
                free(c);
                return 0;
            }
            if (r < 0) {
                free(c);
                return r;
            }
        }
        struct timespec ts = {0, ROUND_PAUSE_NS};
        nanosleep(&ts, NULL);
    }
    free(c);
    if (rc == SCRY_E_AGAIN && !s->rep->error[0])
        inject__set_error(s, "no thread was at a safe point in %d rounds", rounds);
    return rc;
}
