/* test_report_html.c - the self-contained HTML report: structure, escaping of hostile file
 * names, function names and source text, the source view through a reader rooted in a directory,
 * memory columns, 0 samples. Set SCRY_HTML_OUT=path to keep the memory report for a look. */
#include <sys/stat.h>

#include "test_report_util.h"

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* The one script of ours, the flame graph's, and nothing else executable from data. */
static void check_safe(const char *html)
{
    CHECK(!strncmp(html, "<!DOCTYPE html>", 15));
    CHECK(strstr(html, "</html>\n") != NULL);
    CHECK(count(html, "<script") == 2); /* ours + the flame graph's <script type=ecmascript> */
    CHECK(count(html, "</script>") == 2);
    CHECK(strstr(html, "<img") == NULL);
    CHECK(strstr(html, "<b onmouseover") == NULL);
    CHECK(strstr(html, "Content-Security-Policy") != NULL);
    /* no network: the only URLs are the SVG namespace names */
    size_t urls = count(html, "http://") + count(html, "https://");
    size_t ns =
        count(html, "http://www.w3.org/2000/svg") + count(html, "http://www.w3.org/1999/xlink");
    CHECK(urls == ns);
    CHECK(strstr(html, "<?xml") == NULL && strstr(html, "<!DOCTYPE svg") == NULL);
}

/* Tag balance (every non-void element closed in order), checked by Python's html.parser. */
static const char *const balance_py =
    "import sys, html.parser\n"
    "VOID = {'meta','input','br','img','link','circle','line','polyline','polygon','rect',"
    "'path','stop'}\n"
    "class P(html.parser.HTMLParser):\n"
    "    def __init__(s):\n"
    "        super().__init__(); s.st = []; s.bad = 0\n"
    "    def handle_starttag(s, t, a):\n"
    "        if t not in VOID: s.st.append(t)\n"
    "    def handle_startendtag(s, t, a):\n"
    "        pass\n"
    "    def handle_endtag(s, t):\n"
    "        if t in VOID: return\n"
    "        if not s.st or s.st[-1] != t: s.bad += 1; print('mismatch', t, s.st[-4:])\n"
    "        else: s.st.pop()\n"
    "p = P(); p.feed(open(sys.argv[1], encoding='utf-8').read()); p.close()\n"
    "sys.exit(1 if p.bad or p.st else 0)\n";

static char tmpdir[64];
static report_options_t t_src; /* reads beneath tmpdir */

static void write_file(const char *rel, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s%s", tmpdir, rel);
    check_write_file(path, text);
}

static void make_tree(void)
{
    strcpy(tmpdir, "/tmp/scry_html_XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL);
    char d[128];
    snprintf(d, sizeof d, "%s/srv", tmpdir);
    mkdir(d, 0755);
    /* 30 lines; line 3 is hot and hostile, line 5 native-heavy */
    char text[4096] = "";
    strcat(text,
           "import numpy\n"
           "def compute(data):\n"
           "    total = sum(x * x for x in data)  # </script><script>alert(1)</script> & \"q\"\n"
           "    # context line 4\n"
           "    return numpy.dot(data, data)\n");
    for (int i = 6; i <= 30; i++) {
        char ln[64];
        snprintf(ln, sizeof ln, "filler_line_%d = %d\n", i, i);
        strcat(text, ln);
    }
    write_file("/srv/app.py", text);
}

static void remove_tree(void)
{
    char p[256];
    snprintf(p, sizeof p, "%s/srv/app.py", tmpdir);
    unlink(p);
    snprintf(p, sizeof p, "%s/srv", tmpdir);
    rmdir(p);
    rmdir(tmpdir);
}

static report_profile_t *profile(int memory)
{
    report_meta_t m = test_meta();
    m.command = "python3 <b onmouseover=alert(1)>app.py";
    report_profile_t *p = report_profile_new(&m);
    scry_frame_t hot[] = {PY("compute", "/srv/app.py", 3), PY("<module>", "/srv/app.py", 9)};
    scry_frame_t nat[] = {NAT("cblas_ddot", "libopenblas.so.0"), PY("compute", "/srv/app.py", 5),
                          PY("<module>", "/srv/app.py", 9)};
    scry_frame_t evil[] = {PY("f\"<b>&'", "/srv/<img src=x onerror=alert(1)>.py", 7)};
    uint64_t t = 1000000;
    add_cpu_10ms(p, hot, 2, SCRY_CLASS_PYTHON, 1, 6, &t);
    add_cpu_10ms(p, nat, 3, SCRY_CLASS_NATIVE, 1, 3, &t);
    add_cpu_10ms(p, evil, 1, SCRY_CLASS_SYSTEM, 2, 1, &t);
    if (memory) {
        for (int i = 0; i < 8; i++)
            add_mem(p, hot, 2, SCRY_METRIC_ALLOC, i & 1, 1 << 20, 0x100000 + 0x1000 * (uint64_t)i,
                    t += 20000000);
        for (int i = 0; i < 3; i++)
            add_mem(p, nat, 3, SCRY_METRIC_FREE, 0, 1 << 20, 0x100000 + 0x1000 * (uint64_t)i,
                    t += 20000000);
        add_mem(p, nat, 3, SCRY_METRIC_COPY, 1, 4 << 20, 0, t += 1000);
    }
    report_end_t end = {.duration_s = 2.0, .errors = 3, .gil_fraction = 0.42};
    report_profile_set_end(p, &end);
    return p;
}

/* P rendered as HTML with the test's sources: the page (NULL after a failed check),
 * checked well-formed and safe (check_safe). */
static char *render_safe(report_profile_t *p)
{
    int rc = -1;
    char *html = render(p, REPORT_FORMAT_HTML, &t_src, &rc);
    CHECK(rc == 0 && html);
    if (html)
        check_safe(html);
    return html;
}

/* Builds profile(MEMORY), renders it (render_safe) and hands the page to CHECK_PAGE. */
static void test_page(int memory, void (*check_page)(report_profile_t *p, const char *html))
{
    report_profile_t *p = profile(memory);
    char *html = render_safe(p);
    if (html)
        check_page(p, html);
    free(html);
    report_profile_free(p);
}

static void check_cpu(report_profile_t *p, const char *html)
{
    /* header */
    CHECK_CONTAINS(html, "python3 &lt;b onmouseover=alert(1)&gt;app.py",
                   "<dt>Python</dt><dd>3.12.1</dd>", "<dt>duration</dt><dd>2.00 s</dd>",
                   "<dt>samples</dt><dd>10 at 100 Hz</dd>", "<dt>errors</dt><dd>3</dd>",
                   "<dt>GIL held</dt><dd>42.0% of the samples</dd>");
    /* source view: the file read through the reader, rooted in tmpdir, hostile source escaped */
    CHECK(strstr(html, "<span class=\"sc-fname\">/srv/app.py</span>") != NULL);
    CHECK(strstr(html, "    total = sum(x * x for x in data)  # &lt;/script&gt;&lt;script&gt;"
                       "alert(1)&lt;/script&gt; &amp; &quot;q&quot;") != NULL);
    CHECK_CONTAINS(html, "<tr class=\"hot\" id=\"L0-3\"", "<tr class=\"hot\" id=\"L0-5\"",
                   "<b>60.0%</b>", /* line 3: 6 of 10 samples */
                   "<b>30.0%</b>", /* line 5, native */
                   "<i class=\"py\" style=\"width:72.0px\"></i>",
                   "<i class=\"nat\" style=\"width:36.0px\"></i>",
                   "    # context line 4</td>",                  /* context */
                   "<tr class=\"far\"><td class=\"ln\">20</td>", /* far, hidden */
                   "show whole file");
    CHECK(strstr(html, "alloc MiB") == NULL); /* no memory samples: no memory columns */
    /* the hostile file: escaped everywhere, never raw */
    CHECK(strstr(html, "/srv/&lt;img src=x onerror=alert(1)&gt;.py") != NULL);
    CHECK(strstr(html, "f&quot;&lt;b&gt;&amp;&apos;") != NULL);
    /* tables, legend, flame graph */
    CHECK_CONTAINS(html, "id=\"sc-hot-table\"", "id=\"sc-fn-table\"",
                   "<a class=\"sc-goto\" href=\"#L0-3\">app.py:3</a>", "cblas_ddot",
                   "<i class=\"sys\"></i>system");
    CHECK(strstr(html, "<svg version=\"1.1\"") != NULL && strstr(html, "CPU Flame Graph") != NULL);
    CHECK(strstr(html, "<svg class=\"sc-chart\"") == NULL);
    /* well-formed */
    CHECK(run_python(balance_py, html) == 0);
    /* deterministic */
    check_renders_same(p, REPORT_FORMAT_HTML, &t_src, html);
}

static void check_memory(report_profile_t *p, const char *html)
{
    CHECK(strstr(html, "<th>alloc MiB</th><th>Python alloc</th><th>net MiB</th><th>peak MiB</th>"
                       "<th>copy MiB/s</th><th>leak</th>") != NULL);
    CHECK(strstr(html, "<a href=\"#sc-mem\" data-tab=\"sc-mem\">Memory</a>") != NULL);
    /* line 3: 8 MB allocated (half by Python), 3 MB freed: net 5, peak 8 */
    CHECK(strstr(html, "<td class=\"n\" data-v=\"8\">8.00</td><td class=\"n\" data-v=\"50.000\">"
                       "50.0%</td><td class=\"n\" data-v=\"5\">5.00</td><td class=\"n\" "
                       "data-v=\"8\">8.00</td>") != NULL);
    CHECK_CONTAINS(html, "<svg class=\"sc-spark\"", "<svg class=\"sc-chart\"", "peak 8.0 MiB at",
                   "<dt>memory peak</dt><dd>8.0 MiB</dd>", "<dt>memory samples</dt><dd>12</dd>");
    /* copy 4 MB over 2 s on line 5 */
    CHECK(strstr(html, "data-v=\"2\">2.00</td>") != NULL);
    CHECK(run_python(balance_py, html) == 0);
    const char *keep = getenv("SCRY_HTML_OUT");
    if (keep) {
        FILE *f = fopen(keep, "w");
        if (f) {
            fputs(html, f);
            fclose(f);
        }
    }
}

static void test_empty(void)
{
    report_meta_t m = {0};
    report_profile_t *p = report_profile_new(&m);
    char *html = render_safe(p);
    if (html) {
        CHECK_CONTAINS(html, "No samples were collected.",
                       "No Python source line received samples.", "<dt>Python</dt><dd>unknown</dd>",
                       "no samples</text>"); /* the flame graph's */
        CHECK(run_python(balance_py, html) == 0);
    }
    free(html);
    report_profile_free(p);
}

/* Without the source (no root, no file), the active lines are still listed. */
static void test_no_source(void)
{
    report_meta_t m = test_meta();
    report_profile_t *p = report_profile_new(&m);
    scry_frame_t f[] = {PY("gone", "/nonexistent/scry/x.py", 2000000000)};
    add_cpu(p, f, 1, SCRY_CLASS_PYTHON, 1000, 1, 1);
    int rc = -1;
    char *html = render(p, REPORT_FORMAT_HTML, &t_src, &rc);
    CHECK(rc == 0 && html);
    if (html) {
        CHECK_CONTAINS(html, "source not available: not found",
                       "<td class=\"code sc-none\"># in gone</td>", "id=\"L0-2000000000\"");
        CHECK(count(html, "<td class=\"ln\">") == 1); /* no context rows without source */
    }
    free(html);
    report_profile_free(p);
}

int main(void)
{
    make_tree();
    t_src = src_options(tmpdir);
    CHECK(t_src.source_ctx != NULL);
    test_page(0, check_cpu);
    test_page(1, check_memory);
    test_empty();
    test_no_source();
    src_options_free(&t_src);
    remove_tree();
    return test_done("test_report_html");
}
