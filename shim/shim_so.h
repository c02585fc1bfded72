/* shim_so.h - state of libscry-shim.so itself: per-thread counters, the real allocator
 * functions, and the slow paths the interposed functions call. */
#ifndef SCRY_SHIM_SO_H
#define SCRY_SHIM_SO_H

#include <stddef.h>
#include <stdint.h>

#include "shim_internal.h"

/* While no ring is usable, threads re-enter the slow path every this many bytes, to notice
 * a (re-)attach: a thread cannot be reached from another, so this bounds what a session
 * misses of each thread that existed before it (less than one sample at the default mean;
 * 16 MiB hid a whole slowly allocating thread pool from a second session). Without any
 * ring the slow path is two loads (shim__alloc_slow), so the cost is nil. */
#define SHIM_IDLE_STRIDE ((int64_t)64 << 10)
/* Until the PyMem hooks are scheduled, slow paths run at least every this many bytes (the
 * stride is split, not shortened: no bias), so the hooks go in right after Py init. */
#define SHIM_POLL_STRIDE ((int64_t)32 << 10)

/* Per-thread state: small, initial-exec TLS (the fast path is fs-relative). */
typedef struct shim_tls {
    int64_t alloc_left; /* bytes until the next allocation sample */
    int64_t copy_left;  /* bytes until the next copy sample */
    int64_t alloc_rest; /* stride still to go after alloc_left (see shim__clamp) */
    int64_t copy_rest;
    uint64_t rng;  /* xorshift64* state, 0 = unseeded */
    int32_t tid;   /* cached gettid(), 0 = unknown */
    uint8_t busy;  /* inside the shim's slow path: hooks pass through */
    uint8_t in_py; /* inside a PyMem hook's call of the wrapped allocator */
    uint8_t alloc_armed;
    uint8_t copy_armed;
    uint8_t probe; /* shim__interposed() is probing: 1 asked, 2 our malloc was reached */
} shim_tls_t;

extern __thread shim_tls_t shim__tls __attribute__((tls_model("initial-exec")));

/* The allocator and copy functions the shim forwards to. */
typedef struct shim_real {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void (*free)(void *);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    void *(*memcpy)(void *, const void *, size_t);
    void *(*memmove)(void *, const void *, size_t);
    void *(*memcpy_chk)(void *, const void *, size_t, size_t);
    void *(*memmove_chk)(void *, const void *, size_t, size_t);
} shim_real_t;

extern shim_real_t shim__real;

/* shim_hooks.c: resolves shim__real (idempotent). Returns 0 once resolved. */
int shim__resolve(void);
/* Nonzero when this library's malloc is the process's malloc (launch mode). */
int shim__interposed(void);

/* The exported hooks under hidden names (shim_hooks.c): their addresses in this library.
 * (Taking &malloc here gives whatever the global lookup binds: libc's, when injected.) */
#define SHIM_HIDDEN __attribute__((visibility("hidden")))
SHIM_HIDDEN void *shim__hook_malloc(size_t n);
SHIM_HIDDEN void *shim__hook_calloc(size_t a, size_t b);
SHIM_HIDDEN void *shim__hook_realloc(void *p, size_t n);
SHIM_HIDDEN void shim__hook_free(void *p);
SHIM_HIDDEN int shim__hook_posix_memalign(void **pp, size_t al, size_t n);
SHIM_HIDDEN void *shim__hook_aligned_alloc(size_t al, size_t n);
SHIM_HIDDEN void *shim__hook_memalign(size_t al, size_t n);
SHIM_HIDDEN void *shim__hook_valloc(size_t n);
SHIM_HIDDEN void *shim__hook_pvalloc(size_t n);
SHIM_HIDDEN void *shim__hook_memcpy(void *d, const void *s, size_t n);
SHIM_HIDDEN void *shim__hook_memmove(void *d, const void *s, size_t n);
SHIM_HIDDEN void *shim__hook_memcpy_chk(void *d, const void *s, size_t n, size_t dl);
SHIM_HIDDEN void *shim__hook_memmove_chk(void *d, const void *s, size_t n, size_t dl);

/* shim_got.c: attach mode's interposition by relocation patching (docs/memory.md).
 * Redirects the GOT slots of malloc & co., memcpy & co., dlopen and dlmopen in every loaded
 * object except this library, libc, ld.so and the vDSO, to the hooks above; objects loaded
 * later are patched when the redirected dlopen returns. Idempotent and never blocks (a walk
 * in progress on another thread is redone by that thread). Call only when the shim is not
 * preloaded. Returns 0, or -1 when the real functions cannot be resolved (nothing patched).
 * Writes its counters into HDR (may be NULL). */
int shim__got_attach(struct scry_ring_header *hdr);
/* Gives every slot shim__got_attach redirected (in objects still loaded) back the function
 * it forwards to, and forgets which objects were examined (the next attach patches again).
 * Returns 0, or -1 when a walk is in progress on another thread (nothing done). */
int shim__got_detach(void);

/* shim_core.c: slow paths. */
void shim__alloc_slow(void *p, size_t n, uint8_t origin, uint8_t flags);
void shim__free_slow(void *p, uint8_t flags);
void shim__copy_slow(void *dst, size_t n);
/* The active ring view, or NULL. A non-NULL view stays mapped until shim__view_put: every
 * access to a ring is bracketed by these two (shim_core.c explains the reclamation). */
const shim_ring_view_t *shim__view_get(void);
void shim__view_put(const shim_ring_view_t *v);
/* Sets SCRY_RING_SHIM_* bits in the active ring's header (no-op without a ring). */
void shim__state_set(uint32_t bits);
/* Lets go of what a finished session left: unmaps retired rings once no thread is inside
 * one, then (no ring active) restores the GOT slots and removes the PyMem hooks. Run by the
 * main thread with the GIL held (a pending call). Never blocks. Returns 0 when done, -1 to
 * be asked again later (a slow path will). */
int shim__teardown(void);
/* Nonzero while a retired ring or the hooks of a finished session are still to undo. */
int shim__release_pending(void);

/* shim_python.c */
/* Resolves the Python API once and schedules the PyMem hook installation when the
 * interpreter is initialised. Cheap after the hooks are installed. */
void shim__py_poll(const shim_ring_view_t *v);
/* Reads the calling thread's Python stack (leaf first) into CODE/INSTR, at most MAX
 * frames. Returns the count (0 when unknown) and ORs SCRY_RING_REC_* into *FLAGS. */
unsigned shim__py_stack(const shim_ring_view_t *v, uint64_t *code, int32_t *instr, unsigned max,
                        uint8_t *flags);
/* Nonzero once the PyMem hook installation has been scheduled (or is impossible). */
int shim__py_settled(void);
/* Schedules shim__teardown on the main thread (Py_AddPendingCall), once at a time. */
void shim__py_schedule_teardown(void);
/* Removes the PyMem hooks (GIL held) when they are still the installed allocators, so the
 * next attach installs them again. Returns 0 (also when another wrapper sits on top of
 * them: they then stay, as pass-throughs). */
int shim__py_unhook(void);

/* 1 once the interpreter has begun its teardown (Py_Finalize): from then on nothing is
 * recorded, so each line's net memory is what it kept while the program ran. */
int shim__py_finalizing(void);
/* Called in the child after fork. */
void shim__py_atfork_child(void);

#endif
