/* shim_core.c - the shim's process-wide state: attaching to a ring, deciding whether to
 * record, and the slow paths that turn a sample into a ring record.
 *
 * Launch mode: the constructor attaches to $SCRY_RING. Attach mode: an injector dlopen()s
 * the library and calls scry_shim_attach(). Either way the shim becomes a pass-through as
 * soon as the ring is disabled, its heartbeat is stale, or the process is a fork child.
 */
#include "shim_so.h"
#include "scry_shim.h"
#include "../common/scry_err.h"
#include "../common/scry_time.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SHIM_MAX_VIEWS   16
#define SHIM_MAX_RING_MB 1024
#define SHIM_PATH_MAX    256

static shim_ring_view_t views[SHIM_MAX_VIEWS]; /* never unmapped: threads may be inside */
static unsigned nviews;
static shim_ring_view_t *active_view; /* atomic */
static char active_path[SHIM_PATH_MAX];
static int attach_busy; /* atomic try-lock: attach never blocks */
static int forked_child;
static int debug_enabled;

static void debug(const char *a, const char *b)
{
    if (!debug_enabled)
        return;
    const char *parts[4] = {"scry-shim: ", a, b ? b : "", "\n"};
    for (int i = 0; i < 4; i++) {
        ssize_t r = write(2, parts[i], strlen(parts[i]));
        (void)r;
    }
}

struct scry_ring_header *shim__header(void)
{
    shim_ring_view_t *v = __atomic_load_n(&active_view, __ATOMIC_ACQUIRE);
    return v ? v->hdr : NULL;
}

void shim__state_set(uint32_t bits)
{
    shim_ring_view_t *v = __atomic_load_n(&active_view, __ATOMIC_ACQUIRE);
    if (v && (__atomic_load_n(&v->hdr->shim_state, __ATOMIC_RELAXED) & bits) != bits)
        __atomic_fetch_or(&v->hdr->shim_state, bits, __ATOMIC_RELAXED);
}

const shim_ring_view_t *shim__active(uint64_t now)
{
    shim_ring_view_t *v = __atomic_load_n(&active_view, __ATOMIC_ACQUIRE);
    if (!v || __atomic_load_n(&forked_child, __ATOMIC_RELAXED))
        return NULL;
    struct scry_ring_header *h = v->hdr;
    /* A heartbeat a little in the future is normal (NOW was taken before it was read and
     * the thread may have been preempted in between); only a far-future one (a garbage
     * header) is refused, so a dead daemon is still noticed. */
    uint64_t hb = __atomic_load_n(&h->heartbeat_ns, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&h->magic, __ATOMIC_RELAXED) != SCRY_RING_MAGIC ||
        !__atomic_load_n(&h->enabled, __ATOMIC_ACQUIRE) ||
        (int64_t)(now - hb) > (int64_t)SCRY_RING_HEARTBEAT_STALE_NS ||
        (int64_t)(hb - now) > 30 * (int64_t)SCRY_RING_HEARTBEAT_STALE_NS) {
        shim__state_set(SCRY_RING_SHIM_PASSTHROUGH);
        return NULL;
    }
    if (SHIM_UNLIKELY(shim__py_finalizing())) {
        shim__state_set(SCRY_RING_SHIM_FINALIZING);
        return NULL;
    }
    return v;
}

static void thread_seed(shim_tls_t *t)
{
    if (!t->tid)
        t->tid = (int32_t)syscall(SYS_gettid);
    if (!t->rng)
        t->rng = (scry_now_ns() * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)t->tid << 32) ^
                 (uint64_t)(uintptr_t)t;
}

static void emit(const shim_ring_view_t *v, uint8_t kind, uint8_t origin, uint64_t addr,
                 uint64_t size, uint64_t weight, uint8_t flags, uint64_t now, int stack)
{
    uint64_t pos;
    struct scry_ring_record *r = shim__ring_claim(v, &pos);
    if (!r) {
        shim__ring_count(v, kind, weight, 1);
        return;
    }
    r->pos = pos;
    r->addr = addr;
    r->size = size;
    r->weight = weight;
    r->time_ns = now;
    r->tid = shim__tls.tid;
    r->kind = kind;
    r->origin = origin;
    r->reserved = 0;
    unsigned nf = 0;
    if (stack)
        nf = shim__py_stack(v, r->code, r->instr, SCRY_RING_MAX_FRAMES, &flags);
    r->nframes = (uint8_t)nf;
    r->flags = flags;
    int lost = shim__ring_commit(r, pos) != 0;
    shim__ring_count(v, kind, weight, lost);
}

/* Common entry of the sampling slow paths. Returns the active view with t->busy set, or
 * NULL (busy left as it was) after re-arming the countdown for idle mode. */
static const shim_ring_view_t *enter(shim_tls_t *t, uint64_t *now)
{
    t->busy = 1;
    thread_seed(t);
    *now = scry_now_ns();
    const shim_ring_view_t *v = shim__active(*now);
    if (v)
        shim__py_poll(v);
    return v;
}

/* A countdown went negative. If part of the stride was held back (REST), this was only a
 * poll point: give the rest back and report whether the real stride is crossed too. */
static int crossed(int64_t *left, int64_t *rest)
{
    if (*rest) {
        *left += *rest;
        *rest = 0;
    }
    return *left < 0;
}

/* While the Python hooks are not scheduled yet, hold back all but SHIM_POLL_STRIDE of the
 * countdown so that the slow path (which schedules them) runs soon again. */
static void clamp(int64_t *left, int64_t *rest)
{
    if (SHIM_UNLIKELY(*left > SHIM_POLL_STRIDE) && !shim__py_settled()) {
        *rest = *left - SHIM_POLL_STRIDE;
        *left = SHIM_POLL_STRIDE;
    }
}

void shim__alloc_slow(void *p, size_t n, uint8_t origin, uint8_t flags)
{
    shim_tls_t *t = &shim__tls;
    if (SHIM_UNLIKELY(t->probe)) {
        t->probe = 2;
        return;
    }
    if (origin == SCRY_RING_ORIGIN_NATIVE && t->in_py)
        return; /* the PyMem hook around us counts these bytes (it restores the countdown) */
    if (t->busy)
        return; /* our own allocations; stays negative, sampled on the next call */
    uint64_t now;
    const shim_ring_view_t *v = enter(t, &now);
    uint64_t mean = v ? __atomic_load_n(&v->hdr->alloc_mean, __ATOMIC_RELAXED) : 0;
    if (!v || mean == 0) {
        t->alloc_left = SHIM_IDLE_STRIDE;
        t->alloc_armed = 0;
        t->busy = 0;
        return;
    }
    if (mean > ((uint64_t)1 << 40))
        mean = (uint64_t)1 << 40;
    if (!t->alloc_armed) { /* first sample point of this thread (or after idling) */
        t->alloc_armed = 1;
        t->alloc_rest = 0;
        t->alloc_left = shim__stride(&t->rng, mean) - (int64_t)n;
    }
    if (!crossed(&t->alloc_left, &t->alloc_rest)) {
        clamp(&t->alloc_left, &t->alloc_rest);
        t->busy = 0;
        return;
    }
    t->alloc_left = shim__stride(&t->rng, mean);
    clamp(&t->alloc_left, &t->alloc_rest);
    if (p) {
        uint64_t w = shim__weight(n, mean);
        if (shim__live_insert((uint64_t)(uintptr_t)p, n, w, origin) != 0) {
            flags |= SCRY_RING_REC_UNTRACKED;
            __atomic_fetch_add(&v->hdr->untracked, 1, __ATOMIC_RELAXED);
        }
        emit(v, SCRY_RING_ALLOC, origin, (uint64_t)(uintptr_t)p, n, w, flags, now, 1);
    }
    t->busy = 0;
}

void shim__free_slow(void *p, uint8_t flags)
{
    uint64_t size, weight;
    uint8_t origin;
    /* Always forget the block, even when not recording: its address will be reused. */
    if (shim__live_remove((uint64_t)(uintptr_t)p, &size, &weight, &origin) != 0)
        return;
    shim_tls_t *t = &shim__tls;
    if (t->busy)
        return;
    uint64_t now;
    const shim_ring_view_t *v = enter(t, &now);
    if (v)
        emit(v, SCRY_RING_FREE, origin, (uint64_t)(uintptr_t)p, size, weight, flags, now, 1);
    t->busy = 0;
}

void shim__copy_slow(void *dst, size_t n)
{
    shim_tls_t *t = &shim__tls;
    if (t->busy)
        return;
    uint64_t now;
    const shim_ring_view_t *v = enter(t, &now);
    uint64_t mean = v ? __atomic_load_n(&v->hdr->copy_mean, __ATOMIC_RELAXED) : 0;
    if (!v || mean == 0) {
        t->copy_left = SHIM_IDLE_STRIDE;
        t->copy_armed = 0;
        t->busy = 0;
        return;
    }
    if (mean > ((uint64_t)1 << 40))
        mean = (uint64_t)1 << 40;
    if (!t->copy_armed) {
        t->copy_armed = 1;
        t->copy_rest = 0;
        t->copy_left = shim__stride(&t->rng, mean) - (int64_t)n;
    }
    if (!crossed(&t->copy_left, &t->copy_rest)) {
        clamp(&t->copy_left, &t->copy_rest);
        t->busy = 0;
        return;
    }
    t->copy_left = shim__stride(&t->rng, mean);
    clamp(&t->copy_left, &t->copy_rest);
    emit(v, SCRY_RING_COPY, SCRY_RING_ORIGIN_NATIVE, (uint64_t)(uintptr_t)dst, n,
         shim__weight(n, mean), 0, now, 1);
    t->busy = 0;
}

/* ---- attaching ------------------------------------------------------------------------- */

static int map_ring(const char *path, shim_ring_view_t *out)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return SCRY_E_NOTFOUND;
    struct stat st;
    int err = SCRY_E_CORRUPT;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < SCRY_RING_HEADER_SIZE ||
        st.st_size > (off_t)SHIM_MAX_RING_MB << 20)
        goto out;
    void *mem = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) {
        err = SCRY_E_IO;
        goto out;
    }
    if (shim__ring_view(mem, (uint64_t)st.st_size, out) != 0) {
        munmap(mem, (size_t)st.st_size);
        goto out;
    }
    err = 0;
out:
    close(fd);
    return err;
}

/* Launch mode or not (probed once). In attach mode, native code is made to call the hooks
 * by rewriting its relocation slots (shim_got.c); again at each attach, for objects loaded
 * since by a path the dlopen hook did not see. */
static int preloaded = -1;

static void got_attach(const shim_ring_view_t *v)
{
    if (preloaded < 0)
        preloaded = shim__interposed();
    if (!preloaded)
        shim__got_attach(v->hdr);
}

SHIM_API int scry_shim_attach(const char *ring_path)
{
    if (!ring_path || !*ring_path || strlen(ring_path) >= SHIM_PATH_MAX)
        return SCRY_E_INVAL;
    if (__atomic_load_n(&forked_child, __ATOMIC_RELAXED))
        return SCRY_E_PERM;
    int expect = 0;
    if (!__atomic_compare_exchange_n(&attach_busy, &expect, 1, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return SCRY_E_AGAIN;
    shim_tls_t *t = &shim__tls;
    uint8_t was_busy = t->busy;
    t->busy = 1; /* our own allocations (dlsym) are not samples */
    int err = 0;
    shim__resolve();
    shim_ring_view_t *cur = __atomic_load_n(&active_view, __ATOMIC_ACQUIRE);
    if (cur && strcmp(active_path, ring_path) == 0 &&
        __atomic_load_n(&cur->hdr->magic, __ATOMIC_RELAXED) == SCRY_RING_MAGIC) {
        shim__py_poll(cur); /* idempotent: maybe Python is initialised by now */
        got_attach(cur);
        goto out;
    }
    if (nviews >= SHIM_MAX_VIEWS) {
        err = SCRY_E_NOMEM;
        goto out;
    }
    shim_ring_view_t v;
    err = map_ring(ring_path, &v);
    if (err) {
        debug("cannot map ring ", ring_path);
        goto out;
    }
    int32_t me = (int32_t)getpid(), owner = 0;
    int32_t target = __atomic_load_n(&v.hdr->target_pid, __ATOMIC_RELAXED);
    if ((target != 0 && target != me) ||
        (!__atomic_compare_exchange_n(&v.hdr->owner_pid, &owner, me, 0, __ATOMIC_ACQ_REL,
                                      __ATOMIC_RELAXED) &&
         owner != me)) {
        /* another process's ring (e.g. we are a subprocess that inherited SCRY_RING) */
        munmap(v.hdr, v.map_len);
        err = SCRY_E_PERM;
        goto out;
    }
    views[nviews] = v;
    strcpy(active_path, ring_path);
    __atomic_store_n(&active_view, &views[nviews], __ATOMIC_RELEASE);
    nviews++;
    __atomic_fetch_add(&v.hdr->attach_count, 1, __ATOMIC_RELAXED);
    if (preloaded < 0)
        preloaded = shim__interposed();
    shim__state_set(SCRY_RING_SHIM_ATTACHED | (preloaded ? SCRY_RING_SHIM_PRELOADED : 0));
    shim__py_poll(&views[nviews - 1]);
    got_attach(&views[nviews - 1]);
out:
    t->busy = was_busy;
    __atomic_store_n(&attach_busy, 0, __ATOMIC_RELEASE);
    return err;
}

SHIM_API int scry_shim_detach(void)
{
    __atomic_store_n(&active_view, NULL, __ATOMIC_RELEASE);
    return 0;
}

static void atfork_child(void)
{
    /* The child is single-threaded here; it must never write into the parent's ring. */
    __atomic_store_n(&forked_child, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&active_view, NULL, __ATOMIC_RELEASE);
    shim__tls.busy = 0;
    shim__py_atfork_child();
}

/* Launch mode: scry learns the interpreter's version (and so the frame layout the shim
 * needs) only once the program is mapped, which is now. When this process is Python, hold
 * it here, before main(), until scry has published the layout and enabled the ring, so
 * not a byte of the program's own allocations is missed. Bounded: after
 * SCRY_RING_LAUNCH_WAIT_NS (scry gone or slow) the program goes on and the shim stays a
 * pass-through until the ring is enabled. Other programs (shells and wrappers on the way
 * to Python) never wait. */
static void launch_wait(void)
{
    const shim_ring_view_t *v = __atomic_load_n(&active_view, __ATOMIC_ACQUIRE);
    if (!v || !dlsym(RTLD_DEFAULT, "Py_IsInitialized"))
        return;
    uint64_t start = scry_now_ns();
    while (!__atomic_load_n(&v->hdr->enabled, __ATOMIC_ACQUIRE)) {
        if (scry_now_ns() - start > SCRY_RING_LAUNCH_WAIT_NS)
            return;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

__attribute__((constructor)) static void shim_init(void)
{
    shim__resolve();
    const char *dbg = getenv("SCRY_SHIM_DEBUG");
    debug_enabled = dbg && *dbg && *dbg != '0';
    pthread_atfork(NULL, NULL, atfork_child);
    const char *path = getenv("SCRY_RING");
    if (path && *path) {
        int err = scry_shim_attach(path);
        if (err)
            debug("not attached to ", path);
        else
            launch_wait();
    }
}
