/* test_report_formats.c - the one format table: names and aliases, extensions, the format an
 * output name asks for, the list in messages, and report_write's dispatch to every writer. */
#include "scry_err.h"
#include "test_report_util.h"

static const struct {
    const char *name;
    enum report_format fmt;
    const char *ext;
} known[] = {
    {"flamegraph", REPORT_FORMAT_FLAMEGRAPH, "svg"},
    {"html", REPORT_FORMAT_HTML, "html"},
    {"text", REPORT_FORMAT_TEXT, "txt"},
    {"json", REPORT_FORMAT_JSON, "json"},
    {"speedscope", REPORT_FORMAT_SPEEDSCOPE, "speedscope.json"},
    {"collapsed", REPORT_FORMAT_COLLAPSED, "txt"},
    {"pprof", REPORT_FORMAT_PPROF, "pb.gz"},
};
#define NKNOWN (sizeof known / sizeof known[0])

static void test_names(void)
{
    for (size_t i = 0; i < NKNOWN; i++) {
        CHECK_INT(report_format_parse(known[i].name), ==, known[i].fmt, "%s", known[i].name);
        CHECK_STR(report_format_name(known[i].fmt), ==, known[i].name);
        CHECK_STR(report_format_extension(known[i].fmt), ==, known[i].ext);
    }
    CHECK_INT(report_format_parse("svg"), ==, REPORT_FORMAT_FLAMEGRAPH);
    CHECK_INT(report_format_parse("folded"), ==, REPORT_FORMAT_COLLAPSED);
    CHECK_INT(report_format_parse("pb"), ==, REPORT_FORMAT_PPROF);
    CHECK_INT(report_format_parse("HTML"), ==, SCRY_E_INVAL);
    CHECK_INT(report_format_parse("bogus"), ==, SCRY_E_INVAL);
    CHECK_INT(report_format_parse(NULL), ==, SCRY_E_INVAL);
    CHECK(report_format_name((enum report_format)99) == NULL);
    CHECK(report_format_extension((enum report_format)99) == NULL);

    /* The list in messages names all seven. */
    char names[200];
    report_format_names(names, sizeof names);
    CHECK_STR(names, ==, "flamegraph, html, text, json, speedscope, collapsed, pprof");
    char small[8];
    report_format_names(small, sizeof small);
    CHECK_UINT(strlen(small), <, sizeof small); /* truncated, terminated */
}

static void test_from_path(void)
{
    static const struct {
        const char *path;
        int fmt;
    } cases[] = {
        {"report.html", REPORT_FORMAT_HTML},
        {"/tmp/x/REPORT.HTM", REPORT_FORMAT_HTML},
        {"out.svg", REPORT_FORMAT_FLAMEGRAPH},
        {"out.txt", REPORT_FORMAT_TEXT},
        {"out.json", REPORT_FORMAT_JSON},
        {"out.speedscope.json", REPORT_FORMAT_SPEEDSCOPE},
        {"stacks.folded", REPORT_FORMAT_COLLAPSED},
        {"stacks.collapsed", REPORT_FORMAT_COLLAPSED},
        {"cpu.pb.gz", REPORT_FORMAT_PPROF},
        {"cpu.pb", REPORT_FORMAT_PPROF},
        {"cpu.pprof", REPORT_FORMAT_PPROF},
        {"profile", SCRY_E_NOTFOUND},
        {"profile.gz", SCRY_E_NOTFOUND},
        {".html", SCRY_E_NOTFOUND}, /* an ending alone is no name */
        {"html", SCRY_E_NOTFOUND},
        {"", SCRY_E_NOTFOUND},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_INT(report_format_from_path(cases[i].path), ==, cases[i].fmt, "%s", cases[i].path);
    CHECK_INT(report_format_from_path(NULL), ==, SCRY_E_INVAL);
}

/* The one rule for an output's format (issue 25.6): the name's ending decides, or a clear
 * refusal; --format wins only when the name does not contradict it. */
static void test_choose(void)
{
    const unsigned diff =
        REPORT_FORMAT_BIT(REPORT_FORMAT_TEXT) | REPORT_FORMAT_BIT(REPORT_FORMAT_FLAMEGRAPH);
    const unsigned ctl = REPORT_FORMAT_ALL & ~REPORT_FORMAT_BIT(REPORT_FORMAT_PPROF);
    char msg[512];
    static const struct {
        const char *name, *path;
        unsigned allowed;
        int want;
        const char *says; /* in the refusal */
    } cases[] = {
        {NULL, "x.svg", ctl, REPORT_FORMAT_FLAMEGRAPH, NULL},
        {NULL, "x.html", ctl, REPORT_FORMAT_HTML, NULL},
        {NULL, NULL, ctl, REPORT_FORMAT_TEXT, NULL},
        {NULL, "-", ctl, REPORT_FORMAT_TEXT, NULL},
        {NULL, "x.data", ctl, REPORT_FORMAT_TEXT, NULL}, /* unknown ending: the default */
        {NULL, "x.pb.gz", ctl, SCRY_E_INVAL, "asks for pprof (pprof)"},
        {NULL, "d.html", diff, SCRY_E_INVAL, "asks for HTML (html), which t does not write"},
        {NULL, "d.svg", diff, REPORT_FORMAT_FLAMEGRAPH, NULL},
        {"html", "d.txt", diff, SCRY_E_INVAL, "no format 'html' (t writes flamegraph, text)"},
        {"text", "x.svg", ctl, SCRY_E_INVAL, "--format text writes text, but the name x.svg"},
        {"collapsed", "x.txt", ctl, REPORT_FORMAT_COLLAPSED, NULL}, /* both plain text */
        {"speedscope", "x.json", ctl, REPORT_FORMAT_SPEEDSCOPE, NULL},
        {"json", "x.data", ctl, REPORT_FORMAT_JSON, NULL},
        {"bogus", NULL, ctl, SCRY_E_INVAL, "unknown format 'bogus'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        msg[0] = 0;
        int got = report_format_choose("t", cases[i].name, cases[i].path, cases[i].allowed,
                                       REPORT_FORMAT_TEXT, msg, sizeof msg);
        CHECK_INT(got, ==, cases[i].want, "%s %s: %s", cases[i].name ? cases[i].name : "-",
                  cases[i].path ? cases[i].path : "-", msg);
        if (cases[i].says)
            CHECK(strstr(msg, cases[i].says) != NULL, "'%s' lacks '%s'", msg, cases[i].says);
    }
}

/* Every format writes a document that starts the way that format starts. */
static void test_write(void)
{
    report_meta_t m = test_meta();
    report_profile_t *p = report_profile_new(&m);
    scry_frame_t a[] = {PY("compute", "app.py", 20), PY("main", "app.py", 10)};
    for (int i = 0; i < 5; i++)
        add_cpu(p, a, 2, 0, 10000000, 1, (uint64_t)i);
    static const char *starts[] = {
        [REPORT_FORMAT_FLAMEGRAPH] = "<?xml", [REPORT_FORMAT_HTML] = "<!DOCTYPE html>",
        [REPORT_FORMAT_JSON] = "{",           [REPORT_FORMAT_SPEEDSCOPE] = "{",
        [REPORT_FORMAT_COLLAPSED] = "main",   [REPORT_FORMAT_PPROF] = "\x1f\x8b",
        [REPORT_FORMAT_TEXT] = NULL,
    };
    for (size_t i = 0; i < NKNOWN; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        CHECK_INT(report_write(p, known[i].fmt, f, NULL), ==, 0, "%s", known[i].name);
        fclose(f);
        CHECK_UINT(len, >, 0, "%s", known[i].name);
        const char *want = starts[known[i].fmt];
        if (want && buf)
            CHECK(strncmp(buf, want, strlen(want)) == 0, "%s starts with %.16s", known[i].name,
                  buf);
        free(buf);
    }
    FILE *f = fopen("/dev/null", "w");
    CHECK_INT(report_write(p, (enum report_format)99, f, NULL), ==, SCRY_E_INVAL);
    CHECK_INT(report_write(NULL, REPORT_FORMAT_JSON, f, NULL), ==, SCRY_E_INVAL);
    fclose(f);
    report_profile_free(p);
}

int main(void)
{
    test_names();
    test_from_path();
    test_choose();
    test_write();
    return test_done("test_report_formats");
}
