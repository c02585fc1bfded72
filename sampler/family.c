/* family.c - a process and its descendants sampled as one program (family.h). */
#include "family.h"

#include "discover.h"
#include "procinfo.h"
#include "sampler_internal.h"
#include "scry_err.h"
#include "scry_proc.h"
#include "scry_time.h"

#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define SCAN_NS_ALONE     50000000ull    /* /proc scans without the connector */
#define SCAN_NS_CONNECTOR 1000000000ull  /* with it: a safety net for dropped events */
#define TRY_FAST_NS       200000000ull   /* a new program is tried every round at first, */
#define TRY_EVERY_NS      100000000ull   /* then every 100 ms, */
#define TRY_GIVE_UP_NS    10000000000ull /* and not after 10 s (until it execs again) */
#define EXEC_GRACE_NS     700000000ull   /* a sampler follows a Python exec within 500 ms */
#define SCAN_MAX          262144         /* processes a scan looks at */
#define LABEL_COMMAND_MAX 60             /* bytes of the command in the root frame */
#define FD_RESERVE_MIN    48             /* descriptors kept free for the members followed */
#define FD_RECOUNT_NS     100000000ull   /* /proc/self/fd counted at most this often */

enum member_state {
    M_WAITING,    /* not (yet) a Python scry reads: tried again */
    M_SAMPLED,    /* has a sampler */
    M_NOT_PYTHON, /* given up on until it execs */
    M_GONE,       /* exited */
};

typedef struct member {
    family_proc_info_t info;
    uint64_t start_time; /* with the pid, the process's identity */
    uint64_t mark;       /* exec mark of the program last tried or sampled */
    uint64_t program_since_ns;
    uint64_t last_try_ns;
    uint64_t mark_moved_ns;   /* sampled: when its mark first differed from the sampler's */
    int state;                /* enum member_state */
    int listed;               /* shown by family_procs */
    pystate_target_t *target; /* owned unless it is the caller's root target */
    sampler_t *smp;
    sampler_stats_t st;    /* its sampler's, kept after it is freed */
    uint64_t last_read_ns; /* perf: its last read between ticks */
    uint64_t torn;         /* torn stacks its target dropped */
    const char *label;     /* "process PID (command)" */
    void *hook_ctx;        /* the START hook's context */
} member_t;

struct family {
    pid_t root;
    pystate_target_t *root_target;
    sampler_opts_t opts;
    strtab_t *strings;
    member_t *m;
    size_t n;
    uint64_t overflow;
    proc_discover_t *disc;
    pystate_snapshot_t *snap;
    sampler_stats_t st; /* the family loop's ticks and lateness */
    uint64_t next_scan_ns;
    int rescan;
    sampler_emit_fn emit;
    void *ctx;
    member_t *cur;
    family_hooks_t hooks;
    const char *s_empty;
    family_proc_info_t *listed;
    proc_entry_t *scan;
    scry_frame_t frames[SAMPLER_MAX_FRAMES + 1];
    struct pollfd fds[FAMILY_MAX_PROCS + 1]; /* what wait_until polls, and for whom */
    struct member *who[FAMILY_MAX_PROCS + 1];
    char desc[300];
    char backend[400];      /* the first member sampler's back end */
    long fd_limit;          /* the soft RLIMIT_NOFILE (raised to the hard one) */
    long fd_used;           /* descriptors open when last counted */
    uint64_t fd_counted_ns; /* when; 0: count again before the next new member */
    uint64_t fd_skipped;    /* new members not followed: descriptors ran short */
    char note[300];         /* family_limit_note */
};

/* The live member PID (not gone), or NULL. */
static member_t *find_live(family_t *f, pid_t pid)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->m[i].info.pid == pid && f->m[i].state != M_GONE)
            return &f->m[i];
    return NULL;
}

static int live_member(family_t *f, pid_t pid)
{
    return find_live(f, pid) != NULL;
}

/* Adds PID (started at START, 0: read it) as a member to be tried. */
static member_t *add_member(family_t *f, pid_t pid, uint64_t start)
{
    member_t *m = find_live(f, pid);
    if (m)
        return m;
    if (!start && proc_read_identity(pid, &start, NULL, 0) != 0)
        return NULL;
    if (f->n >= FAMILY_MAX_PROCS) {
        f->overflow++;
        return NULL;
    }
    m = &f->m[f->n++];
    memset(m, 0, sizeof *m);
    m->info.pid = pid;
    m->info.command = m->info.version = m->info.why = f->s_empty;
    m->info.is_root = pid == f->root;
    m->start_time = start;
    m->state = M_WAITING;
    m->program_since_ns = scry_now_ns();
    proc_read_exec_mark(pid, &m->mark);
    return m;
}

static void emit_member(const scry_sample_t *s, void *ctx);

/* Frees M's sampler and target, keeping its counters (its END hook first). */
static void drop_sampler(family_t *f, member_t *m)
{
    if (m->smp && m->hook_ctx && f->hooks.end && f->emit) {
        f->cur = m;
        f->hooks.end(f->hooks.ctx, m->hook_ctx, (pystate_target_t *)sampler_target(m->smp), m->smp,
                     emit_member, f);
    }
    m->hook_ctx = NULL;
    if (m->smp) {
        m->st = *sampler_stats(m->smp);
        m->torn = pystate_target_stats(sampler_target(m->smp)).dropped;
        sampler_free(m->smp);
        m->smp = NULL;
    }
    if (m->target && m->target != f->root_target)
        pystate_target_free(m->target);
    m->target = NULL;
}

/* Lets M go: EXITED when the process is gone (else its sampler failed: m->info.why). */
static void member_gone(family_t *f, member_t *m, int exited)
{
    drop_sampler(f, m);
    m->info.exited = exited && m->info.sampled;
    m->state = M_GONE;
}

/* 1 unless member M's process is known to be gone: reaped, a zombie, or its pid taken by
 * another process. (A sampler may take a /proc file it could not open, for lack of a
 * descriptor, for an exit.) */
static int still_there(const member_t *m)
{
    uint64_t start = 0;
    char state = 0;
    int err = proc_read_identity(m->info.pid, &start, NULL, 0);
    if (err == SCRY_E_GONE || (err == 0 && start != m->start_time))
        return 0;
    return proc_read_task_state(m->info.pid, m->info.pid, &state) != 0 ||
           (state != 'Z' && state != 'X');
}

/* M's sampler returned ERR (SCRY_E_GONE: the target exited). A process that is gone is
 * let go as exited; one that still runs loses its sampler, keeps the error as its "why"
 * and is tried again like a new program (never said to have exited). */
static void member_failed(family_t *f, member_t *m, int err, uint64_t now)
{
    if (err == SCRY_E_GONE && !still_there(m)) {
        member_gone(f, m, 1);
        return;
    }
    const char *w = strtab_intern(f->strings, scry_strerror(err == SCRY_E_GONE ? SCRY_E_IO : err));
    m->info.why = w ? w : f->s_empty;
    drop_sampler(f, m);
    m->state = M_WAITING;
    m->program_since_ns = m->last_try_ns = now;
}

/* The descriptors scry has open (/proc/self/fd), or -1. */
static long count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    long n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

/* 1 when a new member may be followed: at least FD_RESERVE_MIN (or an eighth of the
 * limit) descriptors stay free for the members followed already (their new threads, the
 * report). Otherwise counts the member as skipped and says so in f->note. */
static int fd_room(family_t *f, uint64_t now)
{
    if (f->fd_limit <= 0)
        return 1;
    if (!f->fd_counted_ns || now - f->fd_counted_ns > FD_RECOUNT_NS) {
        long n = count_fds();
        f->fd_used = n < 0 ? f->fd_limit : n; /* cannot even open a directory: none left */
        f->fd_counted_ns = now;
    }
    long reserve = f->fd_limit / 8 > FD_RESERVE_MIN ? f->fd_limit / 8 : FD_RESERVE_MIN;
    if (f->fd_used + reserve <= f->fd_limit)
        return 1;
    f->fd_skipped++;
    snprintf(f->note, sizeof f->note,
             "%llu new child process%s not followed: %ld of %ld descriptors in use "
             "(RLIMIT_NOFILE; raise the hard limit, ulimit -Hn, to follow more)",
             (unsigned long long)f->fd_skipped, f->fd_skipped == 1 ? "" : "es", f->fd_used,
             f->fd_limit);
    return 0;
}

/* Raises the soft RLIMIT_NOFILE to the hard limit (a family of hundreds of processes
 * needs several descriptors each) and keeps the result in f->fd_limit. */
static void raise_fd_limit(family_t *f)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit up = {rl.rlim_max, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl.rlim_cur = rl.rlim_max;
    }
    f->fd_limit = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)INT32_MAX
                      ? INT32_MAX
                      : (long)rl.rlim_cur;
}

/* Sets M's command and the root frame of its samples. */
static void name_member(family_t *f, member_t *m)
{
    char cmd[1024];
    proc_cmdline(m->info.pid, cmd, sizeof cmd);
    if (!cmd[0])
        proc_read_comm(m->info.pid, m->info.pid, cmd, sizeof cmd);
    const char *c = strtab_intern(f->strings, cmd);
    if (c)
        m->info.command = c;
    char label[LABEL_COMMAND_MAX + 40];
    size_t len = strlen(cmd);
    snprintf(label, sizeof label, "process %d (%.*s%s)", (int)m->info.pid, LABEL_COMMAND_MAX, cmd,
             len > LABEL_COMMAND_MAX ? "..." : "");
    const char *l = strtab_intern(f->strings, label);
    m->label = l ? l : f->s_empty;
}

/* Gives M a sampler over T (opened now, or the caller's root target). Returns 0, or -1
 * when the sampler cannot be made. */
static int start_member(family_t *f, member_t *m, pystate_target_t *t)
{
    m->smp = sampler_new(&f->opts, t, f->strings);
    if (!m->smp) {
        if (t != f->root_target)
            pystate_target_free(t);
        return -1;
    }
    if (!f->backend[0])
        snprintf(f->backend, sizeof f->backend, "%s", sampler_backend_desc(m->smp));
    m->target = t;
    m->state = M_SAMPLED;
    m->info.why = f->s_empty; /* a failure before, if any, is over */
    m->listed = 1;
    m->info.sampled = 1;
    m->mark_moved_ns = 0;
    proc_read_exec_mark(m->info.pid, &m->mark);
    const char *v = strtab_intern(f->strings, pystate_target_info(t)->version);
    m->info.version = v ? v : f->s_empty;
    name_member(f, m);
    if (f->hooks.start)
        m->hook_ctx = f->hooks.start(f->hooks.ctx, m->info.pid, t, m->smp, m->info.is_root);
    return 0;
}

/* Tries to open waiting member M as Python when its time has come (every round in the
 * first 200 ms of its program, then every 100 ms, for 10 s). */
static void try_member(family_t *f, member_t *m, uint64_t now)
{
    uint64_t mark = 0;
    if (proc_read_exec_mark(m->info.pid, &mark) == 0 && mark != m->mark) {
        m->mark = mark; /* a new program: tried afresh */
        m->program_since_ns = now;
        if (m->state == M_NOT_PYTHON)
            m->state = M_WAITING;
    }
    if (m->state != M_WAITING)
        return;
    uint64_t age = now > m->program_since_ns ? now - m->program_since_ns : 0;
    if (age > TRY_GIVE_UP_NS) {
        m->state = M_NOT_PYTHON;
        return;
    }
    if (age > TRY_FAST_NS && now > m->last_try_ns && now - m->last_try_ns < TRY_EVERY_NS)
        return;
    m->last_try_ns = now;
    if (m->info.is_root ? 0 : !fd_room(f, now)) {
        m->state = M_NOT_PYTHON; /* not followed (counted): tried again if it execs */
        return;
    }
    pystate_target_t *t = NULL;
    char why[512] = "";
    int err =
        pystate_target_open_opts(m->info.pid, f->strings, &f->opts.open_opts, &t, why, sizeof why);
    if (err == SCRY_E_UNSUPPORTED || err == SCRY_E_PERM) {
        /* a Python scry cannot read (2.7, a newer layout) or may not: said in the summary */
        const char *w = strtab_intern(f->strings, why[0] ? why : scry_strerror(err));
        m->info.why = w ? w : f->s_empty;
        m->state = M_NOT_PYTHON;
        m->listed = 1;
        name_member(f, m);
        return;
    }
    if (err)
        return; /* not Python (yet): the loader or the runtime may still be starting */
    /* only once the runtime has a thread: before, nothing read would stay valid */
    if (pystate_sample(t, f->snap) != 0 || pystate_snapshot_count(f->snap) == 0) {
        pystate_target_free(t);
        return;
    }
    f->fd_counted_ns = 0; /* its sampler holds descriptors now: count again */
    if (start_member(f, m, t) != 0)
        m->state = M_NOT_PYTHON;
}

/* A sampled member whose program changed to one its sampler could not follow (a fork
 * that exec'd a shell, a compiler): back to waiting. */
static void check_exec(family_t *f, member_t *m, uint64_t now)
{
    uint64_t mark = 0;
    if (proc_read_exec_mark(m->info.pid, &mark) != 0 || !mark)
        return;
    if (mark == m->smp->exec_mark) {
        m->mark_moved_ns = 0;
        return;
    }
    if (!m->mark_moved_ns) {
        m->mark_moved_ns = now;
        return;
    }
    if (now < m->mark_moved_ns + EXEC_GRACE_NS)
        return;
    drop_sampler(f, m);
    m->state = M_WAITING;
    m->mark = mark;
    m->program_since_ns = now;
}

static int cmp_ppid(const void *a, const void *b)
{
    pid_t x = ((const proc_entry_t *)a)->ppid, y = ((const proc_entry_t *)b)->ppid;
    return (x > y) - (x < y);
}

/* Whether member M has exited (or its pid names another process now), E its entry in a
 * listing of /proc. A member missing from the listing is asked directly: its stat may not
 * have been readable (no descriptor left), which is no exit. */
static int listed_gone(const member_t *m, const proc_entry_t *e)
{
    if (e)
        return e->start_time != m->start_time || e->state == 'Z' || e->state == 'X';
    uint64_t start = 0;
    int err = proc_read_identity(m->info.pid, &start, NULL, 0);
    return err == SCRY_E_GONE || (err == 0 && start != m->start_time);
}

/* Lists every process with its parent: members that are gone (or became zombies, or whose
 * pid now names another process) are let go; children of members join, to any depth. */
static void scan(family_t *f)
{
    int n = proc_list_all(f->scan, SCAN_MAX);
    if (n < 0)
        return;
    size_t cnt = (size_t)n;
    for (size_t i = 0; i < f->n; i++) {
        member_t *m = &f->m[i];
        if (m->state == M_GONE)
            continue;
        if (listed_gone(m, proc_entry_find(f->scan, cnt, m->info.pid)))
            member_gone(f, m, 1);
    }
    /* children of members join, to any depth: the listing sorted by parent, each member's
     * children looked up (members found here are appended and visited in turn) */
    qsort(f->scan, cnt, sizeof *f->scan, cmp_ppid);
    for (size_t i = 0; i < f->n; i++) {
        if (f->m[i].state == M_GONE)
            continue;
        pid_t parent = f->m[i].info.pid;
        size_t lo = 0, hi = cnt;
        while (lo < hi) { /* the first entry whose parent is PARENT or later */
            size_t mid = lo + (hi - lo) / 2;
            if (f->scan[mid].ppid < parent)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (size_t k = lo; k < cnt && f->scan[k].ppid == parent; k++) {
            const proc_entry_t *e = &f->scan[k];
            if (e->state != 'Z' && e->state != 'X' && e->pid != parent)
                add_member(f, e->pid, e->start_time);
        }
    }
}

static void on_event(void *ctx, enum proc_discover_event ev, pid_t pid, pid_t parent,
                     uint64_t when_ns)
{
    (void)when_ns;
    family_t *f = ctx;
    member_t *m;
    switch (ev) {
    case PROC_DISCOVER_NEW:
        if (live_member(f, parent) && (m = add_member(f, pid, 0)) != NULL)
            try_member(f, m, scry_now_ns()); /* a fork of a Python runs Python at once */
        break;
    case PROC_DISCOVER_EXEC:
        if ((m = find_live(f, pid)) != NULL && m->state != M_SAMPLED)
            try_member(f, m, scry_now_ns());
        break;
    case PROC_DISCOVER_EXIT:
        if ((m = find_live(f, pid)) != NULL)
            member_gone(f, m, 1);
        break;
    case PROC_DISCOVER_LOST:
        f->rescan = 1;
        break;
    }
}

family_t *family_new(pid_t root, pystate_target_t *root_target, const sampler_opts_t *opts,
                     strtab_t *strings, int use_connector, const family_hooks_t *hooks, char *why,
                     size_t whylen)
{
    family_t *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    if (hooks)
        f->hooks = *hooks;
    f->root = root;
    f->root_target = root_target;
    f->opts = *opts;
    f->strings = strings;
    f->m = calloc(FAMILY_MAX_PROCS, sizeof *f->m);
    f->listed = calloc(FAMILY_MAX_PROCS, sizeof *f->listed);
    f->scan = calloc(SCAN_MAX, sizeof *f->scan);
    f->snap = pystate_snapshot_new();
    f->s_empty = strtab_intern(strings, "");
    raise_fd_limit(f);
    if (!f->m || !f->listed || !f->scan || !f->snap || !f->s_empty)
        goto fail;
    char cwhy[256] = "";
    if (use_connector)
        f->disc = proc_discover_new(1, cwhy, sizeof cwhy);
    if (proc_discover_fd(f->disc) >= 0) {
        snprintf(f->desc, sizeof f->desc, "children found by the process-events connector");
    } else {
        proc_discover_free(f->disc);
        f->disc = NULL;
        snprintf(f->desc, sizeof f->desc, "children found by /proc scans every %llu ms%s%s%s",
                 SCAN_NS_ALONE / 1000000ull, cwhy[0] ? " (connector: " : "", cwhy,
                 cwhy[0] ? ")" : "");
    }
    if (why)
        snprintf(why, whylen, "%s", f->desc);
    member_t *m = add_member(f, root, 0);
    if (!m)
        goto fail;
    m->listed = 1;
    name_member(f, m);
    if (root_target && start_member(f, m, root_target) != 0)
        goto fail;
    scan(f); /* the descendants present now */
    return f;
fail:
    family_free(f);
    return NULL;
}

void family_end(family_t *f)
{
    for (size_t i = 0; i < f->n; i++) {
        member_t *m = &f->m[i];
        if (m->state == M_SAMPLED) {
            drop_sampler(f, m);
            m->state = M_GONE; /* not 'exited': it ran to the end of the recording */
        }
    }
}

void family_free(family_t *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        drop_sampler(f, &f->m[i]);
    proc_discover_free(f->disc);
    pystate_snapshot_free(f->snap);
    free(f->scan);
    free(f->listed);
    free(f->m);
    free(f);
}

/* Adds the member's root frame above the sample's own and passes it on. */
static void emit_member(const scry_sample_t *s, void *ctx)
{
    family_t *f = ctx;
    member_t *m = f->cur;
    uint32_t n = s->nframes > SAMPLER_MAX_FRAMES ? SAMPLER_MAX_FRAMES : s->nframes;
    memcpy(f->frames, s->frames, n * sizeof *f->frames);
    f->frames[n] = (scry_frame_t){m->label, f->s_empty, 0, SCRY_FRAME_PROCESS};
    scry_sample_t c = *s;
    c.frames = f->frames;
    c.nframes = n + 1;
    m->info.samples++;
    if (s->metric == SCRY_METRIC_CPU)
        m->info.weight_ns += s->weight_ns;
    f->emit(&c, f->ctx);
}

/* One round: every sampled member once. */
static void tick_members(family_t *f, uint64_t now)
{
    for (size_t i = 0; i < f->n; i++) {
        member_t *m = &f->m[i];
        if (m->state != M_SAMPLED)
            continue;
        f->cur = m;
        int err = sampler_tick(m->smp, emit_member, f);
        m->st = *sampler_stats(m->smp);
        m->torn = pystate_target_stats(sampler_target(m->smp)).dropped;
        if (err || m->st.target_exited) {
            member_failed(f, m, m->st.target_exited ? SCRY_E_GONE : err, now);
        } else {
            if (m->hook_ctx && f->hooks.round)
                f->hooks.round(f->hooks.ctx, m->hook_ctx,
                               (pystate_target_t *)sampler_target(m->smp), m->smp, emit_member, f);
            check_exec(f, m, now);
        }
    }
}

static int any_live(const family_t *f)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->m[i].state != M_GONE)
            return 1;
    return 0;
}

#define WAIT_FDS (FAMILY_MAX_PROCS + 1)

/* A member whose perf records woke us: its stacks are read now, while they are still the
 * ones sampled (as sampler_run does for one process), at most four times an interval.
 * (Polling the rings' epoll set consumes the perf events' wake-up: it is taken as the
 * wake itself. A ring whose thread exited keeps the set readable until the member's next
 * tick closes it: the quarter-interval gap bounds those reads.) */
static void read_member_early(family_t *f, member_t *m, uint64_t now)
{
    f->cur = m;
    m->last_read_ns = now;
    int err = sampler__perf_read_early(m->smp, emit_member, f);
    m->st = *sampler_stats(m->smp);
    if (err)
        member_failed(f, m, err, now);
}

/* Sleeps until DEADLINE_NS, or less: connector news are read at once, and a member's perf
 * records wake us to read its stacks early (a member that was just read is left out of the
 * wait for a quarter interval). */
static void wait_until(family_t *f, uint64_t deadline_ns, uint64_t interval)
{
    struct pollfd *fds = f->fds;
    member_t **who = f->who;
    uint64_t now = scry_now_ns();
    if (deadline_ns <= now)
        return;
    size_t n = 0;
    if (f->disc) {
        fds[n] = (struct pollfd){.fd = proc_discover_fd(f->disc), .events = POLLIN};
        who[n++] = NULL;
    }
    for (size_t i = 0; i < f->n && n < WAIT_FDS; i++) {
        member_t *m = &f->m[i];
        int fd = m->state == M_SAMPLED ? sampler__perf_wait_fd(m->smp) : -1;
        if (fd < 0)
            continue;
        uint64_t ready = m->last_read_ns + interval / 4;
        if (ready > now) {
            if (ready < deadline_ns)
                deadline_ns = ready; /* then it is waited on again */
            continue;
        }
        fds[n] = (struct pollfd){.fd = fd, .events = POLLIN};
        who[n++] = m;
    }
    if (!n) {
        struct timespec ts = {(time_t)(deadline_ns / 1000000000ull),
                              (long)(deadline_ns % 1000000000ull)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        return;
    }
    uint64_t left = deadline_ns - now;
    struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
    if (ppoll(fds, n, &ts, NULL) <= 0)
        return;
    now = scry_now_ns();
    for (size_t i = 0; i < n; i++) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        if (who[i]) {
            if (who[i]->state == M_SAMPLED)
                read_member_early(f, who[i], now);
        } else if (proc_discover_read(f->disc, on_event, f) < 0) {
            proc_discover_free(f->disc); /* the socket failed: scans from now on */
            f->disc = NULL;
            f->rescan = 1;
        }
    }
}

int family_run(family_t *f, double duration_s, volatile sig_atomic_t *stop, sampler_emit_fn emit,
               void *ctx, int (*tick_cb)(family_t *, void *), void *tick_ctx)
{
    uint64_t interval = (uint64_t)(1e9 / (f->opts.rate_hz > 0 ? f->opts.rate_hz : 100));
    uint64_t start = scry_now_ns();
    uint64_t end = duration_s > 0 ? start + (uint64_t)(duration_s * 1e9) : UINT64_MAX;
    uint64_t next = start;
    f->emit = emit;
    f->ctx = ctx;
    sampler__ask_short_slice();
    while (!(stop && *stop)) {
        if (sampler__suspend_if_requested())
            next = scry_now_ns();
        uint64_t now = scry_now_ns();
        if (now >= end)
            break;
        if (f->rescan || now >= f->next_scan_ns) {
            f->rescan = 0;
            scan(f);
            f->next_scan_ns = now + (f->disc ? SCAN_NS_CONNECTOR : SCAN_NS_ALONE);
        }
        now = scry_now_ns();
        for (size_t i = 0; i < f->n; i++)
            if (f->m[i].state == M_WAITING || f->m[i].state == M_NOT_PYTHON)
                try_member(f, &f->m[i], now);
        if (now >= next) {
            if (now > next + interval / 2) {
                f->st.late++;
                f->st.late_total_ns += now - next;
                if (now - next > f->st.late_max_ns)
                    f->st.late_max_ns = now - next;
            }
            tick_members(f, now);
            f->st.ticks++;
            if (tick_cb && tick_cb(f, tick_ctx))
                break;
            next += interval;
            now = scry_now_ns();
            if (next < now)
                next += ((now - next) / interval + 1) * interval;
        }
        if (!any_live(f))
            break;
        uint64_t wake = next < f->next_scan_ns ? next : f->next_scan_ns;
        wait_until(f, wake < end ? wake : end, interval);
    }
    return 0;
}

size_t family_procs(const family_t *f, const family_proc_info_t **out)
{
    size_t k = 0;
    for (size_t i = 0; i < f->n; i++) {
        const member_t *m = &f->m[i];
        if (!m->listed)
            continue;
        f->listed[k] = m->info;
        f->listed[k].ticks = m->st.ticks;
        f->listed[k].errors = m->st.errors + m->torn;
        k++;
    }
    *out = f->listed;
    return k;
}

sampler_t *family_root_sampler(family_t *f)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->m[i].info.is_root && f->m[i].state == M_SAMPLED)
            return f->m[i].smp;
    return NULL;
}

void family_stats(const family_t *f, sampler_stats_t *out, uint64_t *torn, uint64_t *overflow)
{
    *out = f->st;
    *torn = 0;
    for (size_t i = 0; i < f->n; i++) {
        const member_t *m = &f->m[i];
        out->samples += m->st.samples;
        out->errors += m->st.errors;
        out->busy_ns += m->st.busy_ns;
        out->gil_ticks += m->st.gil_ticks;
        out->lost += m->st.lost;
        out->execs += m->st.execs;
        out->read_records += m->st.read_records;
        out->read_delay_ns += m->st.read_delay_ns;
        out->syscall_stops += m->st.syscall_stops;
        if (m->st.read_delay_max_ns > out->read_delay_max_ns)
            out->read_delay_max_ns = m->st.read_delay_max_ns;
        *torn += m->torn;
    }
    *overflow = f->overflow;
}

const char *family_discovery_desc(const family_t *f)
{
    return f->desc;
}

const char *family_backend_desc(const family_t *f)
{
    return f->backend[0] ? f->backend : "none (no process was sampled)";
}

int family_done(const family_t *f)
{
    return !any_live(f);
}

const char *family_limit_note(const family_t *f)
{
    return f->note;
}
