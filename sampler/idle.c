/* idle.c - --idle for the back ends driven by the kernel's CPU clock (perf, bpf): a
 * thread's time off a CPU, sampled at ticks (docs/accuracy.md, "Wall time").
 *
 * Each tick, before the rings are drained, every listed thread's CPU clock is read (its
 * task-clock event's count) with the wall time since its previous tick; after the drain (which
 * read the threads' context-switch records) and the read of every thread's stack, a thread
 * that was off its CPU at the tick's moment gets one sample of that wall time where it waits.
 * A thread's state lives in a table sorted by tid, made anew from the thread list at each
 * probe (a thread that left the list leaves the table).
 */
#include "sampler_internal.h"

#include "classify.h"
#include "perfev.h"
#include "scry_proc.h"

#include <stdlib.h>
#include <string.h>

typedef struct idle_thread {
    pid_t tid;
    uint64_t last_wall; /* time of the previous tick that looked at it, */
    uint64_t probe;     /* its CPU clock at this tick, before the stacks were read (0: unread), */
    uint64_t span;      /* the wall time from its previous tick to this one, */
    scry_frame_t rec_leaf; /* the leaf Python frame of its latest records, */
    uint8_t rec_kind;      /* and the IP kind that carried most of their CPU (0: none) */
} idle_thread_t;

struct sampler_idle {
    idle_thread_t *tab, *next; /* sorted by tid; NEXT: the probe's new table */
    size_t n;
    proc_threads_t *states; /* stat files: a thread's scheduler state */
};

sampler_idle_t *sampler__idle_new(pid_t pid)
{
    sampler_idle_t *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->tab = calloc(PROC_TASKS_MAX, sizeof *d->tab);
    d->next = calloc(PROC_TASKS_MAX, sizeof *d->next);
    d->states = proc_threads_new(pid);
    if (!d->tab || !d->next || !d->states) {
        sampler__idle_free(d);
        return NULL;
    }
    return d;
}

void sampler__idle_free(sampler_idle_t *d)
{
    if (!d)
        return;
    free(d->tab);
    free(d->next);
    proc_threads_free(d->states);
    free(d);
}

static int cmp_tid(const void *a, const void *b)
{
    pid_t x = ((const idle_thread_t *)a)->tid, y = ((const idle_thread_t *)b)->tid;
    return (x > y) - (x < y);
}

static idle_thread_t *find(sampler_idle_t *d, pid_t tid)
{
    idle_thread_t key = {.tid = tid};
    return d->n ? bsearch(&key, d->tab, d->n, sizeof key, cmp_tid) : NULL;
}

void sampler__idle_probe(sampler_t *s, sampler_idle_t *d, const perfev_t *ev, const pid_t *tids,
                         size_t n, uint64_t now)
{
    uint64_t cap = SAMPLER_HELD_INTERVALS * s->interval_ns;
    size_t k = 0;
    for (size_t i = 0; i < n && k < PROC_TASKS_MAX; i++) {
        const idle_thread_t *old = find(d, tids[i]);
        idle_thread_t *t = &d->next[k];
        if (old)
            *t = *old;
        else
            *t = (idle_thread_t){.tid = tids[i]};
        uint64_t c = 0;
        t->probe = 0;
        if (tids[i] <= 0 || perfev_thread_clock(ev, t->tid, &c) != 0)
            continue; /* no event (or gone): not in the table */
        k++;
        t->probe = c ? c : 1;
        t->span = t->last_wall && now > t->last_wall ? now - t->last_wall : s->interval_ns;
        if (t->span > cap)
            t->span = cap;
        t->last_wall = now;
    }
    qsort(d->next, k, sizeof *d->next, cmp_tid);
    idle_thread_t *swap = d->tab;
    d->tab = d->next;
    d->next = swap;
    d->n = k;
}

void sampler__idle_records(sampler_idle_t *d, pid_t tid, const scry_frame_t *leaf,
                           const uint64_t by_kind[SAMPLER_IP_KINDS])
{
    idle_thread_t *t = find(d, tid);
    if (!t || !leaf)
        return;
    t->rec_leaf = *leaf;
    t->rec_kind = 0;
    for (int k = 1; k < SAMPLER_IP_KINDS; k++)
        if (by_kind[k] > (t->rec_kind ? by_kind[t->rec_kind] : 0))
            t->rec_kind = (uint8_t)k;
}

/* The class of a thread off its CPU in state STATE, its last switch off a CPU a preemption
 * (PREEMPTED 1) or not, whose stack TH has: docs/accuracy.md says why. */
static uint8_t off_cpu_class(const idle_thread_t *t, const pystate_thread_t *th, char state,
                             int preempted)
{
    unwind_classification_t cls = {.cls = SCRY_CLASS_SYSTEM};
    const scry_frame_t *leaf = th->nframes ? &th->frames[0] : NULL;
    if (state == 'R' && preempted == 1 && t->rec_kind && leaf &&
        leaf->function == t->rec_leaf.function && leaf->file == t->rec_leaf.file &&
        leaf->line == t->rec_leaf.line) {
        unwind_classify_ip(t->rec_kind, th->leaf_opclass, &cls); /* its records on the line */
    } else if (state == 'R' && preempted == 1) {
        /* no record on this line: the rule of a running sample without an instruction
         * pointer (the kernel gives a runnable thread's only to a tracer) */
        unwind_task_t ut = {.state = 'R', .sc = {.nr = PROC_SYSCALL_RUNNING}};
        if (th->gil_known)
            ut.gil = th->gil ? UNWIND_GIL_HELD : UNWIND_GIL_RELEASED;
        unwind_classify(&ut, NULL, 0, th->leaf_opclass, &cls);
    }
    return cls.cls;
}

void sampler__idle_charge(sampler_t *s, sampler_idle_t *d, const perfev_t *ev,
                          const pystate_thread_t *th, uint64_t now, sampler_emit_fn emit, void *ctx)
{
    idle_thread_t *t = find(d, th->tid);
    uint64_t c = 0;
    if (!t || !t->probe || !t->span || perfev_thread_clock(ev, th->tid, &c) != 0)
        return;
    uint64_t moment = s->tick_due && s->tick_due < now ? s->tick_due : now;
    int off = perfev_thread_off_cpu_at(ev, th->tid, moment);
    if (off == 0 || (off < 0 && (c ? c : 1) != t->probe))
        return; /* on a CPU at the tick's moment (often taken off it by scry's own wake-up) */
    int preempted = perfev_thread_preempted(ev, th->tid, NULL);
    char state = proc_threads_state(d->states, th->tid, NULL);
    if (state == 0)
        return;
    sampler__emit(s, th, NULL, 0, off_cpu_class(t, th, state, preempted), 0, t->span, 0, now, emit,
                  ctx);
    t->span = 0;
}
