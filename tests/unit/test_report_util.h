/* test_report_util.h - shared helpers of the report/ unit tests (header-only). */
#ifndef SCRY_TEST_REPORT_UTIL_H
#define SCRY_TEST_REPORT_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"
#include "sample.h"
#include "srcread.h"
#include "strtab.h"
#include "check.h"

static strtab_t *t_strs;

static inline const char *S(const char *s)
{
    if (!t_strs)
        t_strs = strtab_new();
    return strtab_intern(t_strs, s);
}

static inline scry_frame_t PY(const char *fn, const char *file, int line)
{
    return (scry_frame_t){S(fn), S(file), line, SCRY_FRAME_PYTHON};
}

static inline scry_frame_t NAT(const char *fn, const char *lib)
{
    return (scry_frame_t){S(fn), S(lib), 0, SCRY_FRAME_NATIVE};
}

static inline scry_frame_t THR(const char *text)
{
    return (scry_frame_t){S(text), S(""), 0, SCRY_FRAME_THREAD};
}

static inline scry_frame_t PROC(const char *text)
{
    return (scry_frame_t){S(text), S(""), 0, SCRY_FRAME_PROCESS};
}

/* Checks that TEXT contains each of NEEDLES (NULL-terminated), one check each. */
static inline void check_contains(const char *text, const char *const *needles)
{
    for (; *needles; needles++)
        CHECK(strstr(text, *needles) != NULL, "missing: %s", *needles);
}

/* CHECK_CONTAINS(text, "a", "b", ...): check_contains over the strings given. */
#define CHECK_CONTAINS(text, ...) check_contains((text), (const char *const[]){__VA_ARGS__, NULL})

/* Adds a CPU sample (frames leaf first). */
static inline void add_cpu(report_profile_t *p, const scry_frame_t *f, uint32_t n, int cls,
                           uint64_t weight_ns, int tid, uint64_t t_ns)
{
    scry_sample_t s = {0};
    s.time_ns = t_ns;
    s.weight_ns = weight_ns;
    s.tid = tid;
    s.thread_name = S(tid == 1 ? "MainThread" : "");
    s.metric = SCRY_METRIC_CPU;
    s.cls = (uint8_t)cls;
    s.running = cls != SCRY_CLASS_SYSTEM;
    s.gil = cls == SCRY_CLASS_PYTHON;
    s.nframes = n;
    s.frames = f;
    if (report_profile_add(p, &s) != 0) {
        fprintf(stderr, "report_profile_add failed\n");
        check_failures++;
    }
}

/* Adds COUNT CPU samples of 10 ms each (frames leaf first), one every 10 ms after *T, which
 * advances to the last one's time. */
static inline void add_cpu_10ms(report_profile_t *p, const scry_frame_t *f, uint32_t n, int cls,
                                int tid, int count, uint64_t *t)
{
    for (int i = 0; i < count; i++)
        add_cpu(p, f, n, cls, 10000000, tid, *t += 10000000);
}

static inline void add_mem(report_profile_t *p, const scry_frame_t *f, uint32_t n, int metric,
                           int cls, uint64_t bytes, uint64_t addr, uint64_t t_ns)
{
    scry_sample_t s = {0};
    s.time_ns = t_ns;
    s.bytes = bytes;
    s.address = addr;
    s.tid = 1;
    s.thread_name = S("MainThread");
    s.metric = (uint8_t)metric;
    s.cls = (uint8_t)cls;
    s.nframes = n;
    s.frames = f;
    if (report_profile_add(p, &s) != 0) {
        fprintf(stderr, "report_profile_add failed\n");
        check_failures++;
    }
}

static inline report_meta_t test_meta(void)
{
    report_meta_t m = {0};
    m.pid = 4242;
    m.python_version = "3.12.1";
    m.command = "python3 app.py --n=\"10\"";
    m.rate_hz = 100;
    m.start_unix_ns = 1700000000LL * 1000000000LL;
    return m;
}

/* Report options whose source reader reads files beneath ROOT (as ROOT's "/") with this
 * process's uid and gid; free with src_options_free. */
static inline report_options_t src_options(const char *root)
{
    srcread_creds_t c = {.uid = (uint32_t)getuid(), .gid = (uint32_t)getgid()};
    report_options_t o = {.metric = -1, .read_source = srcread_file_cb};
    o.source_ctx = srcread_new_dir(root, &c, NULL);
    return o;
}

static inline void src_options_free(report_options_t *o)
{
    srcread_free(o->source_ctx);
    o->source_ctx = NULL;
}

/* Writes P in FMT to a malloc'd string (*RC gets report_write's result). */
static inline char *render(report_profile_t *p, enum report_format fmt, const report_options_t *opt,
                           int *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    int r = report_write(p, fmt, f, opt);
    fclose(f);
    if (rc)
        *rc = r;
    return buf;
}

/* Checks that rendering P in FMT again gives FIRST byte for byte (deterministic output). */
static inline void check_renders_same(report_profile_t *p, enum report_format fmt,
                                      const report_options_t *opt, const char *first)
{
    char *again = render(p, fmt, opt, NULL);
    CHECK(first && again && strcmp(first, again) == 0, "a second rendering differs");
    free(again);
}

static inline int run_python(const char *code, const char *text);

/* Renders P in FMT (no options), checking that it renders and that the Python CHECKER
 * accepts the output (printed when not). Returns the output (the caller frees it; NULL after
 * a failed check). */
static inline char *render_checked(report_profile_t *p, enum report_format fmt, const char *checker)
{
    int rc;
    char *out = render(p, fmt, NULL, &rc);
    CHECK(rc == 0 && out);
    if (out) {
        int st = run_python(checker, out);
        CHECK_INT(st, ==, 0);
        if (st != 0)
            fprintf(stderr, "%s\n", out);
    }
    return out;
}

/* Checks that an empty profile (meta M) renders in FMT and that the Python CHECKER accepts
 * the output. */
static inline void check_empty(const report_meta_t *m, enum report_format fmt, const char *checker)
{
    report_profile_t *p = report_profile_new(m);
    free(render_checked(p, fmt, checker));
    report_profile_free(p);
}

/* Runs `python3 -c CODE FILE` where FILE holds TEXT; returns the exit status. */
static inline int run_python(const char *code, const char *text)
{
    char path[] = "/tmp/scry_report_testXXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n) {
        close(fd);
        unlink(path);
        return -1;
    }
    close(fd);
    char cpath[] = "/tmp/scry_report_codeXXXXXX";
    fd = mkstemp(cpath);
    if (fd < 0) {
        unlink(path);
        return -1;
    }
    n = strlen(code);
    if (write(fd, code, n) != (ssize_t)n) {
        close(fd);
        unlink(path);
        unlink(cpath);
        return -1;
    }
    close(fd);
    char cmd[256];
    /* the pyenv shim takes a second to start: prefer the system interpreter */
    const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    snprintf(cmd, sizeof cmd, "%s %s %s", py, cpath, path);
    int st = system(cmd);
    unlink(path);
    unlink(cpath);
    return st;
}

static inline int test_done(const char *name)
{
    strtab_free(t_strs);
    return check_summary(name);
}

#endif
