/* targets.c - `scry serve`'s targets: selection, opening, idle detection, sampling.
 *
 * Cost follows the CPU the targets burn: a target is looked at through one pread of its
 * /proc/PID/stat (utime + stime of all its threads). A target that used no CPU since the
 * last look is not sampled and is looked at again only after SERVE_IDLE_CHECK_NS; one that
 * did is sampled at its rate. Checks are aligned on multiples of their period, so targets
 * with the same rate share one wake-up. CPU a target used between two samples is not lost:
 * a thread carries it until a tick finds it on a CPU, and it is charged to the stack it has
 * then (sampler_opts.tick_charge; docs/daemon.md, "Where the CPU is charged").
 * A busy target sampled through perf events is not looked at in /proc: its tick drains its
 * task-clock rings (no system call when it did not run), and their records say whether it
 * did; after a second without any it is checked at the idle period again.
 *
 * Where the kernel allows system-wide perf events (root, CAP_PERFMON), it says which
 * processes ran: a cpu-clock event per CPU at SERVE_WHORAN_HZ, idle time excluded, gives
 * the pid on that CPU at each tick. An idle target that was not seen is then looked at
 * only every SERVE_WHORAN_RECHECK_NS instead of every second: 200 idle services cost a few
 * records per CPU instead of 200 reads of /proc a second.
 */
#include "log.h"
#include "process.h"
#include "scry_proc.h"
#include "select.h"
#include "state.h"
#include "scry_time.h"

#include "scry_err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t comm_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static serve_target_t *find_target(serve_state_t *st, pid_t pid, size_t *idx)
{
    for (size_t i = 0; i < st->n_targets; i++) {
        if (st->targets[i]->pid == pid) {
            if (idx)
                *idx = i;
            return st->targets[i];
        }
    }
    return NULL;
}

void serve_target_free(serve_target_t *t)
{
    if (!t)
        return;
    sampler_free(t->sampler);
    pystate_target_free(t->py);
    strtab_free(t->strings);
    if (t->stat_fd >= 0)
        close(t->stat_fd);
    free(t);
}

static void remove_target(serve_state_t *st, size_t i, const char *why)
{
    serve_target_t *t = st->targets[i];
    uint64_t torn = t->sampler ? pystate_target_stats(sampler_target(t->sampler)).dropped : 0;
    serve_log("target %d (%s) %s after %llu samples (%llu torn stacks dropped)", (int)t->pid,
              t->service, why, (unsigned long long)t->samples, (unsigned long long)torn);
    if (t->win && t->win->live_targets > 0)
        t->win->live_targets--;
    serve_target_free(t);
    st->targets[i] = st->targets[--st->n_targets];
}

static void remove_pending(serve_state_t *st, pid_t pid)
{
    for (size_t i = 0; i < st->n_pending; i++) {
        if (st->pending[i].pid == pid) {
            st->pending[i] = st->pending[--st->n_pending];
            return;
        }
    }
}

/* The rejected list is sorted by pid. */
static serve_rejected_t *find_rejected(serve_state_t *st, pid_t pid)
{
    size_t lo = 0, hi = st->n_rejected;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (st->rejected[mid].pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < st->n_rejected && st->rejected[lo].pid == pid ? &st->rejected[lo] : NULL;
}

static void add_rejected(serve_state_t *st, pid_t pid, uint64_t start_time, const char *comm,
                         int maps_checked)
{
    serve_rejected_t *r = find_rejected(st, pid);
    if (r) {
        r->start_time = start_time;
        r->comm_hash = comm_hash(comm);
        r->maps_checked = maps_checked;
        return;
    }
    if (st->n_rejected >= 4u << 20)
        return;
    serve_rejected_t *n = realloc(st->rejected, (st->n_rejected + 1) * sizeof *n);
    if (!n)
        return;
    st->rejected = n;
    size_t i = st->n_rejected;
    while (i > 0 && st->rejected[i - 1].pid > pid) {
        st->rejected[i] = st->rejected[i - 1];
        i--;
    }
    st->rejected[i] = (serve_rejected_t){pid, start_time, comm_hash(comm), maps_checked};
    st->n_rejected++;
}

static void forget_rejected(serve_state_t *st, pid_t pid)
{
    serve_rejected_t *r = find_rejected(st, pid);
    if (!r)
        return;
    size_t i = (size_t)(r - st->rejected);
    memmove(r, r + 1, (st->n_rejected - i - 1) * sizeof *r);
    st->n_rejected--;
}

void serve_targets_exited(serve_state_t *st, pid_t pid)
{
    size_t i;
    for (size_t k = 0; k < st->n_fresh; k++) {
        if (st->fresh[k].pid == pid) {
            st->fresh[k] = st->fresh[--st->n_fresh];
            break;
        }
    }
    if (find_target(st, pid, &i))
        remove_target(st, i, "exited");
    remove_pending(st, pid);
    forget_rejected(st, pid);
}

void serve_targets_consider(serve_state_t *st, pid_t pid, int exec, int maps)
{
    maps = maps && st->cfg->all_python > 0;
    if (pid <= 0 || pid == getpid())
        return;
    uint64_t start = 0;
    char comm[32];
    if (proc_read_identity(pid, &start, comm, sizeof comm) != 0) {
        serve_targets_exited(st, pid);
        return;
    }
    size_t i;
    serve_target_t *t = find_target(st, pid, &i);
    if (t) {
        if (!exec && t->start_time == start && strcmp(t->comm, comm) == 0)
            return; /* known, unchanged */
        remove_target(st, i, t->start_time != start ? "was replaced (PID reused)" : "exec'd");
    }
    serve_rejected_t *r = find_rejected(st, pid);
    if (r && !exec && r->start_time == start && r->comm_hash == comm_hash(comm) &&
        (r->maps_checked || !maps))
        return;
    for (size_t k = 0; k < st->n_pending; k++) {
        if (st->pending[k].pid == pid) {
            if (st->pending[k].start_time == start && !exec)
                return;
            st->pending[k] = st->pending[--st->n_pending];
            break;
        }
    }
    proc_process_t *p = malloc(sizeof *p);
    if (!p)
        return;
    char name[80];
    double rate;
    /* match rules only: the command line and executable decide, two reads */
    if (proc_process_read_command(pid, p) != 0 || !serve_select_may_hold(st->cfg, p)) {
        free(p);
        add_rejected(st, pid, start, comm, 1);
        return;
    }
    int sel = proc_process_read(pid, p, maps) == 0
                  ? serve_select(st->cfg, p, name, sizeof name, &rate)
                  : SERVE_SELECT_NONE;
    free(p);
    if (sel == SERVE_SELECT_NONE) {
        add_rejected(st, pid, start, comm, maps || st->cfg->all_python <= 0);
        return;
    }
    forget_rejected(st, pid);
    if (st->n_pending >= SERVE_MAX_PENDING)
        return;
    uint64_t now = scry_now_ns();
    st->pending[st->n_pending++] = (serve_pending_t){pid, start, now, now, 0};
}

/* Whether PID is about to be considered or opened: a program it exec'd less than
 * SERVE_FRESH_DELAY_NS ago, or a pending target. A program that forks at once (a pre-fork
 * server's master, a pool) forks before it is a target; forks of processes that exec'd
 * nothing new stay ignored. */
static int is_coming(const serve_state_t *st, pid_t pid)
{
    for (size_t k = 0; k < st->n_fresh; k++)
        if (st->fresh[k].pid == pid && st->fresh[k].exec)
            return 1;
    for (size_t k = 0; k < st->n_pending; k++)
        if (st->pending[k].pid == pid)
            return 1;
    return 0;
}

void serve_targets_notice(serve_state_t *st, pid_t pid, int exec, pid_t parent, uint64_t now,
                          uint64_t exec_ns)
{
    if (!exec && parent > 0 && !find_target(st, parent, NULL) && !find_target(st, pid, NULL) &&
        !is_coming(st, parent))
        return; /* a fork of a process we do not profile runs the same program */
    for (size_t k = 0; k < st->n_fresh; k++) {
        if (st->fresh[k].pid == pid) {
            st->fresh[k].exec |= exec;
            if (exec_ns > st->fresh[k].exec_ns)
                st->fresh[k].exec_ns = exec_ns;
            st->fresh[k].due_ns = now + SERVE_FRESH_DELAY_NS;
            return;
        }
    }
    if (st->n_fresh >= SERVE_MAX_FRESH) {
        st->scan_requested = 1;
        return;
    }
    st->fresh[st->n_fresh++] =
        (serve_fresh_t){pid, exec, exec ? exec_ns : 0, now + SERVE_FRESH_DELAY_NS};
}

uint64_t serve_targets_fresh(serve_state_t *st, uint64_t now)
{
    uint64_t next = UINT64_MAX;
    for (size_t k = 0; k < st->n_fresh;) {
        serve_fresh_t f = st->fresh[k];
        if (f.due_ns > now) {
            if (f.due_ns < next)
                next = f.due_ns;
            k++;
            continue;
        }
        st->fresh[k] = st->fresh[--st->n_fresh];
        serve_target_t *t = f.exec && f.exec_ns ? find_target(st, f.pid, NULL) : NULL;
        if (t && t->opened_ns > f.exec_ns)
            f.exec = 0; /* opened after that exec: it is the program the target reads */
        serve_targets_consider(st, f.pid, f.exec, 0);
    }
    return next;
}

static void scan_cb(void *ctx, enum proc_discover_event ev, pid_t pid, pid_t parent,
                    uint64_t when_ns)
{
    (void)ev;
    (void)parent;
    (void)when_ns;
    serve_targets_consider(ctx, pid, 0, 1);
}

void serve_targets_scan(serve_state_t *st)
{
    /* forget rejected processes that are gone (the list is rebuilt from what exists) */
    size_t w = 0;
    for (size_t i = 0; i < st->n_rejected; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d", (int)st->rejected[i].pid);
        if (access(path, F_OK) == 0)
            st->rejected[w++] = st->rejected[i];
    }
    st->n_rejected = w;
    proc_discover_scan(scan_cb, st);
    for (size_t i = 0; i < st->n_targets;) {
        uint64_t start;
        char comm[32];
        serve_target_t *t = st->targets[i];
        if (proc_read_identity(t->pid, &start, comm, sizeof comm) != 0) {
            remove_target(st, i, "exited");
            continue;
        }
        if (start != t->start_time || strcmp(comm, t->comm) != 0) {
            pid_t pid = t->pid;
            remove_target(st, i, start != t->start_time ? "was replaced (PID reused)" : "exec'd");
            serve_targets_consider(st, pid, 1, 1);
            continue;
        }
        i++;
    }
}

double serve_target_rate(const serve_state_t *st, const serve_target_t *t)
{
    double base = t->set_rate_hz > 0    ? t->set_rate_hz
                  : t->rule_rate_hz > 0 ? t->rule_rate_hz
                                        : st->cfg->rate_hz;
    double r = base * st->rate_factor;
    return r < 0.1 ? 0.1 : r;
}

static int read_cpu_ticks(serve_target_t *t, uint64_t *ticks)
{
    char buf[1024];
    ssize_t n = pread(t->stat_fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return SCRY_E_GONE;
    uint64_t ut = 0, stime = 0; /* fields 14 and 15: user and system clock ticks */
    if (proc_parse_stat_u64(buf, (size_t)n, 14, &ut) != 0 ||
        proc_parse_stat_u64(buf, (size_t)n, 15, &stime) != 0)
        return SCRY_E_GONE;
    *ticks = ut + stime;
    return 0;
}

/* The sampler of target T, with the configured back end. Threads are picked up within a
 * second, as targets are. The back end is named by a static string (the sampler keeps the
 * pointer, a reload frees the configuration's). bpf: the targets share one loaded program
 * per interpreter layout (st->bpf_share; one each would cost 2.5 MiB of kernel memory and a
 * verifier run per target). Where the bpf back end is refused (BPF not allowed or not built,
 * a version it does not walk: sampler_new printed why), the target is sampled with perf
 * events (or ptrace where those are refused too), and the log says so.
 * Returns 0 or SCRY_E_NOMEM. */
static int new_sampler(serve_state_t *st, serve_target_t *t)
{
    const char *want = st->cfg->sampler ? st->cfg->sampler : "auto";
    const char *backend = !strcmp(want, "ptrace") ? "ptrace"
                          : !strcmp(want, "perf") ? "perf"
                          : !strcmp(want, "bpf")  ? "bpf"
                                                  : NULL;
    sampler_opts_t so = {.rate_hz = serve_target_rate(st, t),
                         .list_every_s = 1.0,
                         .tick_charge = 1,
                         .backend = backend};
    if (backend && !strcmp(backend, "bpf") && !st->bpf_share &&
        !(st->bpf_share = sampler_bpf_share_new()))
        return SCRY_E_NOMEM;
    so.bpf_share = st->bpf_share;
    t->sampler = sampler_new(&so, t->py, t->strings);
    if (!t->sampler && backend && !strcmp(backend, "bpf")) {
        so.backend = NULL;
        t->sampler = sampler_new(&so, t->py, t->strings);
        if (t->sampler)
            serve_log("target %d: sampler = bpf refused (the line above says why): %s instead",
                      (int)t->pid,
                      sampler_backend(t->sampler) == SAMPLER_PERF ? "perf events" : "ptrace");
    }
    return t->sampler ? 0 : SCRY_E_NOMEM;
}

static int open_target(serve_state_t *st, serve_pending_t *pd, char *msg, size_t msglen)
{
    proc_process_t *p = malloc(sizeof *p);
    serve_target_t *t = calloc(1, sizeof *t);
    int err = SCRY_E_NOMEM;
    if (!p || !t)
        goto fail;
    t->stat_fd = -1;
    t->opened_ns = scry_now_ns();
    err = proc_process_read(pd->pid, p, st->cfg->all_python > 0);
    if (err)
        goto fail;
    if (p->start_time != pd->start_time) {
        err = SCRY_E_GONE;
        goto fail;
    }
    char name[80];
    double rate = 0;
    if (serve_select(st->cfg, p, name, sizeof name, &rate) == SERVE_SELECT_NONE) {
        err = SCRY_E_NOTFOUND;
        goto fail;
    }
    t->pid = pd->pid;
    t->start_time = p->start_time;
    t->uid = p->uid;
    snprintf(t->comm, sizeof t->comm, "%s", p->comm);
    snprintf(t->service, sizeof t->service, "%.64s", name);
    snprintf(t->container, sizeof t->container, "%s", p->container);
    t->rule_rate_hz = rate;
    err = SCRY_E_NOMEM;
    if (!(t->strings = strtab_new()))
        goto fail;
    err = pystate_target_open(t->pid, t->strings, &t->py, msg, msglen);
    if (err)
        goto fail;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)t->pid);
    t->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (t->stat_fd < 0 || read_cpu_ticks(t, &t->cpu_ticks) != 0) {
        err = SCRY_E_GONE;
        goto fail;
    }
    t->cpu_ticks_w0 = t->cpu_ticks;
    if ((err = new_sampler(st, t)) != 0)
        goto fail;
    t->busy = 1; /* take a first sample at once */
    t->next_ns = 0;
    free(p);
    st->targets[st->n_targets++] = t;
    serve_log("target %d: %s%s%.12s, Python %s, %s", (int)t->pid, t->service,
              t->container[0] ? " in container " : "", t->container,
              pystate_target_info(t->py)->version, pystate_target_info(t->py)->interp_path);
    return 0;
fail:
    free(p);
    serve_target_free(t);
    return err;
}

void serve_targets_open_pending(serve_state_t *st, uint64_t now)
{
    for (size_t i = 0; i < st->n_pending;) {
        serve_pending_t *pd = &st->pending[i];
        if (pd->next_ns > now) {
            i++;
            continue;
        }
        if (st->n_targets >= SERVE_MAX_TARGETS) {
            serve_log("target %d not profiled: %d targets already", (int)pd->pid,
                      SERVE_MAX_TARGETS);
            *pd = st->pending[--st->n_pending];
            continue;
        }
        char msg[512] = "";
        int err = open_target(st, pd, msg, sizeof msg);
        if (err == 0 || err == SCRY_E_GONE || err == SCRY_E_NOPROC || err == SCRY_E_NOTFOUND) {
            *pd = st->pending[--st->n_pending];
            continue;
        }
        /* Not readable yet (an interpreter starting up), or not Python at all: retry with a
         * backoff (10 ms doubling to 1 s) for 10 s, then give up until it execs. */
        pd->tries++;
        if (now - pd->first_ns > SERVE_PENDING_MAX_NS || err == SCRY_E_PERM ||
            err == SCRY_E_UNSUPPORTED) {
            uint64_t start;
            char comm[32] = "";
            if (proc_read_identity(pd->pid, &start, comm, sizeof comm) == 0) {
                serve_log("process %d (%s) not profiled: %s", (int)pd->pid, comm,
                          msg[0] ? msg : scry_strerror(err));
                add_rejected(st, pd->pid, start, comm, 1);
            }
            *pd = st->pending[--st->n_pending];
            continue;
        }
        uint64_t backoff = 10000000ull << (pd->tries < 7 ? pd->tries : 7);
        pd->next_ns = now + (backoff > 1000000000ull ? 1000000000ull : backoff);
        i++;
    }
}

static void emit(const scry_sample_t *s, void *ctx)
{
    serve_target_t *t = ctx;
    if (!t->win)
        return;
    if (serve_agg_add(t->win->agg, s, t->pid, pystate_target_info(t->py)->version) == 0)
        t->samples++;
    else
        t->errors++;
}

void serve_whoran_open(serve_state_t *st)
{
    perfev_opts_t o = {.rate_hz = SERVE_WHORAN_HZ, .clock = PERFEV_CLOCK_CPU, .cpu_wide = 1};
    int rc = perfev_open(&o, &st->whoran);
    if (rc == 0)
        rc = perfev_set_cpus(st->whoran);
    if (rc > 0) {
        serve_log("idle targets: the kernel's per-CPU clock says which ran (%d CPUs at %d Hz); "
                  "the others are looked at every %llu s",
                  rc, SERVE_WHORAN_HZ,
                  (unsigned long long)(SERVE_WHORAN_RECHECK_NS / 1000000000ull));
        return;
    }
    perfev_free(st->whoran);
    st->whoran = NULL;
    serve_log("idle targets: looked at every second through /proc (per-CPU perf events "
              "refused: %s; CAP_PERFMON or perf_event_paranoid <= 0 allows them)",
              scry_strerror(rc));
}

static void whoran_cb(const perfev_sample_t *s, void *ctx)
{
    serve_state_t *st = ctx;
    st->whoran_records++;
    if (s->pid > 0 && st->n_ran < SERVE_MAX_RAN)
        st->ran[st->n_ran++] = s->pid;
}

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* Reads the per-CPU rings and marks the targets that were on a CPU since the last time: the
 * pids of the records sorted once, then one binary search per target (a host with many
 * CPUs gives thousands of records a second, and there may be thousands of targets). */
static void whoran_read(serve_state_t *st)
{
    st->n_ran = 0;
    perfev_read(st->whoran, whoran_cb, st);
    if (!st->n_ran)
        return;
    qsort(st->ran, st->n_ran, sizeof *st->ran, cmp_pid);
    for (size_t i = 0; i < st->n_targets; i++)
        if (bsearch(&st->targets[i]->pid, st->ran, st->n_ran, sizeof *st->ran, cmp_pid))
            st->targets[i]->seen = 1;
}

/* Makes target T's sampler sample at the rate the target has now (set-rate, its rule, the
 * global rate, the CPU budget's factor: serve_target_rate), and its window say the highest
 * rate its targets sample at. */
static void follow_rate(serve_state_t *st, serve_target_t *t)
{
    double rate = serve_target_rate(st, t);
    if (rate != sampler_rate_hz(t->sampler)) {
        int err = sampler_set_rate(t->sampler, rate);
        if (err)
            serve_log("target %d: rate %g Hz not taken by its sampler: %s", (int)t->pid, rate,
                      scry_strerror(err));
    }
    if (t->win && rate > t->win->rate_hz) {
        t->win->rate_hz = rate;
        serve_agg_set_rate(t->win->agg, rate);
    }
}

/* How much T's sampler has taken: the perf back end's records read, the bpf back end's
 * samples (its shared ring hands a target its records at any target's tick); a busy target
 * whose count moved ran, without a look at /proc. 0 for the ptrace back end. */
static uint64_t sampler_taken(const serve_target_t *t)
{
    const sampler_stats_t *ss = sampler_stats(t->sampler);
    int be = sampler_backend(t->sampler);
    return be == SAMPLER_PERF ? ss->read_records : be == SAMPLER_BPF ? ss->samples : 0;
}

static uint64_t align_up(uint64_t now, uint64_t period)
{
    return (now / period + 1) * period;
}

uint64_t serve_targets_tick(serve_state_t *st, uint64_t now)
{
    uint64_t next = UINT64_MAX;
    if (st->whoran)
        whoran_read(st);
    for (size_t i = 0; i < st->n_targets;) {
        serve_target_t *t = st->targets[i];
        if (t->next_ns > now) {
            if (t->next_ns < next)
                next = t->next_ns;
            i++;
            continue;
        }
        if (st->whoran && !t->busy && !t->seen && now - t->checked_ns < SERVE_WHORAN_RECHECK_NS) {
            st->idle_checks_skipped++; /* not on a CPU since the last look: still idle */
            t->next_ns = align_up(now, SERVE_IDLE_CHECK_NS);
            if (t->next_ns < next)
                next = t->next_ns;
            i++;
            continue;
        }
        t->seen = 0;
        t->checked_ns = now;
        /* A busy target sampled through perf events (perf or bpf back end) needs no look at
         * /proc: its own task-clock records say whether it ran (its exit shows in the
         * sampler's thread listing). */
        int used = -1;
        if (!t->busy || sampler_backend(t->sampler) == SAMPLER_PTRACE) {
            uint64_t ticks;
            if (read_cpu_ticks(t, &ticks) != 0) {
                remove_target(st, i, "exited");
                continue;
            }
            uint64_t delta = ticks - t->cpu_ticks;
            t->cpu_ticks = ticks;
            t->unsampled += delta;
            /* A target checked at the idle period that used a single clock tick (<= 1% of a
             * CPU) is sampled only once that adds up or every 10 s: the CPU is not lost (the
             * next sample weighs it), and a service that merely wakes up costs no sampling. */
            used = t->busy ? delta > 0
                           : t->unsampled >= 2 ||
                                 (t->unsampled >= 1 && now - t->last_sample_ns >= 10000000000ull);
        }
        if (used || t->busy) {
            t->unsampled = 0;
            t->last_sample_ns = now;
            if (!t->win) {
                t->win = serve_window_get(st, t->service, t->container[0] ? t->container : NULL);
                if (t->win)
                    t->win->live_targets++;
            }
            follow_rate(st, t);
            int err = sampler_tick(t->sampler, emit, t);
            if (err == SCRY_E_GONE) {
                remove_target(st, i, "exited");
                continue;
            }
            if (err)
                t->errors++;
            uint64_t taken = sampler_taken(t);
            if (used < 0)
                used = taken != t->taken;
            t->taken = taken;
        }
        /* CPU time moves in clock ticks (4-10 ms): a service on a third of a CPU often
         * shows none over one 20-50 ms period, so it stays at its rate for 1 s after it
         * last used CPU before it is checked at the idle period again. */
        if (used)
            t->busy_until_ns = now + SERVE_IDLE_CHECK_NS;
        t->busy = used || now < t->busy_until_ns;
        uint64_t period =
            t->busy ? (uint64_t)(1e9 / serve_target_rate(st, t)) : SERVE_IDLE_CHECK_NS;
        t->next_ns = align_up(now, period);
        if (t->next_ns < next)
            next = t->next_ns;
        i++;
    }
    return next;
}

void serve_targets_reselect(serve_state_t *st)
{
    proc_process_t *p = malloc(sizeof *p);
    if (!p)
        return;
    for (size_t i = 0; i < st->n_targets;) {
        serve_target_t *t = st->targets[i];
        char name[80];
        double rate;
        if (proc_process_read(t->pid, p, st->cfg->all_python > 0) != 0 ||
            serve_select(st->cfg, p, name, sizeof name, &rate) == SERVE_SELECT_NONE) {
            remove_target(st, i, "no longer selected");
            continue;
        }
        if (strcmp(name, t->service) != 0) {
            serve_log("target %d: service %s is now %s", (int)t->pid, t->service, name);
            snprintf(t->service, sizeof t->service, "%.64s", name);
            if (t->win && t->win->live_targets > 0)
                t->win->live_targets--;
            t->win = NULL;
        }
        t->rule_rate_hz = rate;
        i++;
    }
    free(p);
    st->n_rejected = 0; /* the rules changed: look at everything again */
    st->scan_requested = 1;
}
