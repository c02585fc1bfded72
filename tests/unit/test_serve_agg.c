/* test_serve_agg.c - a service window: samples from two "targets" whose string tables are
 * freed before the window is rendered (the window owns its copies), the stack cap with its
 * "<other>" bucket, the pids and version seen, and rendering in the daemon's formats. */
#include "agg.h"
#include "scry_err.h"
#include "strtab.h"
#include "test_serve_util.h"

#include <zlib.h>

static void add(serve_agg_t *a, strtab_t *t, const char *leaf, int line, pid_t pid)
{
    scry_frame_t fr[2] = {
        {strtab_intern(t, leaf), strtab_intern(t, "/srv/app.py"), line, SCRY_FRAME_PYTHON},
        {strtab_intern(t, "<module>"), strtab_intern(t, "/srv/app.py"), 1, SCRY_FRAME_PYTHON}};
    scry_sample_t s = {.time_ns = 1000,
                       .weight_ns = 10000000,
                       .tid = pid,
                       .thread_name = strtab_intern(t, "MainThread"),
                       .metric = SCRY_METRIC_CPU,
                       .running = 1,
                       .nframes = 2,
                       .frames = fr};
    CHECK(serve_agg_add(a, &s, pid, "3.12.1") == 0, "add");
}

int main(void)
{
    serve_agg_meta_t m = {.service = "web",
                          .host = "h1",
                          .rate_hz = 19,
                          .start_unix_s = 1700000000,
                          .start_mono_ns = 1,
                          .max_stacks = 2};
    serve_agg_t *a = serve_agg_new(&m);
    CHECK(a != NULL, "new");
    strtab_t *t1 = strtab_new(), *t2 = strtab_new();
    for (int i = 0; i < 5; i++)
        add(a, t1, "handle", 10, 100);
    for (int i = 0; i < 3; i++)
        add(a, t2, "render", 20, 200);
    strtab_free(t1); /* the targets are gone */
    strtab_free(t2);
    strtab_t *t3 = strtab_new();
    add(a, t3, "third_stack", 30, 300); /* over the cap of 2: "<other>" */
    add(a, t3, "handle", 10, 300);      /* a known stack is still kept */
    strtab_free(t3);
    const serve_agg_stats_t *st = serve_agg_stats(a);
    CHECK(st->samples == 10 && st->other_samples == 1 && st->stacks == 2,
          "samples %llu other %llu stacks %llu", (unsigned long long)st->samples,
          (unsigned long long)st->other_samples, (unsigned long long)st->stacks);
    CHECK(st->n_pids == 3 && strcmp(st->python, "3.12.1") == 0, "pids %zu python %s", st->n_pids,
          st->python);
    report_end_t end = {.duration_s = 60, .ticks = 100};
    char *buf;
    size_t len;
    CHECK(serve_agg_render(a, REPORT_FORMAT_COLLAPSED, &end, &buf, &len) == 0, "collapsed");
    CHECK(strstr(buf, "<module> (/srv/app.py:1);handle (/srv/app.py:10) 6\n") &&
              strstr(buf, "<module> (/srv/app.py:1);render (/srv/app.py:20) 3\n"),
          "collapsed: %s", buf);
    CHECK(strstr(buf, "\n<other> 1\n") != NULL, "other bucket: %s", buf);
    CHECK(strstr(buf, "third_stack") == NULL, "capped stack absent");
    free(buf);
    CHECK(serve_agg_render(a, REPORT_FORMAT_FLAMEGRAPH, &end, &buf, &len) == 0 &&
              strstr(buf, "<svg") && strstr(buf, "web on h1"),
          "svg");
    /* the subtitle names the window's processes, never "pid 0" */
    CHECK(strstr(buf, "3 processes: pids 100, 200, 300: web") && !strstr(buf, "pid 0"),
          "svg subtitle: %.300s", strstr(buf, "subtitle") ? strstr(buf, "subtitle") : buf);
    free(buf);
    CHECK(serve_agg_render(a, REPORT_FORMAT_PPROF, &end, &buf, &len) == 0 && len > 20 &&
              (unsigned char)buf[0] == 0x1f && (unsigned char)buf[1] == 0x8b,
          "pprof gz");
    char raw[1 << 16];
    z_stream z = {.next_in = (Bytef *)buf,
                  .avail_in = (uInt)len,
                  .next_out = (Bytef *)raw,
                  .avail_out = sizeof raw - 1};
    CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK && inflate(&z, Z_FINISH) == Z_STREAM_END,
          "gunzip");
    inflateEnd(&z);
    CHECK(memmem(raw, z.total_out, "scry: 3 processes: pids 100, 200, 300", 37) &&
              !memmem(raw, z.total_out, "pid 0", 5),
          "pprof comment names the processes");
    free(buf);
    serve_agg_free(a);
    return test_summary("test_serve_agg");
}
