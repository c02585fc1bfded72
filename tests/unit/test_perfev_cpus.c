/* test_perfev_cpus.c - the per-CPU "who ran" clock (perfev cpu_wide): one cpu-clock event
 * per CPU says which process was on it.
 *
 * Checked: bad options are refused; with system-wide events allowed (root, CAP_PERFMON),
 * a CPU event opens per CPU, and after this process burns 200 ms of CPU its pid and tid are
 * in the records (about 49 Hz x 0.2 s = 10 expected, at least 3 asked), each record's CPU is
 * the CPU of the ring it came from, and a child that only sleeps is never seen. Skipped
 * (exit 0 with "SKIP") when system-wide perf events are refused.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "perfev.h"
#include "scry_err.h"

typedef struct seen {
    pid_t self, sleeper;
    int mine, sleeper_seen, total, bad_cpu;
    long ncpu;
} seen_t;

static void on_sample(const perfev_sample_t *s, void *ctx)
{
    seen_t *c = ctx;
    c->total++;
    if (s->pid == c->self && s->tid == c->self)
        c->mine++;
    if (s->pid == c->sleeper)
        c->sleeper_seen++;
    if ((long)s->cpu >= c->ncpu)
        c->bad_cpu++;
}

int main(void)
{
    perfev_t *p = NULL;
    perfev_opts_t bad = {.rate_hz = 49, .clock = PERFEV_CLOCK_TASK, .cpu_wide = 1};
    CHECK_INT(perfev_open(&bad, &p), ==, SCRY_E_INVAL);
    bad.clock = PERFEV_CLOCK_CPU;
    bad.stack_bytes = 1024;
    CHECK_INT(perfev_open(&bad, &p), ==, SCRY_E_INVAL);
    perfev_opts_t o = {.rate_hz = 49, .clock = PERFEV_CLOCK_CPU, .cpu_wide = 1};
    CHECK_INT(perfev_open(&o, &p), ==, 0);
    int n = perfev_set_cpus(p);
    if (n == SCRY_E_PERM || n == SCRY_E_NOSYS) {
        printf("SKIP: system-wide perf events refused here (%s)\n", scry_strerror(n));
        perfev_free(p);
        return check_summary("test_perfev_cpus");
    }
    seen_t c = {.self = getpid(), .ncpu = sysconf(_SC_NPROCESSORS_CONF)};
    CHECK(n >= 1 && n <= c.ncpu, "%d CPU events for %ld CPUs", n, c.ncpu);
    c.sleeper = fork();
    if (c.sleeper == 0) {
        struct timespec ts = {5, 0};
        nanosleep(&ts, NULL);
        _exit(0);
    }
    perfev_read(p, NULL, NULL); /* what ran before */
    volatile uint64_t x = 0;
    for (;;) { /* 200 ms of this thread's CPU, however loaded the machine */
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        if ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec > 200000000ull)
            break;
        for (int i = 0; i < 100000; i++)
            x += x * 31 + 7;
    }
    perfev_read(p, on_sample, &c);
    kill(c.sleeper, SIGKILL);
    waitpid(c.sleeper, NULL, 0);
    CHECK(c.mine >= 3, "this process seen in %d of %d records after 200 ms of CPU", c.mine,
          c.total);
    CHECK(c.sleeper_seen == 0, "the sleeping child seen %d times", c.sleeper_seen);
    CHECK(c.bad_cpu == 0, "%d records name a CPU out of range", c.bad_cpu);
    perfev_stats_t st = perfev_stats(p);
    CHECK(st.bad == 0, "%llu bad records", (unsigned long long)st.bad);
    perfev_free(p);
    return check_summary("test_perfev_cpus");
}
