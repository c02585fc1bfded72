/* test_report_bench.c - micro benchmark of report_profile_add on 50-frame stacks, plus a
 * large-profile smoke test of every format. Prints ns per add. */
#include "scry_time.h"
#include "test_report_util.h"

#include <time.h>

#define DEPTH   50
#define NSTACKS 1000

int main(void)
{
    report_meta_t m = test_meta();
    report_profile_t *p = report_profile_new(&m);
    static scry_frame_t stacks[NSTACKS][DEPTH];
    char name[64];
    for (int s = 0; s < NSTACKS; s++) {
        for (int d = 0; d < DEPTH; d++) {
            /* shared roots, distinct leaves: a realistic tree */
            int which = d < DEPTH - 3 ? d : d * 1000 + s;
            snprintf(name, sizeof name, "func_%d", which);
            stacks[s][DEPTH - 1 - d] = PY(name, "/app/module.py", 10 + d);
        }
    }
    scry_sample_t smp = {0};
    smp.weight_ns = 1000000;
    smp.tid = 1;
    smp.thread_name = S("MainThread");
    smp.nframes = DEPTH;

    /* warm up: every stack seen once */
    for (int s = 0; s < NSTACKS; s++) {
        smp.frames = stacks[s];
        report_profile_add(p, &smp);
    }
    const int N = 2000000;
    uint64_t t0 = scry_now_ns();
    for (int i = 0; i < N; i++) {
        smp.time_ns = (uint64_t)i;
        smp.frames = stacks[i % NSTACKS];
        smp.cls = (uint8_t)(i % 3);
        if (report_profile_add(p, &smp) != 0)
            check_failures++;
    }
    double per = (double)(scry_now_ns() - t0) / N;
    printf("report_profile_add: %.1f ns per %d-frame sample (%d distinct stacks)\n", per, DEPTH,
           NSTACKS);
    CHECK(per < 5000); /* target < 1000 ns in a release build; loose for sanitizers */

    /* the same stack every time */
    smp.frames = stacks[0];
    t0 = scry_now_ns();
    for (int i = 0; i < N; i++)
        report_profile_add(p, &smp);
    per = (double)(scry_now_ns() - t0) / N;
    printf("report_profile_add: %.1f ns per %d-frame sample (one stack)\n", per, DEPTH);

    /* memory samples: alloc + free pairs */
    smp.metric = SCRY_METRIC_ALLOC;
    smp.bytes = 4096;
    t0 = scry_now_ns();
    for (int i = 0; i < N / 2; i++) {
        smp.metric = SCRY_METRIC_ALLOC;
        smp.address = 0x100000 + (uint64_t)(i % 50000) * 64;
        smp.frames = stacks[i % NSTACKS];
        report_profile_add(p, &smp);
        if (i % 2) {
            smp.metric = SCRY_METRIC_FREE;
            report_profile_add(p, &smp);
        }
    }
    per = (double)(scry_now_ns() - t0) / (N / 2 + N / 4);
    printf("report_profile_add (memory): %.1f ns per sample\n", per);

    const enum report_format fmts[] = {REPORT_FORMAT_COLLAPSED, REPORT_FORMAT_SPEEDSCOPE,
                                       REPORT_FORMAT_JSON, REPORT_FORMAT_TEXT,
                                       REPORT_FORMAT_FLAMEGRAPH};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        int rc;
        t0 = scry_now_ns();
        char *out = render(p, fmts[i], NULL, &rc);
        printf("write %-10s %8zu bytes in %.1f ms\n", report_format_name(fmts[i]),
               out ? strlen(out) : 0, (double)(scry_now_ns() - t0) / 1e6);
        CHECK(rc == 0 && out && strlen(out) > 0);
        free(out);
    }
    report_profile_free(p);
    return test_done("test_report_bench");
}
