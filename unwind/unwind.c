/* unwind.c - the unwinder: scry's libunwind accessors and the frame loop. */
#include <errno.h>
#include <libunwind-ptrace.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "scry_err.h"
#include "unwind_internal.h"

_Thread_local struct unwind *unwind__current;

/* Our accessors may be called with our unwind_t or, through _UPT_find_proc_info, with the
 * _UPT argument: the sample under way is the one in this thread. */
static struct unwind *ctx(void *arg)
{
    return unwind__current ? unwind__current : arg;
}

static int acc_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *valp, int write,
                          void *arg)
{
    if (write) /* never write to the target */
        return -UNW_EINVAL;
    uint64_t v;
    if (unwind__read_word(ctx(arg), addr, &v) != 0)
        return -UNW_EINVAL;
    *valp = v;
    return 0;
}

/* Register N of user_regs_struct, in libunwind's x86-64 numbering. */
static int reg_get(const struct user_regs_struct *r, unw_regnum_t reg, unw_word_t *out)
{
    switch (reg) {
    case UNW_X86_64_RAX:
        *out = r->rax;
        break;
    case UNW_X86_64_RDX:
        *out = r->rdx;
        break;
    case UNW_X86_64_RCX:
        *out = r->rcx;
        break;
    case UNW_X86_64_RBX:
        *out = r->rbx;
        break;
    case UNW_X86_64_RSI:
        *out = r->rsi;
        break;
    case UNW_X86_64_RDI:
        *out = r->rdi;
        break;
    case UNW_X86_64_RBP:
        *out = r->rbp;
        break;
    case UNW_X86_64_RSP:
        *out = r->rsp;
        break;
    case UNW_X86_64_R8:
        *out = r->r8;
        break;
    case UNW_X86_64_R9:
        *out = r->r9;
        break;
    case UNW_X86_64_R10:
        *out = r->r10;
        break;
    case UNW_X86_64_R11:
        *out = r->r11;
        break;
    case UNW_X86_64_R12:
        *out = r->r12;
        break;
    case UNW_X86_64_R13:
        *out = r->r13;
        break;
    case UNW_X86_64_R14:
        *out = r->r14;
        break;
    case UNW_X86_64_R15:
        *out = r->r15;
        break;
    case UNW_X86_64_RIP:
        *out = r->rip;
        break;
    default:
        return -UNW_EBADREG;
    }
    return 0;
}

static int acc_access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *valp, int write,
                          void *arg)
{
    if (write)
        return -UNW_EREADONLYREG;
    return reg_get(&ctx(arg)->regs, reg, valp);
}

static int acc_access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
                            void *arg)
{
    return -UNW_EBADREG; /* DWARF CFI on x86-64 never needs them to find a caller */
}

static void acc_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
    _UPT_put_unwind_info(as, pi, ctx(arg)->upt);
}

static int acc_get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dilap, void *arg)
{
    return -UNW_ENOINFO; /* no dynamically registered unwind info in CPython targets */
}

static int acc_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
    return -UNW_EINVAL; /* scry never resumes a target through libunwind */
}

static int acc_get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
                             unw_word_t *offp, void *arg)
{
    unwind_sym_t s;
    unwind__symbolize(ctx(arg), addr, 0, &s);
    if (!s.symbol)
        return -UNW_ENOINFO;
    snprintf(buf, len, "%s", s.symbol);
    if (offp)
        *offp = s.offset;
    return 0;
}

static int acc_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                              int need_unwind_info, void *arg)
{
    return unwind__find_proc_info(as, ip, pi, need_unwind_info, ctx(arg));
}

static unw_accessors_t scry_accessors = {
    .find_proc_info = acc_find_proc_info,
    .put_unwind_info = acc_put_unwind_info,
    .get_dyn_info_list_addr = acc_get_dyn_info_list_addr,
    .access_mem = acc_access_mem,
    .access_reg = acc_access_reg,
    .access_fpreg = acc_access_fpreg,
    .resume = acc_resume,
    .get_proc_name = acc_get_proc_name,
};

/* libunwind's register-state cache (per IP: how to find the caller) is global to the
 * address space. UNW_CACHE_PER_THREAD would avoid its lock, which masks signals (two
 * sigprocmask system calls per frame, most of an unwind's cost), but Debian's libunwind
 * 1.6 is built without per-thread caches and silently turns it into the global policy. */
static unw_addr_space_t new_as(unw_accessors_t *acc)
{
    unw_addr_space_t as = unw_create_addr_space(acc, 0);
    if (!as)
        return NULL;
    unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
    unw_set_cache_size(as, UNWIND_RS_CACHE_SIZE, 0);
    return as;
}

unwind_t *unwind_new(pid_t pid)
{
    rmem_t *src = rmem_open_pid(pid);
    return src ? unwind_new_src(src) : NULL;
}

/* The base name of the target's executable, interned into U->exe_base. */
static void set_exe_base(struct unwind *u)
{
    char exe[4096];
    if (rmem_is_live(u->mem)) {
        char link[64];
        snprintf(link, sizeof link, "/proc/%d/exe", (int)u->pid);
        ssize_t len = readlink(link, exe, sizeof exe - 1);
        if (len <= 0)
            return;
        exe[len] = '\0';
        char *del = strstr(exe, " (deleted)");
        if (del)
            *del = '\0';
    } else if (rmem_exe_path(u->mem, exe, sizeof exe) != 0) {
        return;
    }
    const char *base = strrchr(exe, '/');
    u->exe_base = strtab_intern(u->strings, base ? base + 1 : exe);
}

unwind_t *unwind_new_src(rmem_t *src)
{
    if (!src)
        return NULL;
    struct unwind *u = calloc(1, sizeof *u);
    if (!u) {
        rmem_free(src);
        return NULL;
    }
    u->pid = rmem_pid(src);
    u->mem = src;
    u->strings = strtab_new();
    u->as = new_as(&scry_accessors);
    /* libunwind's own per-ELF search reads /proc/PID: only for a live process */
    u->upt = rmem_is_live(src) ? _UPT_create(u->pid) : NULL;
    if (!u->strings || !u->as || (rmem_is_live(src) && !u->upt) || unwind__mem_init(u) != 0)
        goto fail;
    set_exe_base(u);
    return u;
fail:
    unwind_free(u);
    return NULL;
}

void unwind_free(unwind_t *u)
{
    if (!u)
        return;
    unwind__syms_fini(u);
    unwind__objs_fini(u);
    unwind__mem_fini(u);
    if (u->as)
        unw_destroy_addr_space(u->as);
    if (u->stock_as)
        unw_destroy_addr_space(u->stock_as);
    if (u->upt)
        _UPT_destroy(u->upt);
    if (u->stock_upt)
        _UPT_destroy(u->stock_upt);
    strtab_free(u->strings);
    rmem_free(u->mem);
    free(u);
}

int unwind_flush(unwind_t *u)
{
    if (!u)
        return 0;
    unwind__syms_fini(u);
    unwind__objs_fini(u);
    unwind__mem_flush(u);
    unw_flush_cache(u->as, 0, 0);
    if (u->stock_as)
        unw_flush_cache(u->stock_as, 0, 0);
    return 0;
}

int unwind_set_stock_accessors(unwind_t *u, int stock)
{
    if (!u)
        return SCRY_E_INVAL;
    if (stock && !u->stock_as) {
        u->stock_as = new_as(&_UPT_accessors);
        if (!u->stock_as)
            return SCRY_E_NOMEM;
    }
    u->stock = stock != 0;
    return 0;
}

unwind_stats_t unwind_stats(const unwind_t *u)
{
    unwind_stats_t z = {0};
    return u ? u->st : z;
}

/* Why PTRACE_GETREGS failed: the thread is gone, or not in a ptrace-stop of ours. */
static int getregs_error(pid_t pid, pid_t tid, int errnum)
{
    if (errnum == ESRCH) {
        if (syscall(SYS_tgkill, pid, tid, 0) != 0 && errno == ESRCH)
            return SCRY_E_GONE;
        return SCRY_E_INVAL;
    }
    return scry_err_from_errno(errnum);
}

/* The frame loop over address space AS (accessor argument ARG), from the registers and
 * stack already set up in U. */
static int walk(struct unwind *u, unw_addr_space_t as, void *arg, unwind_frame_t *frames,
                size_t max, size_t *n)
{
    unwind__current = u->stock && as != u->as ? NULL : u;
    unw_cursor_t c;
    if (unw_init_remote(&c, as, arg) != 0) {
        unwind__current = NULL;
        u->st.step_errors++;
        return 0;
    }
    size_t i = 0;
    uint64_t prev_sp = 0;
    int prev_signal = 0;
    for (;;) {
        unw_word_t ip = 0, sp = 0;
        if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || unw_get_reg(&c, UNW_REG_SP, &sp) != 0 ||
            ip == 0)
            break;
        /* The stack grows down: a caller's sp is above its callee's. Anything else is a
         * loop or garbage, except right after a signal frame (sigaltstack). */
        if (i > 0 && sp <= prev_sp && !prev_signal) {
            u->st.loops++;
            break;
        }
        unwind_sym_t s;
        unwind__symbolize(u, ip, i > 0 && !prev_signal, &s);
        frames[i] = (unwind_frame_t){.ip = ip,
                                     .sp = sp,
                                     .symbol = s.symbol,
                                     .lib = s.lib,
                                     .offset = s.offset,
                                     .is_eval = s.is_eval,
                                     .in_python = s.in_python};
        i++;
        if (i >= max) {
            u->st.truncated++;
            break;
        }
        prev_sp = sp;
        prev_signal = unw_is_signal_frame(&c) > 0;
        int r = unw_step(&c);
        if (r == 0)
            break;
        if (r < 0) {
            u->st.step_errors++;
            break;
        }
    }
    unwind__current = NULL;
    u->st.frames += i;
    *n = i;
    return 0;
}

/* The start of an unwind of thread TID: a new generation of U's caches. Returns MAX capped
 * at UNWIND_MAX_DEPTH; 0 (nothing to do) leaves U as it was. */
static size_t begin(unwind_t *u, pid_t tid, size_t max)
{
    if (max > UNWIND_MAX_DEPTH)
        max = UNWIND_MAX_DEPTH;
    if (max) {
        u->gen++;
        u->tid = tid;
    }
    return max;
}

int unwind_thread(unwind_t *u, pid_t tid, unwind_frame_t *frames, size_t max, size_t *n)
{
    if (n)
        *n = 0;
    if (!u || !frames || !n || tid <= 0 || !rmem_is_live(u->mem))
        return SCRY_E_INVAL;
    if ((max = begin(u, tid, max)) == 0)
        return 0;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &u->regs) != 0)
        return getregs_error(u->pid, tid, errno);
    u->st.samples++;

    unw_addr_space_t as = u->as;
    void *arg = u;
    if (u->stock) {
        /* The stock path, for comparison: libunwind's own ptrace accessors. */
        if (!u->stock_upt || u->stock_tid != tid) {
            if (u->stock_upt)
                _UPT_destroy(u->stock_upt);
            u->stock_upt = _UPT_create(tid);
            if (!u->stock_upt)
                return SCRY_E_NOMEM;
            u->stock_tid = tid;
        }
        as = u->stock_as;
        arg = u->stock_upt;
    } else {
        int rc = unwind__stack_snapshot(u, u->regs.rsp);
        if (rc == SCRY_E_GONE || rc == SCRY_E_PERM)
            return rc;
    }

    return walk(u, as, arg, frames, max, n);
}

int unwind_copied(unwind_t *u, pid_t tid, const unwind_regs_t *regs, const void *stack, size_t len,
                  unwind_frame_t *frames, size_t max, size_t *n)
{
    if (n)
        *n = 0;
    if (!u || !regs || !frames || !n || (len && !stack))
        return SCRY_E_INVAL;
    if ((max = begin(u, tid, max)) == 0)
        return 0;
    u->st.copies++;
    memset(&u->regs, 0, sizeof u->regs);
    u->regs.rax = regs->ax;
    u->regs.rbx = regs->bx;
    u->regs.rcx = regs->cx;
    u->regs.rdx = regs->dx;
    u->regs.rsi = regs->si;
    u->regs.rdi = regs->di;
    u->regs.rbp = regs->bp;
    u->regs.rsp = regs->sp;
    u->regs.rip = regs->ip;
    u->regs.r8 = regs->r8;
    u->regs.r9 = regs->r9;
    u->regs.r10 = regs->r10;
    u->regs.r11 = regs->r11;
    u->regs.r12 = regs->r12;
    u->regs.r13 = regs->r13;
    u->regs.r14 = regs->r14;
    u->regs.r15 = regs->r15;
    u->stack_ext = stack;
    u->stack_lo = regs->sp;
    u->stack_len = len > UNWIND_STACK_MAX ? UNWIND_STACK_MAX : len;
    u->stack_end = 1;
    u->frozen = 1;
    u->short_read = 0;
    int rc = walk(u, u->as, u, frames, max, n);
    if (u->short_read)
        u->st.copy_short++;
    u->frozen = 0;
    u->stack_ext = NULL;
    u->stack_len = 0;
    return rc;
}

int unwind_describe_ip(unwind_t *u, uint64_t ip, unwind_frame_t *out)
{
    if (!u || !out)
        return SCRY_E_INVAL;
    unwind_sym_t s;
    unwind__symbolize(u, ip, 0, &s);
    *out = (unwind_frame_t){.ip = ip,
                            .symbol = s.symbol,
                            .lib = s.lib,
                            .offset = s.offset,
                            .is_eval = s.is_eval,
                            .in_python = s.in_python};
    return 0;
}

int unwind_ip_in_python(unwind_t *u, uint64_t ip)
{
    const unwind_obj_t *o = u ? unwind__obj_find(u, ip) : NULL;
    return o && o->in_python;
}
