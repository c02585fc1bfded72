/* shim_core.c - the shim's process-wide state: attaching to a ring, deciding whether to
 * record, and the slow paths that turn a sample into a ring record.
 *
 * Launch mode: the constructor attaches to $SCRY_RING. Attach mode: an injector dlopen()s
 * the library and calls scry_shim_attach(). Either way the shim becomes a pass-through as
 * soon as the ring is disabled, its heartbeat is stale, or the process is a fork child.
 */
#include "shim_so.h"
#include "scry_shim.h"
#include "scry_err.h"
#include "scry_time.h"

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

#define SHIM_MAX_VIEWS   8 /* the active ring and retired ones not yet unmapped */
#define SHIM_MAX_RING_MB 1024
#define SHIM_PATH_MAX    256

/* Ring views and their reclamation.
 *
 * Every use of a view is bracketed: view_get() counts the thread in (inflight, seq_cst)
 * and then loads active_view (seq_cst); view_put() counts it out. A view is retired by
 * replacing active_view (seq_cst store) and unmapped only by reclaim(), which needs
 * inflight == 0 at one moment after that store: any thread counted in later loads the new
 * active_view and can never reach the retired one, and none counted in earlier is still
 * inside. reclaim() never waits: when threads are inside, it is retried later (next slow
 * path's teardown, next attach). views[] and view_state[] change only under attach_busy. */
enum { VIEW_FREE = 0, VIEW_ACTIVE, VIEW_RETIRED };
static shim_ring_view_t views[SHIM_MAX_VIEWS];
static uint8_t view_state[SHIM_MAX_VIEWS];
static uint8_t view_enabled_seen[SHIM_MAX_VIEWS]; /* atomic: scry enabled it once */
static int view_fd[SHIM_MAX_VIEWS];               /* the ring's fd kept for reclaim, or -1 */
static shim_ring_view_t *active_view;             /* atomic */
static uint64_t inflight;                         /* atomic: threads using a view */
static int release_pending;                       /* atomic: retired views or hooks to undo */
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

const shim_ring_view_t *shim__view_get(void)
{
    __atomic_fetch_add(&inflight, 1, __ATOMIC_SEQ_CST);
    shim_ring_view_t *v = __atomic_load_n(&active_view, __ATOMIC_SEQ_CST);
    if (!v)
        __atomic_fetch_sub(&inflight, 1, __ATOMIC_RELEASE);
    return v;
}

void shim__view_put(const shim_ring_view_t *v)
{
    if (v)
        __atomic_fetch_sub(&inflight, 1, __ATOMIC_RELEASE);
}

void shim__state_set(uint32_t bits)
{
    const shim_ring_view_t *v = shim__view_get();
    if (v && (__atomic_load_n(&v->hdr->shim_state, __ATOMIC_RELAXED) & bits) != bits)
        __atomic_fetch_or(&v->hdr->shim_state, bits, __ATOMIC_RELAXED);
    shim__view_put(v);
}

static void state_set_on(const shim_ring_view_t *v, uint32_t bits)
{
    if ((__atomic_load_n(&v->hdr->shim_state, __ATOMIC_RELAXED) & bits) != bits)
        __atomic_fetch_or(&v->hdr->shim_state, bits, __ATOMIC_RELAXED);
}

/* Retires V if it is still the active view (any thread, lock-free). */
static void retire(const shim_ring_view_t *v)
{
    shim_ring_view_t *expect = (shim_ring_view_t *)v;
    if (__atomic_compare_exchange_n(&active_view, &expect, NULL, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED))
        __atomic_store_n(&release_pending, 1, __ATOMIC_SEQ_CST);
}

/* Unmaps view slot I and closes its descriptor; the slot is free after. Caller holds
 * attach_busy and knows no thread is inside it. */
static void release_view(unsigned i)
{
    munmap(views[i].hdr, views[i].map_len);
    if (view_fd[i] >= 0)
        close(view_fd[i]);
    view_fd[i] = -1;
    memset(&views[i], 0, sizeof views[i]);
    view_state[i] = VIEW_FREE;
}

/* Unmaps the retired views when no thread can be inside one. Caller holds attach_busy.
 * Returns 0 when none is left, -1 when threads were inside (try again later). */
static int reclaim(void)
{
    int any = 0;
    for (unsigned i = 0; i < SHIM_MAX_VIEWS; i++)
        any |= view_state[i] == VIEW_RETIRED ||
               (view_state[i] == VIEW_ACTIVE &&
                __atomic_load_n(&active_view, __ATOMIC_SEQ_CST) != &views[i]);
    if (!any)
        return 0;
    if (__atomic_load_n(&inflight, __ATOMIC_SEQ_CST) != 0)
        return -1;
    shim_ring_view_t *act = __atomic_load_n(&active_view, __ATOMIC_SEQ_CST);
    for (unsigned i = 0; i < SHIM_MAX_VIEWS; i++)
        if (view_state[i] != VIEW_FREE && act != &views[i])
            release_view(i);
    return 0;
}

/* Nonzero when V may be written now; otherwise (disabled, scry gone, finalizing) the
 * caller passes through. A ring scry enabled once and then disabled, or whose
 * heartbeat stopped for SCRY_RING_RETIRE_NS (scry dead), is retired: the shim lets go of
 * it and of its hooks (shim__teardown). */
static int usable(const shim_ring_view_t *v, uint64_t now)
{
    if (__atomic_load_n(&forked_child, __ATOMIC_RELAXED))
        return 0;
    struct scry_ring_header *h = v->hdr;
    unsigned idx = (unsigned)(v - views);
    /* A heartbeat a little in the future is normal (NOW was taken before it was read and
     * the thread may have been preempted in between); only a far-future one (a garbage
     * header) is refused, so a dead scry is still noticed. */
    uint64_t hb = __atomic_load_n(&h->heartbeat_ns, __ATOMIC_ACQUIRE);
    int enabled = __atomic_load_n(&h->enabled, __ATOMIC_ACQUIRE) != 0;
    int64_t age = (int64_t)(now - hb);
    if (enabled && !__atomic_load_n(&view_enabled_seen[idx], __ATOMIC_RELAXED))
        __atomic_store_n(&view_enabled_seen[idx], 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&h->magic, __ATOMIC_RELAXED) != SCRY_RING_MAGIC ||
        (!enabled && __atomic_load_n(&view_enabled_seen[idx], __ATOMIC_RELAXED)) ||
        age > (int64_t)SCRY_RING_RETIRE_NS) {
        state_set_on(v, SCRY_RING_SHIM_PASSTHROUGH);
        retire(v);
        return 0;
    }
    if (!enabled || age > (int64_t)SCRY_RING_HEARTBEAT_STALE_NS ||
        (int64_t)(hb - now) > 30 * (int64_t)SCRY_RING_HEARTBEAT_STALE_NS) {
        state_set_on(v, SCRY_RING_SHIM_PASSTHROUGH);
        return 0;
    }
    if (SHIM_UNLIKELY(shim__py_finalizing())) {
        state_set_on(v, SCRY_RING_SHIM_FINALIZING);
        return 0;
    }
    return 1;
}

int shim__release_pending(void)
{
    return __atomic_load_n(&release_pending, __ATOMIC_RELAXED);
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

/* Nonzero when no ring is active and none is to be let go of: the slow paths only restart
 * the idle countdown (two relaxed loads, no clock, no shared counter). */
static int nothing_to_do(void)
{
    return !__atomic_load_n(&active_view, __ATOMIC_RELAXED) &&
           !__atomic_load_n(&release_pending, __ATOMIC_RELAXED);
}

/* Common entry of the sampling slow paths. Returns the active view, counted in (give it
 * back with leave()), with t->busy set; or NULL (busy left as it was) when not recording.
 * A thread that finds no ring while one is still to be let go of asks for the teardown. */
static const shim_ring_view_t *enter(shim_tls_t *t, uint64_t *now)
{
    t->busy = 1;
    thread_seed(t);
    *now = scry_now_ns();
    const shim_ring_view_t *v = shim__view_get();
    if (v && !usable(v, *now)) {
        shim__view_put(v);
        v = NULL;
    }
    if (v)
        shim__py_poll(v);
    else if (SHIM_UNLIKELY(__atomic_load_n(&release_pending, __ATOMIC_RELAXED)))
        shim__py_schedule_teardown();
    return v;
}

static void leave(shim_tls_t *t, const shim_ring_view_t *v)
{
    shim__view_put(v);
    t->busy = 0;
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

/* One sample point of a countdown (COPY: the copy countdown, else the allocation one) that
 * went negative at an event of N bytes. Returns the active view, entered (give it back with
 * leave()), with *NOW and the mean stride in *MEAN when this event is a sample; NULL when
 * it is not (not recording, or only a poll point), the countdown restarted and nothing
 * held. */
static const shim_ring_view_t *sample_point(shim_tls_t *t, int copy, size_t n, uint64_t *now,
                                            uint64_t *mean)
{
    int64_t *left = copy ? &t->copy_left : &t->alloc_left;
    int64_t *rest = copy ? &t->copy_rest : &t->alloc_rest;
    uint8_t *armed = copy ? &t->copy_armed : &t->alloc_armed;
    if (nothing_to_do()) {
        *left = SHIM_IDLE_STRIDE;
        *armed = 0;
        return NULL;
    }
    const shim_ring_view_t *v = enter(t, now);
    uint64_t m = 0;
    if (v)
        m = __atomic_load_n(copy ? &v->hdr->copy_mean : &v->hdr->alloc_mean, __ATOMIC_RELAXED);
    if (!v || m == 0) {
        *left = SHIM_IDLE_STRIDE;
        *armed = 0;
        leave(t, v);
        return NULL;
    }
    if (m > ((uint64_t)1 << 40))
        m = (uint64_t)1 << 40;
    if (!*armed) { /* first sample point of this thread (or after idling) */
        *armed = 1;
        *rest = 0;
        *left = shim__stride(&t->rng, m) - (int64_t)n;
    }
    if (!crossed(left, rest)) {
        clamp(left, rest);
        leave(t, v);
        return NULL;
    }
    *left = shim__stride(&t->rng, m);
    clamp(left, rest);
    *mean = m;
    return v;
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
    uint64_t now, mean;
    const shim_ring_view_t *v = sample_point(t, 0, n, &now, &mean);
    if (!v)
        return;
    if (p) {
        uint64_t w = shim__weight(n, mean);
        if (shim__live_insert((uint64_t)(uintptr_t)p, n, w, origin) != 0) {
            flags |= SCRY_RING_REC_UNTRACKED;
            __atomic_fetch_add(&v->hdr->untracked, 1, __ATOMIC_RELAXED);
        }
        emit(v, SCRY_RING_ALLOC, origin, (uint64_t)(uintptr_t)p, n, w, flags, now, 1);
    }
    leave(t, v);
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
    leave(t, v);
}

void shim__copy_slow(void *dst, size_t n)
{
    shim_tls_t *t = &shim__tls;
    if (t->busy)
        return;
    uint64_t now, mean;
    const shim_ring_view_t *v = sample_point(t, 1, n, &now, &mean);
    if (!v)
        return;
    emit(v, SCRY_RING_COPY, SCRY_RING_ORIGIN_NATIVE, (uint64_t)(uintptr_t)dst, n,
         shim__weight(n, mean), 0, now, 1);
    leave(t, v);
}

/* ---- attaching ------------------------------------------------------------------------- */

/* "fd:N" (N decimal, < 2^20): the ring is scry's memfd, inherited as descriptor N (launch
 * mode). Returns N, or -1 for anything else. */
static int ring_fd_number(const char *path)
{
    if (strncmp(path, "fd:", 3) != 0)
        return -1;
    int n = 0, digits = 0;
    for (const char *p = path + 3; *p; p++, digits++) {
        if (*p < '0' || *p > '9' || digits >= 7)
            return -1;
        n = n * 10 + (*p - '0');
    }
    return digits && n < (1 << 20) ? n : -1;
}

/* Maps the ring at PATH into OUT. *KEPT_FD: the inherited descriptor of an "fd:N" ring that
 * was mapped (closed when the view is reclaimed), else -1. */
static int map_ring(const char *path, shim_ring_view_t *out, int *kept_fd)
{
    /* An inherited descriptor stays open (not close-on-exec) while the ring is in use: the
     * programs this one execs into (a wrapper's Python) map it again. Once the ring is
     * retired (scry detached or died), reclaim() closes it, so the memfd's memory is not
     * held for the rest of the program's life. Anything there that is not a ring is refused
     * below (type, size, header), and a ring only by its target_pid. */
    *kept_fd = -1;
    int inherited = ring_fd_number(path);
    if (strncmp(path, "fd:", 3) == 0 && inherited < 0)
        return SCRY_E_INVAL;
    int fd = inherited >= 0 ? inherited : open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
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
    *kept_fd = inherited;
out:
    if (inherited < 0)
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

/* A free slot of views[] (reclaiming retired ones if needed), or -1. Under attach_busy. */
static int free_slot(void)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < SHIM_MAX_VIEWS; i++)
            if (view_state[i] == VIEW_FREE)
                return i;
        if (reclaim() != 0)
            return -1;
    }
    return -1;
}

/* Takes the attach try-lock and marks this thread busy (our own allocations, dlsym's
 * among them, are not samples), its previous flag in *WAS_BUSY. Returns 0 when another
 * attach, create or teardown holds it (nothing taken), else 1. */
static int attach_lock(uint8_t *was_busy)
{
    int expect = 0;
    if (!__atomic_compare_exchange_n(&attach_busy, &expect, 1, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return 0;
    *was_busy = shim__tls.busy;
    shim__tls.busy = 1;
    return 1;
}

static void attach_unlock(uint8_t was_busy)
{
    shim__tls.busy = was_busy;
    __atomic_store_n(&attach_busy, 0, __ATOMIC_RELEASE);
}

/* Makes the mapped ring V (its descriptor FD, or -1; PATH, or "" for an anonymous one) the
 * active view in SLOT: the view it replaces is unmapped once no thread is inside, the
 * ring counts one more attach and learns the shim's state; Python's hooks are scheduled
 * (the layout is checked once scry has published it). Caller holds attach_busy. */
static void activate(int slot, const shim_ring_view_t *v, int fd, const char *path)
{
    views[slot] = *v;
    view_fd[slot] = fd;
    __atomic_store_n(&view_enabled_seen[slot], 0, __ATOMIC_RELAXED);
    view_state[slot] = VIEW_ACTIVE;
    strcpy(active_path, path);
    shim_ring_view_t *old = __atomic_exchange_n(&active_view, &views[slot], __ATOMIC_SEQ_CST);
    if (old) {
        view_state[old - views] = VIEW_RETIRED;
        __atomic_store_n(&release_pending, 1, __ATOMIC_SEQ_CST);
    }
    reclaim();
    __atomic_fetch_add(&v->hdr->attach_count, 1, __ATOMIC_RELAXED);
    if (preloaded < 0)
        preloaded = shim__interposed();
    state_set_on(&views[slot],
                 SCRY_RING_SHIM_ATTACHED | (preloaded ? SCRY_RING_SHIM_PRELOADED : 0));
    shim__py_poll(&views[slot]);
    got_attach(&views[slot]);
}

SHIM_API int scry_shim_attach(const char *ring_path)
{
    if (!ring_path || !*ring_path || strlen(ring_path) >= SHIM_PATH_MAX)
        return SCRY_E_INVAL;
    if (__atomic_load_n(&forked_child, __ATOMIC_RELAXED))
        return SCRY_E_PERM;
    uint8_t was_busy;
    if (!attach_lock(&was_busy))
        return SCRY_E_AGAIN;
    int err = 0;
    shim__resolve();
    shim_ring_view_t *cur = __atomic_load_n(&active_view, __ATOMIC_ACQUIRE);
    if (cur && strcmp(active_path, ring_path) == 0 &&
        __atomic_load_n(&cur->hdr->magic, __ATOMIC_RELAXED) == SCRY_RING_MAGIC) {
        shim__py_poll(cur); /* idempotent: maybe Python is initialised by now */
        got_attach(cur);
        goto out;
    }
    int slot = free_slot();
    if (slot < 0) {
        err = SCRY_E_AGAIN; /* earlier rings still in use by a thread: try again */
        goto out;
    }
    shim_ring_view_t v;
    int kept_fd;
    err = map_ring(ring_path, &v, &kept_fd);
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
    activate(slot, &v, kept_fd, ring_path);
out:
    attach_unlock(was_busy);
    return err;
}

/* In a fork child, before it takes a ring of its own: the parent's rings, inherited as
 * mappings and descriptors, are let go (no thread of the child can be inside one: the
 * active view has been NULL since the fork), and the child is an ordinary process again.
 * Caller holds attach_busy. */
static void forget_parent_views(void)
{
    for (unsigned i = 0; i < SHIM_MAX_VIEWS; i++)
        if (view_state[i] != VIEW_FREE)
            release_view(i);
    active_path[0] = 0;
    __atomic_store_n(&release_pending, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&forked_child, 0, __ATOMIC_SEQ_CST);
}

/* Parses "NRECORDS:ALLOC_MEAN:COPY_MEAN" (decimal). Returns 0 or -1. */
static int parse_spec(const char *spec, uint64_t out[3])
{
    const char *p = spec;
    for (int i = 0; i < 3; i++) {
        uint64_t v = 0;
        int digits = 0;
        for (; *p >= '0' && *p <= '9' && digits < 16; p++, digits++)
            v = v * 10 + (uint64_t)(*p - '0');
        if (!digits || *p != (i < 2 ? ':' : '\0'))
            return -1;
        if (i < 2)
            p++;
        out[i] = v;
    }
    return 0;
}

SHIM_API int scry_shim_attach_new(const char *spec)
{
    uint64_t a[3];
    if (!spec || strlen(spec) >= SHIM_PATH_MAX || parse_spec(spec, a) != 0 ||
        a[0] < SCRY_RING_MIN_RECORDS || a[0] > SCRY_RING_MAX_RECORDS || (a[0] & (a[0] - 1)) ||
        SCRY_RING_HEADER_SIZE + a[0] * sizeof(struct scry_ring_record) > (uint64_t)SHIM_MAX_RING_MB
                                                                             << 20)
        return SCRY_E_INVAL;
    uint8_t was_busy;
    if (!attach_lock(&was_busy))
        return SCRY_E_AGAIN;
    if (__atomic_load_n(&forked_child, __ATOMIC_RELAXED))
        forget_parent_views(); /* a fork child (--subprocesses) gets a ring of its own */
    int rc = SCRY_E_AGAIN, fd = -1;
    void *mem = MAP_FAILED;
    uint64_t len = SCRY_RING_HEADER_SIZE + a[0] * sizeof(struct scry_ring_record);
    shim__resolve();
    int slot = free_slot();
    if (slot < 0)
        goto out;
    /* Anonymous, sealed to its size: scry maps the same pages (pidfd_getfd) and can rely on
     * them staying there; nothing is ever named in a file system, so nothing can be left
     * behind whenever scry dies. */
    rc = SCRY_E_IO;
    fd = memfd_create("scry-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        goto out;
    mem = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED)
        goto out;
    struct scry_ring_layout none;
    memset(&none, 0xff, sizeof none); /* published by scry before it enables the ring */
    none.py_major = none.py_minor = 0;
    int32_t me = (int32_t)getpid();
    shim_ring_view_t v;
    if (scry_ring_init(mem, len, a[0], a[1], a[2], me, &none, scry_now_ns(), 0) != 0 ||
        shim__ring_view(mem, len, &v) != 0) {
        rc = SCRY_E_INVAL;
        goto out;
    }
    v.hdr->owner_pid = me;
    activate(slot, &v, fd, ""); /* the descriptor is closed when the ring is unmapped */
    rc = fd;
    fd = -1;
    mem = MAP_FAILED;
out:
    if (mem != MAP_FAILED)
        munmap(mem, (size_t)len);
    if (fd >= 0)
        close(fd);
    attach_unlock(was_busy);
    return rc;
}

SHIM_API int scry_shim_detach(void)
{
    shim_ring_view_t *v = __atomic_load_n(&active_view, __ATOMIC_ACQUIRE);
    if (v)
        retire(v);
    return 0;
}

int shim__teardown(void)
{
    uint8_t was_busy;
    if (!attach_lock(&was_busy))
        return -1; /* an attach is running: it reclaims, and the next slow path asks again */
    /* Mark views that are no longer active as retired (a retire() by another thread). */
    shim_ring_view_t *act = __atomic_load_n(&active_view, __ATOMIC_SEQ_CST);
    for (unsigned i = 0; i < SHIM_MAX_VIEWS; i++)
        if (view_state[i] == VIEW_ACTIVE && act != &views[i])
            view_state[i] = VIEW_RETIRED;
    int rc = reclaim();
    /* Unhook only once every ring is unmapped: until then the hooks' slow paths are what
     * asks for this again. With a new session active, everything stays. */
    if (rc == 0 && !act) {
        if (preloaded == 0 && shim__got_detach() != 0)
            rc = -1;
        if (rc == 0 && shim__py_unhook() != 0)
            rc = -1;
    }
    if (rc == 0 || act)
        __atomic_store_n(&release_pending, 0, __ATOMIC_SEQ_CST);
    if (act)
        rc = 0;
    attach_unlock(was_busy);
    return rc;
}

static void atfork_child(void)
{
    /* The child is single-threaded here; it must never write into the parent's ring. */
    __atomic_store_n(&forked_child, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&active_view, NULL, __ATOMIC_RELEASE);
    /* the parent's other threads do not exist here: nobody is inside a view or an attach */
    __atomic_store_n(&inflight, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&attach_busy, 0, __ATOMIC_RELAXED);
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
    const shim_ring_view_t *v = shim__view_get();
    if (!v || !dlsym(RTLD_DEFAULT, "Py_IsInitialized")) {
        shim__view_put(v);
        return;
    }
    uint64_t start = scry_now_ns();
    while (!__atomic_load_n(&v->hdr->enabled, __ATOMIC_ACQUIRE)) {
        if (scry_now_ns() - start > SCRY_RING_LAUNCH_WAIT_NS)
            break;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    shim__view_put(v);
}

__attribute__((constructor)) static void shim_init(void)
{
    shim__resolve();
    const char *dbg = getenv("SCRY_SHIM_DEBUG");
    debug_enabled = dbg && *dbg && *dbg != '0';
    pthread_atfork(NULL, NULL, atfork_child);
    const char *path = getenv("SCRY_RING");
    if (preloaded < 0)
        preloaded = shim__interposed();
    /* SCRY_RING is launch mode's, for a preloaded shim. Loaded by an injector into a
     * program that inherited it (launch mode's fallback for a program in another root),
     * the ring is not ours to take, and waiting for it would hold the borrowed thread. */
    if (path && *path && !preloaded) {
        debug("loaded by an injector: ignoring SCRY_RING=", path);
    } else if (path && *path) {
        int err = scry_shim_attach(path);
        if (err)
            debug("not attached to ", path);
        else
            launch_wait();
    }
}
