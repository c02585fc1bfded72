/* shim_python.c - what the shim knows about the interpreter it lives in: the Python API
 * (found with dlsym at run time: libpython is never linked, so this works with a shared
 * libpython and with a static python executable that exports its API), the PyMem hooks,
 * and reading the calling thread's own Python stack.
 *
 * PyMem hooks: domains MEM and OBJ are wrapped (as tracemalloc does), delegating to the
 * allocators already installed, so pymalloc stays in use. RAW is not wrapped: RAW is
 * plain malloc, which the native hook sees (a block from RAW is 'native' origin). While a
 * hook calls the wrapped allocator, shim__tls.in_py is set (the native slow path then
 * does nothing) and the hook restores the countdown it saved before the call, so a
 * pymalloc fall-through to malloc is counted once, as python.
 *
 * Stacks: frames are read in-process, directly, from the calling thread's own tstate
 * (PyGILState_GetThisThreadState), with the offsets scry published in the ring
 * header. Only the thread itself pushes and pops its frames, and it is busy in the shim,
 * so its chain is stable whether or not it holds the GIL (NOGIL flag when not). Before trusting
 * those offsets, the first walks read through process_vm_readv on ourselves (a bad pointer gives
 * EFAULT, not SIGSEGV) and check that every code pointer is a code object (ob_type ==
 * &PyCode_Type). Any failure: no frames, ever.
 */
#include "shim_so.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* PyMemAllocatorEx (3.5+) */
typedef struct shim_pyalloc {
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
    void *(*realloc)(void *ctx, void *ptr, size_t new_size);
    void (*free)(void *ctx, void *ptr);
} shim_pyalloc_t;

enum { PYMEM_RAW = 0, PYMEM_MEM = 1, PYMEM_OBJ = 2 };

#define PY_OB_TYPE                                                                                 \
    8 /* offsetof(PyObject, ob_type): release and Py_DEBUG builds 3.8+ (only                       \
       * Py_TRACE_REFS builds differ; a wrong type fails the walk check) */
#define FRAME_OWNED_BY_CSTACK 3
#define WALK_MAX_STEPS        256 /* frames skipped or kept, whichever first */
#define VALIDATE_WALKS        8   /* good safe walks before trusting direct reads */

static struct {
    int state; /* 0 unresolved, 1 resolving, 2 resolved, 3 no Python */
    int (*is_initialized)(void);
    int (*add_pending)(int (*)(void *), void *);
    void (*get_alloc)(int, shim_pyalloc_t *);
    void (*set_alloc)(int, shim_pyalloc_t *);
    void *(*tstate_current)(void);
    void *(*tstate_this)(void);
    int (*is_finalizing)(void);  /* Py_IsFinalizing (3.13+) or _Py_IsFinalizing (3.7+) */
    void *const *finalizing_var; /* 3.6: &_Py_Finalizing */
    uintptr_t code_type;
    int major, minor;
    int scheduled; /* atomic */
    int installed;
    int teardown_scheduled; /* atomic */
    shim_pyalloc_t old[3];
    int stacks;      /* 0 unknown, 1 ok, -1 bad */
    int no_vm_readv; /* process_vm_readv refused (seccomp): safe reads probe instead */
    int good_walks;
    int bad_walks;
} py;

/* ---- resolution and hook installation ------------------------------------------------- */

static void parse_version(void)
{
    const unsigned long *hex = dlsym(RTLD_DEFAULT, "Py_Version"); /* 3.11+ */
    if (hex) {
        py.major = (int)((*hex >> 24) & 0xff);
        py.minor = (int)((*hex >> 16) & 0xff);
        return;
    }
    const char *(*getv)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    const char *s = getv ? getv() : NULL;
    if (!s)
        return;
    int maj = 0, min = 0, i = 0;
    for (; i < 4 && s[i] >= '0' && s[i] <= '9'; i++)
        maj = maj * 10 + (s[i] - '0');
    if (s[i++] != '.')
        return;
    for (int j = 0; j < 4 && s[i] >= '0' && s[i] <= '9'; j++, i++)
        min = min * 10 + (s[i] - '0');
    py.major = maj;
    py.minor = min;
}

static void resolve_python(void)
{
    int st = 0;
    if (!__atomic_compare_exchange_n(&py.state, &st, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return;
    py.is_initialized = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    py.add_pending = (int (*)(int (*)(void *), void *))dlsym(RTLD_DEFAULT, "Py_AddPendingCall");
    py.get_alloc = (void (*)(int, shim_pyalloc_t *))dlsym(RTLD_DEFAULT, "PyMem_GetAllocator");
    py.set_alloc = (void (*)(int, shim_pyalloc_t *))dlsym(RTLD_DEFAULT, "PyMem_SetAllocator");
    py.tstate_this = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    py.tstate_current = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyThreadState_GetUnchecked");
    if (!py.tstate_current) /* <= 3.12 */
        py.tstate_current = (void *(*)(void))dlsym(RTLD_DEFAULT, "_PyThreadState_UncheckedGet");
    py.code_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyCode_Type");
    py.is_finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
    if (!py.is_finalizing)
        py.is_finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
    if (!py.is_finalizing)
        py.finalizing_var = (void *const *)dlsym(RTLD_DEFAULT, "_Py_Finalizing");
    parse_version();
    int ok = py.is_initialized && py.add_pending && py.get_alloc && py.set_alloc && py.major == 3;
    __atomic_store_n(&py.state, ok ? 2 : 3, __ATOMIC_RELEASE);
}

/* Ends a PyMem hook's call of the allocator under it: restores the thread's IN_PY flag to
 * PREV and the allocation countdown to LEFT (what the native hook counted meanwhile is this
 * call's own bytes), then counts the N bytes at P as a Python allocation. */
static inline void py_count(shim_tls_t *t, uint8_t prev, int64_t left, void *p, size_t n,
                            uint8_t flags)
{
    t->in_py = prev;
    t->alloc_left = left;
    if (SHIM_UNLIKELY((t->alloc_left -= (int64_t)n) < 0))
        shim__alloc_slow(p, n, SCRY_RING_ORIGIN_PYTHON, flags);
}

static void *hook_malloc(void *ctx, size_t n)
{
    shim_pyalloc_t *o = ctx;
    shim_tls_t *t = &shim__tls;
    uint8_t prev = t->in_py;
    int64_t left = t->alloc_left;
    t->in_py = 1;
    void *p = o->malloc(o->ctx, n);
    py_count(t, prev, left, p, n, 0);
    return p;
}

static void *hook_calloc(void *ctx, size_t a, size_t b)
{
    shim_pyalloc_t *o = ctx;
    shim_tls_t *t = &shim__tls;
    uint8_t prev = t->in_py;
    int64_t left = t->alloc_left;
    t->in_py = 1;
    void *p = o->calloc(o->ctx, a, b);
    size_t n;
    if (__builtin_mul_overflow(a, b, &n))
        n = 0; /* the allocator refused it: nothing allocated */
    py_count(t, prev, left, p, n, 0);
    return p;
}

static void *hook_realloc(void *ctx, void *p, size_t n)
{
    shim_pyalloc_t *o = ctx;
    shim_tls_t *t = &shim__tls;
    if (p && SHIM_UNLIKELY(shim__live_maybe(p)))
        shim__free_slow(p, SCRY_RING_REC_REALLOC);
    uint8_t prev = t->in_py;
    int64_t left = t->alloc_left;
    t->in_py = 1;
    void *q = o->realloc(o->ctx, p, n);
    py_count(t, prev, left, q, n, p ? SCRY_RING_REC_REALLOC : 0);
    return q;
}

static void hook_free(void *ctx, void *p)
{
    shim_pyalloc_t *o = ctx;
    if (SHIM_UNLIKELY(shim__live_maybe(p)) && p)
        shim__free_slow(p, 0);
    o->free(o->ctx, p);
}

/* Runs in the main thread with the GIL held (a pending call). */
static int install_hooks(void *arg)
{
    (void)arg;
    if (py.installed)
        return 0;
    const shim_ring_view_t *v = shim__view_get();
    shim__view_put(v);
    if (!v) { /* the session ended before this ran: the next attach schedules it again */
        __atomic_store_n(&py.scheduled, 0, __ATOMIC_RELEASE);
        return 0;
    }
    for (int d = PYMEM_MEM; d <= PYMEM_OBJ; d++) {
        py.get_alloc(d, &py.old[d]);
        if (!py.old[d].malloc || !py.old[d].free)
            return 0;
    }
    for (int d = PYMEM_MEM; d <= PYMEM_OBJ; d++) {
        shim_pyalloc_t a = {&py.old[d], hook_malloc, hook_calloc, hook_realloc, hook_free};
        py.set_alloc(d, &a);
    }
    py.installed = 1;
    shim__state_set(SCRY_RING_SHIM_PY_HOOKS);
    return 0;
}

int shim__py_unhook(void)
{
    if (!py.installed)
        return 0;
    for (int d = PYMEM_MEM; d <= PYMEM_OBJ; d++) {
        shim_pyalloc_t cur;
        py.get_alloc(d, &cur);
        if (cur.malloc != hook_malloc || cur.ctx != &py.old[d])
            return 0; /* someone wrapped ours (tracemalloc...): ours stay, passing through */
    }
    for (int d = PYMEM_MEM; d <= PYMEM_OBJ; d++)
        py.set_alloc(d, &py.old[d]);
    py.installed = 0;
    __atomic_store_n(&py.scheduled, 0, __ATOMIC_RELEASE);
    return 0;
}

static int teardown_cb(void *arg)
{
    (void)arg;
    __atomic_store_n(&py.teardown_scheduled, 0, __ATOMIC_RELEASE);
    shim__teardown(); /* when it cannot finish, a later slow path schedules it again */
    return 0;
}

void shim__py_schedule_teardown(void)
{
    if (__atomic_load_n(&py.state, __ATOMIC_ACQUIRE) != 2 ||
        __atomic_load_n(&py.teardown_scheduled, __ATOMIC_RELAXED) || !py.is_initialized() ||
        shim__py_finalizing())
        return;
    int expect = 0;
    if (!__atomic_compare_exchange_n(&py.teardown_scheduled, &expect, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return;
    if (py.add_pending(teardown_cb, NULL) != 0)
        __atomic_store_n(&py.teardown_scheduled, 0, __ATOMIC_RELEASE); /* queue full */
}

int shim__py_finalizing(void)
{
    if (__atomic_load_n(&py.state, __ATOMIC_ACQUIRE) != 2)
        return 0;
    if (py.is_finalizing)
        return py.is_finalizing() != 0; /* an atomic load in the runtime: any thread, no GIL */
    return py.finalizing_var && __atomic_load_n(py.finalizing_var, __ATOMIC_RELAXED) != NULL;
}

void shim__py_poll(const shim_ring_view_t *v)
{
    if (SHIM_LIKELY(__atomic_load_n(&py.scheduled, __ATOMIC_RELAXED)))
        return;
    int st = __atomic_load_n(&py.state, __ATOMIC_ACQUIRE);
    if (st == 0) {
        resolve_python();
        st = __atomic_load_n(&py.state, __ATOMIC_ACQUIRE);
    }
    if (st == 3) {
        shim__state_set(SCRY_RING_SHIM_NOPYTHON);
        return;
    }
    if (st != 2 || !py.is_initialized())
        return;
    int32_t lmaj = __atomic_load_n(&v->hdr->layout.py_major, __ATOMIC_RELAXED);
    int32_t lmin = __atomic_load_n(&v->hdr->layout.py_minor, __ATOMIC_RELAXED);
    if (lmaj != 0 && (lmaj != py.major || lmin != py.minor)) { /* 0: not published yet */
        shim__state_set(SCRY_RING_SHIM_VERSION_MISMATCH);
        py.stacks = -1;
    }
    int expect = 0;
    if (!__atomic_compare_exchange_n(&py.scheduled, &expect, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return;
    if (py.add_pending(install_hooks, NULL) != 0) {
        __atomic_store_n(&py.scheduled, 0, __ATOMIC_RELEASE); /* queue full: retry later */
        return;
    }
    shim__state_set(SCRY_RING_SHIM_PY_SCHEDULED);
}

int shim__py_settled(void)
{
    return __atomic_load_n(&py.scheduled, __ATOMIC_RELAXED) ||
           __atomic_load_n(&py.state, __ATOMIC_RELAXED) == 3;
}

void shim__py_atfork_child(void)
{
    /* Nothing to undo: hooks stay installed (pass-through), the child never records. */
}

/* ---- stacks ----------------------------------------------------------------------------- */

typedef struct reader {
    int safe; /* read through process_vm_readv */
    int failed;
} reader_t;

static int plausible(uint64_t p)
{
    return p >= 4096 && p < ((uint64_t)1 << 47) && (p & 7) == 0;
}

/* Whether the byte at ADDR can be read, asked of the kernel without touching it:
 * rt_sigprocmask copies its 8-byte set in (EFAULT when it cannot) before it looks at HOW,
 * which is invalid here (EINVAL), so nothing changes. The walks' safe reads use it where
 * process_vm_readv is refused: Docker's default seccomp profile allows that call only to
 * containers with CAP_SYS_PTRACE, and without a safe read no stack would ever be trusted.
 * The 8-byte word around ADDR lies within ADDR's page (pages are multiples of 8). */
static int readable(uint64_t addr)
{
    return syscall(SYS_rt_sigprocmask, -1, (void *)(uintptr_t)(addr & ~(uint64_t)7), NULL,
                   (size_t)8) != 0 &&
           errno == EINVAL;
}

/* Copies LEN (8, 4 or 1) bytes from ADDR in fixed-size copies: no call to (our own) memcpy. */
static void copy_direct(uint64_t addr, void *buf, size_t len)
{
    const void *src = (const void *)(uintptr_t)addr;
    if (len == 8)
        __builtin_memcpy(buf, src, 8);
    else if (len == 4)
        __builtin_memcpy(buf, src, 4);
    else
        __builtin_memcpy(buf, src, 1);
}

static void rd(reader_t *r, uint64_t addr, void *buf, size_t len)
{
    if (r->failed) {
        memset(buf, 0, len);
        return;
    }
    if (!r->safe) {
        copy_direct(addr, buf, len);
        return;
    }
    struct iovec l = {buf, len}, rm = {(void *)(uintptr_t)addr, len};
    int saved = errno, ok = 1;
    if (!py.no_vm_readv) {
        ok = process_vm_readv(getpid(), &l, 1, &rm, 1, 0) == (ssize_t)len;
        if (!ok && (errno == EPERM || errno == ENOSYS)) /* refused, not a bad address */
            py.no_vm_readv = 1;
    }
    if (py.no_vm_readv) {
        ok = readable(addr) && readable(addr + len - 1);
        if (ok)
            copy_direct(addr, buf, len);
    }
    errno = saved; /* the allocator's caller keeps its errno */
    if (!ok) {
        r->failed = 1;
        memset(buf, 0, len);
    }
}

static uint64_t rd_ptr(reader_t *r, uint64_t base, int64_t off)
{
    uint64_t v = 0;
    if (off < 0 || off > 4096 || !plausible(base)) {
        r->failed = 1;
        return 0;
    }
    rd(r, base + (uint64_t)off, &v, sizeof v);
    return v;
}

static int is_code(reader_t *r, uint64_t obj)
{
    return plausible(obj) && rd_ptr(r, obj, PY_OB_TYPE) == py.code_type && !r->failed;
}

/* Walks from TSTATE; returns frames kept, or -1 when the layout looks wrong. */
static int walk(reader_t *r, const struct scry_ring_layout *L, uint64_t ts, uint64_t *code,
                int32_t *instr, unsigned max, uint8_t *flags)
{
    unsigned n = 0;
    int style = L->frame_style;
    uint64_t f = rd_ptr(r, ts, L->tstate_frame);
    if (style == 1 || style == 2)
        f = f ? rd_ptr(r, f, L->cframe_current_frame) : 0;
    for (int steps = 0; f && !r->failed && steps < WALK_MAX_STEPS; steps++) {
        if (n == max) {
            *flags |= SCRY_RING_REC_TRUNCATED;
            break;
        }
        if (style == 0) {
            uint64_t c = rd_ptr(r, f, L->frame_code);
            int32_t lasti = 0;
            if (L->frame_lasti < 0 || L->frame_lasti > 4096)
                return -1;
            rd(r, f + (uint64_t)L->frame_lasti, &lasti, sizeof lasti);
            if (!is_code(r, c))
                return -1;
            code[n] = c;
            instr[n++] = py.minor == 10 ? lasti * 2 : lasti;
            f = rd_ptr(r, f, L->frame_back);
            continue;
        }
        uint8_t owner = 0;
        if (style >= 2 && L->iframe_owner >= 0 && L->iframe_owner < 4096) {
            rd(r, f + (uint64_t)L->iframe_owner, &owner, 1);
            if (owner == FRAME_OWNED_BY_CSTACK) {
                f = rd_ptr(r, f, L->iframe_previous);
                continue;
            }
        }
        uint64_t c = rd_ptr(r, f, L->iframe_code) & ~(uint64_t)7; /* 3.14+: a _PyStackRef */
        uint64_t ip = rd_ptr(r, f, L->iframe_instr);
        if (is_code(r, c)) {
            int64_t off = (int64_t)(ip - (c + (uint64_t)L->code_adaptive));
            if (L->code_adaptive < 0 || off < -(1 << 20) || off > (1 << 30))
                off = -1;
            code[n] = c;
            instr[n++] = (int32_t)off;
        } else if (style < 3 || r->failed) {
            return -1; /* 3.11/3.12 frames always hold a code object */
        }
        f = rd_ptr(r, f, L->iframe_previous);
    }
    return r->failed ? -1 : (int)n;
}

unsigned shim__py_stack(const shim_ring_view_t *v, uint64_t *code, int32_t *instr, unsigned max,
                        uint8_t *flags)
{
    if (py.stacks < 0 || __atomic_load_n(&py.state, __ATOMIC_ACQUIRE) != 2 || !py.tstate_current ||
        !py.tstate_this || !py.code_type)
        return 0;
    /* This thread's own tstate. Its frames can only be changed by this thread, which is
     * here, in the shim: they are stable even when it released the GIL (e.g. numpy's
     * copies). Without a tstate (a thread Python never saw) there is no location. */
    void *ts = py.tstate_this();
    if (!ts)
        return 0;
    if (py.tstate_current() != ts)
        *flags |= SCRY_RING_REC_NOGIL;
    struct scry_ring_layout L = v->hdr->layout; /* one copy: scry may not change it */
    if (L.py_major != py.major || L.py_minor != py.minor || L.frame_style < 0 ||
        L.frame_style > 3) {
        py.stacks = -1;
        shim__state_set(SCRY_RING_SHIM_VERSION_MISMATCH);
        return 0;
    }
    reader_t r = {py.stacks != 1, 0};
    int n = walk(&r, &L, (uint64_t)(uintptr_t)ts, code, instr, max, flags);
    if (n < 0) {
        if (!r.safe) /* cannot happen with a validated layout and the GIL held */
            return 0;
        if (++py.bad_walks >= 2) {
            py.stacks = -1;
            shim__state_set(SCRY_RING_SHIM_STACKS_BAD);
        }
        return 0;
    }
    if (r.safe && n > 0 && ++py.good_walks >= VALIDATE_WALKS) {
        py.stacks = 1;
        shim__state_set(SCRY_RING_SHIM_STACKS_OK);
    }
    return (unsigned)n;
}
