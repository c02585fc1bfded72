/* sampler_bpf.c - the bpf back end of the sampler (`--sampler bpf`).
 *
 * The same per-thread task-clock events as the perf back end (perfev/), each running the
 * BPF program of bpfsamp/ at each of its ticks: the program walks the thread's Python
 * frames at that instant and writes (tid, weight, time, IP, frames as code object and
 * instruction offset) into a ring; the event's own ring gets nothing (with --idle: the
 * thread's context-switch records, for sampler/idle.c). Each tick of the
 * sampler (every 20 ms at most, however high the rate: the ring batches the samples):
 *  1. the ring is drained; each record's code objects are resolved through pystate's code
 *     cache (pystate_resolve_code) and the sample is emitted as the perf back end's are,
 *     classified from its IP and leaf instruction (kernel -> system; outside CPython ->
 *     native; else Python, or native when the leaf instruction is a call);
 *  2. the records the kernel could not walk (a page not present at that instant, or a
 *     thread whose thread state it does not know yet) are read in user space the ordinary
 *     way, right after, with the CPU time they stand for (counted in the summary);
 *  3. every 200 ms, and at once when the target's thread count changed (one stat of
 *     /proc/PID/task) or a record named a thread the map lacks, the thread list is read
 *     again, each new thread's event opened, and the program's tid -> thread state map
 *     made anew from one pystate_sample (thread states only, no frames).
 * Nothing is stopped, and no stack is read after the fact except for the fallbacks.
 */
#include "sampler_internal.h"

#include "bpfsamp.h"
#include "classify.h"
#include "perfev.h"
#include "procinfo.h"
#include "scry_err.h"
#include "scry_proc.h"
#include "scry_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BPF_FALLBACK_MAX 256u /* threads whose records fall back, per tick (the rest: lost) */
#define BPF_LIST_NS      200000000ull /* the thread list reread at least this often */
#define BPF_KINDS        4            /* enum unwind_ip_kind + 1 */
#define BPF_NO_OFFSET    0xffffffffu

/* A thread's records this tick that are read in user space: CPU ns per IP kind. */
typedef struct bpf_fallback {
    pid_t tid;
    uint64_t w[BPF_KINDS];
} bpf_fallback_t;

/* A Python thread as the last read of the thread states saw it. */
typedef struct bpf_known {
    pid_t tid;
    int32_t ns_tid;
    const char *name; /* interned in the target's string table, or NULL */
} bpf_known_t;

struct sampler_bpf {
    perfev_t *ev;
    bpfsamp_t *b;
    unwind_t *unw; /* describes the records' IPs */
    pid_t pid;
    int exclude_kernel;
    int walk_ok;           /* the program knows this interpreter's layout (else all falls back) */
    uint32_t owner_cstack; /* the owner of shim frames (bpfsamp_cfg) */
    uint64_t last_list_ns;
    int stale;
    int ntasks;      /* the target's thread count at the last look (proc_count_tasks) */
    pid_t *tids;     /* the thread list (/proc) */
    size_t ntids;
    pid_t *map_tids; /* the program's map: tid -> thread state */
    uint64_t *tstates;
    bpf_known_t *known; /* the Python threads' names, sorted by tid */
    size_t nknown;
    bpf_fallback_t fb[BPF_FALLBACK_MAX];
    size_t nfb;
    sampler_idle_t *idle; /* --idle: each tick reads every thread's stack (emit_idle) */
    struct bpfsamp_cfg cfg; /* what the program walks (walk_ok), with where the GIL is */
    int gil_seen;           /* a record of this drain was of the GIL's holder */
    /* during a read */
    sampler_t *s;
    sampler_emit_fn emit;
    void *emit_ctx;
    pystate_thread_t th;
    scry_frame_t frames[BPFSAMP_MAX_DEPTH];
    /* counted for the summary */
    uint64_t walked, fallback, faults, unknown, unresolved, midcall, deep;
    uint64_t dropped; /* fallbacks beyond BPF_FALLBACK_MAX threads in one tick */
};

/* TID's fallback entry this tick: found, or with INSERT added; NULL when the table is full
 * (or TID has none, without INSERT). */
static bpf_fallback_t *fallback_of(struct sampler_bpf *p, pid_t tid, int insert)
{
    for (size_t i = 0; i < p->nfb; i++)
        if (p->fb[i].tid == tid)
            return &p->fb[i];
    if (!insert || p->nfb >= BPF_FALLBACK_MAX)
        return NULL;
    bpf_fallback_t *f = &p->fb[p->nfb++];
    memset(f, 0, sizeof *f);
    f->tid = tid;
    return f;
}

/* pystate's thread filter: the threads with records to read in user space this tick. */
static int wants_fallback(void *ctx, int32_t tid)
{
    return fallback_of(ctx, tid, 0) != NULL;
}

static int cmp_known(const void *a, const void *b)
{
    pid_t x = ((const bpf_known_t *)a)->tid, y = ((const bpf_known_t *)b)->tid;
    return (x > y) - (x < y);
}

/* Hands the program where the GIL's holder is (pystate_gil_words, as of the last read of the
 * thread states: the address moves only with an exec) when that changed, so each record says
 * whether its thread held the GIL at the sample. */
static void set_gil_words(sampler_t *s)
{
    struct sampler_bpf *p = s->bpf;
    uint64_t holder = 0, locked = 0;
    if (!p->walk_ok || pystate_gil_words(s->target, s->snap, &holder, &locked) != 0)
        holder = locked = 0;
    if (holder == p->cfg.gil_holder_addr && locked == p->cfg.gil_locked_addr)
        return;
    p->cfg.gil_holder_addr = holder;
    p->cfg.gil_locked_addr = locked;
    if (bpfsamp_set_cfg(p->b, &p->cfg) != 0)
        s->stats.errors++;
}

/* Reads the thread states of every thread (frames only of those FILTER takes) and makes
 * them the program's map. Returns as pystate_sample. */
static int refresh_states(sampler_t *s, pystate_thread_filter_fn filter)
{
    struct sampler_bpf *p = s->bpf;
    int err = sampler__sample_threads(s, filter, p);
    if (err)
        return err;
    size_t n = pystate_snapshot_count(s->snap), k = 0;
    for (size_t i = 0; i < n && k < BPFSAMP_MAX_THREADS; i++) {
        const pystate_thread_t *th = pystate_snapshot_thread(s->snap, i);
        if (th->tid <= 0 || !th->tstate)
            continue;
        p->known[k] = (bpf_known_t){th->tid, th->ns_tid, th->name};
        p->map_tids[k] = th->tid;
        p->tstates[k++] = th->tstate;
    }
    if (bpfsamp_set_threads(p->b, p->map_tids, p->tstates, k) != 0)
        s->stats.errors++;
    set_gil_words(s);
    qsort(p->known, k, sizeof *p->known, cmp_known);
    p->nknown = k;
    return 0;
}

/* The thread list of the target into P->tids: the count, or SCRY_E_GONE. */
static int list_tids(struct sampler_bpf *p)
{
    int n = proc_list_tasks(p->pid, p->tids, PROC_TASKS_MAX);
    p->ntids = n > 0 ? (size_t)n : 0;
    char state = 0;
    if (n == 1 &&
        (proc_read_task_state(p->pid, p->tids[0], &state) != 0 || state == 'Z' || state == 'X'))
        return SCRY_E_GONE; /* an exited process its parent has not reaped */
    return n > 0 ? n : SCRY_E_GONE;
}

static int ip_kind(struct sampler_bpf *p, const struct bpfsamp_record *r)
{
    if (r->flags & BPFSAMP_KERNEL)
        return UNWIND_IP_KERNEL;
    unwind_frame_t leaf = {.in_python = (uint8_t)unwind_ip_in_python(p->unw, r->ip)};
    return unwind_ip_kind(0, &leaf);
}

/* Resolves R's frames into P->th. Returns 0, or a negative code when a code object could
 * not be read (gone since the sample: read in user space instead). */
static int resolve(struct sampler_bpf *p, const struct bpfsamp_record *r)
{
    pystate_target_t *t = p->s->target;
    uint32_t n = 0;
    uint8_t leaf_op = PYSTATE_OP_UNKNOWN;
    /* 3.12+: every run of the eval loop has a shim frame at its bottom, so a whole stack
     * ends with one. One that does not was caught in the middle of a call, between the
     * store of the new current frame and that of its caller link (the compiler may order
     * them either way): its lower frames are a stale slot's. */
    if (p->owner_cstack != BPFSAMP_NO_OWNER && r->nframes > 0 && !(r->flags & BPFSAMP_TRUNCATED) &&
        r->frames[r->nframes - 1].owner != p->owner_cstack)
        return SCRY_E_CORRUPT;
    for (uint32_t i = 0; i < r->nframes && i < BPFSAMP_MAX_DEPTH; i++) {
        uint32_t off = r->frames[i].offset;
        if (r->frames[i].owner == p->owner_cstack)
            continue; /* a shim frame (3.12+): no code of its own */
        if (off == BPF_NO_OFFSET && n > 0)
            return SCRY_E_CORRUPT; /* a caller that has not started: not a real stack */
        if (pystate_resolve_code(t, r->frames[i].code, off == BPF_NO_OFFSET ? 0 : off,
                                 &p->frames[n]) != 0)
            return SCRY_E_FAULT;
        if (n == 0 && off != BPF_NO_OFFSET) /* a call's leaf is C code: unwind_classify_ip */
            leaf_op = pystate_code_opclass(t, r->frames[i].code, off);
        n++;
    }
    bpf_known_t key = {.tid = (pid_t)r->tid};
    const bpf_known_t *k =
        p->nknown ? bsearch(&key, p->known, p->nknown, sizeof key, cmp_known) : NULL;
    p->th = (pystate_thread_t){.tid = (int32_t)r->tid,
                               .ns_tid = k ? k->ns_tid : (int32_t)r->tid,
                               .name = k ? k->name : NULL,
                               .truncated = (r->flags & BPFSAMP_TRUNCATED) != 0,
                               .gil = (r->flags & BPFSAMP_GIL) != 0,
                               .gil_known = (r->flags & BPFSAMP_GIL_KNOWN) != 0,
                               .leaf_opclass = leaf_op,
                               .nframes = n,
                               .frames = p->frames};
    return 0;
}

static void on_record(const struct bpfsamp_record *r, void *ctx)
{
    struct sampler_bpf *p = ctx;
    sampler_t *s = p->s;
    int kind = ip_kind(p, r);
    int err = 0;
    /* a stack deeper than the kernel's walk is read whole in user space */
    if (!p->walk_ok || (r->flags & (BPFSAMP_NO_TSTATE | BPFSAMP_FAULT | BPFSAMP_TRUNCATED)) ||
        (err = resolve(p, r)) != 0) {
        bpf_fallback_t *fb = fallback_of(p, (pid_t)r->tid, 1);
        if (!fb) {
            p->dropped++;
            return;
        }
        fb->w[kind] += r->weight_ns;
        p->fallback++;
        p->faults += (r->flags & BPFSAMP_FAULT) != 0;
        p->deep += (r->flags & BPFSAMP_TRUNCATED) != 0;
        p->unresolved += err == SCRY_E_FAULT;
        p->midcall += err == SCRY_E_CORRUPT;
        if (r->flags & BPFSAMP_NO_TSTATE) {
            p->unknown++;
            p->stale = 1; /* a thread the map lacks: read the thread states again */
        }
        return;
    }
    p->walked++;
    p->gil_seen |= p->th.gil;
    if (p->th.nframes == 0 && !p->th.truncated)
        return; /* no Python frame (starting or finishing) */
    if (s->opts.gil && !p->th.gil)
        return; /* --gil: only the holder at the sample's instant */
    if (p->idle && p->th.nframes) {
        uint64_t by_kind[SAMPLER_IP_KINDS] = {0};
        by_kind[kind] = r->weight_ns;
        sampler__idle_records(p->idle, (pid_t)r->tid, &p->th.frames[0], by_kind);
    }
    unwind_classification_t cls;
    unwind_classify_ip(kind, p->th.leaf_opclass, &cls);
    sampler__emit(s, &p->th, NULL, 0, cls.cls, 0, r->weight_ns, 1, r->time_ns, p->emit,
                  p->emit_ctx);
}

/* Emits the samples the kernel could not walk, from the read of the stacks that followed
 * the drain (s->snap). */
static void emit_fallbacks(sampler_t *s, uint64_t now, sampler_emit_fn emit, void *ctx)
{
    struct sampler_bpf *p = s->bpf;
    size_t n = pystate_snapshot_count(s->snap);
    for (size_t i = 0; i < n; i++) {
        const pystate_thread_t *th = pystate_snapshot_thread(s->snap, i);
        bpf_fallback_t *fb = fallback_of(p, th->tid, 0);
        if (!fb || (th->nframes == 0 && !th->truncated) || (s->opts.gil && !th->gil))
            continue; /* --gil: the holder as the read in user space found it */
        for (int k = 1; k < BPF_KINDS; k++) {
            if (!fb->w[k])
                continue;
            unwind_classification_t cls;
            unwind_classify_ip(k, th->leaf_opclass, &cls);
            sampler__emit(s, th, NULL, 0, cls.cls, 0, fb->w[k], 1, now, emit, ctx);
        }
    }
}

/* --idle, after the drain and the read of every thread's stack: a sample of each thread that
 * was off its CPU at the tick's moment (sampler__idle_charge, as the perf back end's). */
static void emit_idle(sampler_t *s, uint64_t now, sampler_emit_fn emit, void *ctx)
{
    struct sampler_bpf *p = s->bpf;
    size_t n = pystate_snapshot_count(s->snap);
    for (size_t i = 0; i < n; i++) {
        const pystate_thread_t *th = pystate_snapshot_thread(s->snap, i);
        if ((s->opts.gil && !th->gil) || !sampler__stack_wanted(s, th))
            continue;
        sampler__idle_charge(s, p->idle, p->ev, th, now, emit, ctx);
    }
}

/* Opens the events and the program; writes why not into WHY. */
static int bpf_open(sampler_t *s, struct sampler_bpf *p, char *why, size_t whylen)
{
    int err = bpfsamp_cfg_for(pystate_target_layout(s->target), &p->cfg, why, whylen);
    if (err)
        return err;
    p->walk_ok = 1;
    p->owner_cstack = p->cfg.owner_cstack;
    if ((err = bpfsamp_open(&p->cfg, &p->b, why, whylen)) != 0)
        return err;
    err = perfev_probe(p->pid, 0);
    if (err == SCRY_E_PERM && perfev_probe(p->pid, 1) == 0) {
        p->exclude_kernel = 1;
        err = 0;
    }
    perfev_opts_t o = {.pid = p->pid,
                       .rate_hz = s->opts.rate_hz > 0 ? s->opts.rate_hz : 100,
                       .clock = PERFEV_CLOCK_TASK,
                       /* the program writes nothing there; --idle: switch records */
                       .ring_pages = s->opts.idle ? 0 : 1,
                       .exclude_kernel = p->exclude_kernel,
                       .bpf_prog_fd = bpfsamp_prog_fd(p->b),
                       .switches = s->opts.idle};
    if (err || (err = perfev_open(&o, &p->ev)) != 0) {
        snprintf(why, whylen, "perf events: %s", scry_strerror(err));
        return err;
    }
    return 0;
}

/* The map first (a record of a thread it lacks would be read in user space), then each
 * thread's event with the program. */
static int bpf_attach(sampler_t *s, char *why, size_t whylen)
{
    struct sampler_bpf *p = s->bpf;
    int err = refresh_states(s, NULL);
    if (err) {
        snprintf(why, whylen, "reading the thread states: %s", scry_strerror(err));
        return err;
    }
    int n = list_tids(p);
    if (n <= 0)
        return SCRY_E_GONE;
    if ((err = perfev_set_threads(p->ev, p->tids, (size_t)n, NULL, NULL)) < 0) {
        snprintf(why, whylen, "attaching the program to the threads' events: %s",
                 scry_strerror(err));
        return err;
    }
    p->ntasks = n;
    p->last_list_ns = scry_now_ns();
    return 0;
}

const char *sampler__bpf_unsupported(const sampler_opts_t *o)
{
    return o->instant       ? "dump"
           : o->native      ? "--native"
           : o->blocking    ? "--blocking"
           : o->async_labels ? "--async"
                            : NULL;
}

int sampler__bpf_new(sampler_t *s, char *why, size_t whylen)
{
    const char *no = sampler__bpf_unsupported(&s->opts);
    if (no) {
        snprintf(why, whylen, "not with %s yet", no);
        return SCRY_E_INVAL;
    }
    struct sampler_bpf *p = calloc(1, sizeof *p);
    if (!p)
        return SCRY_E_NOMEM;
    p->pid = pystate_target_info(s->target)->pid;
    p->tids = calloc(PROC_TASKS_MAX, sizeof *p->tids);
    p->tstates = calloc(BPFSAMP_MAX_THREADS, sizeof *p->tstates);
    p->map_tids = calloc(BPFSAMP_MAX_THREADS, sizeof *p->map_tids);
    p->known = calloc(BPFSAMP_MAX_THREADS, sizeof *p->known);
    p->unw = unwind_new(p->pid);
    if (s->opts.idle)
        p->idle = sampler__idle_new(p->pid);
    int err = SCRY_E_NOMEM;
    if (!p->tids || !p->tstates || !p->map_tids || !p->known || !p->unw ||
        (s->opts.idle && !p->idle) ||
        (err = bpf_open(s, p, why, whylen))) {
        if (err == SCRY_E_NOMEM && !why[0])
            snprintf(why, whylen, "%s", scry_strerror(err));
        sampler__bpf_free(p);
        return err;
    }
    s->bpf = p;
    if ((err = bpf_attach(s, why, whylen)) != 0) {
        sampler__bpf_free(p);
        s->bpf = NULL;
        return err;
    }
    return 0;
}

void sampler__bpf_free(sampler_bpf_t *p)
{
    if (!p)
        return;
    perfev_free(p->ev); /* the events first: then nothing runs the program */
    bpfsamp_free(p->b);
    unwind_free(p->unw);
    sampler__idle_free(p->idle);
    free(p->tids);
    free(p->tstates);
    free(p->map_tids);
    free(p->known);
    free(p);
}

const char *sampler__bpf_desc(sampler_t *s)
{
    const struct sampler_bpf *p = s->bpf;
    uint64_t runs = 0, ns = 0;
    char kt[80] = "";
    if (bpfsamp_kernel_time(p->b, &runs, &ns) == 0 && runs)
        snprintf(kt, sizeof kt, ", %.1f us of the target's CPU per run", ns / 1e3 / runs);
    int n =
        snprintf(s->desc, sizeof s->desc,
                 "bpf (frames walked in the kernel at each task-clock tick%s: %llu samples; "
                 "%llu read in user space: %llu pages not readable then, %llu threads not known "
                 "yet, %llu code objects gone, %llu stacks caught mid-call, %llu deeper than "
                 "%u frames)",
                 p->exclude_kernel ? ", user mode only" : "", (unsigned long long)p->walked,
                 (unsigned long long)p->fallback, (unsigned long long)p->faults,
                 (unsigned long long)p->unknown, (unsigned long long)p->unresolved,
                 (unsigned long long)p->midcall, (unsigned long long)p->deep,
                 (unsigned)BPFSAMP_MAX_DEPTH);
    if (n > 0 && (size_t)n < sizeof s->desc && kt[0])
        snprintf(s->desc + n - 1, sizeof s->desc - (size_t)n + 1, "%s)", kt);
    return s->desc;
}

/* Every 200 ms, at once when the target's thread count changed (one stat) or a record
 * named a thread the map lacks: the thread list, each new thread's event, and the thread
 * states (one pystate_sample without frames, unless the fallbacks just read them), which
 * make the program's map anew. Returns 0 or a negative code (SCRY_E_GONE: exited). */
static int relist(sampler_t *s, uint64_t now)
{
    struct sampler_bpf *p = s->bpf;
    int count = proc_count_tasks(p->pid);
    if (count != p->ntasks) {
        p->ntasks = count;
        p->stale = 1;
    }
    if (!p->stale && now - p->last_list_ns < BPF_LIST_NS)
        return 0;
    p->stale = 0;
    p->last_list_ns = now;
    int n = sampler__reused(s) ? -1 : list_tids(p);
    if (n < 0)
        return SCRY_E_GONE;
    if (sampler__follow_exec(s, 0))
        return 0; /* sampler__bpf_exec made the map anew; the next tick lists again */
    /* the map before the new threads' events, as at the start (bpf_attach) */
    int err = p->nfb || p->idle ? 0 : refresh_states(s, wants_fallback);
    if (err)
        return err;
    int rc = perfev_set_threads(p->ev, p->tids, (size_t)n, NULL, NULL);
    if (rc < 0 && rc != SCRY_E_GONE)
        s->stats.errors++;
    return 0;
}

int sampler__bpf_tick(sampler_t *s, sampler_emit_fn emit, void *ctx)
{
    struct sampler_bpf *p = s->bpf;
    uint64_t t0 = scry_now_ns();
    /* a drain stands for the rate's ticks since the last one (sampler_run's step) */
    uint64_t nticks = s->interval_ns < SAMPLER_BPF_DRAIN_NS && !p->idle
                          ? SAMPLER_BPF_DRAIN_NS / s->interval_ns
                          : 1;
    s->stats.ticks += nticks;
    p->nfb = 0;
    p->s = s;
    p->emit = emit;
    p->emit_ctx = ctx;
    p->gil_seen = 0;
    if (p->idle) { /* the clocks, then the switch records (the event rings hold nothing else) */
        sampler__idle_probe(s, p->idle, p->ev, p->tids, p->ntids, t0);
        perfev_read(p->ev, NULL, NULL);
    }
    int rc = bpfsamp_read(p->b, on_record, p);
    if (rc < 0)
        s->stats.errors++;
    if (p->gil_seen) /* the GIL's holder was seen in this drain's ticks */
        s->stats.gil_ticks += nticks;
    uint64_t bad = 0, lost = 0;
    bpfsamp_counts(p->b, NULL, &bad, &lost);
    s->stats.lost = bad + lost + p->dropped;
    int err = s->gone ? SCRY_E_GONE : 0;
    /* with --idle every thread's stack, else those of the threads with fallbacks */
    if (!err && (p->nfb || p->idle) &&
        (err = refresh_states(s, p->idle ? NULL : wants_fallback)) == 0) {
        emit_fallbacks(s, t0, emit, ctx);
        if (p->idle)
            emit_idle(s, t0, emit, ctx);
    }
    if (!err)
        err = relist(s, t0);
    if (err) {
        if (err == SCRY_E_GONE || proc_exists(p->pid) != 0) {
            s->stats.target_exited = 1;
            return SCRY_E_GONE;
        }
        if (!sampler__follow_exec(s, 1))
            s->stats.errors++;
        if (err == SCRY_E_PERM || err == SCRY_E_NOMEM)
            return err;
    }
    s->stats.busy_ns += scry_now_ns() - t0;
    return 0;
}

void sampler__bpf_exec(sampler_t *s)
{
    struct sampler_bpf *p = s->bpf;
    char why[200];
    /* Another interpreter: its layout (the GIL's place comes with the map's refresh), or
     * every record read in user space. */
    p->walk_ok =
        bpfsamp_cfg_for(pystate_target_layout(s->target), &p->cfg, why, sizeof why) == 0 &&
        bpfsamp_set_cfg(p->b, &p->cfg) == 0;
    if (p->walk_ok)
        p->owner_cstack = p->cfg.owner_cstack;
    unwind_t *u = unwind_new(p->pid);
    if (u) {
        unwind_free(p->unw);
        p->unw = u;
    }
    p->stale = 1;
    if (refresh_states(s, wants_fallback) != 0)
        s->stats.errors++;
}
