/* sample.c - one snapshot of every thread's Python stack.
 *
 * The walk reads, in order: the interpreter and thread lists, each thread's current frame
 * and (3.11+) its whole data-stack chunk, the frame chains, a validation window of every
 * code object, the leaf instruction and the GIL state. Every read goes through the
 * prefetcher (prefetch.h), which serves it from one batched process_vm_readv planned by
 * the previous sample, so a steady-state sample costs about one system call.
 */
#include "internal.h"
#include "opcodes.h"
#include "prefetch.h"
#include "scry_err.h"
#include "scry_time.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TSTATE_READ_MAX          4096
#define FRAME_READ_MAX           512
#define CHUNK_READ_MAX           (256u * 1024)
#define CHUNK_SLACK              1024 /* room planned for the stack to grow by a sample */
#define CHUNK_ROOM_MIN           256  /* less room than this left in a page: plan the next */
#define READ_PAGE                4096 /* process_vm_readv pins whole pages (4 KiB on x86-64) */
#define CODE_BATCH_MAX           4096
#define FRAME_OWNED_BY_CSTACK    3
#define FRAME_OWNED_BY_GENERATOR 1             /* 3.11+ */
#define FRAME_OWNER_MAX          7             /* no version's enum _frameowner goes beyond */
#define NAMES_REFRESH_NS         1000000000ull /* thread names are reread at most once a second */
#define NAMES_INTERPS_MAX        8             /* interpreters whose threading module is read */

typedef struct raw_frame {
    raddr_t frame; /* the PyFrameObject (<= 3.10) or _PyInterpreterFrame */
    raddr_t code;
    uint32_t offset; /* byte offset of the current instruction */
    uint8_t entry;
    uint8_t has_offset;
} raw_frame_t;

typedef struct thread_work {
    raddr_t tstate;
    raddr_t interp;
    uint64_t pthread_id;
    int32_t tid;
    int32_t interp_id;
    raddr_t top_frame;
    raddr_t cframe;
    raddr_t chunk;
    uint8_t *chunk_buf;   /* the chunk as read (the later of two copies) */
    uint8_t *chunk_first; /* the copy read just before it (same length) */
    size_t chunk_len;
    size_t chunk_cap;
    raw_frame_t *raw;
    uint32_t nraw;
    uint8_t truncated;     /* the depth bound cut the chain (a legitimate deep stack) */
    uint8_t torn;          /* the chain or a code object changed under the reader */
    uint8_t torn_after;    /* torn by a check of the whole walk, not while walking */
    uint8_t top_moved;     /* careful: the current frame moved while the chunk was copied */
    uint8_t top_unchecked; /* careful: not checked so (no chunk copy): check_top_same */
    uint8_t leaf_idle;     /* <= 3.10: the current frame was not executing (entered or left) */
    uint8_t verify;        /* <= 3.10: check the chain against a second copy (verify_chain) */
    uint8_t odd_caller;    /* careful reader: a caller's instruction cannot call (read_once) */
    uint64_t odd_sig;      /* the signature of the last walk with an odd caller, else 0 */
    uint8_t *verify_buf;   /* that copy: nraw frame headers */
    size_t verify_cap;
    uint8_t leaf_instr[2];
    raddr_t leaf_instr_addr;
} thread_work_t;

struct pystate_snapshot {
    int finalizing;
    pystate_thread_t *threads;
    thread_work_t *work;
    size_t count;
    size_t cap;
};

pystate_snapshot_t *pystate_snapshot_new(void)
{
    return calloc(1, sizeof(pystate_snapshot_t));
}

void pystate_snapshot_free(pystate_snapshot_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->cap; i++) {
        free(s->threads[i].frames);
        free(s->threads[i].entry);
        free(s->threads[i].frame_addrs);
        free(s->work[i].raw);
        free(s->work[i].chunk_buf);
        free(s->work[i].chunk_first);
        free(s->work[i].verify_buf);
    }
    free(s->threads);
    free(s->work);
    free(s);
}

size_t pystate_snapshot_count(const pystate_snapshot_t *s)
{
    return s->count;
}

int pystate_snapshot_finalizing(const pystate_snapshot_t *s)
{
    return s->finalizing;
}

const pystate_thread_t *pystate_snapshot_thread(const pystate_snapshot_t *s, size_t i)
{
    return i < s->count ? &s->threads[i] : NULL;
}

static int snapshot_reserve(pystate_snapshot_t *s, size_t n)
{
    if (n <= s->cap)
        return 0;
    size_t ncap = s->cap ? s->cap * 2 : 16;
    while (ncap < n)
        ncap *= 2;
    pystate_thread_t *th = realloc(s->threads, ncap * sizeof *th);
    if (!th)
        return SCRY_E_NOMEM;
    s->threads = th;
    thread_work_t *w = realloc(s->work, ncap * sizeof *w);
    if (!w)
        return SCRY_E_NOMEM;
    s->work = w;
    memset(s->threads + s->cap, 0, (ncap - s->cap) * sizeof *th);
    memset(s->work + s->cap, 0, (ncap - s->cap) * sizeof *w);
    s->cap = ncap;
    return 0;
}

static int pf(pystate_target_t *t, raddr_t addr, void *buf, size_t len)
{
    return pystate__pf_read(t->prefetch, t->mem, addr, buf, len, 0);
}

/* A read whose moment in the batch does not matter (PF_LOOSE): list heads, a chunk's size, a
 * code object's key or bytecode, the GIL's holder. Frames and thread states go through pf(). */
static int pf_loose(pystate_target_t *t, raddr_t addr, void *buf, size_t len)
{
    return pystate__pf_read(t->prefetch, t->mem, addr, buf, len, PF_LOOSE);
}

/* Brent's cycle detection over a chain of frame addresses: a torn chain may loop through
 * any number of frames, not only to itself. */
typedef struct cycle {
    raddr_t mark;
    uint32_t power, steps;
} cycle_t;

/* Returns 1 when ADDR closes a loop of the chain walked so far. */
static int cycle_seen(cycle_t *c, raddr_t addr)
{
    if (c->power && addr == c->mark)
        return 1;
    if (c->steps == c->power) {
        c->mark = addr;
        c->power = c->power ? c->power * 2 : 1;
        c->steps = 0;
    }
    c->steps++;
    return 0;
}

/* Phase 1: the thread states of every interpreter. */
static int list_threads(pystate_target_t *t, pystate_snapshot_t *s)
{
    const pystate_layout_t *L = &t->layout;
    raddr_t interp = 0;
    int err;
    if (t->runtime)
        err = pf_loose(t, t->runtime + (uint64_t)L->runtime_interpreters_head, &interp, 8);
    else
        err = pf_loose(t, t->interp_head_addr, &interp, 8);
    if (err)
        return err == SCRY_E_FAULT ? SCRY_E_CORRUPT : err;
    size_t tsize = L->tstate_size > 0 && L->tstate_size < TSTATE_READ_MAX ? (size_t)L->tstate_size
                                                                          : TSTATE_READ_MAX;
    uint8_t tbuf[TSTATE_READ_MAX];
    s->count = 0;
    /* a list that loops (torn, or a hostile target's) ends at its first repeat; the threads
     * of all interpreters together are at most PYSTATE_MAX_THREADS */
    cycle_t icy = {0};
    for (int ni = 0; interp && ni < PYSTATE_MAX_INTERPS; ni++) {
        if (cycle_seen(&icy, interp)) {
            t->stats.torn++;
            break;
        }
        uint8_t ibuf[24];
        err = pf_loose(t, interp + (uint64_t)L->interp_next, ibuf, 8);
        if (!err)
            err = pf_loose(t, interp + (uint64_t)L->interp_tstate_head, ibuf + 8, 8);
        if (!err)
            err = pf_loose(t, interp + (uint64_t)(L->interp_id >= 0 ? L->interp_id : 0), ibuf + 16,
                           8);
        if (err == SCRY_E_FAULT)
            return ni == 0 ? SCRY_E_CORRUPT : 0;
        if (err)
            return err;
        raddr_t next_interp = pystate__u64_at(ibuf, 24, 0);
        raddr_t ts = pystate__u64_at(ibuf, 24, 8);
        int32_t iid = L->interp_id >= 0 ? (int32_t)pystate__u64_at(ibuf, 24, 16) : ni;
        cycle_t tcy = {0};
        for (; ts && s->count < PYSTATE_MAX_THREADS;) {
            if (cycle_seen(&tcy, ts)) {
                t->stats.torn++;
                break;
            }
            err = pf(t, ts, tbuf, tsize);
            if (err) {
                if (err == SCRY_E_FAULT) {
                    t->stats.torn++;
                    break;
                }
                return err;
            }
            if (pystate__u64_at(tbuf, tsize, L->tstate_interp) != interp) {
                t->stats.torn++; /* a stale or torn list */
                break;
            }
            if ((err = snapshot_reserve(s, s->count + 1)) != 0)
                return err;
            thread_work_t *w = &s->work[s->count];
            w->tstate = ts;
            w->interp = interp;
            w->interp_id = iid;
            w->pthread_id = pystate__u64_at(tbuf, tsize, L->tstate_thread_id);
            w->tid = L->tstate_native_thread_id >= 0
                         ? (int32_t)pystate__u64_at(tbuf, tsize, L->tstate_native_thread_id)
                         : 0;
            w->top_frame = pystate__u64_at(tbuf, tsize, L->tstate_frame);
            w->cframe = 0;
            if (L->cframe_current_frame >= 0) {
                w->cframe = w->top_frame;
                w->top_frame = 0;
            }
            w->chunk = L->tstate_datastack_chunk >= 0
                           ? pystate__u64_at(tbuf, tsize, L->tstate_datastack_chunk)
                           : 0;
            w->nraw = 0;
            w->truncated = 0;
            w->torn = 0;
            w->leaf_instr_addr = 0;
            s->count++;
            ts = pystate__u64_at(tbuf, tsize, L->tstate_next);
        }
        interp = next_interp;
    }
    return 0;
}

static int64_t max4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t m = a > b ? a : b;
    m = m > c ? m : c;
    return m > d ? m : d;
}

/* Bytes of an _PyInterpreterFrame (3.11+) that the walk reads: up to its last field used. */
static size_t iframe_header_len(const pystate_layout_t *L)
{
    size_t len =
        (size_t)max4(L->iframe_code, L->iframe_previous, L->iframe_instr,
                     L->iframe_owner > L->iframe_is_entry ? L->iframe_owner : L->iframe_is_entry) +
        8;
    return len < FRAME_READ_MAX ? len : FRAME_READ_MAX;
}

/* A length to read from BASE: at least NEED (unless MAX is less), at most MAX, and not past
 * the end of the page where BASE + NEED ends. */
static uint64_t within_page(raddr_t base, uint64_t need, uint64_t max)
{
    uint64_t page_end = ((base + need + READ_PAGE - 1) & ~(uint64_t)(READ_PAGE - 1)) - base;
    return max < page_end ? max : page_end;
}

/* A careful reader's copy of W's chunk (WANT bytes, twice, as read_frame_root's) in one
 * process_vm_readv between two reads of the thread's current-frame pointer: a frame popped
 * and pushed again at the same place during the copy (a loop around a call, a recursion)
 * leaves copies whose frames all look consistent yet come from different moments, and the
 * pointer then moved under them (top_moved; the same pointer is a frame that stayed: the
 * copy of microseconds leaves little room for one that left and came back). A copy that
 * does not read leaves the chunk uncopied and the pointer to check_top_same. Returns 0,
 * SCRY_E_GONE or SCRY_E_PERM. */
static int read_chunk_careful(pystate_target_t *t, thread_work_t *w, size_t want)
{
    const pystate_layout_t *L = &t->layout;
    raddr_t at = w->cframe ? w->cframe + (uint64_t)L->cframe_current_frame
                           : w->tstate + (uint64_t)L->tstate_frame;
    raddr_t tops[2] = {0, 0};
    rmem_iov_t iov[4] = {{at, &tops[0], 8},
                         {w->chunk, w->chunk_first, want},
                         {w->chunk, w->chunk_buf, want},
                         {at, &tops[1], 8}};
    int n = rmem_readv(t->mem, iov, 4);
    if (n == SCRY_E_GONE || n == SCRY_E_PERM)
        return n;
    if (n != 4)
        return 0;
    w->chunk_len = want;
    w->top_unchecked = 0;
    w->top_moved = tops[0] != w->top_frame || tops[1] != w->top_frame;
    return 0;
}

/* Phase 2, one thread: its current frame (3.11/3.12: behind cframe), then its data-stack
 * chunk up to just past that frame. Returns 0, or SCRY_E_GONE/SCRY_E_PERM/SCRY_E_NOMEM. */
static int read_frame_root(pystate_target_t *t, thread_work_t *w)
{
    const pystate_layout_t *L = &t->layout;
    w->chunk_len = 0;
    w->top_moved = 0;
    w->top_unchecked = t->torn_retries != 0; /* until the careful copy below checks it */
    if (w->cframe) {
        int err = pf(t, w->cframe + (uint64_t)L->cframe_current_frame, &w->top_frame, 8);
        if (err == SCRY_E_GONE || err == SCRY_E_PERM)
            return err;
        if (err) {
            w->top_frame = 0;
            t->stats.torn++;
        }
    }
    if (!w->chunk || !w->top_frame || L->chunk_size < 0)
        return 0;
    uint64_t size = 0;
    if (pf_loose(t, w->chunk + (uint64_t)L->chunk_size, &size, 8) != 0 || size < 64 ||
        size > (1ull << 30))
        return 0;
    /* Read the chunk up to just past the top frame when that lies inside it, but not into
     * a further page for bytes past the top frame's header (each page read costs a pin,
     * and the chunk is read twice). */
    uint64_t want = size;
    if (w->top_frame > w->chunk && w->top_frame - w->chunk < size) {
        uint64_t top = w->top_frame - w->chunk;
        want = within_page(w->chunk, top + iframe_header_len(L), top + FRAME_READ_MAX);
    }
    if (want > size)
        want = size;
    if (want > CHUNK_READ_MAX)
        want = CHUNK_READ_MAX;
    if (w->chunk_cap < want) {
        uint8_t *nb = realloc(w->chunk_buf, want);
        if (nb)
            w->chunk_buf = nb;
        uint8_t *nf = nb ? realloc(w->chunk_first, want) : NULL;
        if (!nb || !nf)
            return SCRY_E_NOMEM;
        w->chunk_first = nf;
        w->chunk_cap = want;
    }
    if (t->torn_retries)
        return read_chunk_careful(t, w, want);
    /* Twice in a row: a frame of the chain whose header differs between the copies was
     * pushed or popped while the chunk was read (walk_interpreter_frames). */
    if (pystate__pf_read_twice(t->prefetch, t->mem, w->chunk, w->chunk_first, w->chunk_buf, want) ==
        0) {
        w->chunk_len = want;
        /* Room for the stack to grow by the next sample: to the end of the page the copy
         * ends in, or into the next one when that leaves less than CHUNK_ROOM_MIN. */
        uint64_t slack = within_page(w->chunk, want + CHUNK_ROOM_MIN, want + CHUNK_SLACK);
        if (slack > size)
            slack = size;
        pystate__pf_plan(t->prefetch, w->chunk, slack < CHUNK_READ_MAX ? slack : want,
                         PF_RANGE_TWICE);
    }
    return 0;
}

/* Whether the 8 bytes at ADDR + OFF are the same in both copies of the chunk (1 when the
 * frame is not inside the copies: nothing to compare). */
static int same_in_both(const thread_work_t *w, raddr_t addr, int64_t off)
{
    if (off < 0 || !w->chunk_len || addr < w->chunk ||
        addr - w->chunk + (uint64_t)off + 8 > w->chunk_len)
        return 1;
    size_t at = (size_t)(addr - w->chunk) + (size_t)off;
    return memcmp(w->chunk_first + at, w->chunk_buf + at, 8) == 0;
}

/* Reads LEN bytes of a frame at ADDR, from the thread's chunk copy when it lies inside. */
static int frame_bytes(pystate_target_t *t, thread_work_t *w, raddr_t addr, uint8_t *buf,
                       size_t len)
{
    if (w->chunk_len && addr >= w->chunk && addr - w->chunk + len <= w->chunk_len) {
        memcpy(buf, w->chunk_buf + (addr - w->chunk), len);
        return 0;
    }
    return pf(t, addr, buf, len);
}

static int push_raw(thread_work_t *w, raddr_t frame, raddr_t code, uint32_t offset, int has_offset,
                    int entry)
{
    if (!w->raw) {
        w->raw = malloc(PYSTATE_MAX_DEPTH * sizeof *w->raw);
        if (!w->raw)
            return SCRY_E_NOMEM;
    }
    if (w->nraw >= PYSTATE_MAX_DEPTH) {
        w->truncated = 1;
        return SCRY_E_TRUNC;
    }
    w->raw[w->nraw++] = (raw_frame_t){frame, code, offset, (uint8_t)entry, (uint8_t)has_offset};
    return 0;
}

/* Whether a PyFrameObject copy says it is executing: f_executing != 0 up to 3.9; in 3.10
 * f_state FRAME_EXECUTING (0) or FRAME_UNWINDING (2, an exception on its way out). */
static int frame_executing(const pystate_layout_t *L, const uint8_t *buf, size_t len, int64_t off)
{
    int8_t v = (int8_t)pystate__u8_at(buf, len, off);
    if (L->major == 3 && L->minor == 10)
        return v == 0 || v == 2;
    return v != 0;
}

/* <= 3.10, a chain walked frame by frame (a read each) and found whole: every frame's
 * header copied again in one batch right after. The frames of a recursion are reused at
 * shifting depths (a code object's zombie frame and the free list rotate them), so frames
 * read at different moments can each be executing and still join into a chain that never
 * existed, longer than the real one; the batch takes microseconds where the walk took tens.
 * Below the leaf a frame is suspended in a call: its code, caller and instruction must be
 * the same in the copy; the leaf's code and caller too. Otherwise the walk is torn.
 * Returns 0 or SCRY_E_NOMEM. */
static int verify_chain(pystate_target_t *t, thread_work_t *w, size_t len, int64_t exec_off)
{
    const pystate_layout_t *L = &t->layout;
    rmem_iov_t iov[64];
    size_t need = (size_t)w->nraw * len;
    if (w->verify_cap < need) {
        uint8_t *nb = realloc(w->verify_buf, need);
        if (!nb)
            return SCRY_E_NOMEM;
        w->verify_buf = nb;
        w->verify_cap = need;
    }
    for (uint32_t at = 0; at < w->nraw;) {
        size_t n = 0;
        for (; n < 64 && at + n < w->nraw; n++)
            iov[n] = (rmem_iov_t){w->raw[at + n].frame, w->verify_buf + (at + n) * len, len};
        if (rmem_readv(t->mem, iov, n) != (int)n) {
            w->torn = w->torn_after = 1;
            t->stats.torn++;
            return 0;
        }
        at += (uint32_t)n;
    }
    for (uint32_t k = 0; k < w->nraw; k++) {
        const uint8_t *b = w->verify_buf + (size_t)k * len;
        raddr_t back = k + 1 < w->nraw ? w->raw[k + 1].frame : 0; /* whole: to the root */
        int32_t lasti = (int32_t)pystate__u32_at(b, len, L->frame_lasti);
        uint32_t offset = lasti < 0 ? 0 : (uint32_t)lasti;
        if (L->major == 3 && L->minor == 10)
            offset *= 2;
        if (pystate__u64_at(b, len, L->frame_code) != w->raw[k].code ||
            pystate__u64_at(b, len, L->frame_back) != back ||
            (k > 0 && (offset != w->raw[k].offset ||
                       (exec_off >= 0 && !frame_executing(L, b, len, exec_off))))) {
            w->torn = w->torn_after = 1;
            t->stats.torn++;
            return 0;
        }
    }
    return 0;
}

/* Phase 3, <= 3.10: PyFrameObject chains. Returns 0 or SCRY_E_NOMEM. */
static int walk_frame_objects(pystate_target_t *t, thread_work_t *w)
{
    const pystate_layout_t *L = &t->layout;
    /* f_executing (3.6-3.9) and f_state (3.10) follow f_lineno and int f_iblock in every
     * version's PyFrameObject: every frame of a thread's chain is executing, so one that is
     * not (a generator that yielded, a frame that returned) was read after it left. */
    int64_t exec_off = L->frame_lineno >= 0 ? L->frame_lineno + 8 : -1;
    size_t len = (size_t)max4(L->frame_back, L->frame_code, L->frame_lasti, exec_off) + 8;
    uint8_t buf[FRAME_READ_MAX];
    if (len > sizeof buf)
        len = sizeof buf;
    raddr_t f = w->top_frame;
    cycle_t cy = {0};
    while (f) {
        if (cycle_seen(&cy, f) || pf(t, f, buf, len) != 0) {
            w->torn = 1; /* a loop or a freed frame: the chain changed under us */
            t->stats.torn++;
            return 0;
        }
        raddr_t code = pystate__u64_at(buf, len, L->frame_code);
        int32_t lasti = (int32_t)pystate__u32_at(buf, len, L->frame_lasti);
        uint32_t offset = lasti < 0 ? 0 : (uint32_t)lasti;
        if (L->major == 3 && L->minor == 10)
            offset *= 2;
        if (!code) {
            w->torn = 1;
            t->stats.torn++;
            return 0;
        }
        if (exec_off >= 0 && !frame_executing(L, buf, len, exec_off)) {
            /* The current frame itself is not executing for a moment on its way in (the
             * flag is set after tstate->frame) and out (cleared before it is restored):
             * read_once keeps it when the same frames read twice and the thread's current
             * frame is still this one after the walk. Below the leaf, the frame left: the
             * chain is stale. */
            if (w->nraw > 0) {
                w->torn = 1;
                t->stats.torn++;
                return 0;
            }
            w->leaf_idle = 1;
        }
        if (push_raw(w, f, code, offset, 1, 1) != 0)
            return 0; /* the depth bound: truncated */
        f = pystate__u64_at(buf, len, L->frame_back);
    }
    return w->verify && w->nraw ? verify_chain(t, w, len, exec_off) : 0;
}

/* Phase 3, 3.11+: _PyInterpreterFrame chains, with entry and shim frames. */
static void walk_interpreter_frames(pystate_target_t *t, thread_work_t *w)
{
    const pystate_layout_t *L = &t->layout;
    size_t len = iframe_header_len(L);
    uint8_t buf[FRAME_READ_MAX];
    if (len > sizeof buf)
        len = sizeof buf;
    raddr_t f = w->top_frame;
    cycle_t cy = {0};
    size_t steps = 0;
    while (f && steps++ < 2 * PYSTATE_MAX_DEPTH) {
        if (cycle_seen(&cy, f) || frame_bytes(t, w, f, buf, len) != 0) {
            w->torn = 1; /* a loop or an unreadable frame: the chain changed under us */
            t->stats.torn++;
            return;
        }
        uint8_t owner = pystate__u8_at(buf, len, L->iframe_owner);
        raddr_t next = pystate__u64_at(buf, len, L->iframe_previous);
        /* Below the leaf, a frame is suspended in a call: its code and caller stay put, and
         * a careful reader's instruction too (a sampler lets it move: a leaf that returned
         * during the copy leaves its caller running on, a sample still mostly right). One
         * that differs between the two copies of the chunk was popped (and its slot reused)
         * or resumed while the chunk was read: the chain may join frames that never
         * coexisted, even when the current frame is the same before and after the copy. */
        if (steps > 1 &&
            (!same_in_both(w, f, L->iframe_code) || !same_in_both(w, f, L->iframe_previous) ||
             (t->torn_retries && !same_in_both(w, f, L->iframe_instr)))) {
            w->torn = 1;
            t->stats.torn++;
            return;
        }
        if (owner > FRAME_OWNER_MAX || (owner == FRAME_OWNED_BY_GENERATOR && !next)) {
            /* not a frame any more, or a generator that yielded (a running generator
             * always has a caller; it is never a thread's root) */
            w->torn = 1;
            t->stats.torn++;
            return;
        }
        if (L->frame_style >= PYSTATE_FRAMES_312 && owner == FRAME_OWNED_BY_CSTACK) {
            /* A shim frame: the Python frame just above it was entered from C. */
            if (w->nraw)
                w->raw[w->nraw - 1].entry = 1;
        } else {
            /* 3.14+: f_executable is a _PyStackRef whose low bits are tags (Py_TAG_REFCNT
             * on immortal code objects: the static trampoline below a forked child's
             * stack); objects are 8-aligned, so the mask is a no-op before */
            raddr_t code = pystate__u64_at(buf, len, L->iframe_code) & ~(uint64_t)7;
            raddr_t instr = pystate__u64_at(buf, len, L->iframe_instr);
            if (!code) {
                w->torn = 1;
                t->stats.torn++;
                return;
            }
            raddr_t start = code + (uint64_t)L->code_adaptive;
            uint32_t offset = 0;
            int has = 0;
            if (instr >= start && instr - start < (1u << 26)) {
                offset = (uint32_t)(instr - start);
                has = 1;
            } else if (w->nraw > 0) {
                /* Not started (3.11/3.12 keep prev_instr one before the first instruction
                 * until it runs), yet the caller of a frame above: a newer top over an
                 * older copy of the chunk, where the frame above is a stale slot (a dump of
                 * 3.11 showed chain_b at line 0 under chain_c, CI) */
                w->torn = 1;
                t->stats.torn++;
                return;
            }
            int entry =
                L->iframe_is_entry >= 0 ? pystate__u8_at(buf, len, L->iframe_is_entry) != 0 : 0;
            if (w->nraw == 0) {
                w->leaf_instr_addr = has ? instr : 0;
            }
            if (push_raw(w, f, code, offset, has, entry) != 0)
                return;
        }
        f = next;
    }
    if (f)
        w->truncated = 1;
}

/* The frame list for the root: 3.12+ marks the bottom frame as entry implicitly. */
static void finish_entries(thread_work_t *w)
{
    if (w->nraw)
        w->raw[w->nraw - 1].entry = 1;
}

/* The opclass of the instruction at byte OFFSET of CODE (HAS_OFFSET 0: the frame had not
 * started, no instruction), or -1 when unknown; *PUSHES whether its family may push a frame
 * from the eval loop (pystate_opcode_pushes_frame; 1 when unknown). */
static int instr_opclass_via(pystate_target_t *t, int has_offset, pystate_code_t *code,
                             uint32_t offset, int direct, int *pushes);

static int instr_opclass(pystate_target_t *t, int has_offset, pystate_code_t *code, uint32_t offset,
                         int *pushes)
{
    return instr_opclass_via(t, has_offset, code, offset, 0, pushes);
}

uint8_t pystate_code_opclass(pystate_target_t *t, raddr_t code, uint32_t offset)
{
    pystate_code_t *c = (pystate_code_t *)pystate__code_get(t, code, NULL);
    int pushes;
    int cls = c ? instr_opclass_via(t, 1, c, offset, 1, &pushes) : -1;
    return cls >= 0 ? (uint8_t)cls : PYSTATE_OP_UNKNOWN;
}

/* instr_opclass; DIRECT: the bytecode read outside a sample (not through the prefetch,
 * whose plan is the next sample's). */
static int instr_opclass_via(pystate_target_t *t, int has_offset, pystate_code_t *code,
                             uint32_t offset, int direct, int *pushes)
{
    const pystate_layout_t *L = &t->layout;
    *pushes = 1;
    if (code->bytecode && offset < code->bytecode_len) {
        *pushes = pystate_opcode_pushes_frame(L->major, L->minor, code->bytecode[offset]);
        return pystate_opcode_class(L->major, L->minor, code->bytecode[offset]);
    }
    if (!has_offset || !code->ncodeunits)
        return -1;
    int cls = pystate__code_opclass(t, code, offset, pushes);
    if (cls >= 0)
        return cls; /* this offset's, found before */
    /* 3.11/3.12 may leave prev_instr inside a CALL's inline caches: find the instruction by
     * walking the bytecode, once per offset (remembered in the code cache's memo). */
    uint32_t blen = code->ncodeunits * 2u;
    if (blen > PYSTATE_BYTECODE_READ_MAX)
        blen = PYSTATE_BYTECODE_READ_MAX;
    uint32_t at = 0;
    uint8_t op = 0;
    raddr_t at_code = code->addr + (uint64_t)L->code_adaptive;
    if ((direct ? rmem_read(t->mem, at_code, t->bytecode_buf, blen)
                : pystate__pf_read(t->prefetch, t->mem, at_code, t->bytecode_buf, blen,
                                   1 | PF_LOOSE)) != 0 ||
        pystate_opcode_find_instruction(L->major, L->minor, t->bytecode_buf, blen, offset, &at,
                                        &op) != 0)
        return -1;
    cls = pystate_opcode_class(L->major, L->minor, op);
    *pushes = pystate_opcode_pushes_frame(L->major, L->minor, op);
    pystate__code_remember_opclass(t, code, offset, cls, *pushes);
    return cls;
}

/* Fills the ids of thread I from its work entry, and clears what a read sets. */
static void thread_ids(pystate_target_t *t, pystate_snapshot_t *s, size_t i)
{
    const thread_work_t *w = &s->work[i];
    pystate_thread_t *th = &s->threads[i];
    th->tstate = w->tstate;
    th->pthread_id = w->pthread_id;
    th->ns_tid = w->tid ? w->tid : pystate__tid_from_pthread(t, w->pthread_id);
    th->tid = proc_tidmap_to_host(t->tidmap, th->ns_tid);
    th->interp_id = w->interp_id;
    th->gil = th->gil_known = 0;
    th->truncated = 0;
    th->skipped = 0;
    th->leaf_opclass = PYSTATE_OP_UNKNOWN;
}

/* Phase 4, one thread: validate code objects, read the leaf instruction, fill the frames.
 * A code object that is gone or changed marks the walk torn. Returns 0 or SCRY_E_NOMEM. */
static int resolve_thread(pystate_target_t *t, pystate_snapshot_t *s, size_t i)
{
    uint8_t key[PYSTATE_CODE_KEY_MAX];
    {
        thread_work_t *w = &s->work[i];
        pystate_thread_t *th = &s->threads[i];
        if (!th->frames) {
            th->frames = malloc(PYSTATE_MAX_DEPTH * sizeof *th->frames);
            th->entry = malloc(PYSTATE_MAX_DEPTH);
            th->frame_addrs = malloc(PYSTATE_MAX_DEPTH * sizeof *th->frame_addrs);
            if (!th->frames || !th->entry || !th->frame_addrs)
                return SCRY_E_NOMEM;
        }
        th->truncated = w->truncated;
        th->leaf_opclass = PYSTATE_OP_UNKNOWN; /* a retry resolves the thread again */
        uint32_t n = 0;
        raddr_t last_code = 0;
        pystate_code_t *code = NULL;
        for (uint32_t k = 0; k < w->nraw; k++) {
            raw_frame_t *r = &w->raw[k];
            if (r->code != last_code || !code) {
                /* Validate the cached copy against the object as it is now (once per
                 * sample: a frame keeps its code object alive). */
                code = (pystate_code_t *)pystate__code_checked(t, r->code);
                if (!code) {
                    int kerr = pf_loose(t, r->code + (uint64_t)t->code_key_start, key,
                                        (size_t)t->code_key_len);
                    code = kerr ? NULL : (pystate_code_t *)pystate__code_get(t, r->code, key);
                }
                last_code = r->code;
            }
            if (!code) {
                w->torn = 1; /* freed or reused: the frame is stale */
                t->stats.torn++;
                break;
            }
            scry_frame_t *f = &th->frames[n];
            f->function = code->function;
            f->file = code->file;
            f->line = t->function_lines ? code->firstlineno
                      : r->has_offset   ? pystate__code_line(t, code, r->offset)
                                        : 0;
            f->kind = SCRY_FRAME_PYTHON;
            th->entry[n] = r->entry;
            th->frame_addrs[n] = r->frame;
            int pushes = 1;
            if (n == 0) {
                int cls = instr_opclass(t, w->leaf_instr_addr != 0, code, r->offset, &pushes);
                if (cls >= 0)
                    th->leaf_opclass = (uint8_t)cls;
            } else if (t->torn_retries) {
                /* see read_once; a callee pushed by the eval loop itself (not entered from
                 * C) needs a caller stopped at an instruction that pushes frames */
                int cls = instr_opclass(t, r->has_offset, code, r->offset, &pushes);
                if (cls == PYSTATE_OP_OTHER || (!pushes && !th->entry[n - 1]))
                    w->odd_caller = 1;
            }
            n++;
        }
        th->nframes = n;
    }
    return 0;
}

int pystate_gil_words(pystate_target_t *t, const pystate_snapshot_t *s, uint64_t *holder_addr,
                      uint64_t *locked_addr)
{
    const pystate_layout_t *L = &t->layout;
    *holder_addr = *locked_addr = 0;
    if (t->tstate_current_addr) {
        *holder_addr = t->tstate_current_addr;
        return 0;
    }
    raddr_t gil = 0;
    if (L->runtime_gil >= 0 && t->runtime)
        gil = t->runtime + (uint64_t)L->runtime_gil;
    else if (L->interp_gil_ptr >= 0 && s->count)
        pf_loose(t, s->work[0].interp + (uint64_t)L->interp_gil_ptr, &gil, 8);
    if (!gil || L->gil_locked < 0 || L->gil_last_holder < 0)
        return SCRY_E_NOTFOUND;
    *holder_addr = gil + (uint64_t)L->gil_last_holder;
    *locked_addr = gil + (uint64_t)L->gil_locked;
    return 0;
}

/* GIL holder: marks the thread whose tstate holds the GIL, and every thread's gil_known
 * when the holder (or that nobody holds it) was read. */
static void mark_gil(pystate_target_t *t, pystate_snapshot_t *s)
{
    raddr_t holder = 0, holder_word = 0, locked_word = 0;
    int known = 0;
    if (pystate_gil_words(t, s, &holder_word, &locked_word) == 0) {
        int32_t locked = 1;
        known = (!locked_word || pf_loose(t, locked_word, &locked, 4) == 0) &&
                pf_loose(t, holder_word, &holder, 8) == 0;
        if (!known || !locked)
            holder = 0;
    }
    for (size_t i = 0; i < s->count; i++) {
        s->threads[i].gil = holder && s->threads[i].tstate == holder;
        s->threads[i].gil_known = (uint8_t)known;
    }
}

/* Python thread names: the map of every interpreter's threading._active, reread when older
 * than a second (threadnames.c), then matched to the threads by pthread id. A failure only
 * leaves names out. */
static void assign_names(pystate_target_t *t, pystate_snapshot_t *s)
{
    pystate_names_t *nm = &t->names;
    uint64_t now = scry_now_ns();
    if (!nm->refreshed || now - nm->refreshed_ns >= NAMES_REFRESH_NS) {
        raddr_t done[NAMES_INTERPS_MAX];
        size_t ndone = 0;
        nm->map.count = 0;
        for (size_t i = 0; i < s->count && ndone < NAMES_INTERPS_MAX; i++) {
            raddr_t interp = s->work[i].interp;
            size_t k = 0;
            while (k < ndone && done[k] != interp)
                k++;
            if (k < ndone)
                continue;
            done[ndone++] = interp;
            pystate__thread_names(t, interp, &nm->map);
        }
        nm->refreshed = 1;
        nm->refreshed_ns = now;
    }
    for (size_t i = 0; i < s->count; i++)
        s->threads[i].name = pystate__name_map_find(&nm->map, s->threads[i].pthread_id);
}

/* The thread's current frame as the target has it now, read directly (not from the
 * batch): tstate->frame (<= 3.10), tstate->cframe->current_frame (3.11, 3.12),
 * tstate->current_frame (3.13+). Returns 0 or an rmem code. */
static int read_top_now(pystate_target_t *t, const thread_work_t *w, raddr_t *top, raddr_t *cframe)
{
    const pystate_layout_t *L = &t->layout;
    raddr_t v = 0;
    int err = rmem_read(t->mem, w->tstate + (uint64_t)L->tstate_frame, &v, 8);
    if (err)
        return err;
    *cframe = 0;
    if (L->cframe_current_frame >= 0) {
        *cframe = v;
        if (v && (err = rmem_read(t->mem, v + (uint64_t)L->cframe_current_frame, &v, 8)) != 0)
            return err;
    }
    *top = v;
    return 0;
}

/* Walks one thread's chain (from W->top_frame, with its chunk copy) and resolves it. */
static int walk_thread(pystate_target_t *t, pystate_snapshot_t *s, size_t i)
{
    thread_work_t *w = &s->work[i];
    w->nraw = 0;
    w->truncated = 0;
    w->torn = 0;
    w->torn_after = 0;
    w->leaf_idle = 0;
    w->odd_caller = 0;
    w->leaf_instr_addr = 0;
    if (w->top_frame) {
        if (t->layout.frame_style == PYSTATE_FRAMES_OBJECTS) {
            int err = walk_frame_objects(t, w);
            if (err)
                return err;
        } else {
            walk_interpreter_frames(t, w);
        }
        finish_entries(w);
    }
    return resolve_thread(t, s, i);
}

/* A walk is whole only when the thread's current frame is still the one it started from
 * after it, when (a) that frame was not executing (leaf_idle: the thread was between the
 * frame's push and its first instruction, or between its return and its pop, all along; a
 * thread preempted there stays so for milliseconds), or (b) a careful reader's 3.11+ walk
 * had no chunk copy to check it on (top_unchecked; read_chunk_careful). Otherwise the walk
 * is torn. Returns 0 or an rmem code. */
static int check_top_same(pystate_target_t *t, thread_work_t *w)
{
    if (w->top_moved && !w->torn) {
        w->torn = w->torn_after = 1;
        t->stats.torn++;
        return 0;
    }
    int unchecked = w->top_unchecked && t->layout.frame_style != PYSTATE_FRAMES_OBJECTS;
    if ((!w->leaf_idle && !unchecked) || w->torn || !w->top_frame)
        return 0;
    raddr_t top = 0, cf = 0;
    int err = read_top_now(t, w, &top, &cf);
    if (err == SCRY_E_GONE || err == SCRY_E_PERM)
        return err;
    if (err || top != w->top_frame) {
        w->torn = w->torn_after = 1;
        t->stats.torn++;
    }
    return 0;
}

/* A signature of the frames walked (never 0). */
static uint64_t raw_signature(const thread_work_t *w)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint32_t k = 0; k < w->nraw; k++) {
        uint64_t v[3] = {w->raw[k].frame, w->raw[k].code, w->raw[k].offset};
        for (int j = 0; j < 3; j++)
            h = (h ^ v[j]) * 1099511628211ull;
    }
    return h | 1;
}

/* One read of thread I's stack from W->top_frame (W->cframe): the chain, its code objects
 * and the checks that it is whole. A careful reader (pystate_set_torn_retries) also takes a
 * caller stopped at an instruction that cannot call for a tear (a frame slot popped and
 * pushed again while the copy was taken: a loop's call at its first line, a shallower
 * round's bottom), and on 3.11+ one whose callee the eval loop pushed itself (not entered
 * from C) stopped at an instruction whose family never pushes a frame (a recursion's
 * `if n > 0:` at COMPARE_OP_INT under a callee of the next round; a specialised instruction
 * that deoptimised into a dunder method calls it through C: an entry frame),
 * unless the read before found exactly the same frames: a real stack that
 * looks like that (a signal handler or a __del__ entered from any instruction) reads the
 * same twice, a tear almost never does. A leaf that was not executing (leaf_idle) must
 * read the same twice too, careful or not: a freed frame reused at the same place looks
 * just like it. Returns 0 or a fatal code; W->torn says whether the stack is whole. */
static int read_once(pystate_target_t *t, pystate_snapshot_t *s, size_t i)
{
    thread_work_t *w = &s->work[i];
    int err = read_frame_root(t, w);
    if (!err)
        err = walk_thread(t, s, i);
    if (!err)
        err = check_top_same(t, w);
    if (err || w->torn || (!w->odd_caller && !w->leaf_idle)) {
        w->odd_sig = 0;
        return err;
    }
    uint64_t sig = raw_signature(w);
    if (sig != w->odd_sig) {
        w->odd_sig = sig;
        w->torn = w->torn_after = 1;
        t->stats.torn++;
    }
    return 0;
}

/* Reads one thread's stack so that it is whole. The walk served from the batch is kept
 * unless it was torn (a loop, a frame or code object that is gone, a frame that is not
 * executing any more: the thread ran on between the reads); then the stack is read again
 * directly from the target, from the thread's current frame as it is now, up to
 * t->torn_retries times. A stack that never reads whole is handed on marked torn and
 * counted in stats.dropped, with the leaf part the last reread found consistent up to
 * where its walk broke; none when the walk was whole but failed a check of the whole
 * (torn_after): which of its frames are from the same moment is not known. The frames
 * below a tear are never guessed. (Requiring the current frame to be the same before and
 * after the read as well dropped 7-18% of a call-heavy program's stacks for no measurable
 * gain: docs/accuracy.md.) */
static int read_thread(pystate_target_t *t, pystate_snapshot_t *s, size_t i)
{
    thread_work_t *w = &s->work[i];
    /* a careful reader's every walk (the first too: a one-shot reader has no batch); a
     * sampler's retries are not checked so (they would drop twice as many stacks of a
     * call-heavy program: docs/accuracy.md) */
    w->verify = t->torn_retries != 0;
    w->odd_sig = 0;
    int err = read_once(t, s, i);
    if (err || !w->torn)
        return err;
    uint32_t retries = t->torn_retries ? t->torn_retries : PYSTATE_TORN_RETRIES;
    pystate__pf_direct(t->prefetch, 1);
    for (uint32_t r = 0; r < retries && w->torn; r++) {
        t->stats.retries++;
        raddr_t top = 0, cf = 0;
        if ((err = read_top_now(t, w, &top, &cf)) != 0)
            break;
        w->top_frame = top;
        if (t->layout.cframe_current_frame >= 0)
            w->cframe = cf; /* read_frame_root reads the top through it again */
        if ((err = read_once(t, s, i)) != 0)
            break;
    }
    pystate__pf_direct(t->prefetch, 0);
    if (err == SCRY_E_GONE || err == SCRY_E_PERM || err == SCRY_E_NOMEM)
        return err;
    if (err || w->torn) {
        t->stats.dropped++;
        s->threads[i].truncated = 0;
        s->threads[i].torn = 1;
        if (err || w->torn_after)
            s->threads[i].nframes = 0; /* nothing of it is known to be whole */
    }
    return 0;
}

void pystate_set_torn_retries(pystate_target_t *t, uint32_t n)
{
    if (t)
        t->torn_retries = n < PYSTATE_TORN_RETRIES_MAX ? n : PYSTATE_TORN_RETRIES_MAX;
}

int pystate_sample(pystate_target_t *t, pystate_snapshot_t *s)
{
    t->stats.samples++;
    int err = pystate__pf_begin(t->prefetch, t->mem);
    if (err)
        return err;
    err = list_threads(t, s);
    if (err)
        return err;
    size_t nread = 0;
    for (size_t i = 0; i < s->count; i++) {
        pystate_thread_t *th = &s->threads[i];
        th->torn = 0;
        thread_ids(t, s, i);
        if (t->filter && th->tid > 0 && !t->filter(t->filter_ctx, th->tid)) {
            th->nframes = 0;
            th->skipped = 1;
            t->stats.threads_skipped++;
            continue;
        }
        if ((err = read_thread(t, s, i)) != 0)
            return err;
        nread++;
        if (th->truncated)
            t->stats.truncated++;
    }
    mark_gil(t, s);
    uint64_t fin = 0;
    s->finalizing = t->finalizing_addr && pf_loose(t, t->finalizing_addr, &fin, 8) == 0 && fin != 0;
    assign_names(t, s);
    t->stats.threads_read += nread;
    return 0;
}

void pystate_set_thread_filter(pystate_target_t *t, pystate_thread_filter_fn fn, void *ctx)
{
    if (!t)
        return;
    t->filter = fn;
    t->filter_ctx = ctx;
}

/* True when the 8-byte word at 'off' (8-aligned) looks like a user-space pointer. */
static int looks_like_pointer(const uint8_t *buf, size_t len, int64_t off)
{
    uint64_t lo = pystate__u32_at(buf, len, off);
    uint64_t hi = pystate__u32_at(buf, len, off + 4);
    uint64_t v = hi << 32 | lo;
    return lo != 0 && v >= 0x100000000ull && v < 0x800000000000ull;
}

int64_t pystate__tid_offset_learn(const uint8_t *buf, size_t len, const pid_t *tids, size_t ntids)
{
    for (int64_t off = 0; off + 4 <= (int64_t)len; off += 4) {
        int32_t v = (int32_t)pystate__u32_at(buf, len, off);
        if (v <= 0)
            continue;
        /* The upper half of a heap or mapping address is a number in the range of thread
         * ids (0x55xx, 0x7fxx): never take it for one. */
        if (off % 8 == 4 && looks_like_pointer(buf, len, off - 4))
            continue;
        for (size_t i = 0; i < ntids; i++)
            if (v == tids[i])
                return off;
    }
    return -1;
}

int32_t pystate__tid_from_pthread(pystate_target_t *t, uint64_t pthread_id)
{
    if (!pthread_id || t->pthread_tid_offset == -2)
        return 0;
    if (t->pthread_tid_offset >= 0) {
        int32_t tid = 0;
        if (pf_loose(t, pthread_id + (uint64_t)t->pthread_tid_offset, &tid, 4) != 0)
            return 0;
        return tid;
    }
    uint8_t buf[1024];
    if (rmem_read(t->mem, pthread_id, buf, sizeof buf) != 0)
        return 0;
    /* Learn the offset of 'tid' in glibc's struct pthread once. */
    pid_t tids[4096]; /* as the process knows them: in a container, its namespace's */
    size_t ntids = proc_tidmap_ns_tids(t->tidmap, tids, 4096);
    int64_t off = pystate__tid_offset_learn(buf, sizeof buf, tids, ntids);
    if (off < 0)
        return 0;
    t->pthread_tid_offset = off;
    return (int32_t)pystate__u32_at(buf, sizeof buf, off);
}
