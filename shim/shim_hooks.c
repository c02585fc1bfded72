/* shim_hooks.c - the interposed allocation and copy functions, and how the shim finds
 * the real ones.
 *
 * Every hook's fast path is: call the real function, subtract the size from a
 * thread-local countdown, branch. free() checks a one-load filter. Only when the
 * countdown goes negative (on average once per 'mean' bytes) or the filter says "maybe
 * sampled" does control reach shim_core.c.
 *
 * Before the real functions are known (dlsym itself allocates), allocations come from a
 * small static bump allocator; its blocks are recognised and never given to the real
 * free. This file is compiled with -fno-builtin and -fno-tree-loop-distribute-patterns
 * so that the compiler does not turn the copy fallback into a call of memcpy (ourselves).
 */
#include "shim_so.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* glibc's fortify entry points (no public prototype). */
void *__memcpy_chk(void *d, const void *s, size_t n, size_t dl);
void *__memmove_chk(void *d, const void *s, size_t n, size_t dl);

__thread shim_tls_t shim__tls __attribute__((tls_model("initial-exec")));

/* ---- bootstrap allocator ---------------------------------------------------------------- */

#define BOOT_SIZE (256u * 1024u)
static _Alignas(64) unsigned char boot_buf[BOOT_SIZE];
static uint64_t boot_used;

static inline int in_boot(const void *p)
{
    return (uintptr_t)p - (uintptr_t)boot_buf < BOOT_SIZE;
}

static void *boot_alloc(size_t n, size_t align)
{
    if (align < 16)
        align = 16;
    if (n > BOOT_SIZE || (align & (align - 1)) != 0 || align > 4096)
        return NULL;
    uint64_t need = (n + 15) & ~(uint64_t)15;
    for (int tries = 0; tries < 64; tries++) {
        uint64_t old = __atomic_load_n(&boot_used, __ATOMIC_RELAXED);
        uint64_t start = (old + 16 + align - 1) & ~(uint64_t)(align - 1); /* 16: size word */
        if (start + need > BOOT_SIZE)
            return NULL;
        if (__atomic_compare_exchange_n(&boot_used, &old, start + need, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            *(uint64_t *)(boot_buf + start - 8) = n; /* for realloc; memory is zero */
            /* Make free() take its slow path for this block (a permanent, harmless
             * filter hit): the fast path then needs no range check of its own. */
            uint64_t h = shim__live_hash((uint64_t)(uintptr_t)(boot_buf + start)) >>
                         (64 - SHIM_LIVE_FILTER_BITS);
            __atomic_fetch_add(&shim__live_filter[h], 1, __ATOMIC_RELAXED);
            return boot_buf + start;
        }
    }
    return NULL;
}

static void copy_bytes(void *d, const void *s, size_t n)
{
    volatile unsigned char *dd = d;
    const unsigned char *ss = s;
    if (dd < ss || dd >= ss + n) {
        for (size_t i = 0; i < n; i++)
            dd[i] = ss[i];
    } else {
        for (size_t i = n; i-- > 0;)
            dd[i] = ss[i];
    }
}

static void *boot_realloc(void *p, size_t n)
{
    uint64_t old = *(uint64_t *)((unsigned char *)p - 8);
    void *q = (shim__resolve() == 0) ? shim__real.malloc(n) : boot_alloc(n, 16);
    if (q)
        copy_bytes(q, p, old < n ? old : n);
    return q;
}

/* ---- trampolines used until the real functions are resolved ----------------------------- */

static void *tramp_malloc(size_t n)
{
    return shim__resolve() == 0 ? shim__real.malloc(n) : boot_alloc(n, 16);
}
static void *tramp_calloc(size_t a, size_t b)
{
    size_t n;
    if (__builtin_mul_overflow(a, b, &n))
        return NULL;
    return shim__resolve() == 0 ? shim__real.calloc(a, b) : boot_alloc(n, 16);
}
static void *tramp_realloc(void *p, size_t n)
{
    if (shim__resolve() == 0)
        return shim__real.realloc(p, n);
    return p ? boot_realloc(p, n) : boot_alloc(n, 16);
}
static void tramp_free(void *p)
{
    if (shim__resolve() == 0)
        shim__real.free(p);
}
static int tramp_posix_memalign(void **pp, size_t al, size_t n)
{
    if (shim__resolve() == 0)
        return shim__real.posix_memalign(pp, al, n);
    *pp = boot_alloc(n, al);
    return *pp ? 0 : ENOMEM;
}
static void *tramp_aligned_alloc(size_t al, size_t n)
{
    return shim__resolve() == 0 ? shim__real.aligned_alloc(al, n) : boot_alloc(n, al);
}
static void *tramp_memalign(size_t al, size_t n)
{
    return shim__resolve() == 0 ? shim__real.memalign(al, n) : boot_alloc(n, al);
}
static void *tramp_valloc(size_t n)
{
    return shim__resolve() == 0 ? shim__real.valloc(n) : boot_alloc(n, 4096);
}
static void *tramp_pvalloc(size_t n)
{
    return shim__resolve() == 0 ? shim__real.pvalloc(n) : boot_alloc((n + 4095) & ~4095ul, 4096);
}
static void *fallback_memcpy(void *d, const void *s, size_t n)
{
    copy_bytes(d, s, n);
    return d;
}
static void *fallback_memcpy_chk(void *d, const void *s, size_t n, size_t dl)
{
    if (n > dl)
        __builtin_trap();
    copy_bytes(d, s, n);
    return d;
}

shim_real_t shim__real = {
    .malloc = tramp_malloc,
    .calloc = tramp_calloc,
    .realloc = tramp_realloc,
    .free = tramp_free,
    .posix_memalign = tramp_posix_memalign,
    .aligned_alloc = tramp_aligned_alloc,
    .memalign = tramp_memalign,
    .valloc = tramp_valloc,
    .pvalloc = tramp_pvalloc,
    .memcpy = fallback_memcpy,
    .memmove = fallback_memcpy,
    .memcpy_chk = fallback_memcpy_chk,
    .memmove_chk = fallback_memcpy_chk,
};

/* ---- resolution --------------------------------------------------------------------------- */

static int resolve_state; /* 0 not yet, 1 in progress, 2 done */

static void *find(const char *name, const char *fallback)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f && fallback) /* dlopen'ed (attach mode): libc's own entry point */
        f = dlsym(RTLD_DEFAULT, fallback);
    return f;
}

#define SET_REAL(field, name, fallback)                                                            \
    do {                                                                                           \
        void *f_ = find(name, fallback);                                                           \
        if (f_)                                                                                    \
            __atomic_store_n((void **)&shim__real.field, f_, __ATOMIC_RELEASE);                    \
    } while (0)

int shim__resolve(void)
{
    int st = __atomic_load_n(&resolve_state, __ATOMIC_ACQUIRE);
    if (SHIM_LIKELY(st == 2))
        return 0;
    if (st == 1 ||
        !__atomic_compare_exchange_n(&resolve_state, &st, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return -1; /* being resolved (maybe by this very thread, from dlsym) */
    /* Resolve everything into locals first: a trampoline must never see a half state
     * where malloc is real but free is still the trampoline (that would be fine too, as
     * tramp_free resolves; but realloc of a real block through boot_realloc would not). */
    void *m = find("malloc", "__libc_malloc"), *c = find("calloc", "__libc_calloc");
    void *r = find("realloc", "__libc_realloc"), *f = find("free", "__libc_free");
    if (!m || !c || !r || !f) {
        __atomic_store_n(&resolve_state, 0, __ATOMIC_RELEASE);
        return -1;
    }
    SET_REAL(posix_memalign, "posix_memalign", NULL);
    SET_REAL(aligned_alloc, "aligned_alloc", NULL);
    SET_REAL(memalign, "memalign", "__libc_memalign");
    SET_REAL(valloc, "valloc", NULL);
    SET_REAL(pvalloc, "pvalloc", NULL);
    SET_REAL(memcpy, "memcpy", NULL);
    SET_REAL(memmove, "memmove", NULL);
    SET_REAL(memcpy_chk, "__memcpy_chk", NULL);
    SET_REAL(memmove_chk, "__memmove_chk", NULL);
    __atomic_store_n((void **)&shim__real.malloc, m, __ATOMIC_RELEASE);
    __atomic_store_n((void **)&shim__real.calloc, c, __ATOMIC_RELEASE);
    __atomic_store_n((void **)&shim__real.realloc, r, __ATOMIC_RELEASE);
    __atomic_store_n((void **)&shim__real.free, f, __ATOMIC_RELEASE);
    __atomic_store_n(&resolve_state, 2, __ATOMIC_RELEASE);
    return 0;
}

/* ---- the hooks ------------------------------------------------------------------------------ */

static inline void count_alloc(void *p, size_t n)
{
    shim_tls_t *t = &shim__tls;
    if (SHIM_UNLIKELY((t->alloc_left -= (int64_t)n) < 0))
        shim__alloc_slow(p, n, SCRY_RING_ORIGIN_NATIVE, 0);
}

SHIM_API void *malloc(size_t n)
{
    void *p = shim__real.malloc(n);
    count_alloc(p, n);
    return p;
}

SHIM_API void *calloc(size_t a, size_t b)
{
    void *p = shim__real.calloc(a, b);
    size_t n;
    if (!__builtin_mul_overflow(a, b, &n))
        count_alloc(p, n);
    return p;
}

/* free()'s slow path: returns 1 when P must not reach the real free (a bootstrap block). */
static __attribute__((noinline)) int free_filtered(void *p, uint8_t flags)
{
    if (in_boot(p))
        return 1;
    if (p)
        shim__free_slow(p, flags);
    return 0;
}

SHIM_API void free(void *p)
{
    if (SHIM_UNLIKELY(shim__live_maybe(p)) && free_filtered(p, 0))
        return;
    shim__real.free(p);
}

SHIM_API void *realloc(void *p, size_t n)
{
    if (SHIM_UNLIKELY(shim__live_maybe(p)) && free_filtered(p, SCRY_RING_REC_REALLOC))
        return boot_realloc(p, n);
    void *q = shim__real.realloc(p, n);
    shim_tls_t *t = &shim__tls;
    if (SHIM_UNLIKELY((t->alloc_left -= (int64_t)n) < 0))
        shim__alloc_slow(q, n, SCRY_RING_ORIGIN_NATIVE, p ? SCRY_RING_REC_REALLOC : 0);
    return q;
}

SHIM_API void *reallocarray(void *p, size_t a, size_t b)
{
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n);
}

SHIM_API int posix_memalign(void **pp, size_t al, size_t n)
{
    int r = shim__real.posix_memalign(pp, al, n);
    if (r == 0)
        count_alloc(*pp, n);
    return r;
}

SHIM_API void *aligned_alloc(size_t al, size_t n)
{
    void *p = shim__real.aligned_alloc(al, n);
    count_alloc(p, n);
    return p;
}

SHIM_API void *memalign(size_t al, size_t n)
{
    void *p = shim__real.memalign(al, n);
    count_alloc(p, n);
    return p;
}

SHIM_API void *valloc(size_t n)
{
    void *p = shim__real.valloc(n);
    count_alloc(p, n);
    return p;
}

SHIM_API void *pvalloc(size_t n)
{
    void *p = shim__real.pvalloc(n);
    count_alloc(p, n);
    return p;
}

static inline void count_copy(void *d, size_t n)
{
    shim_tls_t *t = &shim__tls;
    if (SHIM_UNLIKELY((t->copy_left -= (int64_t)n) < 0))
        shim__copy_slow(d, n);
}

SHIM_API void *memcpy(void *restrict d, const void *restrict s, size_t n)
{
    count_copy(d, n);
    return shim__real.memcpy(d, s, n);
}

SHIM_API void *memmove(void *d, const void *s, size_t n)
{
    count_copy(d, n);
    return shim__real.memmove(d, s, n);
}

/* _FORTIFY_SOURCE builds (Debian's python3.11) call these instead of memcpy/memmove. */
SHIM_API void *__memcpy_chk(void *d, const void *s, size_t n, size_t dl)
{
    if (SHIM_LIKELY(n <= dl))
        count_copy(d, n);
    return shim__real.memcpy_chk(d, s, n, dl);
}

SHIM_API void *__memmove_chk(void *d, const void *s, size_t n, size_t dl)
{
    if (SHIM_LIKELY(n <= dl))
        count_copy(d, n);
    return shim__real.memmove_chk(d, s, n, dl);
}

/* Launch mode: calls of "malloc" reach this library. Probed by a real call through the
 * PLT (dlsym would be fooled by a non-PIE executable's canonical PLT entry). */
int shim__interposed(void)
{
    shim_tls_t *t = &shim__tls;
    int64_t saved = t->alloc_left;
    t->probe = 1;
    t->alloc_left = -1; /* our malloc, if it is the one called, enters the slow path */
    void *volatile p = malloc(16);
    int ours = t->probe == 2;
    t->probe = 0;
    t->alloc_left = saved;
    free(p);
    return ours;
}

/* Hidden aliases of the hooks (declared in shim_so.h): what shim_got.c writes into the
 * relocation slots of other objects in attach mode. */
#if defined(__clang__)
#define SHIM_ALIAS(name, fn) extern __typeof(fn) name __attribute__((alias(#fn)))
#else /* copy(): the alias gets its target's attributes (-Wmissing-attributes) */
#define SHIM_ALIAS(name, fn) extern __typeof(fn) name __attribute__((copy(fn), alias(#fn)))
#endif
SHIM_ALIAS(shim__hook_malloc, malloc);
SHIM_ALIAS(shim__hook_calloc, calloc);
SHIM_ALIAS(shim__hook_realloc, realloc);
SHIM_ALIAS(shim__hook_free, free);
SHIM_ALIAS(shim__hook_posix_memalign, posix_memalign);
SHIM_ALIAS(shim__hook_aligned_alloc, aligned_alloc);
SHIM_ALIAS(shim__hook_memalign, memalign);
SHIM_ALIAS(shim__hook_valloc, valloc);
SHIM_ALIAS(shim__hook_pvalloc, pvalloc);
SHIM_ALIAS(shim__hook_memcpy, memcpy);
SHIM_ALIAS(shim__hook_memmove, memmove);
SHIM_ALIAS(shim__hook_memcpy_chk, __memcpy_chk);
SHIM_ALIAS(shim__hook_memmove_chk, __memmove_chk);
