/* test_report_text.c - the terminal report: header, source through a reader rooted in a directory,
 * colours, memory columns with sparklines, unreadable files, zero samples. */
#include "test_report_util.h"

#include "scry_err.h"

#include <sys/stat.h>

/* A reader that gives 16 MiB of short lines for any name, counting its calls (a target
 * naming its code objects after links of one big file). */
static int big_reader(void *ctx, const char *file, char **data, size_t *len)
{
    (void)file;
    size_t n = 16u << 20;
    char *d = malloc(n + 1);
    if (!d)
        return SCRY_E_NOMEM;
    for (size_t i = 0; i < n; i++)
        d[i] = i % 64 == 63 ? '\n' : 'x';
    d[n] = 0;
    ++*(int *)ctx;
    *data = d;
    *len = n;
    return 0;
}

/* 40 hot files of 16 MiB each: 2 are read (the second crosses the 32 MiB budget), the
 * report names the budget for the rest and counts them. */
static void source_budget(const report_meta_t *m)
{
    report_profile_t *p = report_profile_new(m);
    char names[40][32];
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof names[i], "/big/f%02d.py", i);
        scry_frame_t f[] = {PY("f", names[i], 2)};
        add_cpu(p, f, 1, 0, 1000000, 1, (uint64_t)i);
    }
    int calls = 0, rc;
    report_options_t o = {.read_source = big_reader, .source_ctx = &calls, .top_lines = 40};
    char *out = render(p, REPORT_FORMAT_TEXT, &o, &rc);
    CHECK(rc == 0 && out);
    CHECK(calls == 2);
    CHECK(out && strstr(out, "(not read: the report's source budget (32 MiB) is spent)"));
    CHECK(out && strstr(out, "the source of 38 files was not read"));
    free(out);
    calls = 0;
    out = render(p, REPORT_FORMAT_HTML, &o, &rc);
    CHECK(rc == 0 && out && calls == 2);
    CHECK(out && strstr(out, "The source of 38 files was not read"));
    free(out);
    report_profile_free(p);
}

int main(void)
{
    char root[] = "/tmp/scry_text_rootXXXXXX";
    CHECK(mkdtemp(root) != NULL);
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "%s/srv", root);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/srv/app.py", root);
    FILE *f = fopen(path, "w");
    CHECK(f);
    if (f) {
        fputs("def main():\n"
              "    \ttotal = sum(x * x for x in data)  # hot \x1b[31m\n"
              "    return total\r\n"
              "    very_long_line = '",
              f);
        for (int i = 0; i < 300; i++)
            fputc('x', f);
        fputs("'\n", f);
        fclose(f);
    }

    report_meta_t m = test_meta();
    report_options_t so = src_options(root);
    CHECK(so.source_ctx != NULL);
    report_profile_t *p = report_profile_new(&m);
    scry_frame_t a[] = {PY("main", "/srv/app.py", 2)};
    scry_frame_t b[] = {PY("main", "/srv/app.py", 3)};
    scry_frame_t c[] = {PY("main", "/srv/app.py", 4)};
    scry_frame_t d[] = {PY("gone", "/nonexistent/x.py", 7)};
    scry_frame_t n[] = {NAT("epoll_wait", "libc.so.6")};
    for (int i = 0; i < 6; i++)
        add_cpu(p, a, 1, 0, 1000000, 1, (uint64_t)i);
    add_cpu(p, b, 1, 1, 1000000, 1, 7);
    add_cpu(p, c, 1, 0, 1000000, 1, 8);
    add_cpu(p, d, 1, 2, 1000000, 1, 9);
    add_cpu(p, n, 1, 2, 1000000, 3, 10);
    report_end_t e = {.duration_s = 1.5, .errors = 2, .gil_fraction = -1, .target_exited = 1};
    report_profile_set_end(p, &e);
    int rc;
    char *out = render(p, REPORT_FORMAT_TEXT, &so, &rc);
    CHECK(rc == 0 && out);
    if (out) {
        CHECK(strstr(out, "pid 4242") && strstr(out, "Python 3.12.1"));
        CHECK(strstr(out, "duration 1.50 s, 10 samples at 100 Hz, 2 errors"));
        CHECK(strstr(out, "(target exited)"));
        CHECK(strstr(out, "/srv/app.py:2"));
        CHECK(strstr(out, "total = sum(x * x for x in data)  # hot ?[31m"));
        CHECK(strstr(out, "  return total\n") || strstr(out, "return total\n"));
        CHECK(strstr(out, "\xe2\x80\xa6")); /* the long line is cut */
        CHECK(strstr(out, "# in gone"));
        CHECK(strstr(out, "source not available: /nonexistent/x.py (not found)"));
        CHECK(!strstr(out, "source not available: /srv/app.py"));
        CHECK(strstr(out, "epoll_wait (libc.so.6)"));
        CHECK(strstr(out, "60.0%"));
        CHECK(strstr(out, "Hottest functions"));
        CHECK(!strchr(out, '\x1b') && !strchr(out, '\r'));
        /* the hottest line comes first */
        CHECK(strstr(out, "app.py:2") < strstr(out, "app.py:3"));
        printf("%s", out);
    }
    free(out);
    report_options_t o = so;
    o.color = 1;
    o.top_lines = 2;
    out = render(p, REPORT_FORMAT_TEXT, &o, &rc);
    CHECK(rc == 0 && out && strstr(out, "\x1b[") && !strstr(out, "app.py:4"));
    free(out);
    report_profile_free(p);
    src_options_free(&so);

    /* memory columns */
    p = report_profile_new(&m);
    for (int i = 0; i < 40; i++) /* over 2 s: a trend over time, growing */
        add_mem(p, a, 1, SCRY_METRIC_ALLOC, 0, 1 << 20, 0x1000 * (uint64_t)(i + 1),
                (uint64_t)i * 50000000);
    out = render(p, REPORT_FORMAT_TEXT, NULL, &rc);
    CHECK(rc == 0 && out && strstr(out, "alloc MiB") && strstr(out, "\xe2\x96\x81") &&
          strstr(out, "\xe2\x96\x88") && strstr(out, "40.0") && strstr(out, "Possible leaks"));
    if (out)
        printf("%s", out);
    free(out);
    report_profile_free(p);

    p = report_profile_new(&m);
    out = render(p, REPORT_FORMAT_TEXT, NULL, &rc);
    CHECK(rc == 0 && out && strstr(out, "no samples collected"));
    free(out);
    report_profile_free(p);

    source_budget(&m);

    unlink(path);
    rmdir(dir);
    rmdir(root);
    return test_done("test_report_text");
}
