/* perfev.c - opening per-thread clock events and their rings. */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "perfev_internal.h"
#include "scry_err.h"
#include "scry_grow.h"

/* AX..IP (0..8) and R8..R15 (16..23) in the kernel's x86-64 numbering: what a DWARF
 * unwinder needs; flags and segment registers are left out. */
#define REGS_MASK_X86_64 (0x1ffull | (0xffull << 16))

#define RING_SECONDS   0.02 /* a ring holds about this much sampling of one thread */
#define RING_MAX_PAGES 64u  /* per thread */
#define SAMPLE_BYTES   48u  /* a record without registers or stack */

static long sys_perf_event_open(struct perf_event_attr *a, pid_t tid, int cpu, int group,
                                unsigned long flags)
{
    return syscall(SYS_perf_event_open, a, tid, cpu, group, flags);
}

static int open_errno(int e)
{
    switch (e) {
    case EACCES:
    case EPERM:
        return SCRY_E_PERM;
    case ENOSYS:
    case ENOENT:
    case EOPNOTSUPP:
        return SCRY_E_NOSYS;
    case ESRCH:
        return SCRY_E_GONE;
    case ENOMEM:
        return SCRY_E_NOMEM;
    case EINVAL:
        return SCRY_E_INVAL;
    default:
        return scry_err_from_errno(e);
    }
}

static void fill_attr(struct perf_event_attr *a, int clock, uint64_t period, uint64_t regs_mask,
                      uint32_t stack_bytes, int exclude_kernel, uint64_t ring_bytes, int wake_each)
{
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->type = PERF_TYPE_SOFTWARE;
    a->config = clock == PERFEV_CLOCK_CPU ? PERF_COUNT_SW_CPU_CLOCK : PERF_COUNT_SW_TASK_CLOCK;
    a->sample_period = period;
    a->sample_type =
        PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD;
    if (stack_bytes) {
        a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
        a->sample_regs_user = regs_mask;
        a->sample_stack_user = stack_bytes;
    }
    a->exclude_kernel = exclude_kernel != 0;
    a->exclude_hv = 1;
    a->exclude_guest = 1;
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
    if (wake_each) {
        a->wakeup_events = 1; /* every sample wakes the poller */
    } else {
        /* Nobody polls: ask for a wake-up only when the ring is nearly full. */
        a->watermark = 1;
        a->wakeup_watermark = (uint32_t)(ring_bytes - ring_bytes / 8);
    }
}

int perfev_probe(pid_t tid, int exclude_kernel)
{
    struct perf_event_attr a;
    fill_attr(&a, PERFEV_CLOCK_TASK, 10000000, 0, 0, exclude_kernel, 4096, 0);
    a.disabled = 1;
    long fd = sys_perf_event_open(&a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
        return open_errno(errno);
    close((int)fd);
    return 0;
}

static uint32_t pow2_at_least(uint64_t v)
{
    uint32_t r = 1;
    while (r < v && r < (1u << 30))
        r <<= 1;
    return r;
}

int perfev_open(const perfev_opts_t *opts, perfev_t **out)
{
    if (!out)
        return SCRY_E_INVAL;
    *out = NULL;
    if (opts && opts->cpu_wide && (opts->clock != PERFEV_CLOCK_CPU || opts->stack_bytes))
        return SCRY_E_INVAL;
    if (!opts || (opts->pid <= 0 && !opts->cpu_wide) ||
        !(opts->rate_hz >= 1 && opts->rate_hz <= 100000) ||
        (opts->clock != PERFEV_CLOCK_TASK && opts->clock != PERFEV_CLOCK_CPU) ||
        opts->stack_bytes > PERFEV_STACK_MAX ||
        (opts->ring_pages && (opts->ring_pages & (opts->ring_pages - 1))))
        return SCRY_E_INVAL;
    struct perfev *p = calloc(1, sizeof *p);
    if (!p)
        return SCRY_E_NOMEM;
    p->opts = *opts;
    p->opts.stack_bytes = (opts->stack_bytes + 7u) & ~7u;
    p->period_ns = (uint64_t)(1e9 / opts->rate_hz);
    p->regs_mask = p->opts.stack_bytes ? REGS_MASK_X86_64 : 0;
    long pg = sysconf(_SC_PAGESIZE);
    p->page = pg > 0 ? (size_t)pg : 4096;
    if (opts->ring_pages) {
        p->ring_pages = opts->ring_pages;
    } else {
        uint64_t rec = SAMPLE_BYTES +
                       (p->opts.stack_bytes ? 16 + 8 * PERFEV_NREGS + 16 + p->opts.stack_bytes : 0);
        double bytes = opts->rate_hz * RING_SECONDS * (double)rec;
        uint64_t pages = (uint64_t)(bytes / (double)p->page) + 1;
        if (pages < 2)
            pages = 2;
        p->ring_pages = pow2_at_least(pages < RING_MAX_PAGES ? pages : RING_MAX_PAGES);
    }
    p->epfd = -1;
    p->tfd = -1;
    p->wrap = malloc(PERFEV_RECORD_MAX);
    if (!p->wrap || (opts->wake_each && (p->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)) {
        free(p->wrap);
        free(p);
        return SCRY_E_NOMEM;
    }
    *out = p;
    return 0;
}

static void thread_close(perfev_thread_t *t)
{
    if (t->base)
        munmap(t->base, t->map_len);
    if (t->fd >= 0)
        close(t->fd);
    t->base = NULL;
    t->fd = -1;
}

void perfev_free(perfev_t *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nthreads; i++)
        thread_close(&p->threads[i]);
    if (p->epfd >= 0)
        close(p->epfd);
    if (p->tfd >= 0)
        close(p->tfd);
    free(p->threads);
    free(p->wrap);
    free(p);
}

/* Opens the event and maps the ring of TID into T. The ring is halved when the locked-
 * memory limit refuses it. Returns 0 or a negative code. */
static int thread_open(struct perfev *p, pid_t tid, perfev_thread_t *t)
{
    memset(t, 0, sizeof *t);
    t->tid = tid;
    t->fd = -1;
    t->preempted = -1;
    uint32_t pages = p->ring_pages;
    struct perf_event_attr a;
    fill_attr(&a, p->opts.clock, p->period_ns, p->regs_mask, p->opts.stack_bytes,
              p->opts.exclude_kernel, (uint64_t)pages * p->page, p->opts.wake_each);
    a.context_switch = p->opts.switches && !p->opts.cpu_wide;
    a.sample_id_all = a.context_switch; /* their time (after TID: ring.c) */
    long fd;
    if (p->opts.cpu_wide) { /* TID is CPU + 1: every process on that CPU, idle excluded */
        a.exclude_idle = 1;
        fd = sys_perf_event_open(&a, -1, (int)(tid - 1), -1, PERF_FLAG_FD_CLOEXEC);
    } else {
        fd = sys_perf_event_open(&a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    }
    if (fd < 0) {
        p->st.open_failed++;
        return open_errno(errno);
    }
    t->fd = (int)fd;
    for (;;) {
        size_t len = (size_t)(pages + 1) * p->page;
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, 0);
        if (m != MAP_FAILED) {
            t->base = m;
            t->map_len = len;
            break;
        }
        if ((errno != EPERM && errno != ENOMEM) || pages <= 1) {
            int err = open_errno(errno);
            thread_close(t);
            p->st.open_failed++;
            return err;
        }
        pages /= 2;
    }
    struct perf_event_mmap_page *pc = (struct perf_event_mmap_page *)t->base;
    uint64_t off = pc->data_offset ? pc->data_offset : p->page;
    uint64_t size = pc->data_size ? pc->data_size : (uint64_t)pages * p->page;
    if (off + size > t->map_len || (size & (size - 1)) != 0 || size == 0) {
        thread_close(t);
        p->st.open_failed++;
        return SCRY_E_CORRUPT;
    }
    t->data = t->base + off;
    t->size = size;
    if (p->epfd >= 0) {
        struct epoll_event e = {.events = EPOLLIN, .data.fd = t->fd};
        if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, t->fd, &e) != 0) {
            int err = scry_err_from_errno(errno);
            thread_close(t);
            p->st.open_failed++;
            return err;
        }
    }
    if (p->opts.bpf_prog_fd > 0 && ioctl(t->fd, PERF_EVENT_IOC_SET_BPF, p->opts.bpf_prog_fd) != 0) {
        int err = open_errno(errno);
        thread_close(t);
        p->st.open_failed++;
        return err;
    }
    p->st.opened++;
    return 0;
}

static int cmp_thread(const void *a, const void *b)
{
    pid_t x = ((const perfev_thread_t *)a)->tid, y = ((const perfev_thread_t *)b)->tid;
    return (x > y) - (x < y);
}

static perfev_thread_t *find(const struct perfev *p, pid_t tid)
{
    perfev_thread_t key = {.tid = tid};
    /* bsearch's base must not be NULL, even for zero elements. */
    return p->nthreads ? bsearch(&key, p->threads, p->nthreads, sizeof key, cmp_thread) : NULL;
}

int perfev_has_thread(const perfev_t *p, pid_t tid)
{
    return p && find(p, tid) != NULL;
}

static int reserve(struct perfev *p, size_t n)
{
    if (n > PERFEV_MAX_THREADS)
        return SCRY_E_NOMEM;
    if (n <= p->cap)
        return 0;
    perfev_thread_t *t = scry_grow(p->threads, &p->cap, sizeof *t, n, 16, SIZE_MAX);
    if (!t)
        return SCRY_E_NOMEM;
    p->threads = t;
    return 0;
}

int perfev_add_thread(perfev_t *p, pid_t tid)
{
    if (!p || tid <= 0)
        return SCRY_E_INVAL;
    if (find(p, tid))
        return 0;
    int err = reserve(p, p->nthreads + 1);
    if (err)
        return err;
    perfev_thread_t t;
    err = thread_open(p, tid, &t);
    if (err)
        return err;
    p->threads[p->nthreads++] = t;
    qsort(p->threads, p->nthreads, sizeof *p->threads, cmp_thread);
    p->st.threads = p->nthreads;
    return 0;
}

int perfev_set_threads(perfev_t *p, const pid_t *tids, size_t n, perfev_sample_fn cb, void *ctx)
{
    if (!p || (n && !tids))
        return SCRY_E_INVAL;
    if (n > PERFEV_MAX_THREADS)
        n = PERFEV_MAX_THREADS;
    for (size_t i = 0; i < p->nthreads; i++)
        p->threads[i].mark = 0;
    int first_err = 0;
    size_t opened = 0, asked = 0;
    size_t old = p->nthreads;
    for (size_t i = 0; i < n; i++) {
        if (tids[i] <= 0)
            continue;
        perfev_thread_t key = {.tid = tids[i]};
        perfev_thread_t *t = old ? bsearch(&key, p->threads, old, sizeof key, cmp_thread) : NULL;
        if (t) {
            t->mark = 1;
            continue;
        }
        int err = reserve(p, p->nthreads + 1);
        if (err)
            return err;
        asked++;
        perfev_thread_t nt;
        err = thread_open(p, tids[i], &nt);
        if (err) {
            if (err != SCRY_E_GONE && !first_err)
                first_err = err;
            continue;
        }
        nt.mark = 1;
        p->threads[p->nthreads++] = nt;
        opened++;
    }
    /* Threads gone: read what they left, then close. */
    size_t w = 0;
    for (size_t i = 0; i < p->nthreads; i++) {
        perfev_thread_t *t = &p->threads[i];
        if (!t->mark) {
            perfev__drain(p, t, cb, ctx);
            thread_close(t);
            continue;
        }
        p->threads[w++] = *t;
    }
    p->nthreads = w;
    qsort(p->threads, p->nthreads, sizeof *p->threads, cmp_thread);
    p->st.threads = p->nthreads;
    if (asked && !opened && p->nthreads == 0 &&
        (first_err == SCRY_E_PERM || first_err == SCRY_E_NOSYS))
        return first_err;
    return (int)p->nthreads;
}

int perfev_set_cpus(perfev_t *p)
{
    if (!p || !p->opts.cpu_wide)
        return SCRY_E_INVAL;
    long n = sysconf(_SC_NPROCESSORS_CONF);
    if (n < 1)
        n = 1;
    if (n > (long)PERFEV_MAX_THREADS)
        n = PERFEV_MAX_THREADS;
    pid_t *keys = malloc((size_t)n * sizeof *keys);
    if (!keys)
        return SCRY_E_NOMEM;
    for (long i = 0; i < n; i++)
        keys[i] = (pid_t)(i + 1); /* a key per CPU (0 is no key) */
    int rc = perfev_set_threads(p, keys, (size_t)n, NULL, NULL);
    free(keys);
    return rc == 0 ? SCRY_E_PERM : rc;
}

int perfev_read(perfev_t *p, perfev_sample_fn cb, void *ctx)
{
    if (!p)
        return 0;
    int n = 0;
    for (size_t i = 0; i < p->nthreads; i++)
        n += perfev__drain(p, &p->threads[i], cb, ctx);
    return n;
}

/* Waits at least this long end by the set's timer (arm_timer). */
#define PERFEV_TIMER_MIN_NS 4000000ull

/* Arms the set's timer to fire at DEADLINE_NS, unless it already fires before it and less
 * than half of LEFT_NS (the wait's length) early. A wait with a timeout arms and cancels a
 * kernel timer each time (on a VM, a fifth of a sample's CPU): records that come every
 * millisecond would pay it at every sample. The timer instead stays armed across waits and
 * is moved every half wait or so; a wait it ends early is one without a record, which the
 * caller's loop takes as such. Returns 0, or -1 when no timer can be used. */
static int arm_timer(struct perfev *p, uint64_t deadline_ns, uint64_t left_ns)
{
    if (p->tfd < 0) {
        int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (fd < 0)
            return -1;
        struct epoll_event e = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
            close(fd);
            return -1;
        }
        p->tfd = fd;
        p->armed_ns = 0;
    }
    if (p->armed_ns && p->armed_ns <= deadline_ns && deadline_ns - p->armed_ns < left_ns / 2)
        return 0;
    struct itimerspec it = {
        .it_value = {(time_t)(deadline_ns / 1000000000ull), (long)(deadline_ns % 1000000000ull)}};
    if (timerfd_settime(p->tfd, TFD_TIMER_ABSTIME, &it, NULL) != 0)
        return -1;
    p->armed_ns = deadline_ns;
    return 0;
}

int perfev_wait(perfev_t *p, uint64_t deadline_ns)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t t = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    if (deadline_ns <= t)
        return 0;
    if (!p || p->epfd < 0 || p->nthreads == 0) {
        struct timespec ts = {(time_t)(deadline_ns / 1000000000ull),
                              (long)(deadline_ns % 1000000000ull)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        return 0;
    }
    uint64_t left = deadline_ns - t;
    struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
    /* Long waits (the perf back end's quiet waits) end by the set's timer; short ones by
     * the wait's own timeout. */
    int timed = left >= PERFEV_TIMER_MIN_NS && arm_timer(p, deadline_ns, left) == 0;
    struct epoll_event e[8];
    /* Closed descriptors leave the set by themselves: the rings are ours alone. The event
     * of a thread that exited reports a hang-up forever: it leaves the set at once (its
     * ring is read and closed at the next listing), so that it cannot keep us awake. */
    int n = epoll_pwait2(p->epfd, e, 8, timed ? NULL : &ts, NULL);
    int woke = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].data.fd == p->tfd) {
            uint64_t expirations;
            ssize_t got = read(p->tfd, &expirations, sizeof expirations); /* clears it */
            (void)got;
            p->armed_ns = 0;
            continue;
        }
        if (e[i].events & (EPOLLHUP | EPOLLERR))
            epoll_ctl(p->epfd, EPOLL_CTL_DEL, e[i].data.fd, NULL);
        if (e[i].events & EPOLLIN)
            woke = 1;
    }
    return woke;
}

int perfev_wait_fd(const perfev_t *p)
{
    return p && p->nthreads ? p->epfd : -1;
}

perfev_stats_t perfev_stats(const perfev_t *p)
{
    perfev_stats_t z = {0};
    return p ? p->st : z;
}

int perfev_thread_clock(const perfev_t *p, pid_t tid, uint64_t *ns)
{
    const perfev_thread_t *t = p ? find(p, tid) : NULL;
    if (!t || t->fd < 0)
        return SCRY_E_NOTFOUND;
    uint64_t v = 0;
    if (read(t->fd, &v, sizeof v) != (ssize_t)sizeof v)
        return SCRY_E_GONE;
    *ns = v;
    return 0;
}

int perfev_thread_preempted(const perfev_t *p, pid_t tid, uint64_t *at_ns)
{
    const perfev_thread_t *t = p && p->opts.switches ? find(p, tid) : NULL;
    if (t && t->preempted >= 0 && at_ns)
        *at_ns = t->switch_ns;
    return t ? t->preempted : -1;
}

int perfev_thread_off_cpu_at(const perfev_t *p, pid_t tid, uint64_t at_ns)
{
    const perfev_thread_t *t = p && p->opts.switches ? find(p, tid) : NULL;
    if (!t || t->preempted < 0)
        return -1;
    if (t->switch_ns > at_ns) /* it left after AT_NS: on a CPU then if it came before */
        return t->in_ns && t->in_ns <= at_ns ? 0 : -1;
    return t->in_ns <= t->switch_ns || t->in_ns > at_ns;
}

int perfev_set_rate(perfev_t *p, double rate_hz)
{
    if (!p || !(rate_hz >= 0.01 && rate_hz <= 100000))
        return SCRY_E_INVAL;
    uint64_t period = (uint64_t)(1e9 / rate_hz);
    int err = 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    p->opts.rate_hz = rate_hz;
    p->old_period_ns = p->period_ns;
    p->changed_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    p->period_ns = period;
    p->rate_changed = 1;
    for (size_t i = 0; i < p->nthreads; i++) {
        if (p->threads[i].fd >= 0 && ioctl(p->threads[i].fd, PERF_EVENT_IOC_PERIOD, &period) != 0 &&
            !err)
            err = open_errno(errno);
    }
    return err;
}

uint64_t perfev_period_ns(const perfev_t *p)
{
    return p ? p->period_ns : 0;
}
