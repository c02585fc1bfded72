/* test_perfev_live.c - perf-event sampling of a real interpreter's threads.
 *
 * The target (Python 3.12, else 3.11) runs: the main thread in a pure-Python loop, thread
 * H hashing (native code, GIL released), thread K in os.urandom (mostly kernel time),
 * thread S sleeping; on "go" it starts thread N (hashing). Checked:
 *  - every busy thread has samples, the sleeping one (almost) none;
 *  - the periods of a thread's samples add up to the CPU time it used (schedstat) within
 *    25%; times are CLOCK_MONOTONIC within the window and increasing per thread;
 *  - K's samples are mostly in the kernel, H's mostly in user mode;
 *  - with a stack copy: user registers (IP equal to the sample's for user samples) and a
 *    stack copy starting at SP;
 *  - a thread started later is sampled once it is added;
 *  - a one-page ring read late: the kernel's lost records are counted;
 *  - perfev_wait: ended by a record, by its deadline, or up to half its length early by
 *    the timer it keeps armed across waits (after a signal ended the previous one);
 *  - the target was never stopped (its threads never left R/S).
 * Skipped (exit 0 with "SKIP") when perf events are refused on this machine.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perfev.h"
#include "scry_err.h"
#include "check.h"
#include "python_child.h"
#include "scry_time.h"

static const char script[] =
    "import hashlib, os, sys, threading, time\n"
    "buf = b'x' * (1 << 22)\n"
    "ids = {}\n"
    "def hasher(name):\n"
    "    ids[name] = threading.get_native_id()\n"
    "    while True:\n"
    "        hashlib.sha256(buf).digest()\n"
    "def kern():\n"
    "    ids['K'] = threading.get_native_id()\n"
    "    while True:\n"
    "        os.urandom(1 << 20)\n"
    "def sleeper():\n"
    "    ids['S'] = threading.get_native_id()\n"
    "    while True:\n"
    "        time.sleep(0.5)\n"
    "for f, a in ((hasher, ('H',)), (kern, ()), (sleeper, ())):\n"
    "    threading.Thread(target=f, args=a, daemon=True).start()\n"
    "while len(ids) < 3:\n"
    "    time.sleep(0.01)\n"
    "print(os.getpid(), ids['H'], ids['K'], ids['S'], flush=True)\n"
    "def go():\n"
    "    sys.stdin.readline()\n"
    "    threading.Thread(target=hasher, args=('N',), daemon=True).start()\n"
    "    while 'N' not in ids:\n"
    "        time.sleep(0.001)\n"
    "    print(ids['N'], flush=True)\n"
    "threading.Thread(target=go, daemon=True).start()\n"
    "x = 0\n"
    "while True:\n"
    "    x = (x + 1) % 1000003\n";

static python_child_t g_py = {.pid = -1};

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static uint64_t cpu_ns(pid_t pid, pid_t tid)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
    FILE *f = fopen(path, "r");
    unsigned long long run = 0;
    if (f) {
        if (fscanf(f, "%llu", &run) != 1)
            run = 0;
        fclose(f);
    }
    return run;
}

/* Per-thread tallies. */
#define MAXT 16
typedef struct tally {
    pid_t tid;
    uint64_t n, kernel, period, last_time, bad_time, regs, regs_ip_ok, stacks, stack_ok;
} tally_t;

typedef struct acc {
    tally_t t[MAXT];
    uint64_t t0, t1;
    pid_t pid;
    uint64_t wrong_pid;
} acc_t;

static tally_t *tally_of(acc_t *a, pid_t tid)
{
    for (int i = 0; i < MAXT; i++) {
        if (a->t[i].tid == tid)
            return &a->t[i];
        if (a->t[i].tid == 0) {
            a->t[i].tid = tid;
            return &a->t[i];
        }
    }
    return &a->t[MAXT - 1];
}

static void on_sample(const perfev_sample_t *s, void *ctx)
{
    acc_t *a = ctx;
    if (s->pid != a->pid)
        a->wrong_pid++;
    tally_t *t = tally_of(a, s->tid);
    t->n++;
    t->kernel += s->kernel;
    t->period += s->period_ns;
    if (s->time_ns < t->last_time || s->time_ns < a->t0 || s->time_ns > scry_now_ns())
        t->bad_time++;
    t->last_time = s->time_ns;
    if (s->has_regs) {
        t->regs++;
        if (s->kernel || s->regs[PERFEV_REG_IP] == s->ip)
            t->regs_ip_ok++;
    }
    if (s->stack) {
        t->stacks++;
        /* The copy starts at SP: its first word is what the thread had there; at least a
         * return address into user space must appear among the first words. */
        int ok = 0;
        for (size_t off = 0; off + 8 <= s->stack_len && off < 4096; off += 8) {
            uint64_t w;
            memcpy(&w, s->stack + off, 8);
            if (w > 0x400000 && w < 0x800000000000ull)
                ok = 1;
        }
        t->stack_ok += ok;
    }
}

static tally_t *get(acc_t *a, pid_t tid)
{
    for (int i = 0; i < MAXT; i++)
        if (a->t[i].tid == tid)
            return &a->t[i];
    static tally_t none;
    memset(&none, 0, sizeof none);
    return &none;
}

/* Opens perf events with OPTS on every thread of OPTS->pid now; each step checked. Returns
 * the session, or NULL (then already failed a check). */
static perfev_t *open_all(const perfev_opts_t *opts)
{
    perfev_t *p = NULL;
    CHECK(perfev_open(opts, &p) == 0);
    if (!p)
        return NULL;
    pid_t tids[64];
    size_t n = python_child_tids(opts->pid, tids, 64);
    CHECK(perfev_set_threads(p, tids, n, NULL, NULL) == (int)n);
    return p;
}

/* Samples for MS ms with OPTS; fills A; checks CPU accounting of TIDS_CHECK. */
static void run(perfev_opts_t *opts, int ms, acc_t *a, pid_t pid, const pid_t *check, int ncheck)
{
    memset(a, 0, sizeof *a);
    a->pid = pid;
    perfev_t *p = NULL;
    CHECK(perfev_open(opts, &p) == 0);
    if (!p)
        return;
    pid_t tids[64];
    size_t n = python_child_tids(pid, tids, 64);
    uint64_t c0[8] = {0};
    a->t0 = scry_now_ns();
    CHECK(perfev_set_threads(p, tids, n, NULL, NULL) == (int)n);
    for (int i = 0; i < ncheck; i++)
        c0[i] = cpu_ns(pid, check[i]);
    for (int i = 0; i < ms / 10; i++) {
        sleep_ms(10);
        perfev_read(p, on_sample, a);
    }
    uint64_t c1[8] = {0};
    for (int i = 0; i < ncheck; i++)
        c1[i] = cpu_ns(pid, check[i]);
    perfev_read(p, on_sample, a);
    for (int i = 0; i < ncheck; i++) {
        tally_t *t = get(a, check[i]);
        double used = (double)(c1[i] - c0[i]), got = (double)t->period;
        fprintf(stderr, "  tid %d: %llu samples (%llu kernel), periods %.1f ms, CPU %.1f ms\n",
                (int)check[i], (unsigned long long)t->n, (unsigned long long)t->kernel, got / 1e6,
                used / 1e6);
        CHECK(t->n > 0);
        CHECK(t->bad_time == 0);
        /* One period of slack at each end of the window. */
        CHECK(got <= used * 1.25 + 2.0 * (double)perfev_period_ns(p));
        CHECK(got >= used * 0.75 - 2.0 * (double)perfev_period_ns(p));
    }
    perfev_stats_t st = perfev_stats(p);
    fprintf(stderr, "  stats: samples %llu lost %llu bad %llu other %llu threads %llu\n",
            (unsigned long long)st.samples, (unsigned long long)st.lost, (unsigned long long)st.bad,
            (unsigned long long)st.other, (unsigned long long)st.threads);
    CHECK(st.bad == 0);
    CHECK(a->wrong_pid == 0);
    perfev_free(p);
}

static int thread_stopped(pid_t pid)
{
    pid_t tids[64];
    size_t n = python_child_tids(pid, tids, 64);
    int stopped = 0;
    for (size_t i = 0; i < n; i++) {
        char path[96], buf[512];
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tids[i]);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        char *rp = strrchr(buf, ')');
        if (rp && (rp[2] == 't' || rp[2] == 'T'))
            stopped++;
    }
    return stopped;
}

static void on_alarm(int sig)
{
    (void)sig; /* only ends a wait */
}

/* perfev_wait with wake_each: a record ends a wait at once; without one, a long wait ends
 * by its deadline or up to half its length early (a timer kept armed across waits), never
 * later; a signal ends it too. */
static void check_waits(pid_t pid, pid_t busy, pid_t idle)
{
    perfev_t *p = NULL;
    perfev_opts_t o = {.pid = pid, .rate_hz = 1000, .wake_each = 1};
    CHECK(perfev_open(&o, &p) == 0);
    CHECK(p && perfev_set_threads(p, &idle, 1, NULL, NULL) == 1);
    uint64_t t0 = scry_now_ns();
    CHECK(perfev_wait(p, t0 + 40000000ull) == 0);
    uint64_t took = scry_now_ns() - t0;
    fprintf(stderr, "  quiet wait of 40 ms: %.1f ms\n", (double)took / 1e6);
    CHECK(took >= 39000000ull && took < 400000000ull);
    /* Interrupted by a signal after 5 ms, the timer stays armed for 40 ms from t0; the next
     * wait, to 50 ms, may end at 40 ms (10 ms early, less than half of its 45 ms). */
    struct sigaction sa = {.sa_handler = on_alarm};
    struct sigaction old;
    sigaction(SIGALRM, &sa, &old);
    t0 = scry_now_ns();
    struct itimerval it = {.it_value = {0, 5000}};
    setitimer(ITIMER_REAL, &it, NULL);
    CHECK(perfev_wait(p, t0 + 40000000ull) == 0);
    took = scry_now_ns() - t0;
    CHECK(took < 39000000ull);
    uint64_t t1 = scry_now_ns();
    CHECK(perfev_wait(p, t0 + 50000000ull) == 0);
    took = scry_now_ns() - t0;
    fprintf(stderr, "  interrupted, then waited to 50 ms: ended at %.1f ms\n", (double)took / 1e6);
    CHECK(took >= 39000000ull && took >= t1 - t0 + (t0 + 50000000ull - t1) / 2 - 1000000ull);
    CHECK(took < 400000000ull);
    sigaction(SIGALRM, &old, NULL);
    /* A busy thread's records end a wait long before its deadline. */
    CHECK(perfev_set_threads(p, &busy, 1, NULL, NULL) == 1);
    int woke = 0;
    t0 = scry_now_ns();
    for (int i = 0; i < 5 && !woke; i++)
        woke = perfev_wait(p, scry_now_ns() + 1000000000ull);
    took = scry_now_ns() - t0;
    fprintf(stderr, "  busy thread: woken after %.1f ms\n", (double)took / 1e6);
    CHECK(woke == 1 && took < 500000000ull);
    perfev_free(p);
}

int main(void)
{
    int probe = perfev_probe(0, 0);
    if (probe != 0) {
        printf("SKIP: perf events refused here (%s)\n", scry_strerror(probe));
        return 0;
    }
    const char *py = "/root/.pyenv/versions/3.12.1/bin/python3.12";
    struct stat stb;
    if (stat(py, &stb) != 0)
        py = "/usr/bin/python3.11";
    if (python_child_start(&g_py, py, script, NULL) != 0)
        return 1;
    char line[256];
    int pid = 0, h = 0, k = 0, s = 0;
    if (python_child_line(&g_py, line, sizeof line, 20000) < 0 ||
        sscanf(line, "%d %d %d %d", &pid, &h, &k, &s) != 4) {
        fprintf(stderr, "target did not start\n");
        python_child_end(&g_py);
        return 1;
    }
    acc_t a;
    pid_t busy[3] = {pid, h, k};

    fprintf(stderr, "task-clock, 1 kHz, no stack:\n");
    perfev_opts_t o = {.pid = pid, .rate_hz = 1000, .clock = PERFEV_CLOCK_TASK};
    run(&o, 600, &a, pid, busy, 3);
    CHECK(get(&a, s)->n <= 2);
    CHECK(get(&a, k)->kernel * 2 > get(&a, k)->n);
    CHECK(get(&a, h)->kernel * 5 < get(&a, h)->n);
    CHECK(get(&a, h)->regs == 0 && get(&a, h)->stacks == 0);

    fprintf(stderr, "cpu-clock, 500 Hz, 16 KiB stacks:\n");
    o = (perfev_opts_t){
        .pid = pid, .rate_hz = 500, .clock = PERFEV_CLOCK_CPU, .stack_bytes = 16384};
    run(&o, 600, &a, pid, busy, 3);
    for (int i = 0; i < 3; i++) {
        tally_t *t = get(&a, busy[i]);
        CHECK(t->regs == t->n && t->regs_ip_ok == t->n);
        CHECK(t->stacks * 10 >= t->n * 9);
        CHECK(t->stack_ok == t->stacks);
    }
    CHECK(thread_stopped(pid) == 0);

    fprintf(stderr, "a thread started later:\n");
    {
        perfev_t *p = NULL;
        o = (perfev_opts_t){.pid = pid, .rate_hz = 1000};
        CHECK(perfev_open(&o, &p) == 0);
        pid_t tids[64];
        size_t n = python_child_tids(pid, tids, 64);
        CHECK(p && perfev_set_threads(p, tids, n, NULL, NULL) == (int)n);
        CHECK(write(g_py.in_fd, "go\n", 3) == 3);
        int nt = 0;
        CHECK(python_child_line(&g_py, line, sizeof line, 10000) >= 0 &&
              sscanf(line, "%d", &nt) == 1);
        CHECK(!perfev_has_thread(p, nt));
        CHECK(perfev_add_thread(p, nt) == 0 && perfev_has_thread(p, nt));
        CHECK(perfev_add_thread(p, nt) == 0); /* twice is fine */
        memset(&a, 0, sizeof a);
        a.pid = pid;
        a.t0 = scry_now_ns();
        sleep_ms(300);
        perfev_read(p, on_sample, &a);
        fprintf(stderr, "  new thread %d: %llu samples\n", nt, (unsigned long long)get(&a, nt)->n);
        CHECK(get(&a, nt)->n > 0);
        /* Dropping a thread from the set closes its event after draining it. */
        size_t w = 0;
        for (size_t i = 0; i < n; i++)
            if (tids[i] != h)
                tids[w++] = tids[i];
        tids[w++] = nt;
        CHECK(perfev_set_threads(p, tids, w, NULL, NULL) == (int)w);
        CHECK(!perfev_has_thread(p, h));
        CHECK(perfev_add_thread(p, 999999999) == SCRY_E_GONE ||
              perfev_add_thread(p, 999999999) == SCRY_E_INVAL);
        perfev_free(p);
    }

    fprintf(stderr, "a one-page ring read late: lost records counted:\n");
    {
        o = (perfev_opts_t){.pid = pid, .rate_hz = 1000, .stack_bytes = 1024, .ring_pages = 1};
        perfev_t *p = open_all(&o);
        sleep_ms(200);
        memset(&a, 0, sizeof a);
        a.pid = pid;
        perfev_read(p, on_sample, &a);
        sleep_ms(100);
        perfev_read(p, on_sample, &a);
        perfev_stats_t st = perfev_stats(p);
        fprintf(stderr, "  samples %llu lost %llu bad %llu\n", (unsigned long long)st.samples,
                (unsigned long long)st.lost, (unsigned long long)st.bad);
        CHECK(st.lost > 0);
        CHECK(st.samples > 0);
        CHECK(st.bad == 0);
        perfev_free(p);
    }

    fprintf(stderr, "a rate changed while sampling (100 Hz, then 1 kHz):\n");
    {
        o = (perfev_opts_t){.pid = pid, .rate_hz = 100};
        perfev_t *p = open_all(&o);
        sleep_ms(100);
        perfev_read(p, NULL, NULL);
        CHECK(perfev_set_rate(p, 1000) == 0 && perfev_period_ns(p) == 1000000);
        CHECK(perfev_set_rate(p, 0.001) == SCRY_E_INVAL && perfev_period_ns(p) == 1000000);
        uint64_t c0 = cpu_ns(pid, h);
        memset(&a, 0, sizeof a);
        a.pid = pid;
        a.t0 = scry_now_ns();
        for (int i = 0; i < 40; i++) {
            sleep_ms(10);
            perfev_read(p, on_sample, &a);
        }
        uint64_t used = cpu_ns(pid, h) - c0;
        tally_t *t = get(&a, h);
        fprintf(stderr, "  tid %d: %llu samples standing for %.1f ms, CPU %.1f ms\n", (int)h,
                (unsigned long long)t->n, (double)t->period / 1e6, (double)used / 1e6);
        /* a record per ms of CPU (not per 10 ms), each standing for 1 ms */
        CHECK((double)t->n >= (double)used / 1e6 * 0.75 - 12);
        CHECK((double)t->n <= (double)used / 1e6 * 1.25 + 2);
        CHECK(t->period <= t->n * 1000000ull + 10000000ull);
        /* each thread's exact clock: the busy one's moves with its CPU time, the sleeping
         * one's hardly, a thread without an event has none */
        uint64_t b0 = 0, b1 = 0, z0 = 0, z1 = 0, x = 0;
        uint64_t u0 = cpu_ns(pid, h);
        CHECK(perfev_thread_clock(p, h, &b0) == 0 && perfev_thread_clock(p, s, &z0) == 0);
        sleep_ms(200);
        CHECK(perfev_thread_clock(p, h, &b1) == 0 && perfev_thread_clock(p, s, &z1) == 0);
        uint64_t u1 = cpu_ns(pid, h);
        fprintf(stderr, "  clocks: busy +%.1f ms (schedstat +%.1f ms), sleeping +%.3f ms\n",
                (double)(b1 - b0) / 1e6, (double)(u1 - u0) / 1e6, (double)(z1 - z0) / 1e6);
        CHECK(b1 > b0 && b1 - b0 + 8000000ull >= u1 - u0 && b1 - b0 <= u1 - u0 + 8000000ull);
        CHECK(z1 - z0 < 2000000ull);
        CHECK(perfev_thread_clock(p, 999999999, &x) == SCRY_E_NOTFOUND);
        perfev_free(p);
    }

    fprintf(stderr, "switches:\n");
    {
        /* how each thread last left its CPU: the sleeping one to wait, a busy one (when it
         * left at all) preempted; unknown without the option */
        perfev_t *p = NULL;
        o = (perfev_opts_t){.pid = pid, .rate_hz = 100, .clock = PERFEV_CLOCK_TASK, .switches = 1};
        pid_t ids[2] = {h, s};
        CHECK(perfev_open(&o, &p) == 0 && perfev_set_threads(p, ids, 2, NULL, NULL) == 2);
        uint64_t t0 = scry_now_ns(), at_s = 0, at_h = 0;
        int ps = -1;
        /* the sleeper wakes every 0.5 s (later when the busy threads hold the GIL): up to
         * 3 s for its first switch out to be seen */
        for (int i = 0; i < 30 && ps < 0; i++) {
            sleep_ms(100);
            perfev_read(p, NULL, NULL);
            ps = perfev_thread_preempted(p, s, &at_s);
        }
        int ph = perfev_thread_preempted(p, h, &at_h);
        fprintf(stderr, "  sleeping: %d %.1f ms in, busy: %d\n", ps, (double)(at_s - t0) / 1e6, ph);
        CHECK(ps == 0 && at_s >= t0 && at_s <= scry_now_ns());
        /* the hasher is preempted, or waits for the GIL the other Python threads hold */
        CHECK(ph == -1 || (ph >= 0 && at_h >= t0));
        CHECK(perfev_thread_preempted(p, 999999999, NULL) == -1);
        /* off a CPU at a moment: the sleeper (asleep almost all the time) now, after its
         * switch out; at a moment before any switch read, unknown */
        uint64_t now = scry_now_ns();
        perfev_read(p, NULL, NULL);
        int off = perfev_thread_off_cpu_at(p, s, now);
        fprintf(stderr, "  sleeping off a CPU now: %d\n", off);
        CHECK(off == 1 || off == -1); /* -1: it switched out again since NOW */
        CHECK(perfev_thread_off_cpu_at(p, 999999999, now) == -1);
        CHECK(perfev_thread_off_cpu_at(p, s, t0 - 1) <= 0);
        perfev_free(p);
        o.switches = 0;
        CHECK(perfev_open(&o, &p) == 0 && perfev_set_threads(p, ids, 2, NULL, NULL) == 2);
        sleep_ms(50);
        perfev_read(p, NULL, NULL);
        CHECK(perfev_thread_preempted(p, s, NULL) == -1);
        CHECK(perfev_thread_off_cpu_at(p, s, scry_now_ns()) == -1);
        perfev_free(p);
    }

    fprintf(stderr, "waits:\n");
    check_waits(pid, h, s);

    /* Bad options. */
    perfev_t *p = NULL;
    o = (perfev_opts_t){.pid = pid, .rate_hz = 0};
    CHECK(perfev_open(&o, &p) == SCRY_E_INVAL && !p);
    o = (perfev_opts_t){.pid = pid, .rate_hz = 100, .ring_pages = 3};
    CHECK(perfev_open(&o, &p) == SCRY_E_INVAL);
    o = (perfev_opts_t){.pid = pid, .rate_hz = 100, .stack_bytes = PERFEV_STACK_MAX + 8};
    CHECK(perfev_open(&o, &p) == SCRY_E_INVAL);
    perfev_free(NULL);

    CHECK(thread_stopped(pid) == 0);
    python_child_end(&g_py);

    return check_summary("test_perfev_live");
}
