/* sampler_perf.c - the perf-event back end of the sampler.
 *
 * Each thread of the target has a task-clock event (perfev/): the kernel writes a record
 * each time the thread has used 1/rate s of CPU, with the instruction pointer and, with
 * --native, the user registers and a copy of the top of the user stack. Each tick:
 *  1. the rings are drained; each record is classified from its IP (kernel -> system;
 *     outside CPython and the C runtime -> native; else decided by the leaf Python
 *     instruction below) and, with --native, unwound from its copy (unwind_copied);
 *  2. only when some thread ran (or with --idle), one pystate_sample reads the Python
 *     stacks, right after: of the threads that ran (with --idle, of every thread);
 *  3. each Python thread that ran gets one sample per record with a native stack (merged),
 *     or one per class with the CPU time its records add up to; with --idle, a thread
 *     that a tick finds off its CPU gets a sample of the wall time since its previous
 *     tick where it waits (sampler/idle.c; docs/accuracy.md, "Wall time").
 * Without --idle no /proc file is read per thread per tick: the thread list
 * (/proc/PID/task) is read every 200 ms (every 20 ticks, at most 1 s, at rates under 100 Hz) or
 * when a Python thread without an event shows up. Nothing is stopped.
 */
#include "sampler_internal.h"

#include "classify.h"
#include "perfev.h"
#include "procinfo.h"
#include "scry_proc.h"
#include "scry_err.h"
#include "scry_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PERF_SLOTS       16384u        /* thread table (power of two) */
#define PERF_MAX_PENDING 64u           /* records unwound per tick (the rest count without stack) */
#define PERF_LIST_NS     200000000ull  /* thread list reread at least this often, */
#define PERF_LIST_TICKS  20u           /* or every this many ticks when that is longer, */
#define PERF_LIST_MAX_NS 1000000000ull /* but at least once a second */
#define PERF_STACK_BYTES 32768u
#define PERF_KINDS       SAMPLER_IP_KINDS

typedef struct perf_thread {
    pid_t tid;                   /* 0 = empty */
    uint64_t gen;                /* tick in which CPU is valid */
    uint64_t rgen;               /* read in which W is valid */
    uint64_t w[PERF_KINDS];      /* CPU ns this read per IP kind, records without stack */
    uint64_t cpu;                /* CPU ns this tick, all records */
    uint64_t held[PERF_KINDS];   /* tick_charge: CPU ns per IP kind not charged yet, */
    uint32_t held_n[PERF_KINDS]; /* and the records they came in, */
    uint64_t held_sum;           /* their sum, */
    uint64_t probe_ns;           /* and when its CPU clock was read before this tick's read, */
    uint64_t probe_cpu;          /* and what it said, */
    int on_cpu;                  /* and whether it ran while its stack was read */
} perf_thread_t;

typedef struct perf_pending {
    pid_t tid;
    uint8_t kind;
    uint64_t weight, time_ns;
    size_t nn;
    unwind_frame_t f[UNWIND_MAX_DEPTH];
} perf_pending_t;

struct sampler_perf {
    perfev_t *ev;
    unwind_t *unw; /* the sampler's (--native) or our own, to describe IPs */
    int own_unw;
    pid_t pid;
    int exclude_kernel;
    uint64_t gen;  /* ticks */
    uint64_t rgen; /* reads: ticks and the reads between them that a record woke */
    int gil_seen;  /* a read since the last tick saw a thread holding the GIL */
    uint64_t rec_n, rec_sum_ns, rec_min_ns; /* this read's records: count, sum, first time */
    uint64_t last_list_ns;
    int stale;
    pid_t *tids;
    size_t ntids; /* of the last listing */
    perf_thread_t *tab;
    size_t used;
    perf_pending_t *pend;
    size_t npend;
    uint64_t touched;
    int ran_since_list;   /* some record came since the thread list was last read */
    sampler_idle_t *idle; /* --idle */
    pid_t *held;          /* tick_charge: threads with CPU not charged yet */
    size_t nheld;
};

/* Lists /proc/PID/task into P->tids. Returns the count, or SCRY_E_GONE. */
static int list_tids(struct sampler_perf *p)
{
    int n = proc_list_tasks(p->pid, p->tids, PROC_TASKS_MAX);
    if (n < 0)
        return SCRY_E_GONE;
    p->ntids = (size_t)n;
    /* An exited process that its parent has not reaped yet keeps one zombie task (not
     * looked for when a record came since the last listing: it ran then, and if it has
     * exited since, the next listing finds the zombie). */
    char state = 0;
    if (n == 1 && !p->ran_since_list &&
        (proc_read_task_state(p->pid, p->tids[0], &state) != 0 || state == 'Z' || state == 'X'))
        return SCRY_E_GONE;
    return n > 0 ? n : SCRY_E_GONE;
}

/* The table entry of TID: found, or with INSERT added when missing. NULL when it has none
 * (without INSERT) or the table is full. */
static perf_thread_t *lookup(struct sampler_perf *p, pid_t tid, int insert)
{
    if (tid <= 0)
        return NULL;
    if (insert && p->used >= PERF_SLOTS / 2) { /* threads come and go: start afresh */
        memset(p->tab, 0, PERF_SLOTS * sizeof *p->tab);
        p->used = 0;
    }
    size_t h = ((uint32_t)tid * 2654435761u) & (PERF_SLOTS - 1);
    for (size_t i = 0; i < PERF_SLOTS; i++) {
        perf_thread_t *t = &p->tab[(h + i) & (PERF_SLOTS - 1)];
        if (t->tid == tid)
            return t;
        if (t->tid == 0) {
            if (!insert)
                return NULL;
            memset(t, 0, sizeof *t);
            t->tid = tid;
            p->used++;
            return t;
        }
    }
    return NULL;
}

static perf_thread_t *slot(struct sampler_perf *p, pid_t tid)
{
    return lookup(p, tid, 1);
}

/* pystate's thread filter: only the threads this read has records of. */
static int ran_this_read(void *ctx, int32_t tid)
{
    struct sampler_perf *p = ctx;
    const perf_thread_t *t = lookup(p, tid, 0);
    return t && t->rgen == p->rgen;
}

static void to_unwind_regs(const perfev_sample_t *r, unwind_regs_t *u)
{
    const uint64_t *g = r->regs;
    *u = (unwind_regs_t){g[PERFEV_REG_AX],  g[PERFEV_REG_BX],  g[PERFEV_REG_CX],  g[PERFEV_REG_DX],
                         g[PERFEV_REG_SI],  g[PERFEV_REG_DI],  g[PERFEV_REG_BP],  g[PERFEV_REG_SP],
                         g[PERFEV_REG_IP],  g[PERFEV_REG_R8],  g[PERFEV_REG_R9],  g[PERFEV_REG_R10],
                         g[PERFEV_REG_R11], g[PERFEV_REG_R12], g[PERFEV_REG_R13], g[PERFEV_REG_R14],
                         g[PERFEV_REG_R15]};
}

/* tick_charge: adds a record of KIND and PERIOD ns to thread T's carry. */
static void hold(sampler_t *s, perf_thread_t *t, int kind, uint64_t period)
{
    struct sampler_perf *p = s->perf;
    if (t->held_sum >= SAMPLER_HELD_INTERVALS * s->interval_ns) {
        s->stats.held_dropped_ns += period;
        return;
    }
    if (!t->held_sum) {
        if (p->nheld >= PROC_TASKS_MAX) {
            s->stats.held_dropped_ns += period;
            return;
        }
        p->held[p->nheld++] = t->tid;
    }
    t->held[kind] += period;
    t->held_n[kind]++;
    t->held_sum += period;
}

static void on_record(const perfev_sample_t *r, void *ctx)
{
    sampler_t *s = ctx;
    struct sampler_perf *p = s->perf;
    perf_thread_t *t = slot(p, r->tid);
    if (!t)
        return;
    if (t->rgen != p->rgen) {
        memset(t->w, 0, sizeof t->w);
        t->rgen = p->rgen;
    }
    if (t->gen != p->gen) {
        t->cpu = 0;
        t->gen = p->gen;
    }
    p->touched++;
    p->ran_since_list = 1;
    p->rec_n++;
    p->rec_sum_ns += r->time_ns;
    if (!p->rec_min_ns || r->time_ns < p->rec_min_ns)
        p->rec_min_ns = r->time_ns;
    int kind = UNWIND_IP_KERNEL;
    if (!r->kernel) {
        unwind_frame_t leaf = {.in_python = (uint8_t)unwind_ip_in_python(p->unw, r->ip)};
        kind = unwind_ip_kind(0, &leaf);
    }
    t->cpu += r->period_ns;
    if (p->held) {
        hold(s, t, kind, r->period_ns);
        return;
    }
    if (s->opts.native && r->has_regs && r->stack && p->npend < PERF_MAX_PENDING) {
        perf_pending_t *pd = &p->pend[p->npend];
        unwind_regs_t regs;
        to_unwind_regs(r, &regs);
        size_t nn = 0;
        if (unwind_copied(p->unw, r->tid, &regs, r->stack, r->stack_len, pd->f, UNWIND_MAX_DEPTH,
                          &nn) == 0 &&
            nn > 0) {
            pd->tid = r->tid;
            pd->kind = (uint8_t)kind;
            pd->weight = r->period_ns;
            pd->time_ns = r->time_ns;
            pd->nn = nn;
            p->npend++;
            return;
        }
    }
    t->w[kind] += r->period_ns;
}

int sampler__perf_new(sampler_t *s, char *why, size_t whylen)
{
    pid_t pid = pystate_target_info(s->target)->pid;
    int excl = 0;
    int err = perfev_probe(pid, 0);
    if (err == SCRY_E_PERM && perfev_probe(pid, 1) == 0) {
        excl = 1; /* kernel samples refused (perf_event_paranoid 2): user mode only */
        err = 0;
    }
    if (err) {
        snprintf(why, whylen, "%s%s", scry_strerror(err),
                 err == SCRY_E_PERM ? " (perf_event_paranoid, a seccomp profile or a missing "
                                      "CAP_PERFMON)"
                                    : "");
        return err;
    }
    struct sampler_perf *p = calloc(1, sizeof *p);
    if (!p)
        return SCRY_E_NOMEM;
    p->pid = pid;
    p->exclude_kernel = excl;
    p->stale = 1;
    p->tids = calloc(PROC_TASKS_MAX, sizeof *p->tids);
    p->tab = calloc(PERF_SLOTS, sizeof *p->tab);
    int tick_charge = s->opts.tick_charge && !s->opts.native && !s->opts.idle;
    if (s->opts.idle)
        p->idle = sampler__idle_new(pid);
    if (tick_charge)
        p->held = calloc(PROC_TASKS_MAX, sizeof *p->held);
    if (s->opts.native) {
        p->unw = s->unwind;
        p->pend = malloc(PERF_MAX_PENDING * sizeof *p->pend);
    } else {
        p->unw = unwind_new(pid);
        p->own_unw = 1;
    }
    perfev_opts_t o = {.pid = pid,
                       .rate_hz = s->opts.rate_hz > 0 ? s->opts.rate_hz : 100,
                       .clock = PERFEV_CLOCK_TASK,
                       .stack_bytes = s->opts.native ? PERF_STACK_BYTES : 0,
                       .exclude_kernel = excl,
                       .wake_each = 1,
                       .switches = s->opts.idle};
    err = SCRY_E_NOMEM;
    if (!p->tids || !p->tab || !p->unw || (s->opts.idle && !p->idle) || (tick_charge && !p->held) ||
        (s->opts.native && !p->pend) || (err = perfev_open(&o, &p->ev)) != 0) {
        snprintf(why, whylen, "%s", scry_strerror(err));
        sampler__perf_free(p);
        return err;
    }
    s->perf = p;
    /* Open every thread's event now, so that the first tick already has records. */
    int n = list_tids(p);
    if (n > 0) {
        int rc = perfev_set_threads(p->ev, p->tids, (size_t)n, NULL, NULL);
        if (rc < 0) {
            snprintf(why, whylen, "%s", scry_strerror(rc));
            sampler__perf_free(p);
            s->perf = NULL;
            return rc;
        }
        p->stale = 0;
        p->last_list_ns = scry_now_ns();
    }
    snprintf(s->desc, sizeof s->desc, "perf events (task-clock%s)",
             excl ? ", user mode only: kernel time not seen" : "");
    return 0;
}

void sampler__perf_free(sampler_perf_t *p)
{
    if (!p)
        return;
    perfev_free(p->ev);
    if (p->own_unw)
        unwind_free(p->unw);
    free(p->tids);
    free(p->tab);
    free(p->pend);
    free(p->held);
    sampler__idle_free(p->idle);
    free(p);
}

int sampler__perf_set_rate(sampler_perf_t *p, double rate_hz)
{
    return perfev_set_rate(p->ev, rate_hz);
}

void sampler__perf_counts(const sampler_perf_t *p, uint64_t *lost, uint64_t *bad)
{
    perfev_stats_t st = perfev_stats(p ? p->ev : NULL);
    if (lost)
        *lost = st.lost;
    if (bad)
        *bad = st.bad;
}

/* Emits the CPU samples of thread TH from its table entry T and the pending unwound
 * records. */
static void emit_cpu(sampler_t *s, const pystate_thread_t *th, perf_thread_t *t, uint64_t now,
                     sampler_emit_fn emit, void *ctx)
{
    struct sampler_perf *p = s->perf;
    unwind_classification_t cls;
    uint64_t by_kind[PERF_KINDS];
    memcpy(by_kind, t->w, sizeof by_kind);
    for (size_t i = 0; i < p->npend; i++) {
        perf_pending_t *pd = &p->pend[i];
        if (pd->tid != th->tid)
            continue;
        by_kind[pd->kind] += pd->weight;
        unwind_classify_ip(pd->kind, th->leaf_opclass, &cls);
        sampler__emit(s, th, pd->f, pd->nn, cls.cls, 0, pd->weight, 1, pd->time_ns, emit, ctx);
    }
    if (p->idle && th->nframes)
        sampler__idle_records(p->idle, th->tid, &th->frames[0], by_kind);
    for (int k = 1; k < PERF_KINDS; k++) {
        if (!t->w[k])
            continue;
        unwind_classify_ip(k, th->leaf_opclass, &cls);
        sampler__emit(s, th, NULL, 0, cls.cls, 0, t->w[k], 1, now, emit, ctx);
    }
}

/* Counts this read's records in the stats, with how stale the stacks they get are (read at
 * T_READ): the sooner, the truer. */
static void count_records(sampler_t *s, uint64_t t_read)
{
    struct sampler_perf *p = s->perf;
    if (!p->rec_n || t_read < p->rec_min_ns)
        return;
    s->stats.read_records += p->rec_n;
    s->stats.read_delay_ns += p->rec_n * t_read - p->rec_sum_ns;
    if (t_read - p->rec_min_ns > s->stats.read_delay_max_ns)
        s->stats.read_delay_max_ns = t_read - p->rec_min_ns;
}

/* What a read of the stacks that failed with ERR (pystate_sample's code, or SCRY_E_AGAIN
 * for an exec just followed) returns: SCRY_E_GONE when the target exited, 0 when it
 * exec'd or the error is one to go on after, else ERR. T0: when the read began. */
static int read_failed(sampler_t *s, int err, uint64_t t0)
{
    if (err == SCRY_E_GONE || proc_exists(s->perf->pid) != 0) {
        s->stats.target_exited = 1;
        return SCRY_E_GONE;
    }
    if (err == SCRY_E_AGAIN || sampler__follow_exec(s, 1)) {
        s->stats.busy_ns += scry_now_ns() - t0;
        return 0; /* it exec'd: its records since are read with the new program */
    }
    s->stats.errors++;
    s->stats.busy_ns += scry_now_ns() - t0;
    return err == SCRY_E_PERM || err == SCRY_E_NOMEM ? err : 0;
}

/* pystate's thread filter with tick_charge, called once the target's memory was read (the
 * prefetch: one system call for every stack) and before the thread's stack is walked:
 * whether thread TID carries CPU and was on a CPU for at least half of the time from its
 * probe (probe_running) to now. Then the stack read between is where it ran; else it may
 * be where it was woken up to run or where it waits again, and the thread keeps its carry
 * for a later tick. The shorter that time, the shorter the bursts of CPU that are seen. */
static int held_on_cpu(void *ctx, int32_t tid)
{
    sampler_t *s = ctx;
    perf_thread_t *t = lookup(s->perf, tid, 0);
    if (!t || !t->held_sum || !t->probe_ns)
        return 0;
    uint64_t cpu = 0;
    t->on_cpu = perfev_thread_clock(s->perf->ev, tid, &cpu) == 0 && cpu >= t->probe_cpu &&
                2 * (cpu - t->probe_cpu) >= scry_now_ns() - t->probe_ns;
    if (!t->on_cpu)
        s->stats.held++;
    return t->on_cpu;
}

/* tick_charge, right before the stacks are read: drops the threads that carry nothing any
 * more, or are gone (their carry counted in stats.held_dropped_ns), from the list, and finds
 * which of the others are on a CPU now (probe_cpu at probe_ns set, else probe_ns 0: their
 * stacks are not read). Returns how many are. */
static size_t probe_running(sampler_t *s)
{
    struct sampler_perf *p = s->perf;
    size_t w = 0, running = 0;
    for (size_t i = 0; i < p->nheld; i++) {
        perf_thread_t *t = lookup(p, p->held[i], 0);
        if (!t || !t->held_sum)
            continue;
        uint64_t c0 = 0;
        t->on_cpu = 0;
        t->probe_ns = 0;
        if (perfev_thread_clock(p->ev, t->tid, &c0) != 0) { /* gone: so is its carry */
            s->stats.held_dropped_ns += t->held_sum;
            memset(t->held, 0, sizeof t->held);
            memset(t->held_n, 0, sizeof t->held_n);
            t->held_sum = 0;
            continue;
        }
        p->held[w++] = t->tid;
        /* Read twice: a clock that moved in between is a thread on a CPU now, whose stack is
         * worth reading; the others (waiting, or runnable while another runs) keep their
         * carry without a read. On a loaded host most ticks find a busy thread runnable. */
        uint64_t c1 = 0;
        if (perfev_thread_clock(p->ev, t->tid, &c1) == 0 && c1 > c0) {
            t->probe_cpu = c1;
            t->probe_ns = scry_now_ns();
            running++;
        }
    }
    p->nheld = w;
    return running;
}

/* tick_charge: charges the carry of thread TH (table entry T), found on a CPU while its
 * stack was read (held_on_cpu), at that stack: sampler__charge_count of its records, taken
 * from each IP kind in proportion, one sample per record (as when each is read at once: the
 * counts of the count-based formats stay records, the rate's samples per CPU second). */
static void charge_held(sampler_t *s, const pystate_thread_t *th, perf_thread_t *t, uint64_t now,
                        sampler_emit_fn emit, void *ctx)
{
    uint32_t total = 0;
    for (int k = 1; k < PERF_KINDS; k++)
        total += t->held_n[k];
    uint32_t take = sampler__charge_count(s, total, t->held_sum);
    unwind_classification_t cls;
    for (int k = 1; k < PERF_KINDS; k++) {
        uint32_t n = t->held_n[k];
        if (!n)
            continue;
        uint32_t m = take == total ? n : (uint32_t)(((uint64_t)n * take + total - 1) / total);
        if (m > n)
            m = n;
        uint64_t amount = m == n ? t->held[k] : t->held[k] / n * m;
        unwind_classify_ip(k, th->leaf_opclass, &cls);
        sampler__emit_split(s, th, cls.cls, amount, m, now, emit, ctx);
        t->held[k] -= amount;
        t->held_n[k] -= m;
        t->held_sum -= amount;
    }
    if (total == 0)
        t->held_sum = 0;
}

/* The tick of tick_charge: drains the rings into the threads' carries, then reads the
 * stacks of the carrying threads that run now and charges each carry to its thread's stack
 * when the thread was on a CPU while it was read. Threads found waiting keep their carry
 * for a later tick: a tick falls at a random moment of a thread's running time, so the
 * lines it finds are a fair sample of where the CPU went, whatever the rate; the stack a
 * thread has when it has just gone back to wait never is. */
static int read_held(sampler_t *s, uint64_t t0, sampler_emit_fn emit, void *ctx)
{
    struct sampler_perf *p = s->perf;
    int any_gil = 0;
    if (p->nheld && probe_running(s)) { /* none on a CPU now: no read at all */
        int err = sampler__follow_exec(s, 0) ? SCRY_E_AGAIN
                  : s->gone                  ? SCRY_E_GONE
                                             : sampler__sample_threads(s, held_on_cpu, s);
        if (err)
            return read_failed(s, err, t0);
        size_t n = pystate_snapshot_count(s->snap);
        any_gil = sampler__snapshot_gil(s);
        for (size_t i = 0; i < n; i++) {
            const pystate_thread_t *th = pystate_snapshot_thread(s->snap, i);
            if (th->tid > 0 && !perfev_has_thread(p->ev, th->tid))
                p->stale = 1;
            perf_thread_t *t = lookup(p, th->tid, 0);
            if (!t || !t->on_cpu || (th->nframes == 0 && !th->truncated) ||
                (s->opts.gil && !th->gil))
                continue;
            charge_held(s, th, t, t0, emit, ctx);
        }
    }
    if (any_gil)
        s->stats.gil_ticks++;
    s->stats.busy_ns += scry_now_ns() - t0;
    return 0;
}

/* Drains the rings and, when some thread ran (or on a tick with --idle), reads the Python
 * stacks right after and emits the samples. TICK: a tick of the sampler's clock (not a
 * read a record woke). T0: when the tick or read began. */
static int perf_read(sampler_t *s, int tick, uint64_t t0, sampler_emit_fn emit, void *ctx)
{
    struct sampler_perf *p = s->perf;
    p->rgen++;
    p->npend = 0;
    p->touched = 0;
    p->rec_n = p->rec_sum_ns = p->rec_min_ns = 0;
    int idle = tick && s->opts.idle;
    if (idle) /* before the drain: it reads how each thread off a CPU now left it */
        sampler__idle_probe(s, p->idle, p->ev, p->tids, p->ntids, t0);
    perfev_read(p->ev, on_record, s);
    uint64_t lost = 0, bad = 0;
    sampler__perf_counts(p, &lost, &bad);
    s->stats.lost = lost + bad;
    if (p->held) { /* tick_charge: the stacks are read on ticks only */
        count_records(s, scry_now_ns());
        if (tick)
            return read_held(s, t0, emit, ctx);
        s->stats.busy_ns += scry_now_ns() - t0;
        return 0;
    }
    if (!p->touched && !idle) {
        if (tick && p->gil_seen) {
            s->stats.gil_ticks++;
            p->gil_seen = 0;
        }
        s->stats.busy_ns += scry_now_ns() - t0;
        return 0; /* nothing ran: nothing to read */
    }
    count_records(s, scry_now_ns());
    int err = sampler__follow_exec(s, 0) ? SCRY_E_AGAIN
              : s->gone                  ? SCRY_E_GONE
                        /* with --idle every thread's stack, else only
                         * those of the threads that ran */
                        : sampler__sample_threads(s, idle ? NULL : ran_this_read, s->perf);
    if (err)
        return read_failed(s, err, t0);
    size_t n = pystate_snapshot_count(s->snap);
    int any_gil = sampler__snapshot_gil(s);
    for (size_t i = 0; i < n; i++) {
        const pystate_thread_t *th = pystate_snapshot_thread(s->snap, i);
        if (th->tid > 0 && !perfev_has_thread(p->ev, th->tid))
            p->stale = 1; /* a new thread: list them again next tick */
        if (s->opts.gil && !th->gil)
            continue;
        if (!sampler__stack_wanted(s, th))
            continue;
        perf_thread_t *t = slot(p, th->tid);
        if (!t)
            continue;
        if (t->rgen == p->rgen)
            emit_cpu(s, th, t, t0, emit, ctx);
        if (idle)
            sampler__idle_charge(s, p->idle, p->ev, th, t0, emit, ctx);
    }
    p->gil_seen |= any_gil;
    if (tick && p->gil_seen) {
        s->stats.gil_ticks++;
        p->gil_seen = 0;
    }
    s->stats.busy_ns += scry_now_ns() - t0;
    return 0;
}

int sampler__perf_tick(sampler_t *s, sampler_emit_fn emit, void *ctx)
{
    struct sampler_perf *p = s->perf;
    uint64_t t0 = scry_now_ns();
    s->stats.ticks++;
    p->gen++;
    /* The list is reread every 200 ms, and at low rates (scry serve's 19 Hz) every 20
     * ticks, at most 1 s: a new thread is found sooner when a read of the stacks shows it. */
    uint64_t every = s->interval_ns * PERF_LIST_TICKS;
    if (every < PERF_LIST_NS)
        every = PERF_LIST_NS;
    if (every > PERF_LIST_MAX_NS)
        every = PERF_LIST_MAX_NS;
    if (s->opts.list_every_s > 0 && s->opts.list_every_s <= 60)
        every = (uint64_t)(s->opts.list_every_s * 1e9);
    if (p->stale || t0 - p->last_list_ns >= every) {
        /* A process whose threads' events gave records since the last listing was alive
         * then: its pid cannot have gone to another process so soon (that needs the
         * host to cycle through its whole pid space), so /proc/PID/stat is not read. */
        int n = !p->ran_since_list && sampler__reused(s) ? -1 : list_tids(p);
        p->ran_since_list = 0;
        if (n < 0) {
            s->stats.target_exited = 1;
            return SCRY_E_GONE;
        }
        int rc = perfev_set_threads(p->ev, p->tids, (size_t)n, on_record, s);
        if (rc < 0 && rc != SCRY_E_GONE)
            s->stats.errors++;
        p->stale = 0;
        p->last_list_ns = t0;
    }
    return perf_read(s, 1, t0, emit, ctx);
}

int sampler__perf_read_early(sampler_t *s, sampler_emit_fn emit, void *ctx)
{
    return perf_read(s, 0, scry_now_ns(), emit, ctx);
}

void sampler__perf_exec(sampler_t *s)
{
    struct sampler_perf *p = s->perf;
    p->stale = 1; /* the other threads died with the old program */
    if (!p->own_unw) {
        p->unw = s->unwind;
        return;
    }
    unwind_t *u = unwind_new(p->pid);
    if (u) {
        unwind_free(p->unw);
        p->unw = u;
    }
}

int sampler__perf_wait(sampler_t *s, uint64_t deadline_ns)
{
    return perfev_wait(s->perf ? s->perf->ev : NULL, deadline_ns);
}

int sampler__perf_wait_fd(const sampler_t *s)
{
    return s->backend == SAMPLER_PERF && s->perf ? perfev_wait_fd(s->perf->ev) : -1;
}
