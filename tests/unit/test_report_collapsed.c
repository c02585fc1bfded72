/* test_report_collapsed.c - exact folded-stack output, escaping, determinism, empty. */
#include "test_report_util.h"

static void fill(report_profile_t *p, int reverse)
{
    scry_frame_t a[] = {PY("compute", "app.py", 20), PY("main", "app.py", 10)};
    scry_frame_t b[] = {NAT("sum_native", "libfoo.so"), PY("compute", "app.py", 21),
                        PY("main", "app.py", 10)};
    scry_frame_t h[] = {PY("a;b\nc", "x;y.py", 5), PY("main", "app.py", 11)};
    for (int k = 0; k < 6; k++) {
        int i = reverse ? 5 - k : k;
        if (i < 3)
            add_cpu(p, a, 2, SCRY_CLASS_PYTHON, 10000000, 1, (uint64_t)i * 10000000);
        else if (i < 5)
            add_cpu(p, b, 3, SCRY_CLASS_NATIVE, 10000000, 1, (uint64_t)i * 10000000);
        else
            add_cpu(p, h, 2, SCRY_CLASS_PYTHON, 10000000, 2, (uint64_t)i * 10000000);
    }
}

/* Checks that P rendered as collapsed stacks with O (NULL: defaults) is exactly WANT. */
static void check_collapsed(report_profile_t *p, const report_options_t *o, const char *want)
{
    int rc = -1;
    char *out = render(p, REPORT_FORMAT_COLLAPSED, o, &rc);
    CHECK(rc == 0 && out && strcmp(out, want) == 0, "got:\n%s", out ? out : "(null)");
    free(out);
}

int main(void)
{
    report_meta_t m = test_meta();
    int rc;
    const char *expect = "main (app.py:10);compute (app.py:20) 3\n"
                         "main (app.py:10);compute (app.py:21);sum_native (libfoo.so) 2\n"
                         "main (app.py:11);a:b c (x:y.py:5) 1\n";

    report_profile_t *p = report_profile_new(&m);
    CHECK(p);
    fill(p, 0);
    char *out = render(p, REPORT_FORMAT_COLLAPSED, NULL, &rc);
    CHECK_INT(rc, ==, 0);
    CHECK(out && strcmp(out, expect) == 0);
    if (out && strcmp(out, expect) != 0)
        fprintf(stderr, "got:\n%s", out);

    /* same samples in another order: identical output */
    report_profile_t *q = report_profile_new(&m);
    fill(q, 1);
    char *out2 = render(q, REPORT_FORMAT_COLLAPSED, NULL, &rc);
    CHECK(rc == 0 && out && out2 && strcmp(out, out2) == 0);
    free(out);
    free(out2);
    report_profile_free(p);
    report_profile_free(q);

    /* thread roots, and the same frames from two threads stay two lines */
    p = report_profile_new(&m);
    scry_frame_t t1[] = {PY("work", "w.py", 3), THR("thread 11 (worker-1)")};
    scry_frame_t t2[] = {PY("work", "w.py", 3), THR("thread 12 (worker-2)")};
    add_cpu(p, t1, 2, 0, 1000, 11, 1);
    add_cpu(p, t2, 2, 0, 1000, 12, 2);
    add_cpu(p, t2, 2, 0, 1000, 12, 3);
    check_collapsed(p, NULL,
                    "thread 11 (worker-1);work (w.py:3) 1\n"
                    "thread 12 (worker-2);work (w.py:3) 2\n");
    report_profile_free(p);

    /* a thread renamed during the recording (or named only once it ran) keeps one root,
     * labelled with its latest name; its samples from before and after stay together */
    p = report_profile_new(&m);
    scry_frame_t r1[] = {PY("work", "w.py", 3), THR("thread 11")};
    scry_frame_t r2[] = {PY("work", "w.py", 3), THR("thread 11 (renamed)")};
    scry_frame_t r3[] = {PY("idle", "w.py", 9), THR("thread 11 (renamed)")};
    add_cpu(p, r1, 2, 0, 1000, 11, 1);
    add_cpu(p, r2, 2, 0, 1000, 11, 2);
    add_cpu(p, r3, 2, 0, 1000, 11, 3);
    add_cpu(p, r1, 2, 0, 1000, 11, 4);
    add_cpu(p, r2, 2, 0, 1000, 11, 5);
    check_collapsed(p, NULL,
                    "thread 11 (renamed);idle (w.py:9) 1\n"
                    "thread 11 (renamed);work (w.py:3) 4\n");
    report_profile_free(p);

    /* --subprocesses: a process root above the thread root; a renamed thread still keeps
     * one root below it, and two processes stay apart */
    p = report_profile_new(&m);
    scry_frame_t p1[] = {PY("work", "w.py", 3), THR("thread 11"), PROC("process 10 (a.py)")};
    scry_frame_t p2[] = {PY("work", "w.py", 3), THR("thread 11 (x)"), PROC("process 10 (a.py)")};
    scry_frame_t p3[] = {PY("work", "w.py", 3), THR("thread 21"), PROC("process 20 (b.py)")};
    add_cpu(p, p1, 3, 0, 1000, 11, 1);
    add_cpu(p, p2, 3, 0, 1000, 11, 2);
    add_cpu(p, p3, 3, 0, 1000, 21, 3);
    check_collapsed(p, NULL,
                    "process 10 (a.py);thread 11 (x);work (w.py:3) 2\n"
                    "process 20 (b.py);thread 21;work (w.py:3) 1\n");
    out = render(p, REPORT_FORMAT_JSON, NULL, &rc);
    CHECK(rc == 0 && out &&
          strstr(out, "\"function\":\"process 10 (a.py)\",\"file\":\"\",\"line\":0,"
                      "\"kind\":\"process\""));
    free(out);
    report_profile_free(p);

    /* a run of "??" frames of one library (addresses without a symbol) is one frame; runs
     * of different libraries stay apart (issue 11) */
    p = report_profile_new(&m);
    scry_frame_t u[] = {NAT("??", "libm.so"),    NAT("??", "libm.so"), NAT("??", "libx.so"),
                        NAT("??", "libm.so"),    NAT("??", "libm.so"), NAT("??", "libm.so"),
                        PY("main", "app.py", 10)};
    add_cpu(p, u, 7, 0, 1000, 11, 1);
    add_cpu(p, u + 3, 4, 0, 1000, 11, 2);
    check_collapsed(p, NULL,
                    "main (app.py:10);?? (libm.so) 1\n"
                    "main (app.py:10);?? (libm.so);?? (libx.so);?? (libm.so) 1\n");
    report_profile_free(p);

    /* without thread roots, the same frames from two threads merge into one line */
    p = report_profile_new(&m);
    scry_frame_t w[] = {PY("work", "w.py", 3)};
    add_cpu(p, w, 1, 0, 1000, 11, 1);
    add_cpu(p, w, 1, 0, 1000, 12, 2);
    check_collapsed(p, NULL, "work (w.py:3) 2\n");
    report_profile_free(p);

    /* memory-only profile: values are bytes; explicit metric selection */
    p = report_profile_new(&m);
    scry_frame_t al[] = {PY("load", "io.py", 7), PY("<module>", "io.py", 1)};
    add_mem(p, al, 2, SCRY_METRIC_ALLOC, 0, 4096, 0x1000, 1);
    add_mem(p, al, 2, SCRY_METRIC_ALLOC, 0, 1024, 0x2000, 2);
    add_mem(p, al, 2, SCRY_METRIC_FREE, 0, 4096, 0x1000, 3);
    check_collapsed(p, NULL, "<module> (io.py:1);load (io.py:7) 5120\n");
    report_options_t o = {.metric = SCRY_METRIC_FREE};
    check_collapsed(p, &o, "<module> (io.py:1);load (io.py:7) 4096\n");
    o.metric = SCRY_METRIC_CPU;
    check_collapsed(p, &o, "");
    report_profile_free(p);

    /* empty stack and zero samples */
    p = report_profile_new(&m);
    out = render(p, REPORT_FORMAT_COLLAPSED, NULL, &rc);
    CHECK(rc == 0 && out && out[0] == 0);
    free(out);
    add_cpu(p, NULL, 0, 0, 1000, 1, 1);
    check_collapsed(p, NULL, "<unknown> 1\n");
    report_profile_free(p);

    /* format names */
    CHECK(report_format_parse("collapsed") == REPORT_FORMAT_COLLAPSED);
    CHECK(report_format_parse("folded") == REPORT_FORMAT_COLLAPSED);
    CHECK(report_format_parse("speedscope") == REPORT_FORMAT_SPEEDSCOPE);
    CHECK(report_format_parse("json") == REPORT_FORMAT_JSON);
    CHECK(report_format_parse("text") == REPORT_FORMAT_TEXT);
    CHECK(report_format_parse("flamegraph") == REPORT_FORMAT_FLAMEGRAPH);
    CHECK(report_format_parse("svg") == REPORT_FORMAT_FLAMEGRAPH);
    CHECK(report_format_parse("nope") < 0 && report_format_parse(NULL) < 0);
    CHECK(strcmp(report_format_name(REPORT_FORMAT_JSON), "json") == 0);
    CHECK(report_profile_new(NULL) == NULL);
    report_profile_free(NULL);
    return test_done("test_report_collapsed");
}
