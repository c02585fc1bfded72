/* test_unwind_cost.c - what one native sample costs (docs/native.md).
 *
 * A 3.11.7 thread sits in a ~30-frame native stack (scryext.deep). We take 1000 samples
 * with scry's accessors and 1000 with libunwind's stock _UPT accessors, in the same run,
 * and print medians of: the whole sample (stop + unwind + resume) and the unwind alone.
 */
#include "test_unwind_live.h"
#include "scry_time.h"

#define NSAMPLES 1000

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct result {
    uint64_t full_med, unw_med, unw_p90, first;
    size_t frames;
    int fails;
} result_t;

static uint64_t g_full[NSAMPLES], g_unw[NSAMPLES];

static void run(unwind_t *u, pid_t tid, result_t *r)
{
    static unwind_frame_t f[UNWIND_MAX_DEPTH];
    memset(r, 0, sizeof *r);
    size_t k = 0;
    for (int i = 0; i < NSAMPLES; i++) {
        uint64_t t0 = scry_now_ns();
        int src = proc_stop_thread(tid);
        if (src != 0) {
            if (r->fails++ < 3)
                fprintf(stderr, "stop: %d\n", src);
            continue;
        }
        uint64_t t1 = scry_now_ns();
        size_t n = 0;
        int rc = unwind_thread(u, tid, f, UNWIND_MAX_DEPTH, &n);
        uint64_t t2 = scry_now_ns();
        proc_resume_thread(tid);
        uint64_t t3 = scry_now_ns();
        if (rc != 0 || n == 0) {
            if (r->fails++ < 3)
                fprintf(stderr, "unwind: %d, %zu frames\n", rc, n);
            continue;
        }
        if (i == 0)
            r->first = t2 - t1;
        if (n > r->frames)
            r->frames = n;
        g_full[k] = t3 - t0;
        g_unw[k] = t2 - t1;
        k++;
    }
    if (k == 0)
        return;
    qsort(g_full, k, sizeof *g_full, cmp_u64);
    qsort(g_unw, k, sizeof *g_unw, cmp_u64);
    r->full_med = g_full[k / 2];
    r->unw_med = g_unw[k / 2];
    r->unw_p90 = g_unw[k * 9 / 10];
}

int main(void)
{
    const char *python = PYENV "3.11.7/bin/python3.11";
    const char *inc = PYENV "3.11.7/include/python3.11";
    if (!file_exists(python) || !file_exists(inc)) {
        fprintf(stderr, "skip: %s not installed\n", python);
        return 0;
    }
    char dir[128];
    snprintf(dir, sizeof dir, "/tmp/scry-test-unwind-cost-%d", (int)getpid());
    CHECK(build_ext(inc, dir) == 0);
    static const char script[] = "import os, scryext\n"
                                 "print(os.getpid(), flush=True)\n"
                                 "scryext.deep(15, 120.0)\n";
    child_t c;
    start_target(&c, python, script, dir, 10000, 100);

    unwind_t *u = unwind_new(c.pid);
    CHECK(u != NULL);
    result_t scry, stock;
    run(u, c.pid, &scry);
    unwind_stats_t st = unwind_stats(u);
    unwind_free(u);

    u = unwind_new(c.pid);
    CHECK(u != NULL);
    CHECK(unwind_set_stock_accessors(u, 1) == 0);
    run(u, c.pid, &stock);
    unwind_free(u);

    printf("native sample of a %zu-frame stack, median of %d (us):\n", scry.frames, NSAMPLES);
    printf("  scry accessors : whole sample %.1f, unwind %.1f (p90 %.1f), first (cold) %.1f\n",
           scry.full_med / 1e3, scry.unw_med / 1e3, scry.unw_p90 / 1e3, scry.first / 1e3);
    printf("  stock _UPT     : whole sample %.1f, unwind %.1f (p90 %.1f), first (cold) %.1f\n",
           stock.full_med / 1e3, stock.unw_med / 1e3, stock.unw_p90 / 1e3, stock.first / 1e3);
    printf("  scry: %llu stack reads, %llu page hits, %llu page misses, %llu tables\n",
           (unsigned long long)st.stack_reads, (unsigned long long)st.page_hits,
           (unsigned long long)st.page_misses, (unsigned long long)st.tables);
    printf("  failed samples: scry %d, stock %d\n", scry.fails, stock.fails);
    /* A loaded machine may make a stop time out now and then. */
    CHECK(scry.fails < NSAMPLES / 20 && stock.fails < NSAMPLES / 20);
    CHECK(scry.frames >= 28 && stock.frames >= 28);
    CHECK(scry.unw_med < stock.unw_med);
    /* The whole sample is not bounded here: on a loaded machine the stop waits for the
     * scheduler to run the target thread into its ptrace-stop. */

    stop_child(&c);
    check_rmtree(dir);
    return check_summary("test_unwind_cost");
}
