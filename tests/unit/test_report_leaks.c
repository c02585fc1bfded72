/* test_report_leaks.c - a line that makes many short-lived objects and keeps a few is a
 * likely leak (ranked by bytes still held, not by its free/alloc ratio); --metric inuse
 * draws the bytes still held at the end; --metric peak the bytes held at the highest
 * footprint. */
#include "test_report_util.h"

#define MB (1024u * 1024u)

static const char *checker = "import json, sys\n"
                             "d = json.load(open(sys.argv[1]))\n"
                             "L = [(l['file'], l['line']) for l in d['memory']['likely_leaks']]\n"
                             "assert L == [('pool.py', 10)], L\n";

int main(void)
{
    report_meta_t m = test_meta();
    m.flags = REPORT_F_MEMORY;
    report_profile_t *p = report_profile_new(&m);
    CHECK(p);
    scry_frame_t pool[] = {PY("work", "pool.py", 10), PY("run", "pool.py", 3)};
    scry_frame_t tmp[] = {PY("scratch", "tmp.py", 5)};
    scry_frame_t pk[] = {PY("burst", "peak.py", 7)};
    uint64_t t = 1000000000ull, addr = 0x100000;
    for (int i = 0; i < 1000; i++) {
        uint64_t a = addr += 0x200000;
        add_mem(p, pool, 2, SCRY_METRIC_ALLOC, 0, MB, a, t += 1000000);
        if (i % 20 != 0)
            add_mem(p, pool, 2, SCRY_METRIC_FREE, 0, MB, a, t += 1000000);
        if (i == 500) { /* a burst of 200 MB, all freed: the peak */
            for (int k = 0; k < 200; k++)
                add_mem(p, pk, 1, SCRY_METRIC_ALLOC, 0, MB, 0x80000000ull + (uint64_t)k * 0x200000,
                        t += 1000);
            for (int k = 0; k < 200; k++)
                add_mem(p, pk, 1, SCRY_METRIC_FREE, 0, MB, 0x80000000ull + (uint64_t)k * 0x200000,
                        t += 1000);
        }
        if (i % 100 == 0) {
            add_mem(p, tmp, 1, SCRY_METRIC_ALLOC, 0, MB, 0x40000000ull + (uint64_t)i * 0x200000,
                    t += 1000);
            add_mem(p, tmp, 1, SCRY_METRIC_FREE, 0, MB, 0x40000000ull + (uint64_t)i * 0x200000,
                    t += 1000);
        }
    }
    int rc;
    char *out = render(p, REPORT_FORMAT_JSON, NULL, &rc);
    CHECK(rc == 0 && out && run_python(checker, out) == 0);
    free(out);

    report_options_t o = {.metric = REPORT_METRIC_INUSE};
    out = render(p, REPORT_FORMAT_COLLAPSED, &o, &rc);
    /* 50 blocks of 1 MB kept by pool.py:10, nothing else */
    CHECK(rc == 0 && out && strcmp(out, "run (pool.py:3);work (pool.py:10) 52428800\n") == 0);
    if (out && strcmp(out, "run (pool.py:3);work (pool.py:10) 52428800\n") != 0)
        fprintf(stderr, "inuse: %s\n", out);
    free(out);

    o.metric = REPORT_METRIC_PEAK;
    out = render(p, REPORT_FORMAT_COLLAPSED, &o, &rc);
    CHECK(rc == 0 && out);
    if (out) {
        /* at the peak: the burst (200 MB, within 1%) and the 26 blocks pool.py held then */
        const char *b = strstr(out, "burst (peak.py:7) ");
        long long burst = b ? atoll(b + strlen("burst (peak.py:7) ")) : 0;
        const char *w = strstr(out, "work (pool.py:10) ");
        long long work = w ? atoll(w + strlen("work (pool.py:10) ")) : 0;
        CHECK(burst >= 198LL * MB && burst <= 200LL * MB);
        CHECK(work == 26LL * MB);
        if (!(burst >= 198LL * MB && work == 26LL * MB))
            fprintf(stderr, "peak: %s\n", out);
    }
    free(out);
    out = render(p, REPORT_FORMAT_FLAMEGRAPH, &o, &rc);
    CHECK(rc == 0 && out && strstr(out, "bytes held at the peak footprint"));
    free(out);
    report_profile_free(p);

    /* a line that kept all it made in the first tenth of the run (a short run, a burst at
     * start-up) is listed although it has not grown since the middle; one that made as
     * much and freed it is not */
    static const char *early = "import json, sys\n"
                               "d = json.load(open(sys.argv[1]))\n"
                               "L = [(l['file'], l['line']) for l in d['memory']['likely_leaks']]\n"
                               "assert L == [('keep.py', 4)], L\n";
    p = report_profile_new(&m);
    scry_frame_t keep[] = {PY("load", "keep.py", 4)};
    scry_frame_t late[] = {PY("churn", "late.py", 8)};
    t = 1000000000ull;
    for (int i = 0; i < 40; i++)
        add_mem(p, keep, 1, SCRY_METRIC_ALLOC, 0, MB, 0x100000000ull + (uint64_t)i * 0x200000,
                t += 1000000);
    for (int i = 0; i < 400; i++) {
        uint64_t a = 0x200000000ull + (uint64_t)i * 0x200000;
        add_mem(p, late, 1, SCRY_METRIC_ALLOC, 0, MB, a, t += 1000000);
        add_mem(p, late, 1, SCRY_METRIC_FREE, 0, MB, a, t += 1000000);
    }
    out = render(p, REPORT_FORMAT_JSON, NULL, &rc);
    CHECK(rc == 0 && out && run_python(early, out) == 0);
    free(out);
    report_profile_free(p);
    return test_done("test_report_leaks");
}
