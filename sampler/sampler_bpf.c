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
 *     native; else Python, or native when the leaf instruction is a call); with --native
 *     the record's copy of the user registers and stack top is unwound (unwind_copied) and
 *     merged with the Python frames (sampler__emit), as the perf back end's copies are;
 *  2. the records the kernel could not walk (a page not present at that instant, or a
 *     thread whose thread state it does not know yet) are read in user space the ordinary
 *     way, right after, with the CPU time they stand for (counted in the summary);
 *  3. every 200 ms, and at once when the target's thread count changed (one stat of
 *     /proc/PID/task) or a record named a thread the map lacks, the thread list is read
 *     again, each new thread's event opened, and the program's tid -> thread state map
 *     made anew from one pystate_sample (thread states only, no frames).
 * Nothing is stopped, and no stack is read after the fact except for the fallbacks.
 *
 * Samplers given a sampler_bpf_share_t (scry serve's targets) share one loaded program, map
 * and ring per interpreter layout: a tick drains the ring and hands each record to the
 * sampler that listed its thread (a record of a thread nobody listed yet is lost, counted).
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
#define BPF_LIST_NS      200000000ull /* the thread list reread this often (or list_every_s) */
#define BPF_KINDS        4            /* enum unwind_ip_kind + 1 */
#define BPF_NO_OFFSET    0xffffffffu

/* A thread's records this tick that are read in user space: CPU ns per IP kind. */
typedef struct bpf_fallback {
    pid_t tid;
    uint64_t w[BPF_KINDS];
} bpf_fallback_t;

#define BPF_SHARE_LOADS 32 /* interpreter layouts one share holds programs for */

/* One loaded program of a share, and how many samplers use it. */
typedef struct bpf_load {
    struct bpfsamp_cfg cfg;
    bpfsamp_t *b;
    size_t users;
} bpf_load_t;

struct sampler_bpf_share {
    bpf_load_t loads[BPF_SHARE_LOADS];
    struct sampler_bpf **members;
    size_t nmembers, cap;
    uint64_t unowned; /* records of a thread no member had listed yet: lost */
};

/* An entry of a shared thread map: a thread and its thread state. */
typedef struct bpf_entry {
    pid_t tid;
    uint64_t tstate;
} bpf_entry_t;

/* A Python thread as the last read of the thread states saw it. */
typedef struct bpf_known {
    pid_t tid;
    int32_t ns_tid;
    const char *name; /* interned in the target's string table, or NULL */
} bpf_known_t;

struct sampler_bpf {
    perfev_t *ev;
    bpfsamp_t *b;               /* the sampler's own, or its share's (LOAD's) */
    sampler_bpf_share_t *share; /* or NULL */
    bpf_load_t *load;
    pid_t *sorted; /* the thread list, sorted: the records that are this target's (a share) */
    size_t nsorted;
    pid_t *gone;       /* share_update: the map entries to drop, then to write, */
    uint64_t *put_ts;  /* with their thread states, */
    bpf_entry_t *prev; /* and the target's entries in the map, sorted by tid */
    size_t nprev;
    unwind_t *unw; /* describes the records' IPs */
    pid_t pid;
    int exclude_kernel;
    uint64_t period_ns;     /* sampler__bpf_set_rate: the events' period now, */
    uint64_t old_period_ns; /* the one before, */
    uint64_t changed_ns;    /* and when it changed (CLOCK_MONOTONIC; 0: never) */
    int walk_ok;            /* the program knows this interpreter's layout (else all falls back) */
    uint32_t owner_cstack;  /* the owner of shim frames (bpfsamp_cfg) */
    uint64_t last_list_ns;
    uint64_t counted_ns; /* the ring's lost records last looked up */
    int stale;
    int ntasks;  /* the target's thread count at the last look (proc_count_tasks) */
    pid_t *tids; /* the thread list (/proc) */
    size_t ntids;
    pid_t *map_tids; /* the program's map: tid -> thread state */
    uint64_t *tstates;
    bpf_known_t *known; /* the Python threads' names, sorted by tid */
    size_t nknown;
    bpf_fallback_t fb[BPF_FALLBACK_MAX];
    size_t nfb;
    sampler_idle_t *idle;   /* --idle: each tick reads every thread's stack (emit_idle) */
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
    /* --native: the sampler's unwinder (S->unwind) serves P->unw too */
    int own_unw;
    uint8_t entry[BPFSAMP_MAX_DEPTH]; /* per frame of P->th (pystate_thread_t.entry) */
    unwind_frame_t nat[UNWIND_MAX_DEPTH];
    uint64_t nat_unwound, nat_none; /* samples with a native stack, without (see on_record) */
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

static int cmp_entry(const void *a, const void *b)
{
    pid_t x = ((const bpf_entry_t *)a)->tid, y = ((const bpf_entry_t *)b)->tid;
    return (x > y) - (x < y);
}

/* A shared map: the K entries of P->map_tids/tstates replace the target's entries put before
 * (P->prev), and only those that changed are written (a system call each). */
static void share_update(sampler_t *s, size_t k)
{
    struct sampler_bpf *p = s->bpf;
    size_t ngone = 0, nput = 0;
    for (size_t i = 0; i < p->nprev; i++) {
        bpf_known_t key = {.tid = p->prev[i].tid};
        if (!k || !bsearch(&key, p->known, k, sizeof key, cmp_known))
            p->gone[ngone++] = p->prev[i].tid;
    }
    bpfsamp_drop_threads(p->b, p->gone, ngone);
    for (size_t i = 0; i < k; i++) {
        bpf_entry_t key = {.tid = p->map_tids[i]};
        const bpf_entry_t *e =
            p->nprev ? bsearch(&key, p->prev, p->nprev, sizeof key, cmp_entry) : NULL;
        if (!e || e->tstate != p->tstates[i]) {
            p->gone[nput] = p->map_tids[i];
            p->put_ts[nput++] = p->tstates[i];
        }
    }
    for (size_t i = 0; i < k; i++)
        p->prev[i] = (bpf_entry_t){p->map_tids[i], p->tstates[i]};
    qsort(p->prev, k, sizeof *p->prev, cmp_entry);
    p->nprev = k;
    if (bpfsamp_put_threads(p->b, p->gone, p->put_ts, nput) != 0) {
        s->stats.errors++;
        p->nprev = 0; /* the map is full: all of them again next time */
    }
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
    qsort(p->known, k, sizeof *p->known, cmp_known);
    p->nknown = k;
    if (!p->share) {
        if (bpfsamp_set_threads(p->b, p->map_tids, p->tstates, k) != 0)
            s->stats.errors++;
        set_gil_words(s); /* not with a share: its program's cfg is every target's */
        return 0;
    }
    share_update(s, k);
    return 0;
}

static int cmp_tid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* The first N entries of P->tids (just listed) become the sorted list of the target's
 * threads. */
static void set_sorted(struct sampler_bpf *p, int n)
{
    memcpy(p->sorted, p->tids, (size_t)n * sizeof *p->tids);
    qsort(p->sorted, (size_t)n, sizeof *p->sorted, cmp_tid);
    p->nsorted = (size_t)n;
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
        if (r->frames[i].owner == p->owner_cstack) {
            if (n > 0) /* the Python frame above a shim frame was entered from C */
                p->entry[n - 1] = 1;
            continue; /* a shim frame (3.12+): no code of its own */
        }
        p->entry[n] = (r->frames[i].owner & BPFSAMP_OWNER_ENTRY) != 0; /* 3.11's is_entry */
        if (off == BPF_NO_OFFSET && n > 0)
            return SCRY_E_CORRUPT; /* a caller that has not started: not a real stack */
        if (pystate_resolve_code(t, r->frames[i].code, off == BPF_NO_OFFSET ? 0 : off,
                                 &p->frames[n]) != 0)
            return SCRY_E_FAULT;
        if (n == 0 && off != BPF_NO_OFFSET) /* a call's leaf is C code: unwind_classify_ip */
            leaf_op = pystate_code_opclass(t, r->frames[i].code, off);
        n++;
    }
    if (n > 0) /* the root frame, as pystate has it */
        p->entry[n - 1] = 1;
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
                               .frames = p->frames,
                               .entry = p->entry};
    return 0;
}

/* --native: unwinds the user registers and stack copy of R into P->nat with the unwinder
 * and the copy rules of the perf back end (unwind_copied). Returns the frame count: 0 for
 * a sample without a copy (no room in the ring then, or in the kernel before Linux 5.15)
 * or whose copy does not hold sp; such a sample has its Python stack only. */
static size_t unwind_record(struct sampler_bpf *p, const struct bpfsamp_record *r)
{
    const struct bpfsamp_native *n = bpfsamp_record_native(r);
    _Static_assert(sizeof(unwind_regs_t) == sizeof n->regs, "unwind_regs_t is 17 registers");
    unwind_regs_t regs;
    size_t nn = 0;
    if (n) {
        memcpy(&regs, n->regs, sizeof regs);
        uint64_t at = regs.sp - n->stack_addr;
        if (regs.sp >= n->stack_addr && at < n->stack_len &&
            unwind_copied(p->unw, (pid_t)r->tid, &regs, n->stack + at, n->stack_len - at, p->nat,
                          UNWIND_MAX_DEPTH, &nn) != 0)
            nn = 0;
    }
    if (nn)
        p->nat_unwound++;
    else
        p->nat_none++;
    return nn;
}

/* The CPU time record R stands for. The kernel hands the program the event's first period
 * even after PERF_EVENT_IOC_PERIOD changed it (a task-clock event's last_period is set
 * once), so after sampler__bpf_set_rate a record weighs the period of its time. */
static uint64_t record_weight(const struct sampler_bpf *p, const struct bpfsamp_record *r)
{
    if (!p->changed_ns)
        return r->weight_ns;
    return r->time_ns < p->changed_ns ? p->old_period_ns : p->period_ns;
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
        fb->w[kind] += record_weight(p, r);
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
    uint64_t weight = record_weight(p, r);
    p->gil_seen |= p->th.gil;
    if (p->th.nframes == 0 && !p->th.truncated)
        return; /* no Python frame (starting or finishing) */
    if (s->opts.gil && !p->th.gil)
        return; /* --gil: only the holder at the sample's instant */
    if (p->idle && p->th.nframes) {
        uint64_t by_kind[SAMPLER_IP_KINDS] = {0};
        by_kind[kind] = weight;
        sampler__idle_records(p->idle, (pid_t)r->tid, &p->th.frames[0], by_kind);
    }
    unwind_classification_t cls;
    unwind_classify_ip(kind, p->th.leaf_opclass, &cls);
    size_t nn = s->opts.native ? unwind_record(p, r) : 0;
    sampler__emit(s, &p->th, p->nat, nn, cls.cls, 0, weight, 1, r->time_ns, p->emit, p->emit_ctx);
}

/* A record of a shared ring: handed to the sampler whose target listed the thread, through
 * the emit function it was last ticked with. */
static void on_shared(const struct bpfsamp_record *r, void *ctx)
{
    struct sampler_bpf *p = ctx;
    sampler_bpf_share_t *sh = p->share;
    pid_t tid = (pid_t)r->tid;
    for (size_t i = 0; i < sh->nmembers; i++) {
        struct sampler_bpf *m = sh->members[i];
        if (m->load == p->load && m->emit && m->nsorted &&
            bsearch(&tid, m->sorted, m->nsorted, sizeof tid, cmp_tid)) {
            on_record(r, m);
            return;
        }
    }
    sh->unowned++;
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

/* P joins share SH: the program loaded for CFG (loaded now when no member has it yet).
 * Returns 0, or bpfsamp_open's code and WHY. */
static int share_join(sampler_bpf_share_t *sh, struct sampler_bpf *p, const struct bpfsamp_cfg *cfg,
                      char *why, size_t whylen)
{
    bpf_load_t *l = NULL;
    for (size_t i = 0; i < BPF_SHARE_LOADS && !l; i++)
        if (sh->loads[i].users && !memcmp(&sh->loads[i].cfg, cfg, sizeof *cfg))
            l = &sh->loads[i];
    for (size_t i = 0; i < BPF_SHARE_LOADS && !l; i++)
        if (!sh->loads[i].users)
            l = &sh->loads[i];
    if (!l) {
        snprintf(why, whylen, "%d interpreter layouts already sampled", BPF_SHARE_LOADS);
        return SCRY_E_NOMEM;
    }
    if (sh->nmembers == sh->cap) {
        size_t cap = sh->cap ? 2 * sh->cap : 16;
        struct sampler_bpf **m = realloc(sh->members, cap * sizeof *m);
        if (!m)
            return SCRY_E_NOMEM;
        sh->members = m;
        sh->cap = cap;
    }
    if (!l->users) {
        int err = bpfsamp_open(cfg, &l->b, why, whylen);
        if (err)
            return err;
        l->cfg = *cfg;
    }
    l->users++;
    p->share = sh;
    p->load = l;
    p->b = l->b;
    sh->members[sh->nmembers++] = p;
    return 0;
}

/* P leaves its share: its threads out of the map, the program unloaded with its last user.
 * Its events must be closed already (nothing runs the program for it any more). */
static void share_leave(struct sampler_bpf *p)
{
    sampler_bpf_share_t *sh = p->share;
    bpfsamp_drop_threads(p->b, p->map_tids, p->nknown);
    for (size_t i = 0; i < sh->nmembers; i++)
        if (sh->members[i] == p)
            sh->members[i] = sh->members[--sh->nmembers];
    if (--p->load->users == 0) {
        bpfsamp_free(p->load->b);
        memset(p->load, 0, sizeof *p->load);
    }
}

sampler_bpf_share_t *sampler_bpf_share_new(void)
{
    return calloc(1, sizeof(sampler_bpf_share_t));
}

void sampler_bpf_share_free(sampler_bpf_share_t *sh)
{
    if (!sh)
        return;
    for (size_t i = 0; i < BPF_SHARE_LOADS; i++)
        bpfsamp_free(sh->loads[i].b);
    free(sh->members);
    free(sh);
}

/* Opens the events and the program; writes why not into WHY. */
static int bpf_open(sampler_t *s, struct sampler_bpf *p, char *why, size_t whylen)
{
    int err = bpfsamp_cfg_for(pystate_target_layout(s->target), &p->cfg, why, whylen);
    if (err)
        return err;
    p->walk_ok = 1;
    p->owner_cstack = p->cfg.owner_cstack;
    p->cfg.native = s->opts.native != 0;
    if ((err = s->opts.bpf_share ? share_join(s->opts.bpf_share, p, &p->cfg, why, whylen)
                                 : bpfsamp_open(&p->cfg, &p->b, why, whylen)) != 0)
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
    p->period_ns = (uint64_t)(1e9 / o.rate_hz);
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
    int err = refresh_states(s, wants_fallback); /* thread states only: no fallback yet */
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
    set_sorted(p, n);
    p->ntasks = n;
    p->last_list_ns = scry_now_ns();
    return 0;
}

const char *sampler__bpf_unsupported(const sampler_opts_t *o)
{
    return o->instant ? "dump" : o->blocking ? "--blocking" : o->async_labels ? "--async" : NULL;
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
    p->gone = calloc(BPFSAMP_MAX_THREADS, sizeof *p->gone);
    p->put_ts = calloc(BPFSAMP_MAX_THREADS, sizeof *p->put_ts);
    p->prev = calloc(BPFSAMP_MAX_THREADS, sizeof *p->prev);
    p->sorted = calloc(PROC_TASKS_MAX, sizeof *p->sorted);
    p->own_unw = !s->unwind;
    p->unw = p->own_unw ? unwind_new(p->pid) : s->unwind;
    p->s = s;
    if (s->opts.idle)
        p->idle = sampler__idle_new(p->pid);
    int err = SCRY_E_NOMEM;
    if (!p->tids || !p->tstates || !p->map_tids || !p->known || !p->gone || !p->put_ts ||
        !p->prev || !p->sorted || !p->unw || (s->opts.idle && !p->idle) ||
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
    if (p->share)
        share_leave(p);
    else
        bpfsamp_free(p->b);
    if (p->own_unw)
        unwind_free(p->unw);
    free(p->gone);
    free(p->put_ts);
    free(p->prev);
    free(p->sorted);
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
    char kt[160] = "";
    int k = 0;
    if (bpfsamp_kernel_time(p->b, &runs, &ns) == 0 && runs)
        k = snprintf(kt, sizeof kt, ", %.1f us of the target's CPU per run", ns / 1e3 / runs);
    if (s->opts.native && k >= 0 && (size_t)k < sizeof kt)
        snprintf(kt + k, sizeof kt - (size_t)k, ", native stacks of %llu (%llu without one)",
                 (unsigned long long)p->nat_unwound, (unsigned long long)p->nat_none);
    int n = snprintf(
        s->desc, sizeof s->desc,
        "bpf (frames walked in the kernel at each task-clock tick%s: %llu samples; "
        "%llu read in user space: %llu pages not readable then, %llu threads not known "
        "yet, %llu code objects gone, %llu stacks caught mid-call, %llu deeper than "
        "%u frames)",
        p->exclude_kernel ? ", user mode only" : "", (unsigned long long)p->walked,
        (unsigned long long)p->fallback, (unsigned long long)p->faults,
        (unsigned long long)p->unknown, (unsigned long long)p->unresolved,
        (unsigned long long)p->midcall, (unsigned long long)p->deep, (unsigned)BPFSAMP_MAX_DEPTH);
    if (n > 0 && (size_t)n < sizeof s->desc && kt[0])
        snprintf(s->desc + n - 1, sizeof s->desc - (size_t)n + 1, "%s)", kt);
    return s->desc;
}

/* Every 200 ms, at once when the target's thread count changed (one stat) or a record
 * named a thread the map lacks: the thread list, each new thread's event, and the thread
 * states (one pystate_sample without frames, unless the fallbacks just read them), which
 * make the program's map anew. Returns 0 or a negative code (SCRY_E_GONE: exited). */
static int relist(sampler_t *s, uint64_t now, int read_states)
{
    struct sampler_bpf *p = s->bpf;
    int count = proc_count_tasks(p->pid);
    if (count != p->ntasks) {
        p->ntasks = count;
        p->stale = 1;
    }
    uint64_t every =
        s->opts.list_every_s > 0 ? (uint64_t)(s->opts.list_every_s * 1e9) : BPF_LIST_NS;
    if (!p->stale && now - p->last_list_ns < every)
        return 0;
    p->stale = 0;
    p->last_list_ns = now;
    int n = sampler__reused(s) ? -1 : list_tids(p);
    if (n < 0)
        return SCRY_E_GONE;
    if (sampler__follow_exec(s, 0))
        return 0; /* sampler__bpf_exec made the map anew; the next tick lists again */
    set_sorted(p, n);
    /* the map before the new threads' events, as at the start (bpf_attach) */
    int err = read_states ? refresh_states(s, wants_fallback) : 0;
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
    p->s = s;
    p->emit = emit;
    p->emit_ctx = ctx;
    p->gil_seen = 0;
    if (p->idle) { /* the clocks, then the switch records (the event rings hold nothing else) */
        sampler__idle_probe(s, p->idle, p->ev, p->tids, p->ntids, t0);
        perfev_read(p->ev, NULL, NULL);
    }
    /* with a share, other samplers' ticks may have left records to read in user space */
    int rc = bpfsamp_read(p->b, p->share ? on_shared : on_record, p);
    if (rc < 0)
        s->stats.errors++;
    if (p->gil_seen) /* the GIL's holder was seen in this drain's ticks */
        s->stats.gil_ticks += nticks;
    uint64_t bad = 0, lost = 0;
    if (!p->share || t0 - p->counted_ns >= BPF_LIST_NS) { /* a share: a lookup less per tick */
        p->counted_ns = t0;
        bpfsamp_counts(p->b, NULL, &bad, &lost);
        s->stats.lost = bad + lost + p->dropped + (p->share ? p->share->unowned : 0);
    }
    int err = s->gone ? SCRY_E_GONE : 0;
    /* with --idle every thread's stack, else those of the threads with fallbacks (a share's
     * other samplers' ticks may have left some) */
    int read = !err && (p->nfb || p->idle);
    if (read && (err = refresh_states(s, p->idle ? NULL : wants_fallback)) == 0) {
        emit_fallbacks(s, t0, emit, ctx);
        if (p->idle)
            emit_idle(s, t0, emit, ctx);
    }
    p->nfb = 0;
    if (!err)
        err = relist(s, t0, !read);
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

int sampler__bpf_set_rate(sampler_bpf_t *p, double rate_hz)
{
    uint64_t period = (uint64_t)(1e9 / rate_hz);
    if (period == p->period_ns)
        return 0;
    p->old_period_ns = p->period_ns;
    p->period_ns = period;
    p->changed_ns = scry_now_ns();
    return perfev_set_rate(p->ev, rate_hz);
}

void sampler__bpf_exec(sampler_t *s)
{
    struct sampler_bpf *p = s->bpf;
    char why[200];
    /* Another interpreter: its layout (the GIL's place comes with the map's refresh), or
     * every record read in user space. */
    p->walk_ok = bpfsamp_cfg_for(pystate_target_layout(s->target), &p->cfg, why, sizeof why) == 0;
    p->cfg.native = s->opts.native != 0;
    /* a shared program keeps its layout: another one's records are read in user space */
    if (p->share)
        p->walk_ok = p->walk_ok && !memcmp(&p->cfg, &p->load->cfg, sizeof p->cfg);
    else
        p->walk_ok = p->walk_ok && bpfsamp_set_cfg(p->b, &p->cfg) == 0;
    if (p->walk_ok)
        p->owner_cstack = p->cfg.owner_cstack;
    unwind_t *u = p->own_unw ? unwind_new(p->pid) : NULL;
    if (!p->own_unw)
        p->unw = s->unwind; /* the sampler's, made anew for the new program */
    if (u) {
        unwind_free(p->unw);
        p->unw = u;
    }
    p->stale = 1;
    if (refresh_states(s, wants_fallback) != 0)
        s->stats.errors++;
}
