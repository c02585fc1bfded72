/* test_memprof_attach.c - the memprof library against a real interpreter: the shim injected
 * into a running Python (attach mode, as `scry record --memory --pid`), its ring drained
 * into memory samples with Python frames.
 *
 * Known answer: on "go" the target allocates N blocks of 64 KiB in grow() (each freed at
 * once) and says "done"; the ALLOC samples whose stack holds grow() must weigh N * 64 KiB
 * within 25 % (the shim samples one byte in 16 KiB on average: about 2000 samples, a 64 KiB block
 * weighing its own size or more), and 99 % of them at grow()'s bytearray line (the
 * loop's own few allocations are elsewhere). After
 * memprof_free the shim passes through and the target lives on.
 */
#include "python_child.h"

#include "memory.h"
#include "sampler.h"
#include "scry_err.h"
#include "scry_time.h"
#include "strtab.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NBLOCKS 2000
#define BLOCK   65536

static const char script[] = "import sys\n"
                             "def grow(n):\n"
                             "    for i in range(n):\n"
                             "        b = bytearray(65536)\n"
                             "        del b\n"
                             "print('READY', flush=True)\n"
                             "for line in sys.stdin:\n"
                             "    grow(int(line))\n"
                             "    print('done', flush=True)\n";

typedef struct tally {
    uint64_t alloc_bytes, grow_bytes, grow_samples, other_line;
    int grow_line;
} tally_t;

static void count(const scry_sample_t *s, void *ctx)
{
    tally_t *t = ctx;
    if (s->metric != SCRY_METRIC_ALLOC)
        return;
    t->alloc_bytes += s->bytes;
    for (uint32_t i = 0; i < s->nframes; i++)
        if (strcmp(s->frames[i].function, "grow") == 0) {
            t->grow_bytes += s->bytes;
            t->grow_samples++;
            t->other_line += s->frames[i].line != t->grow_line;
            break;
        }
}

static void drain_for(memprof_t *m, pystate_target_t *t, tally_t *tl, int ms)
{
    uint64_t end = scry_now_ns() + (uint64_t)ms * 1000000u;
    do {
        CHECK_INT(memprof_drain(m, t, count, tl), >=, 0, "drain");
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    } while (scry_now_ns() < end);
}

int main(void)
{
    const char *py = python_child_interp();
    if (!py) {
        printf("SKIP: no Python interpreter\n");
        return 0;
    }
    setenv("SCRY_SHIM", SCRY_TEST_SHIM, 1);
    strtab_t *strings = strtab_new();
    pystate_target_t *t = NULL;
    python_child_t c;
    char line[64], msg[512] = "";
    CHECK(python_child_start(&c, py, script, NULL) == 0, "start %s", py);
    CHECK(python_child_line(&c, line, sizeof line, 20000) >= 0 && !strcmp(line, "READY"),
          "the target started");
    CHECK_INT(sampler_open_target(c.pid, strings, NULL, &t), ==, 0, "open");
    memprof_t *m = memprof_new(16384, 0);
    CHECK(m != NULL, "memprof_new (shim at %s)", SCRY_TEST_SHIM);
    if (!t || !m)
        goto out;
    int err = memprof_inject(m, t, msg, sizeof msg);
    CHECK_INT(err, ==, 0, "inject: %s", msg);
    if (err)
        goto out;
    CHECK_INT(memprof_start(m, t), ==, 0, "start");
    tally_t before = {.grow_line = 4};
    drain_for(m, t, &before, 200);
    CHECK_UINT(before.grow_samples, ==, 0, "nothing in grow() before it ran");

    tally_t tl = {.grow_line = 4}; /* b = bytearray(65536) */
    char go[32];
    int n = snprintf(go, sizeof go, "%d\n", NBLOCKS);
    CHECK_INT(write(c.in_fd, go, (size_t)n), ==, n, "go");
    CHECK(python_child_line(&c, line, sizeof line, 30000) >= 0 && !strcmp(line, "done"),
          "the target allocated");
    drain_for(m, t, &tl, 300);
    double truth = (double)NBLOCKS * BLOCK, got = (double)tl.grow_bytes;
    fprintf(stderr, "grow(): %.1f MiB estimated from %llu samples, %.1f MiB allocated\n",
            got / 1048576, (unsigned long long)tl.grow_samples, truth / 1048576);
    CHECK_DBL(got, >=, truth * 0.75, "bytes allocated in grow() (%llu samples)",
              (unsigned long long)tl.grow_samples);
    CHECK_DBL(got, <=, truth * 1.25, "bytes allocated in grow()");
    CHECK_UINT(tl.other_line * 100, <=, tl.grow_samples, "99 %% of grow()'s samples at its bytearray line");
    uint64_t events = 0, dropped = 0, bad = 0;
    memprof_counts(m, &events, &dropped, &bad);
    CHECK_UINT(bad, ==, 0, "no record rejected");
    CHECK_UINT(events, >=, tl.grow_samples, "events counted");
    char desc[512];
    memprof_describe(m, desc, sizeof desc);
    CHECK(strstr(desc, "shim attached") != NULL, "describe: %s", desc);
    memprof_free(m);
    m = NULL;
    /* the shim passes through: the target still runs and allocates */
    CHECK_INT(write(c.in_fd, go, (size_t)n), ==, n, "go again");
    CHECK(python_child_line(&c, line, sizeof line, 30000) >= 0 && !strcmp(line, "done"),
          "the target lives on after memprof_free");
out:
    memprof_free(m);
    python_child_end(&c);
    pystate_target_free(t);
    strtab_free(strings);
    return check_summary("test_memprof_attach");
}
