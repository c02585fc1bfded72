/* bench_sample.c - the profiler's cost per sample: pystate_sample on a live target.
 *
 * usage: bench_sample PID [ITERATIONS]
 * Prints one line: median and mean microseconds per sample, syscalls and bytes per sample,
 * threads and frames seen.
 */
#include "pystate.h"
#include "scry_err.h"
#include "scry_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_sample PID [ITERATIONS]\n");
        return 2;
    }
    pid_t pid = (pid_t)atoi(argv[1]);
    int iters = argc > 2 ? atoi(argv[2]) : 2000;
    if (iters < 1 || iters > 10000000)
        iters = 2000;
    strtab_t *strings = strtab_new();
    pystate_target_t *t = NULL;
    char msg[512] = "";
    int err = pystate_target_open(pid, strings, &t, msg, sizeof msg);
    if (err) {
        fprintf(stderr, "bench_sample: %s\n", msg[0] ? msg : scry_strerror(err));
        return 1;
    }
    pystate_snapshot_t *snap = pystate_snapshot_new();
    uint64_t *times = malloc((size_t)iters * sizeof *times);
    if (!snap || !times)
        return 1;
    pystate_sample(t, snap); /* warm the caches */
    rmem_stats_t before = rmem_stats(pystate_target_mem(t));
    uint64_t frames = 0, threads = 0, failures = 0;
    for (int i = 0; i < iters; i++) {
        uint64_t t0 = scry_now_ns();
        err = pystate_sample(t, snap);
        times[i] = scry_now_ns() - t0;
        if (err) {
            failures++;
            continue;
        }
        threads += pystate_snapshot_count(snap);
        for (size_t k = 0; k < pystate_snapshot_count(snap); k++)
            frames += pystate_snapshot_thread(snap, k)->nframes;
    }
    rmem_stats_t after = rmem_stats(pystate_target_mem(t));
    uint64_t sum = 0;
    for (int i = 0; i < iters; i++)
        sum += times[i];
    qsort(times, (size_t)iters, sizeof *times, cmp_u64);
    printf("median_us=%.2f mean_us=%.2f p90_us=%.2f syscalls=%.2f bytes=%.0f threads=%.1f "
           "frames=%.1f failures=%llu\n",
           (double)times[iters / 2] / 1e3, (double)sum / iters / 1e3,
           (double)times[iters * 9 / 10] / 1e3, (double)(after.syscalls - before.syscalls) / iters,
           (double)(after.bytes - before.bytes) / iters, (double)threads / iters,
           (double)frames / iters, (unsigned long long)failures);
    free(times);
    pystate_snapshot_free(snap);
    pystate_target_free(t);
    strtab_free(strings);
    return 0;
}
