#include "sampler.h"
#include "sampler_internal.h"

#include "classify.h"
#include "merge.h"
#include "procinfo.h"
#include "scry_err.h"
#include "tasks.h"
#include "unwind.h"
#include "scry_proc.h"
#include "scry_time.h"

#include <errno.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Chooses the back end; returns 0, or SCRY_E_PERM when perf was forced and refused. Auto:
 * perf, else ptrace; dump, --blocking: ptrace. bpf only by name (docs/architecture.md,
 * "Stacks read in the kernel": not auto's yet). */
static int choose_backend(sampler_t *s)
{
    const char *want = s->opts.backend ? s->opts.backend : "auto";
    s->backend = SAMPLER_PTRACE;
    if (!strcmp(want, "ptrace"))
        return 0;
    char why[256] = "";
    if (!strcmp(want, "bpf")) {
        int err = sampler__bpf_new(s, why, sizeof why);
        if (err)
            fprintf(stderr, "scry: --sampler bpf: %s\n", why);
        else
            s->backend = SAMPLER_BPF;
        return err;
    }
    int forced = !strcmp(want, "perf");
    /* A dump is one instant of every thread, and --blocking stops threads: the kernel's
     * CPU clock has nothing to say about either. */
    if (!forced && (s->opts.instant || s->opts.blocking)) {
        s->backend_note = s->opts.blocking ? "--blocking" : NULL;
        return 0;
    }
    int err = sampler__perf_new(s, why, sizeof why);
    if (err == 0) {
        s->backend = SAMPLER_PERF;
        return 0;
    }
    if (forced) {
        fprintf(stderr, "scry: --sampler perf: %s\n", why);
        return err;
    }
    snprintf(s->note, sizeof s->note, "perf events refused: %s", why);
    s->backend_note = s->note;
    return 0;
}

sampler_t *sampler_new(const sampler_opts_t *opts, pystate_target_t *t, strtab_t *strings)
{
    sampler_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    pid_t pid = pystate_target_info(t)->pid;
    s->opts = *opts;
    s->target = t;
    s->first = t;
    proc_read_exec_mark(pid, &s->exec_mark);
    proc_read_identity(pid, &s->start_time, NULL, 0);
    proc_container_t ct;
    if (proc_read_container(pid, &ct) == 0 && ct.id[0])
        snprintf(s->container, sizeof s->container, " [%s:%.12s]",
                 ct.runtime[0] ? ct.runtime : "container", ct.id);
    s->exec_checked_ns = scry_now_ns();
    s->strings = strings;
    s->snap = pystate_snapshot_new();
    s->tasks = proc_tasks_new(pid);
    s->s_truncated = strtab_intern(strings, "<truncated>");
    s->s_torn = strtab_intern(strings, "<changed while reading>");
    s->s_empty = strtab_intern(strings, "");
    s->s_gil_wait = strtab_intern(strings, "<waiting for the GIL>");
    s->interval_ns = (uint64_t)(1e9 / (opts->rate_hz > 0 ? opts->rate_hz : 100));
    if (opts->native)
        s->unwind = unwind_new(pid);
    if (opts->async_labels)
        s->async = pystate_async_labels_new(t);
    if (!s->snap || !s->tasks || !s->s_truncated || !s->s_torn || !s->s_empty || !s->s_gil_wait ||
        (opts->native && !s->unwind) || (opts->async_labels && !s->async)) {
        sampler_free(s);
        return NULL;
    }
    if (choose_backend(s) != 0) {
        sampler_free(s);
        return NULL;
    }
    return s;
}

void sampler_free(sampler_t *s)
{
    if (!s)
        return;
    sampler__perf_free(s->perf);
    sampler__bpf_free(s->bpf);
    proc_tasks_free(s->tasks); /* resumes anything still stopped */
    unwind_free(s->unwind);
    pystate_async_labels_free(s->async);
    pystate_snapshot_free(s->snap);
    if (s->target != s->first)
        pystate_target_free(s->target);
    free(s);
}

int sampler__reused(sampler_t *s)
{
    uint64_t start = 0;
    if (!s->gone && s->start_time &&
        proc_read_identity(pystate_target_info(s->target)->pid, &start, NULL, 0) == 0 &&
        start != s->start_time)
        s->gone = 1;
    return s->gone;
}

int sampler__follow_exec(sampler_t *s, int after_error)
{
    uint64_t now = scry_now_ns();
    uint64_t every = after_error ? 100000000ull : 500000000ull;
    if (now - s->exec_checked_ns < every)
        return 0;
    s->exec_checked_ns = now;
    pid_t pid = pystate_target_info(s->target)->pid;
    uint64_t mark = 0;
    if (proc_read_exec_mark(pid, &mark) != 0 || mark == 0 || mark == s->exec_mark)
        return 0;
    if (sampler__reused(s))
        return 0; /* not an exec: another process got the pid */
    /* Taken only once the new program is whole: its mark the same before and after the
     * open (the kernel sets it twice during an exec) and its runtime readable (not just
     * mapped); else looked at again later. */
    pystate_target_t *nt = NULL;
    char msg[256];
    uint64_t mark2 = 0;
    if (pystate_target_open_opts(pid, s->strings, &s->opts.open_opts, &nt, msg, sizeof msg) != 0)
        return 0;
    if (proc_read_exec_mark(pid, &mark2) != 0 || mark2 != mark ||
        pystate_sample(nt, s->snap) != 0 || pystate_snapshot_count(s->snap) == 0) {
        pystate_target_free(nt);
        return 0;
    }
    pystate_async_labels_t *labels = NULL;
    unwind_t *unw = NULL;
    if ((s->async && !(labels = pystate_async_labels_new(nt))) ||
        (s->unwind && !(unw = unwind_new(pid)))) {
        pystate_async_labels_free(labels);
        pystate_target_free(nt);
        return 0;
    }
    if (s->async) {
        pystate_async_labels_free(s->async);
        s->async = labels;
    }
    if (s->unwind) {
        unwind_free(s->unwind);
        s->unwind = unw;
    }
    if (s->target != s->first)
        pystate_target_free(s->target);
    s->target = nt;
    s->exec_mark = mark;
    s->stats.execs++;
    if (s->perf)
        sampler__perf_exec(s);
    if (s->bpf)
        sampler__bpf_exec(s);
    return 1;
}

const pystate_target_t *sampler_target(const sampler_t *s)
{
    return s ? s->target : NULL;
}

int sampler_refused(const sampler_opts_t *opts)
{
    return opts->backend && (!strcmp(opts->backend, "perf") || !strcmp(opts->backend, "bpf"));
}

int sampler_backend(const sampler_t *s)
{
    return s->backend;
}

const char *sampler_backend_desc(const sampler_t *s)
{
    if (s->backend == SAMPLER_PERF)
        return s->desc;
    if (s->backend == SAMPLER_BPF)
        return sampler__bpf_desc((sampler_t *)s);
    if (s->backend_note) {
        snprintf((char *)s->desc, sizeof s->desc, "ptrace and /proc (%s)", s->backend_note);
        return s->desc;
    }
    return "ptrace and /proc";
}

int sampler_set_rate(sampler_t *s, double rate_hz)
{
    if (!(rate_hz >= 0.01 && rate_hz <= 100000))
        return SCRY_E_INVAL;
    s->opts.rate_hz = rate_hz;
    s->interval_ns = (uint64_t)(1e9 / rate_hz);
    if (s->bpf)
        return sampler__bpf_set_rate(s->bpf, rate_hz);
    return s->perf ? sampler__perf_set_rate(s->perf, rate_hz) : 0;
}

double sampler_rate_hz(const sampler_t *s)
{
    return s->opts.rate_hz > 0 ? s->opts.rate_hz : 100;
}

const sampler_stats_t *sampler_stats(const sampler_t *s)
{
    return &s->stats;
}

static thread_label_t *label_slot(sampler_t *s, pid_t tid)
{
    return &s->labels[((uint32_t)tid * 2654435761u) % SAMPLER_LABELS];
}

/* A thread's name and its root-frame label, cached per tid and refreshed about once a
 * second (names change rarely; reading /proc each sample would cost three syscalls). */
static const thread_label_t *thread_label(sampler_t *s, pid_t tid, pid_t ns_tid, const char *pyname,
                                          uint64_t now)
{
    thread_label_t *l = label_slot(s, tid);
    /* A Python name missing from one reading of the names (read while the target runs:
     * a partial map) is kept; a thread does not lose its name. */
    if (!pyname && l->tid == tid && l->pyname)
        pyname = l->pyname;
    if (l->tid == tid && l->pyname == pyname && now - l->stamp < 1000000000ull)
        return l;
    char name[64], label[1100];
    /* The Python thread name (threading) when there is one, else the OS one (comm). */
    if (!pyname)
        proc_read_comm(pystate_target_info(s->target)->pid, tid, name, sizeof name);
    char own[48] = ""; /* a container's own id of the thread, when it differs */
    if (ns_tid > 0 && ns_tid != tid)
        snprintf(own, sizeof own, " [tid %d in its namespace]", (int)ns_tid);
    snprintf(label, sizeof label, "thread %d%s (%s)%s", (int)tid, own, pyname ? pyname : name,
             s->container);
    l->tid = tid;
    l->stamp = now;
    l->pyname = pyname;
    l->name = pyname ? pyname : strtab_intern(s->strings, name);
    l->label = strtab_intern(s->strings, label);
    if (!l->name)
        l->name = s->s_empty;
    if (!l->label)
        l->label = s->s_empty;
    return l;
}

const char *sampler_thread_name(sampler_t *s, pid_t tid)
{
    uint64_t now = scry_now_ns();
    const thread_label_t *l = label_slot(s, tid);
    if (l->tid == tid && l->pyname && now - l->stamp < 1000000000ull)
        return l->name; /* named within the second (memory samples come by thousands) */
    const pystate_thread_t *th = NULL;
    size_t n = pystate_snapshot_count(s->snap);
    for (size_t i = 0; i < n && !th; i++) {
        const pystate_thread_t *x = pystate_snapshot_thread(s->snap, i);
        if (x->tid == tid)
            th = x;
    }
    return thread_label(s, tid, th ? th->ns_tid : 0, th ? th->name : NULL, now)->name;
}

/* What a sample stands for: when the thread is running, the CPU time it really used
 * since it was last seen running (so CPU shares are real shares, also when more threads
 * are runnable than there are CPUs, and the total is kept when it is not running at every
 * tick); when it is off CPU (--idle), the wall time since its previous tick (so late or
 * skipped ticks lose no waiting time). Both capped, so one long pause claims no more than
 * ten intervals. */
static uint64_t sample_weight(const sampler_t *s, int running, const proc_task_t *task)
{
    uint64_t d = !task ? PROC_NO_DELTA : running ? task->cpu_delta : task->wall_delta;
    if (d == PROC_NO_DELTA)
        return s->interval_ns;
    uint64_t cap = 10 * s->interval_ns;
    return d < cap ? d : cap;
}

/* Builds the frames of one thread: its Python stack, merged with its native stack when
 * one was unwound. Returns the count. */
static uint32_t build_frames(sampler_t *s, const pystate_thread_t *th, const unwind_frame_t *nat,
                             size_t nn, uint32_t at)
{
    scry_frame_t *out = s->frames + at;
    uint32_t room = SAMPLER_MAX_FRAMES - 3 - PYSTATE_ASYNC_LABEL_DEPTH - at, n = 0;
    size_t merged = 0;
    if (nn && unwind_merge(nat, nn, th->frames, th->entry, th->nframes,
                           pystate_target_info(s->target)->minor, s->strings, out, room, &merged,
                           &s->merge_stats) == 0) {
        n = (uint32_t)merged;
    } else {
        for (uint32_t i = 0; i < th->nframes && n < room; i++)
            out[n++] = th->frames[i];
    }
    if (th->truncated)
        out[n++] = (scry_frame_t){s->s_truncated, s->s_empty, 0, SCRY_FRAME_OTHER};
    else if (th->torn)
        out[n++] = (scry_frame_t){s->s_torn, s->s_empty, 0, SCRY_FRAME_OTHER};
    return n;
}

void sampler__emit(sampler_t *s, const pystate_thread_t *th, const unwind_frame_t *nat, size_t nn,
                   uint8_t cls, uint8_t flags, uint64_t weight, int running, uint64_t time_ns,
                   sampler_emit_fn emit, void *ctx)
{
    uint32_t n = 0;
    if (flags & UNWIND_CLASSIFY_GIL_WAIT) /* a leaf that says why the line is waiting */
        s->frames[n++] = (scry_frame_t){s->s_gil_wait, s->s_empty, 0, SCRY_FRAME_OTHER};
    n += build_frames(s, th, nat, nn, n);
    if (s->async) { /* the running task, then the tasks awaiting it: the root is outermost */
        const char *tl[PYSTATE_ASYNC_LABEL_DEPTH];
        size_t nt =
            pystate_async_labels_get(s->async, th->tstate, time_ns, tl, PYSTATE_ASYNC_LABEL_DEPTH);
        for (size_t i = 0; i < nt; i++)
            s->frames[n++] = (scry_frame_t){tl[i], s->s_empty, 0, SCRY_FRAME_OTHER};
    }
    const thread_label_t *label = thread_label(s, th->tid, th->ns_tid, th->name, time_ns);
    if (s->opts.threads)
        s->frames[n++] = (scry_frame_t){label->label, s->s_empty, 0, SCRY_FRAME_THREAD};
    scry_sample_t smp = {
        .time_ns = time_ns,
        .weight_ns = weight,
        .tid = th->tid,
        .ns_tid = th->ns_tid != th->tid ? th->ns_tid : 0,
        .thread_name = label->name,
        .metric = SCRY_METRIC_CPU,
        .cls = cls,
        .gil = th->gil,
        .running = (uint8_t)(running != 0),
        .truncated = th->truncated,
        .torn = th->torn,
        .gil_wait = (flags & UNWIND_CLASSIFY_GIL_WAIT) != 0,
        .nframes = n,
        .frames = s->frames,
    };
    emit(&smp, ctx);
    s->stats.samples++;
}

uint32_t sampler__charge_count(const sampler_t *s, uint32_t n, uint64_t carried_ns)
{
    uint64_t whole = SAMPLER_CHARGE_MIN * s->interval_ns;
    if (whole < SAMPLER_CHARGE_WHOLE)
        whole = SAMPLER_CHARGE_WHOLE;
    if (n <= 1 || carried_ns <= whole)
        return n;
    uint64_t k = (uint64_t)n * whole / carried_ns; /* the records that make up WHOLE ns */
    uint32_t quarter = n / 4 + (n % 4 != 0);
    if (k < quarter)
        k = quarter;
    return k < n ? (uint32_t)k : n;
}

void sampler__emit_split(sampler_t *s, const pystate_thread_t *th, uint8_t cls, uint64_t amount,
                         uint32_t n, uint64_t time_ns, sampler_emit_fn emit, void *ctx)
{
    uint64_t each = amount / n;
    for (uint32_t i = 0; i < n; i++)
        sampler__emit(s, th, NULL, 0, cls, 0, i + 1 < n ? each : amount - each * i, 1, time_ns,
                      emit, ctx);
}

/* tick_charge (scry serve), called by pystate once the target's memory was read and before
 * runnable thread TASK's stack is walked: 1 when it was on a CPU, without a break, from the
 * read of its CPU time (the tick's task list, before the target's memory was read) to now
 * (tasks_on_cpu): the stack read between is where it ran. Else 0 (its stack is not used):
 * a thread woken up from a wait and not on a CPU yet, or waiting again, has its stack where
 * it waits. */
static int on_cpu_while_read(sampler_t *s, proc_task_t *task)
{
    task->on_cpu = (uint8_t)proc_tasks_on_cpu(s->tasks, task);
    if (!task->on_cpu)
        s->stats.held++;
    return task->on_cpu;
}

static void emit_thread(sampler_t *s, const pystate_thread_t *th, proc_task_t *task, uint64_t now,
                        sampler_emit_fn emit, void *ctx)
{
    char state = task ? task->state : 0;
    size_t nn = 0;
    if (s->unwind && task && task->stopped &&
        unwind_thread(s->unwind, th->tid, s->native, UNWIND_MAX_DEPTH, &nn) != 0)
        nn = 0;
    unwind_task_t ut = {.state = state, .sc = {.nr = PROC_SYSCALL_UNKNOWN}};
    if (th->gil_known)
        ut.gil = th->gil ? UNWIND_GIL_HELD : UNWIND_GIL_RELEASED;
    /* Running without the GIL and not unwound: C code that let go of it, unless the thread
     * is on its way into or out of a wait (a GIL wait, a sleep): its system call says. */
    if (!nn && ut.gil == UNWIND_GIL_RELEASED && state == 'R' &&
        proc_read_task_syscall(pystate_target_info(s->target)->pid, th->tid, &ut.sc) != 0)
        ut.sc.nr = PROC_SYSCALL_UNKNOWN;
    unwind_classification_t cls = {.cls = SCRY_CLASS_PYTHON};
    unwind_classify(&ut, nn ? s->native : NULL, nn, th->leaf_opclass, &cls);
    int running = state == 'R' || state == 0;
    if (task && task->on_cpu) {
        /* tick_charge: a tick falls at a moment that has nothing to do with what the
         * target does, so a thread found on a CPU stands for an interval there (not the
         * time since it was last looked at: a target that used no CPU is looked at again
         * only a second later; docs/daemon.md, "Where the CPU is charged") */
        sampler__emit(s, th, NULL, 0, cls.cls, cls.flags, s->interval_ns, 1, now, emit, ctx);
        return;
    }
    /* --idle: every thread stands for the wall time since its previous tick, charged where
     * the tick finds it, running, runnable or waiting (docs/accuracy.md, "Wall time") */
    uint64_t weight = sample_weight(s, running && !s->opts.idle, task);
    if (task) { /* the weight of its stops not counted (proc_tasks_stop_counts) */
        weight += task->carry_ns;
        task->carry_ns = 0;
    }
    sampler__emit(s, th, s->native, nn, cls.cls, cls.flags, weight, running, now, emit, ctx);
}

/* Whether a thread in STATE is sampled this tick (its Python stack decides the rest). */
static int wanted(const sampler_t *s, char state)
{
    return s->opts.idle || state == 'R';
}

/* Whether this tick judges running threads by on_cpu_while_read (scry serve's ticks, when no
 * thread is stopped: a stopped thread runs no CPU). */
static int charge_on_cpu(const sampler_t *s)
{
    return s->opts.tick_charge && !s->opts.blocking && !s->opts.native && !s->opts.idle;
}

/* pystate's thread filter without --idle: only the threads that are running (as this
 * tick's task list has them; with tick_charge, and on a CPU while read); the others would
 * not be emitted. */
static int running_now(void *ctx, int32_t tid)
{
    sampler_t *s = ctx;
    proc_task_t *task = proc_tasks_find(s->tasks, tid);
    if (!task || !wanted(s, task->state))
        return 0;
    return !charge_on_cpu(s) || task->state != 'R' || on_cpu_while_read(s, task);
}

int sampler__stack_wanted(const sampler_t *s, const pystate_thread_t *th)
{
    /* a torn one left out is counted in pystate's stats.dropped */
    if (th->torn)
        return s->opts.partial;
    return th->nframes > 0 || th->truncated; /* none: a thread starting or finishing */
}

int sampler__snapshot_gil(sampler_t *s)
{
    int any_gil = 0;
    s->stats.finalizing = pystate_snapshot_finalizing(s->snap);
    for (size_t i = 0; i < pystate_snapshot_count(s->snap); i++)
        any_gil |= pystate_snapshot_thread(s->snap, i)->gil;
    return any_gil;
}

int sampler__sample_threads(sampler_t *s, pystate_thread_filter_fn fn, void *ctx)
{
    pystate_set_thread_filter(s->target, fn, ctx);
    int err = pystate_sample(s->target, s->snap);
    pystate_set_thread_filter(s->target, NULL, NULL);
    return err;
}

int sampler_tick(sampler_t *s, sampler_emit_fn emit, void *ctx)
{
    if (s->backend == SAMPLER_PERF)
        return sampler__perf_tick(s, emit, ctx);
    if (s->backend == SAMPLER_BPF)
        return sampler__bpf_tick(s, emit, ctx);
    uint64_t t0 = scry_now_ns();
    s->stats.ticks++;
    pid_t pid = pystate_target_info(s->target)->pid;
    if (proc_tasks_refresh(s->tasks) < 0) {
        s->stats.target_exited = 1;
        return SCRY_E_GONE;
    }
    /* Threads are stopped only for --blocking (all of them) or --native (those that will
     * be unwound), and all are resumed before this function returns. */
    if (s->opts.blocking) {
        proc_tasks_stop_all(s->tasks);
    } else if (s->opts.native) {
        /* Stop the threads that will be unwound before reading their Python stacks, so
         * both stacks come from the same instant and merge exactly. */
        for (size_t i = 0;; i++) {
            proc_task_t *ti = proc_tasks_at(s->tasks, i);
            if (!ti)
                break;
            if (wanted(s, ti->state))
                proc_tasks_stop(s->tasks, ti);
        }
    }
    int err = sampler__follow_exec(s, 0) ? SCRY_E_AGAIN
              : s->gone                  ? SCRY_E_GONE
                        : sampler__sample_threads(s, s->opts.idle ? NULL : running_now, s);
    if (err) {
        proc_tasks_resume_all(s->tasks);
        if (err == SCRY_E_GONE || proc_exists(pid) != 0) {
            s->stats.target_exited = 1;
            return SCRY_E_GONE;
        }
        if (err == SCRY_E_AGAIN || sampler__follow_exec(s, 1)) {
            s->stats.busy_ns += scry_now_ns() - t0;
            return 0; /* it exec'd: the next tick reads the new program */
        }
        s->stats.errors++;
        s->stats.busy_ns += scry_now_ns() - t0;
        return err == SCRY_E_PERM || err == SCRY_E_NOMEM ? err : 0;
    }
    size_t n = pystate_snapshot_count(s->snap);
    int any_gil = sampler__snapshot_gil(s);
    for (size_t i = 0; i < n; i++) {
        const pystate_thread_t *th = pystate_snapshot_thread(s->snap, i);
        proc_task_t *task = proc_tasks_find(s->tasks, th->tid);
        if (!task && th->tid > 0)
            proc_tasks_mark_stale(s->tasks); /* a new thread: list them again next tick */
        char state = task ? task->state : 0;
        if (s->opts.gil && !th->gil)
            continue;
        if (!wanted(s, state))
            continue;
        if (!sampler__stack_wanted(s, th))
            continue;
        if (task && !proc_tasks_stop_counts(task)) {
            uint64_t w = sample_weight(s, 1, task);
            if (task->carry_ns < 100 * s->interval_ns)
                task->carry_ns += w;
            s->stats.syscall_stops++;
            continue;
        }
        emit_thread(s, th, task, t0, emit, ctx);
    }
    proc_tasks_resume_all(s->tasks);
    if (any_gil)
        s->stats.gil_ticks++;
    s->stats.busy_ns += scry_now_ns() - t0;
    return 0;
}

static volatile sig_atomic_t suspend_requested;
static void (*suspend_before)(void);
static void (*suspend_after)(void);

static void on_tstp(int sig)
{
    (void)sig;
    suspend_requested = 1;
}

void sampler_handle_job_control(void (*before_stop)(void), void (*after_cont)(void))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_tstp;
    sigemptyset(&sa.sa_mask);
    suspend_before = before_stop;
    suspend_after = after_cont;
    sigaction(SIGTSTP, &sa, NULL);
}

/* Between rounds: lets go of every thread still held (stops that timed out), then stops
 * scry itself as the default SIGTSTP action would. */
static void suspend_self(void)
{
    uint64_t give_up = scry_now_ns() + 2000000000ull;
    while (proc_reap_pending() > 0 && scry_now_ns() < give_up) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (suspend_before)
        suspend_before();
    suspend_requested = 0;
    raise(SIGSTOP);
    if (suspend_after)
        suspend_after();
}

int sampler__suspend_if_requested(void)
{
    if (!suspend_requested)
        return 0;
    suspend_self();
    return 1;
}

/* The perf back end reads a thread's Python stack when the kernel's record of its CPU
 * sample wakes us: the sooner it runs, the likelier the stack is still the one sampled.
 * With the default slice (about 1.5 ms on EEVDF kernels), a woken scry waited for the
 * target's slice to end on its CPU, about 1 ms: a thread that had gone to sleep since was
 * charged to its sleep line (20% of a demo's CPU on `time.sleep`). A 100 us slice (the
 * kernel's minimum; Linux 6.12+, no privilege needed, ignored by older kernels) lets the
 * wake-up preempt it: stacks are read about 150 us after their record. scry runs for tens
 * of microseconds per read, so the target loses no CPU time and little wall time. */
void sampler__ask_short_slice(void)
{
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } attr = {.size = 48, .policy = SCHED_OTHER, .runtime = 100000};
    (void)syscall(SYS_sched_setattr, 0, &attr, 0);
}

int sampler_run(sampler_t *s, double duration_s, volatile sig_atomic_t *stop, sampler_emit_fn emit,
                void *ctx, int (*tick_cb)(sampler_t *, void *), void *tick_ctx)
{
    uint64_t start = scry_now_ns();
    uint64_t end = duration_s > 0 ? start + (uint64_t)(duration_s * 1e9) : UINT64_MAX;
    uint64_t next = start;
    int perf = s->backend == SAMPLER_PERF;
    uint64_t last_read = 0;
    /* A tick is late when it runs more than this after it was due: half an interval, and
     * three quarters with the perf back end, whose ticks wait up to half an interval for
     * a record (below). */
    /* The bpf back end's ring batches the samples: it is drained every STEP, not at every
     * sample (with --idle at each tick: each reads every thread's stack anyway). */
    uint64_t step =
        s->backend == SAMPLER_BPF && !s->opts.idle && s->interval_ns < SAMPLER_BPF_DRAIN_NS
            ? SAMPLER_BPF_DRAIN_NS
            : s->interval_ns;
    uint64_t late_after = perf ? s->interval_ns / 4 * 3 : step / 2;
    /* Without --idle a tick of the perf back end that no record preceded has nothing to
     * do (each record is a slice of CPU time; a tick only reads what records say ran): the
     * wait then lasts until a record comes, at most SAMPLER_QUIET_WAIT_NS, and the ticks
     * that passed meanwhile count as taken. A wait with a near deadline costs a timer
     * armed and cancelled at every sample (a fifth of a sample's CPU in a VM). */
    int quiet_ok = perf && !s->opts.idle;
    uint64_t quiet_wait =
        s->interval_ns * 2 > SAMPLER_QUIET_WAIT_NS ? s->interval_ns * 2 : SAMPLER_QUIET_WAIT_NS;
    uint64_t woke_due = 0; /* when the last wait ended without a record: its deadline */
    int idle_timed = (perf || s->backend == SAMPLER_BPF) && s->opts.idle;
    if (perf)
        sampler__ask_short_slice();
    while (!(stop && *stop)) {
        if (sampler__suspend_if_requested())
            next = scry_now_ns(); /* the time suspended is not lateness */
        uint64_t now = scry_now_ns();
        if (now >= end)
            break;
        /* --idle with perf or bpf: the ticks keep their clock (sampler__idle_charge: the
         * moment a tick stands for must have nothing to do with what the target does) */
        if (idle_timed ? now < next : now + step / 2 < next) {
            /* Woken before the tick by a record (perf) or a signal: read the stacks of the
             * threads that ran while they are still the ones sampled; the tick stays due. */
            if (perf) {
                /* Many busy threads: at most four reads that found records per interval
                 * (each reads every thread's stack), however many records wake us. */
                uint64_t gap = s->interval_ns / 4;
                if (now < last_read + gap) {
                    struct timespec ts = {(time_t)((last_read + gap) / 1000000000ull),
                                          (long)((last_read + gap) % 1000000000ull)};
                    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
                }
                uint64_t before = s->stats.read_records;
                uint64_t t_read = scry_now_ns();
                int err = sampler__perf_read_early(s, emit, ctx);
                if (s->stats.read_records != before)
                    last_read = t_read;
                if (err)
                    return err == SCRY_E_GONE ? 0 : err;
            }
        } else {
            /* A tick (a record that woke us in the half interval before it counts as it). */
            /* With quiet waits a tick is late when its wait's deadline passed long ago
             * (how stale a record's read was is the read delay); ticks skipped while no
             * record came were empty, and are counted as taken. */
            uint64_t due = quiet_ok ? (woke_due ? woke_due : now) : next;
            if (now > due + late_after) {
                uint64_t late = now - due;
                s->stats.late++;
                s->stats.late_total_ns += late;
                if (late > s->stats.late_max_ns)
                    s->stats.late_max_ns = late;
            }
            if (quiet_ok && now >= next + s->interval_ns)
                s->stats.ticks += (now - next) / s->interval_ns;
            uint64_t before = s->stats.read_records;
            s->tick_due = idle_timed ? next : 0;
            int err = sampler_tick(s, emit, ctx);
            s->tick_due = 0;
            if (err)
                return err == SCRY_E_GONE ? 0 : err;
            if (s->stats.read_records != before)
                last_read = now;
            if (tick_cb && tick_cb(s, tick_ctx))
                break;
            next += step;
            now = scry_now_ns();
            if (next < now) {
                /* Fell behind: skip missed deadlines rather than bursting. */
                uint64_t behind = (now - next) / step;
                next += behind * step;
                if (next < now)
                    next += step;
            }
            if (next > end)
                next = end;
        }
        if (perf) {
            /* The tick waits for a record (whose read does the tick's work): a busy thread
             * then costs one wake-up per sample, not one for its record and another for
             * the tick. Not with --idle (its ticks keep their clock), else up to quiet_wait. */
            uint64_t wake = next + (quiet_ok ? quiet_wait : idle_timed ? 0 : s->interval_ns / 2);
            if (wake > end)
                wake = end;
            woke_due = sampler__perf_wait(s, wake) ? 0 : wake;
        } else {
            struct timespec ts = {(time_t)(next / 1000000000ull), (long)(next % 1000000000ull)};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        }
    }
    return 0;
}
