/* test_report_flamegraph.c - the SVG flame graph parses as XML, holds the expected frames,
 * elides narrow ones, escapes hostile names, says "bytes" for memory profiles. */
#include "test_report_util.h"

static const char *checker =
    "import sys, re, xml.dom.minidom as md\n"
    "doc = md.parse(sys.argv[1])\n"
    "def fail(m):\n"
    "    print('svg check failed:', m); sys.exit(1)\n"
    "svg = doc.documentElement\n"
    "if svg.tagName != 'svg': fail(svg.tagName)\n"
    "mode = sys.argv[2] if len(sys.argv) > 2 else "
    "open(sys.argv[1]).read().split('<!--MODE:')[1].split('-->')[0]\n"
    "title = [t for t in doc.getElementsByTagName('text') if t.getAttribute('id') == 'title'][0]\n"
    "tt = title.firstChild.data if title.firstChild else ''\n"
    "scripts = doc.getElementsByTagName('script')\n"
    "if len(scripts) != 1 or 'function zoom' not in scripts[0].firstChild.data: fail('script')\n"
    "frames = [g for g in doc.getElementsByTagName('g') if g.getAttribute('class') == 'f']\n"
    "names = [g.getElementsByTagName('title')[0].firstChild.data for g in frames]\n"
    "if mode == 'cpu':\n"
    "    if tt != 'CPU Flame Graph': fail(tt)\n"
    "    if not names[0].startswith('all (10001 samples, 100.00%)'): fail(names[0])\n"
    "    if 'compute (app.py:20) (5000 samples, 50.00%)' not in names: fail(names)\n"
    "    if 'dot (libblas.so) (4000 samples, 40.00%)' not in names: fail(names)\n"
    "    if any('tiny' in n for n in names): fail('not elided')\n"
    "    if not any(n.startswith('we\"ird<&>') for n in names): fail('hostile')\n"
    "    for g in frames:\n"
    "        r = g.getElementsByTagName('rect')[0]\n"
    "        if float(r.getAttribute('width')) < 1: fail('narrow')\n"
    "        if not re.match(r'rgb\\(\\d+,\\d+,\\d+\\)$', r.getAttribute('fill')): fail('fill')\n"
    "    ys = {g.getElementsByTagName('title')[0].firstChild.data.split(' (')[0]: "
    "float(g.getElementsByTagName('rect')[0].getAttribute('y')) for g in frames}\n"
    "    if not ys['all'] > ys['main'] > ys['compute']: fail(ys)\n"
    "elif mode == 'mem':\n"
    "    if 'bytes' not in tt: fail(tt)\n"
    "    if not any('3.0 KiB' in n for n in names): fail(names)\n"
    "elif mode == 'empty':\n"
    "    if frames: fail(frames)\n";

static void check_svg(const char *svg, const char *mode)
{
    char *doc = NULL;
    size_t n = strlen(svg) + 64;
    doc = malloc(n);
    snprintf(doc, n, "%s<!--MODE:%s-->\n", svg, mode);
    int st = run_python(checker, doc);
    CHECK_INT(st, ==, 0);
    free(doc);
}

/* Renders P (then frees it): the SVG passes the checker in MODE and renders the same again. */
static void check_rendered(report_profile_t *p, const char *mode)
{
    int rc;
    char *out = render(p, REPORT_FORMAT_FLAMEGRAPH, NULL, &rc);
    CHECK(rc == 0 && out, "%s", mode);
    if (out)
        check_svg(out, mode);
    check_renders_same(p, REPORT_FORMAT_FLAMEGRAPH, NULL, out);
    free(out);
    report_profile_free(p);
}

int main(void)
{
    report_meta_t m = test_meta();
    m.command = "python3 <evil> & \"quoted\" ]]> \x01";
    report_profile_t *p = report_profile_new(&m);
    scry_frame_t a[] = {PY("compute", "app.py", 20), PY("main", "app.py", 10)};
    scry_frame_t b[] = {NAT("dot", "libblas.so"), PY("compute", "app.py", 21),
                        PY("main", "app.py", 10)};
    scry_frame_t t[] = {PY("tiny", "app.py", 99), PY("main", "app.py", 10)};
    scry_frame_t h[] = {PY("we\"ird<&> ]]> \x02\xff", "x.py", 1), PY("main", "app.py", 10)};
    for (int i = 0; i < 5000; i++)
        add_cpu(p, a, 2, 0, 1000, 1, (uint64_t)i);
    for (int i = 0; i < 4000; i++)
        add_cpu(p, b, 3, 1, 1000, 1, (uint64_t)i);
    for (int i = 0; i < 1000; i++)
        add_cpu(p, h, 2, 2, 1000, 1, (uint64_t)i);
    add_cpu(p, t, 2, 0, 1000, 1, 1);
    check_rendered(p, "cpu");

    p = report_profile_new(&m);
    add_mem(p, a, 2, SCRY_METRIC_ALLOC, 0, 2048, 0x10, 1);
    add_mem(p, b, 3, SCRY_METRIC_ALLOC, 1, 1024, 0x20, 2);
    check_rendered(p, "mem");

    /* labels show the file's base name (they fit); the tooltip and search keep the path */
    p = report_profile_new(&m);
    scry_frame_t lp[] = {PY("make_list", "/home/someone/projects/longname/app.py", 12)};
    add_cpu(p, lp, 1, 0, 1000, 1, 1);
    int rc;
    char *out = render(p, REPORT_FORMAT_FLAMEGRAPH, NULL, &rc);
    CHECK(rc == 0 && out);
    CHECK(out && strstr(out, ">make_list (app.py:12)</text>"));
    CHECK(out && strstr(out, "data-n=\"make_list (app.py:12)\""));
    CHECK(out && strstr(out, "<title>make_list (/home/someone/projects/longname/app.py:12) ("));
    free(out);
    report_profile_free(p);

    check_rendered(report_profile_new(&m), "empty");
    return test_done("test_report_flamegraph");
}
