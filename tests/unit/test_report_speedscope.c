/* test_report_speedscope.c - speedscope file structure, per-thread and memory profiles. */
#include "test_report_util.h"

static const char *checker =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
    "def fail(m):\n"
    "    print('speedscope check failed:', m); sys.exit(1)\n"
    "if d['$schema'] != 'https://www.speedscope.app/file-format-schema.json': fail('schema')\n"
    "fr = d['shared']['frames']\n"
    "if not all(isinstance(f['name'], str) for f in fr): fail(fr)\n"
    "names = [f['name'] for f in fr]\n"
    "if len(set(json.dumps(f, sort_keys=True) for f in fr)) != len(fr): fail('dup frames')\n"
    "P = {p['name']: p for p in d['profiles']}\n"
    "want = ['thread 1 (MainThread)', 'thread 2', 'memory: allocated bytes', "
    "'memory: freed bytes']\n"
    "if [p['name'] for p in d['profiles']] != want: fail(list(P))\n"
    "for p in d['profiles']:\n"
    "    if p['type'] != 'sampled' or p['startValue'] != 0: fail(p)\n"
    "    if len(p['samples']) != len(p['weights']): fail(p)\n"
    "    if p['endValue'] != sum(p['weights']): fail(p)\n"
    "    for s in p['samples']:\n"
    "        if not s or any(i < 0 or i >= len(fr) for i in s): fail(s)\n"
    "t1 = P['thread 1 (MainThread)']\n"
    "if t1['unit'] != 'nanoseconds' or t1['endValue'] != 50000000: fail(t1)\n"
    "roots = set(fr[s[0]]['name'] for s in t1['samples'])\n"
    "if roots != {'main'}: fail(roots)\n"
    "leaf = [fr[s[-1]] for s in t1['samples']]\n"
    "if {'name': 'dot', 'file': 'libblas.so'} not in leaf: fail(leaf)\n"
    "if {'name': 'compute', 'file': 'app.py', 'line': 20} not in leaf: fail(leaf)\n"
    "t2 = P['thread 2']\n"
    "if fr[t2['samples'][0][-1]]['name'] != 'odd\"<name>\\n\\u00e9': "
    "fail(fr[t2['samples'][0][-1]])\n"
    "a = P['memory: allocated bytes']\n"
    "if a['unit'] != 'bytes' or a['endValue'] != 3072: fail(a)\n"
    "f = P['memory: freed bytes']\n"
    "if f['unit'] != 'bytes' or f['endValue'] != 1024: fail(f)\n";

static const char *empty_checker =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1]))\n"
    "assert d['shared']['frames'] == [] and d['profiles'] == [], d\n";

int main(void)
{
    report_meta_t m = test_meta();
    report_profile_t *p = report_profile_new(&m);
    const uint64_t ms = 1000000;
    scry_frame_t a[] = {PY("compute", "app.py", 20), PY("main", "app.py", 10)};
    scry_frame_t b[] = {NAT("dot", "libblas.so"), PY("compute", "app.py", 21),
                        PY("main", "app.py", 10)};
    scry_frame_t h[] = {PY("odd\"<name>\n\xc3\xa9", "t.py", 1), PY("run", "t.py", 9)};
    add_cpu(p, a, 2, 0, 10 * ms, 1, 1);
    add_cpu(p, a, 2, 0, 10 * ms, 1, 2);
    add_cpu(p, b, 3, 1, 30 * ms, 1, 3);
    add_cpu(p, h, 2, 0, 5 * ms, 2, 4);
    add_mem(p, a, 2, SCRY_METRIC_ALLOC, 0, 2048, 0x100, 5);
    add_mem(p, b, 3, SCRY_METRIC_ALLOC, 1, 1024, 0x200, 6);
    add_mem(p, a, 2, SCRY_METRIC_FREE, 0, 1024, 0x200, 7);
    char *out = render_checked(p, REPORT_FORMAT_SPEEDSCOPE, checker);
    free(out);
    report_profile_free(p);

    /* no thread ids: one "cpu" profile; no weights: unit none with counts */
    p = report_profile_new(&m);
    add_cpu(p, a, 2, 0, 0, 0, 1);
    add_cpu(p, a, 2, 0, 0, 0, 2);
    int rc;
    out = render(p, REPORT_FORMAT_SPEEDSCOPE, NULL, &rc);
    CHECK(rc == 0 && out && strstr(out, "\"name\":\"cpu\",\"unit\":\"none\"") &&
          strstr(out, "\"weights\":[2]"));
    free(out);
    report_profile_free(p);

    check_empty(&m, REPORT_FORMAT_SPEEDSCOPE, empty_checker);
    return test_done("test_report_speedscope");
}
