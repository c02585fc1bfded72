/* test_sampler_engine.c - the sampler library against a real interpreter.
 *
 * The target's main thread spins in spin() (always on a CPU; it says READY from inside
 * spin(), so that a loaded machine cannot catch it still at module level) and a thread
 * named 'napper' sleeps in nap() (never on a CPU). Known answers: with the ptrace back end and idle
 * threads off, every tick samples the spinning thread in spin() and never the napper; with
 * idle on, both, the napper in nap(); --threads puts "thread TID (NAME)" at the root; a run
 * of 0.6 s at 100 Hz takes at most 60 (+2) rounds, each with the spinner in spin() (a
 * loaded machine skips late rounds, so the lower bound is loose); the options struct chooses the
 * back end (ptrace, instant -> ptrace, refused perf); sampler_open_target refuses a missing and a
 * non-Python process; ticks after the target exited say SCRY_E_GONE.
 */
#include "python_child.h"

#include "sampler.h"
#include "scry_err.h"
#include "strtab.h"

#include <stdlib.h>
#include <string.h>

static const char script[] = "import threading, time\n"
                             "def nap():\n"
                             "    while True:\n"
                             "        time.sleep(10)\n"
                             "threading.Thread(target=nap, name='napper', daemon=True).start()\n"
                             "time.sleep(0.2)\n"
                             "def spin():\n"
                             "    print('READY', flush=True)\n"
                             "    x = 0\n"
                             "    while True:\n"
                             "        x = (x + 1) % 1000003\n"
                             "spin()\n";

typedef struct tally {
    pid_t main_tid;
    int samples, main_spin, napper, napper_nap, rooted, other;
} tally_t;

static int has_frame(const scry_sample_t *s, const char *fn)
{
    for (uint32_t i = 0; i < s->nframes; i++)
        if (strcmp(s->frames[i].function, fn) == 0)
            return 1;
    return 0;
}

static void count(const scry_sample_t *s, void *ctx)
{
    tally_t *t = ctx;
    t->samples++;
    if (s->nframes && strncmp(s->frames[s->nframes - 1].function, "thread ", 7) == 0 &&
        strstr(s->frames[s->nframes - 1].function, "(napper)"))
        t->rooted++;
    if (s->tid == t->main_tid)
        t->main_spin += has_frame(s, "spin");
    else if (strcmp(s->thread_name, "napper") == 0) {
        t->napper++;
        t->napper_nap += has_frame(s, "nap");
    } else
        t->other++;
}

static tally_t ticks(pystate_target_t *t, strtab_t *strings, const sampler_opts_t *o, int n,
                     pid_t main_tid, int *backend)
{
    tally_t tl = {.main_tid = main_tid};
    sampler_t *s = sampler_new(o, t, strings);
    CHECK(s != NULL, "sampler_new");
    if (!s)
        return tl;
    *backend = sampler_backend(s);
    for (int i = 0; i < n; i++)
        CHECK_INT(sampler_tick(s, count, &tl), ==, 0, "tick %d", i);
    sampler_free(s);
    return tl;
}

int main(void)
{
    const char *py = python_child_interp();
    if (!py) {
        printf("SKIP: no Python interpreter\n");
        return 0;
    }
    strtab_t *strings = strtab_new();
    pystate_target_t *t = NULL;

    /* refusals first: no such process, not Python */
    CHECK_INT(sampler_open_target(999999999, strings, NULL, &t), ==, SCRY_E_NOPROC, "no pid");
    CHECK_INT(sampler_open_target(getpid(), strings, NULL, &t), <, 0, "the test is not Python");
    CHECK(t == NULL, "no target on failure");

    python_child_t c;
    char line[64];
    CHECK(python_child_start(&c, py, script, NULL) == 0, "start %s", py);
    CHECK(python_child_line(&c, line, sizeof line, 20000) >= 0 && !strcmp(line, "READY"),
          "the target started");
    CHECK_INT(sampler_open_target(c.pid, strings, NULL, &t), ==, 0, "open %d", (int)c.pid);
    if (!t) {
        python_child_end(&c);
        return check_summary("test_sampler_engine");
    }

    int backend = 0;
    sampler_opts_t o = {.rate_hz = 100, .backend = "ptrace"};
    tally_t a = ticks(t, strings, &o, 20, c.pid, &backend);
    CHECK_INT(backend, ==, SAMPLER_PTRACE, "backend ptrace");
    CHECK_INT(a.main_spin, >=, 18, "on-CPU only: the spinner in spin() (%d samples)", a.samples);
    CHECK_INT(a.napper, ==, 0, "on-CPU only: the napper never sampled");
    CHECK_INT(a.other, ==, 0, "no other thread");

    o.idle = 1;
    o.threads = 1;
    tally_t b = ticks(t, strings, &o, 10, c.pid, &backend);
    CHECK_INT(b.main_spin, >=, 9, "idle: the spinner still in spin()");
    CHECK_INT(b.napper, ==, 10, "idle: the napper every tick");
    CHECK_INT(b.napper_nap, ==, 10, "idle: the napper in nap()");
    CHECK_INT(b.rooted, ==, 10, "--threads: the napper's root frame names it");

    /* instant (a dump) with the automatic back end: ptrace */
    sampler_opts_t d = {.instant = 1, .idle = 1};
    tally_t e = ticks(t, strings, &d, 1, c.pid, &backend);
    CHECK_INT(backend, ==, SAMPLER_PTRACE, "instant -> ptrace");
    CHECK_INT(e.samples, ==, 2, "one instant: both threads");
    CHECK(!sampler_refused(&d) && !sampler_refused(&o), "only a forced perf can be refused");
    sampler_opts_t f = {.backend = "perf"};
    CHECK(sampler_refused(&f), "forced perf");

    /* sampler_run: 0.6 s at 100 Hz */
    sampler_opts_t r = {.rate_hz = 100, .backend = "ptrace"};
    sampler_t *s = sampler_new(&r, t, strings);
    tally_t g = {.main_tid = c.pid};
    volatile sig_atomic_t stop = 0;
    CHECK_INT(sampler_run(s, 0.6, &stop, count, &g, NULL, NULL), ==, 0, "run");
    const sampler_stats_t *st = sampler_stats(s);
    /* never more rounds than the rate allows; a loaded machine skips late ones */
    CHECK_UINT(st->ticks, >=, 15, "ticks in 0.6 s at 100 Hz (%llu late)",
               (unsigned long long)st->late);
    CHECK_UINT(st->ticks, <=, 62, "ticks in 0.6 s at 100 Hz");
    CHECK_INT(g.main_spin, >=, (int)st->ticks * 9 / 10, "the spinner in spin() every tick");

    /* the target exits: the next ticks say so */
    python_child_end(&c);
    int rc = 0;
    for (int i = 0; i < 5 && rc == 0; i++)
        rc = sampler_tick(s, count, &g);
    CHECK_INT(rc, ==, SCRY_E_GONE, "target gone");
    CHECK(sampler_stats(s)->target_exited, "stats say it exited");
    sampler_free(s);
    pystate_target_free(t);
    strtab_free(strings);
    return check_summary("test_sampler_engine");
}
