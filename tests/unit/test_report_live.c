/* test_report_live.c - live tables: windows vs since start, functions vs lines, totals
 * counted once per stack (recursion), classes, sorting, reset. */
#include "test_report_util.h"

#include <math.h>

#include "live.h"
#include "scry_err.h"

#define MS 1000000ull
#define S1 1000000000ull

static int near(double a, double b)
{
    return fabs(a - b) < 1e-6;
}

static const report_live_row_t *find(const report_live_table_t *t, const char *fn, int line)
{
    for (uint32_t i = 0; i < t->nrows; i++)
        if (!strcmp(t->rows[i].function, fn) && (line < 0 || t->rows[i].line == line))
            return &t->rows[i];
    return NULL;
}

static void add(report_live_t *l, const scry_frame_t *f, uint32_t n, int cls, uint64_t t)
{
    scry_sample_t s = {0};
    s.time_ns = t;
    s.weight_ns = 10 * MS;
    s.tid = 1;
    s.thread_name = S("MainThread");
    s.metric = SCRY_METRIC_CPU;
    s.cls = (uint8_t)cls;
    s.running = 1;
    s.nframes = n;
    s.frames = f;
    CHECK(report_live_add(l, &s) == 0);
}

int main(void)
{
    report_meta_t m = {.pid = 42, .python_version = "3.12.1", .rate_hz = 100};
    report_live_t *l = report_live_new(&m, 0);
    CHECK(l != NULL);
    scry_frame_t hot[] = {PY("hot", "/a.py", 17), PY("main", "/a.py", 43),
                          PY("<module>", "/a.py", 58)};
    scry_frame_t cold[] = {PY("cold", "/a.py", 26), PY("main", "/a.py", 44),
                           PY("<module>", "/a.py", 58)};
    /* recursion: f at two lines on one stack */
    scry_frame_t rec[] = {PY("f", "/a.py", 5), PY("f", "/a.py", 6), PY("f", "/a.py", 5),
                          PY("<module>", "/a.py", 58)};

    report_live_table_t t;
    report_live_query_t q = {.by_lines = 0, .sort = REPORT_LIVE_SORT_OWN, .window_s = 1};
    CHECK(report_live_snapshot(l, &q, &t) == 0); /* empty: valid, no rows */
    CHECK_INT(t.nrows, ==, 0);
    report_live_table_free(&t);

    /* second 1: 10 hot samples (8 python, 2 native); second 2: 30 cold samples */
    for (int i = 0; i < 10; i++)
        add(l, hot, 3, i < 8 ? SCRY_CLASS_PYTHON : SCRY_CLASS_NATIVE, (uint64_t)i * 10 * MS);
    CHECK(report_live_mark(l, S1) == 0);
    for (int i = 0; i < 30; i++)
        add(l, cold, 3, SCRY_CLASS_PYTHON, S1 + (uint64_t)i * 10 * MS);
    CHECK(report_live_mark(l, 2 * S1) == 0);

    /* last 1 s: only cold, 30 x 10 ms of 1 s = 30% of one CPU */
    CHECK(report_live_snapshot(l, &q, &t) == 0);
    CHECK(near(t.window_s, 1.0));
    CHECK(near(t.elapsed_s, 2.0));
    CHECK(t.samples == 30 && t.samples_all == 40);
    CHECK(near(t.cpu_pct, 30.0));
    CHECK_INT(t.nrows, ==, 4); /* hot, cold, main, <module> */
    CHECK(!strcmp(t.rows[0].function, "cold"));
    CHECK(near(t.rows[0].own_pct, 30.0) && near(t.rows[0].total_pct, 30.0));
    CHECK(near(t.rows[0].own_s, 0.3));
    const report_live_row_t *r = find(&t, "hot", -1);
    CHECK(r && near(r->own_pct, 0) && near(r->own_s, 0.1) && r->samples == 10);
    r = find(&t, "main", -1);
    CHECK(r && near(r->own_pct, 0) && near(r->total_pct, 30.0) && near(r->total_s, 0.4));
    CHECK(r && r->line == 43); /* first line seen */
    report_live_table_free(&t);

    /* since start: 0.4 s of 2 s */
    q.window_s = 0;
    CHECK(report_live_snapshot(l, &q, &t) == 0);
    CHECK(near(t.window_s, 2.0) && near(t.cpu_pct, 20.0));
    r = find(&t, "hot", -1);
    CHECK(r && near(r->own_pct, 5.0) && near(r->cls_pct[SCRY_CLASS_PYTHON], 4.0) &&
          near(r->cls_pct[SCRY_CLASS_NATIVE], 1.0) && near(r->cls_pct[SCRY_CLASS_SYSTEM], 0));
    r = find(&t, "<module>", -1);
    CHECK(r && near(r->total_pct, 20.0) && near(r->own_pct, 0));
    report_live_table_free(&t);

    /* a window of 2 s covers both intervals */
    q.window_s = 2;
    CHECK(report_live_snapshot(l, &q, &t) == 0);
    CHECK(near(t.window_s, 2.0) && near(t.cpu_pct, 20.0));
    report_live_table_free(&t);

    /* lines, sorted by total: <module>:58 first, main:43 and main:44 apart */
    q.window_s = 0;
    q.by_lines = 1;
    q.sort = REPORT_LIVE_SORT_TOTAL;
    CHECK(report_live_snapshot(l, &q, &t) == 0);
    CHECK(t.by_lines && t.nrows == 5);
    CHECK(!strcmp(t.rows[0].function, "<module>") && t.rows[0].line == 58);
    r = find(&t, "main", 43);
    CHECK(r && near(r->total_pct, 5.0) && near(r->own_pct, 0));
    r = find(&t, "main", 44);
    CHECK(r && near(r->total_pct, 15.0));
    r = find(&t, "hot", 17);
    CHECK(r && near(r->own_pct, 5.0) && near(r->total_pct, 5.0));
    /* re-sorting kept rows */
    CHECK(report_live_table_sort(&t, REPORT_LIVE_SORT_OWN) == 0);
    CHECK(!strcmp(t.rows[0].function, "cold"));
    CHECK(report_live_table_sort(&t, 9) == SCRY_E_INVAL);
    report_live_table_free(&t);

    /* max_rows */
    q.max_rows = 2;
    CHECK(report_live_snapshot(l, &q, &t) == 0);
    CHECK(t.nrows == 2 && t.nrows_all == 5);
    report_live_table_free(&t);
    q.max_rows = 0;

    /* recursion: a frame counts once per stack in totals */
    for (int i = 0; i < 10; i++)
        add(l, rec, 4, SCRY_CLASS_PYTHON, 2 * S1 + (uint64_t)i * 10 * MS);
    CHECK(report_live_mark(l, 3 * S1) == 0);
    q.window_s = 1;
    CHECK(report_live_snapshot(l, &q, &t) == 0); /* lines */
    r = find(&t, "f", 5);
    CHECK(r && near(r->total_pct, 10.0) && near(r->own_pct, 10.0));
    r = find(&t, "f", 6);
    CHECK(r && near(r->total_pct, 10.0) && near(r->own_pct, 0));
    report_live_table_free(&t);
    q.by_lines = 0;
    CHECK(report_live_snapshot(l, &q, &t) == 0);
    r = find(&t, "f", -1);
    CHECK(r && near(r->total_pct, 10.0) && near(r->own_pct, 10.0) && r->line == 5);
    report_live_table_free(&t);

    /* a short last interval is merged with the one before it */
    add(l, hot, 3, SCRY_CLASS_PYTHON, 3 * S1 + 10 * MS);
    CHECK(report_live_mark(l, 3 * S1 + 100 * MS) == 0);
    CHECK(report_live_snapshot(l, &q, &t) == 0);
    CHECK(near(t.window_s, 1.1) && t.samples == 11);
    report_live_table_free(&t);

    /* reset forgets everything */
    CHECK(report_live_reset(l, 4 * S1) == 0);
    CHECK(report_live_snapshot(l, &q, &t) == 0);
    CHECK(t.nrows == 0 && t.samples_all == 0);
    report_live_table_free(&t);
    add(l, cold, 3, SCRY_CLASS_SYSTEM, 4 * S1 + MS);
    CHECK(report_live_mark(l, 5 * S1) == 0);
    CHECK(report_live_snapshot(l, &q, &t) == 0);
    CHECK(t.nrows == 3 && near(t.cls_pct[SCRY_CLASS_SYSTEM], 1.0) && near(t.elapsed_s, 1.0));
    report_live_table_free(&t);

    /* bad arguments */
    CHECK(report_live_snapshot(NULL, &q, &t) == SCRY_E_INVAL);
    q.sort = 7;
    CHECK(report_live_snapshot(l, &q, &t) == SCRY_E_INVAL);
    CHECK(report_live_mark(NULL, 0) == SCRY_E_INVAL);
    CHECK(report_live_new(NULL, 0) == NULL);
    report_live_table_free(NULL);
    report_live_free(NULL);

    report_live_free(l);
    strtab_free(t_strs);
    return check_summary("test_report_live");
}
