/* inject.c - sessions: borrow a thread, run functions on it, give it back (see inject.h). */
#include "inject_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elfobj.h"
#include "inject_stub.h"
#include "scry_err.h"
#include "scry_time.h"

#define WAIT_SLICE_MS   20
#define RELEASE_WAIT_MS 1000
#define MAX_STOPS       1000000 /* syscall stops in one call: bounded, generously */
#define RTLD_NOW_       2
#define RTLD_DLOPEN_    0x80000000 /* glibc's __RTLD_DLOPEN, for __libc_dlopen_mode */
#define EFLAGS_TF       0x100ull
#define EFLAGS_DF       0x400ull
#define EFLAGS_RF       0x10000ull

static volatile sig_atomic_t g_abort;

void inject_abort_all(void)
{
    g_abort = 1;
}

void inject_abort_clear(void)
{
    g_abort = 0;
}

int inject__aborting(void)
{
    return g_abort != 0;
}

void inject__set_error(inject_session_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->rep->error, sizeof s->rep->error, fmt, ap);
    va_end(ap);
}

pid_t inject_session_tid(const inject_session_t *s)
{
    return s ? s->tid : 0;
}

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) & ~(a - 1);
}

/* Erases what we wrote into the cave (it was all zeros). Only while the thread is not in it. */
static void erase_cave(inject_session_t *s)
{
    static const uint8_t zeros[4096];
    size_t done = 0;
    while (done < s->cave_used) {
        size_t n = s->cave_used - done;
        if (n > sizeof zeros)
            n = sizeof zeros;
        if (inject__mem_write(s->memfd, s->cave + done, zeros, n) != 0)
            break;
        done += n;
    }
    s->cave_used = 0;
}

/* Gives the stopped thread back, restored: vector state, then general registers with the
 * syscall restart applied and orig_rax = -1, then erase the cave, detach, re-send signals. */
static int release_restored(inject_session_t *s)
{
    if (s->state != INJECT__PARKED)
        return 0;
    /* The mask first: if we die after it, the thread (at the marker, or not redirected)
     * restores the rest itself, or was never changed. */
    int rc0 = 0;
    if (s->sigmask_taken) { /* what the blocked mask kept pending for the program */
        int n = ptr_sigpending_count(s->tid, ~s->sigmask);
        if (n > 0)
            s->rep->signals_deferred += n;
    }
    if (s->sigmask_taken && (rc0 = ptr_sigmask_set(s->tid, s->sigmask)) == 0)
        s->sigmask_taken = 0;
    int rc = ptr_xstate_restore(s->tid, &s->orig);
    if (!rc)
        rc = rc0;
    int rc2 = ptr_gpr_write(s->tid, &s->resume);
    if (!rc)
        rc = rc2;
    if (!rc2)
        erase_cave(s);
    int rc3 = proc_detach(s->tid, 0);
    if (!rc)
        rc = rc3;
    ptr_sigq_redeliver(&s->sigq, s->pid, s->tid);
    s->state = INJECT__RELEASED;
    s->rep->stopped_ns += scry_now_ns() - s->t_stopped;
    return rc;
}

/* Gives the stopped thread back without touching it: it is inside the trampoline and will
 * finish the call and restore itself (the cave stays). */
static void release_running(inject_session_t *s)
{
    proc_detach(s->tid, 0);
    ptr_sigq_redeliver(&s->sigq, s->pid, s->tid);
    s->state = INJECT__RELEASED;
    s->rep->stopped_ns += scry_now_ns() - s->t_stopped;
}

static void resolve_loader(inject_session_t *s);

int inject_session_open(pid_t pid, const inject_opts_t *opts, inject_report_t *rep,
                        inject_session_t **out)
{
    if (!out || pid <= 0)
        return SCRY_E_INVAL;
    *out = NULL;
    if (inject__aborting())
        return SCRY_E_AGAIN;
    inject_session_t *s = calloc(1, sizeof *s);
    if (!s)
        return SCRY_E_NOMEM;
    s->pid = pid;
    s->memfd = -1;
    s->rep = rep ? rep : &s->own_rep;
    memset(s->rep, 0, sizeof *s->rep);
    s->rep->syscall_nr = -1;
    s->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : INJECT_DEFAULT_TIMEOUT_MS;
    int rc;
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        rc = SCRY_E_NOPROC;
        goto fail;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    s->memfd = open(path, O_RDWR | O_CLOEXEC);
    if (s->memfd < 0) {
        /* ESRCH for a live pid: a kernel thread, which has no user address space. */
        rc = errno == ENOENT  ? SCRY_E_NOPROC
             : errno == ESRCH ? SCRY_E_PERM
                              : scry_err_from_errno(errno);
        inject__set_error(s, "open %s: %s", path, strerror(errno));
        goto fail;
    }
    s->maps = elfsym_maps_new(pid, &rc);
    if (!s->maps)
        goto fail;
    size_t code_len;
    inject__stub_code(&code_len);
    size_t need = align_up(code_len, 16) + sizeof(inject__stub_data_t) + 64;
    rc = inject__find_cave(pid, s->maps, s->memfd, need, &s->cave, &s->cave_size);
    if (rc) {
        inject__set_error(s, "no unused executable tail of at least %zu bytes", need);
        goto fail;
    }
    s->rep->cave = s->cave;
    resolve_loader(s);
    inject__stub_fpu_area(&s->fpu_size, &s->use_xsave);
    rc = inject__borrow_thread(s, opts);
    if (rc)
        goto fail;
    const uint8_t *code = inject__stub_code(&code_len);
    rc = inject__mem_write(s->memfd, s->cave, code, code_len);
    s->cave_used = code_len;
    if (rc) {
        inject__set_error(s, "cannot write the trampoline at %#llx", (unsigned long long)s->cave);
        release_restored(s);
        goto fail;
    }
    s->data = s->cave + align_up(code_len, 16);
    s->cave_used = align_up(code_len, 16) + sizeof(inject__stub_data_t);
    *out = s;
    return 0;
fail:
    if (s->memfd >= 0)
        close(s->memfd);
    elfsym_maps_free(s->maps);
    if (rep && s->rep == rep && !rep->error[0])
        snprintf(rep->error, sizeof rep->error, "%s", scry_strerror(rc));
    free(s);
    return rc;
}

int inject_session_string(inject_session_t *s, const char *str, raddr_t *addr)
{
    if (!s || !str || !addr || s->state != INJECT__PARKED)
        return SCRY_E_INVAL;
    size_t len = strlen(str) + 1;
    size_t at = align_up(s->cave_used, 8);
    if (at > s->cave_size || len > s->cave_size - at)
        return SCRY_E_NOMEM;
    int rc = inject__mem_write(s->memfd, s->cave + at, str, len);
    if (rc)
        return rc;
    s->cave_used = at + len;
    *addr = s->cave + at;
    return 0;
}

static void fill_data(inject_session_t *s, inject__stub_data_t *d, raddr_t func,
                      const uint64_t *args, int nargs)
{
    const struct user_regs_struct *r = &s->resume;
    memset(d, 0, sizeof *d);
    d->func = func;
    for (int i = 0; i < nargs; i++)
        d->args[i] = args[i];
    d->xsave_size = s->fpu_size;
    d->use_xsave = (uint64_t)s->use_xsave;
    d->rsp = r->rsp;
    d->rip = r->rip;
    d->rflags = r->eflags & ~(EFLAGS_RF | EFLAGS_TF);
    d->rax = r->rax;
    d->rbx = r->rbx;
    d->rcx = r->rcx;
    d->rdx = r->rdx;
    d->rsi = r->rsi;
    d->rdi = r->rdi;
    d->rbp = r->rbp;
    d->r8 = r->r8;
    d->r9 = r->r9;
    d->r10 = r->r10;
    d->r11 = r->r11;
    d->r12 = r->r12;
    d->r13 = r->r13;
    d->r14 = r->r14;
    d->r15 = r->r15;
    d->sigmask = s->sigmask;
    d->sigmask_ok = (uint64_t)s->sigmask_saved;
}

/* Waits up to RELEASE_WAIT_MS for the thread's next stop, into *ST. Returns 0, SCRY_E_GONE
 * when it exited (the session is then released), or proc_wait's error. */
static int wait_next_stop(inject_session_t *s, proc_stop_t *st)
{
    int rc = proc_wait(s->tid, RELEASE_WAIT_MS, st);
    if (rc == 0 && st->kind == PROC_EXITED) {
        s->state = INJECT__RELEASED;
        return SCRY_E_GONE;
    }
    return rc;
}

/* The call has to stop now (timeout or abort): stop the thread and decide. Returns 1 when
 * it turned out to have reached the marker (result in *RET), 0 when released, <0 on error. */
static int stop_running_call(inject_session_t *s, raddr_t marker, uint64_t *ret, int restore)
{
    int rc = proc_interrupt(s->tid);
    for (int guard = 0; rc == 0 && guard < 1000; guard++) {
        proc_stop_t st;
        rc = wait_next_stop(s, &st);
        if (rc)
            break;
        struct user_regs_struct g;
        if (ptr_gpr_read(s->tid, &g) != 0)
            break;
        if (st.kind == PROC_STOP_SYSCALL && g.rip == marker &&
            g.orig_rax == INJECT__STUB_MARKER_NR) {
            *ret = g.r13;
            return 1;
        }
        if (st.kind == PROC_STOP_SIGNAL) {
            siginfo_t si;
            if (ptr_getsiginfo(s->tid, &si) == 0 && !ptr_siginfo_is_fault(&si)) {
                ptr_sigq_push(&s->sigq, &si);
                s->rep->signals_deferred++;
            }
        }
        if (st.kind == PROC_STOP_EVENT && !proc_stop_is_group(&st))
            break; /* our interrupt: stopped */
        if (st.kind == PROC_STOP_SIGNAL || st.kind == PROC_STOP_SYSCALL)
            break; /* stopped is stopped; the pending interrupt will be swallowed by detach */
        rc = proc_cont_syscall(s->tid, 0);
    }
    if (rc == SCRY_E_GONE) {
        s->state = INJECT__RELEASED;
        return rc;
    }
    if (rc) {
        /* Could not get it to stop in time: it still runs the trampoline, which restores it
         * by itself; our tracing ends at the latest when this process exits. */
        return rc;
    }
    if (restore)
        release_restored(s);
    else
        release_running(s);
    return 0;
}

/* Moves the thread from the marker's syscall-entry stop to that syscall's exit stop, where
 * it stays parked. Registers written at an entry stop with orig_rax = -1 (skip the syscall)
 * then pass a seccomp filter, which runs after the entry stop: a profile that refuses
 * syscall -1 (Docker's and podman's, with ENOSYS) overwrites rax, so a thread restored
 * there restarted its sleep as syscall -38 and the program saw ENOSYS. After the exit stop
 * nothing runs on the registers; the marker (getpid) is allowed everywhere. Returns 0, or
 * SCRY_E_GONE / another code. */
static int park_after_marker(inject_session_t *s)
{
    int rc = proc_cont_syscall(s->tid, 0);
    for (int guard = 0; rc == 0 && guard < 64; guard++) {
        proc_stop_t st;
        rc = wait_next_stop(s, &st);
        if (rc)
            break;
        if (st.kind == PROC_STOP_SYSCALL)
            return 0;
        siginfo_t si;
        if (st.kind == PROC_STOP_SIGNAL && ptr_getsiginfo(s->tid, &si) == 0) {
            ptr_sigq_push(&s->sigq, &si);
            s->rep->signals_deferred++;
        }
        rc = proc_cont_syscall(s->tid, 0);
    }
    return rc ? rc : SCRY_E_TIMEOUT;
}

int inject_session_call(inject_session_t *s, raddr_t func, const uint64_t *args, int nargs,
                        uint64_t *ret)
{
    if (!s || s->state != INJECT__PARKED || nargs < 0 || nargs > INJECT_MAX_ARGS ||
        (nargs > 0 && !args) || !func)
        return SCRY_E_INVAL;
    inject__stub_data_t d;
    fill_data(s, &d, func, args, nargs);
    int rc = inject__mem_write(s->memfd, s->data, &d, sizeof d);
    if (rc)
        goto restore;
    /* The stub saves the live vector state for its own restore: make it the original. */
    rc = ptr_xstate_restore(s->tid, &s->orig);
    if (rc)
        goto restore;
    struct user_regs_struct g = s->resume;
    g.rip = s->cave;
    g.rbx = s->data;
    g.rsp = (s->orig.gpr.rsp - INJECT__STUB_ENTRY_GAP) & ~15ull;
    g.rax = 0;
    g.orig_rax = (unsigned long long)-1;
    g.eflags &= ~(EFLAGS_TF | EFLAGS_DF | EFLAGS_RF);
    rc = ptr_gpr_write(s->tid, &g);
    if (rc)
        goto restore;
    /* Block every signal for the call, after the redirection: from here on the trampoline
     * gives the thread its mask back if we die. Signals sent meanwhile stay pending in the
     * kernel and are delivered, in order, once the mask is restored (none held here). */
    if (s->sigmask_saved && !s->sigmask_taken) {
        rc = ptr_sigmask_set(s->tid, ~(uint64_t)0);
        if (rc)
            goto restore;
        s->sigmask_taken = 1;
    }

    raddr_t marker = s->cave + inject__stub_marker_offset();
    uint64_t t0 = scry_now_ns();
    uint64_t deadline = t0 + (uint64_t)s->timeout_ms * 1000000ull;
    uint64_t result = 0;
    int resume_sig = 0;
    for (long stops = 0; stops < MAX_STOPS; stops++) {
        rc = proc_cont_syscall(s->tid, resume_sig);
        resume_sig = 0;
        if (rc)
            goto gone_or_restore;
        proc_stop_t st;
        for (;;) {
            rc = proc_wait(s->tid, WAIT_SLICE_MS, &st);
            if (rc != SCRY_E_TIMEOUT)
                break;
            if (inject__aborting()) {
                int r = stop_running_call(s, marker, &result, 0);
                if (r == 1)
                    goto done;
                inject__set_error(s, "aborted: the thread finishes the call by itself");
                return r < 0 ? r : SCRY_E_AGAIN;
            }
            if (scry_now_ns() >= deadline) {
                int r = stop_running_call(s, marker, &result, 1);
                if (r == 1)
                    goto done;
                inject__set_error(s, "the remote call did not return within %d ms", s->timeout_ms);
                s->rep->call_ns += scry_now_ns() - t0;
                return r < 0 ? r : SCRY_E_TIMEOUT;
            }
        }
        if (rc)
            goto gone_or_restore;
        if (st.kind == PROC_EXITED) {
            s->state = INJECT__RELEASED;
            rc = SCRY_E_GONE;
            inject__set_error(s, "the thread exited during the call");
            return rc;
        }
        if (st.kind == PROC_STOP_SYSCALL) {
            s->rep->syscall_stops++;
            struct user_regs_struct now;
            rc = ptr_gpr_read(s->tid, &now);
            if (rc)
                goto gone_or_restore;
            if (now.rip == marker && now.orig_rax == INJECT__STUB_MARKER_NR) {
                result = now.r13;
                goto done;
            }
            continue;
        }
        if (st.kind == PROC_STOP_SIGNAL) {
            siginfo_t si;
            rc = ptr_getsiginfo(s->tid, &si);
            if (rc)
                goto gone_or_restore;
            if (ptr_siginfo_is_fault(&si)) {
                inject__set_error(s, "the remote call faulted: signal %d code %d at %p",
                                  si.si_signo, si.si_code, si.si_addr);
                s->rep->call_ns += scry_now_ns() - t0;
                rc = release_restored(s);
                return rc ? rc : SCRY_E_FAULT;
            }
            ptr_sigq_push(&s->sigq, &si);
            s->rep->signals_deferred++;
            continue;
        }
        /* Event stops (a leftover interrupt, a group-stop): keep the call going. */
    }
    inject__set_error(s, "too many stops during the remote call");
    rc = SCRY_E_TIMEOUT;
    goto restore;
done:
    s->rep->call_ns += scry_now_ns() - t0;
    if (ret)
        *ret = result;
    rc = park_after_marker(s);
    if (rc)
        goto gone_or_restore;
    return 0;
gone_or_restore:
    if (rc == SCRY_E_GONE) {
        s->state = INJECT__RELEASED;
        return rc;
    }
restore : {
    int r2 = release_restored(s);
    return rc ? rc : r2;
}
}

int inject_session_close(inject_session_t *s)
{
    if (!s)
        return 0;
    int rc = release_restored(s);
    if (s->memfd >= 0)
        close(s->memfd);
    elfsym_maps_free(s->maps);
    free(s);
    return rc;
}

/* Finds dlopen (glibc >= 2.34 and musl: in the C library; older glibc: libdl when loaded,
 * else the private __libc_dlopen_mode) and dlerror. Done before any thread is stopped. */
static void resolve_loader(inject_session_t *s)
{
    static const char *const objs[] = {"libc.so", "libdl.so", "ld-musl", "libc.musl"};
    s->dlopen_mode = RTLD_NOW_;
    for (size_t i = 0; i < sizeof objs / sizeof objs[0] && !s->fn_dlopen; i++)
        if (inject__lookup(s->pid, s->maps, objs[i], "dlopen", NULL, &s->fn_dlopen) != 0)
            s->fn_dlopen = 0;
    if (!s->fn_dlopen &&
        inject__lookup(s->pid, s->maps, "libc.so", "__libc_dlopen_mode", NULL, &s->fn_dlopen) == 0)
        s->dlopen_mode |= RTLD_DLOPEN_;
    for (size_t i = 0; i < sizeof objs / sizeof objs[0] && !s->fn_dlerror; i++)
        if (inject__lookup(s->pid, s->maps, objs[i], "dlerror", NULL, &s->fn_dlerror) != 0)
            s->fn_dlerror = 0;
}

static int refresh_maps(inject_session_t *s)
{
    int rc = 0;
    elfsym_maps_t *m = elfsym_maps_new(s->pid, &rc);
    if (!m)
        return rc;
    elfsym_maps_free(s->maps);
    s->maps = m;
    return 0;
}

int inject_session_symbol(inject_session_t *s, const char *object, const char *symbol,
                          raddr_t *addr)
{
    if (!s || !object || !symbol || !addr)
        return SCRY_E_INVAL;
    int rc = refresh_maps(s);
    if (rc)
        return rc;
    return inject__lookup(s->pid, s->maps, object, symbol, NULL, addr);
}

int inject_session_dlopen(inject_session_t *s, const char *lib_path, uint64_t *handle)
{
    if (!s || !lib_path || !lib_path[0])
        return SCRY_E_INVAL;
    raddr_t fn = s->fn_dlopen;
    if (!fn) {
        inject__set_error(s, "no dlopen in the target (static or not glibc/musl)");
        return SCRY_E_NOSYS;
    }
    raddr_t path;
    int rc = inject_session_string(s, lib_path, &path);
    if (rc)
        return rc;
    uint64_t args[2] = {path, s->dlopen_mode}, h = 0;
    rc = inject_session_call(s, fn, args, 2, &h);
    if (rc)
        return rc;
    if (handle)
        *handle = h;
    if (h)
        return 0;
    /* Why: dlerror() on the same thread. */
    raddr_t fe = s->fn_dlerror;
    uint64_t msg = 0;
    inject__set_error(s, "dlopen(%s) failed", lib_path);
    if (fe && inject_session_call(s, fe, NULL, 0, &msg) == 0 && msg) {
        char buf[sizeof s->rep->error];
        memset(buf, 0, sizeof buf);
        size_t got = 0;
        while (got < sizeof buf - 1 && inject__mem_read(s->memfd, msg + got, buf + got, 1) == 0 &&
               buf[got])
            got++;
        buf[got] = 0;
        if (got)
            inject__set_error(s, "%s", buf);
    }
    return SCRY_E_NOTFOUND;
}

int inject_find_symbol(pid_t pid, const char *object, const char *symbol, raddr_t *addr)
{
    return inject_find_symbol_as(pid, object, symbol, NULL, addr);
}

int inject_find_symbol_as(pid_t pid, const char *object, const char *symbol, const char *file,
                          raddr_t *addr)
{
    if (pid <= 0 || !object || !symbol || !addr)
        return SCRY_E_INVAL;
    int rc = 0;
    elfsym_maps_t *m = elfsym_maps_new(pid, &rc);
    if (!m)
        return rc;
    rc = inject__lookup(pid, m, object, symbol, file, addr);
    elfsym_maps_free(m);
    return rc;
}

int inject_call_function(pid_t pid, raddr_t func, const uint64_t *args, int nargs, uint64_t *ret,
                         inject_report_t *rep)
{
    inject_session_t *s;
    int rc = inject_session_open(pid, NULL, rep, &s);
    if (rc)
        return rc;
    rc = inject_session_call(s, func, args, nargs, ret);
    int rc2 = inject_session_close(s);
    return rc ? rc : rc2;
}

int inject_call_dlopen(pid_t pid, const char *lib_path, uint64_t *handle_out, inject_report_t *rep)
{
    inject_session_t *s;
    int rc = inject_session_open(pid, NULL, rep, &s);
    if (rc)
        return rc;
    rc = inject_session_dlopen(s, lib_path, handle_out);
    int rc2 = inject_session_close(s);
    return rc ? rc : rc2;
}

int inject_load_and_call(pid_t pid, const char *lib_path, const char *func_name,
                         const char *str_arg, const inject_opts_t *opts, uint64_t *handle_out,
                         uint64_t *ret_out, inject_report_t *rep)
{
    if (!lib_path || !func_name)
        return SCRY_E_INVAL;
    /* Load the library's symbols into elfsym's cache now, not while a thread is held. */
    elfsym_obj_free(elfsym_obj_open(lib_path, NULL));
    inject_session_t *s;
    int rc = inject_session_open(pid, opts, rep, &s);
    if (rc)
        return rc;
    uint64_t h = 0;
    rc = inject_session_dlopen(s, lib_path, &h);
    if (rc)
        goto out;
    if (handle_out)
        *handle_out = h;
    raddr_t fn = 0;
    rc = inject_session_symbol(s, lib_path, func_name, &fn);
    if (rc) {
        inject__set_error(s, "%s does not export %s", lib_path, func_name);
        goto out;
    }
    uint64_t arg = 0;
    if (str_arg) {
        rc = inject_session_string(s, str_arg, &arg);
        if (rc)
            goto out;
    }
    rc = inject_session_call(s, fn, &arg, str_arg ? 1 : 0, ret_out);
out:;
    int rc2 = inject_session_close(s);
    return rc ? rc : rc2;
}
