/* test_report_json.c - the JSON report: schema, line shares, functions, memory fields,
 * hostile strings, zero samples. Parsed by python3's json module. */
#include "test_report_util.h"

#define MB (1024u * 1024u)

static const char *checker =
    "import json, sys, math\n"
    "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
    "def fail(m):\n"
    "    print('json check failed:', m); sys.exit(1)\n"
    "def near(a, b, eps=0.01): return abs(a - b) <= eps\n"
    "if d['target'] != {'pid': 4242, 'python_version': '3.12.1', 'command': "
    "'python3 app.py --n=\"10\"'}: fail(d['target'])\n"
    "if d['samples'] != 7 or d['errors'] != 3 or d['dropped'] != 1: fail('counts')\n"
    "if not near(d['duration_s'], 2.0): fail('duration')\n"
    "if d['start_time'] != '2023-11-14T22:13:20Z': fail(d['start_time'])\n"
    "if not d['target_exited'] or d['unit'] != 'nanoseconds': fail('flags')\n"
    "if not near(d['gil_held_pct'], 40.0): fail('gil')\n"
    "L = {(l['file'], l['line']): l for l in d['lines']}\n"
    "tot = sum(l['cpu_python_pct'] + l['cpu_native_pct'] + l['cpu_system_pct'] for l in "
    "d['lines'])\n"
    "if abs(tot - 100) > 0.5: fail('sum %f' % tot)\n"
    "l20, l21, l30 = L[('app.py', 20)], L[('app.py', 21)], L[('app.py', 30)]\n"
    "if not (near(l20['cpu_python_pct'], 300/7) and l20['samples'] == 3): fail(l20)\n"
    "if not (near(l21['cpu_native_pct'], 200/7) and l21['cpu_python_pct'] == 0): fail(l21)\n"
    "if not near(l30['cpu_system_pct'], 200/7): fail(l30)\n"
    "if d['lines'][0]['line'] != 20: fail('order')\n"
    "F = {f['function']: f for f in d['functions']}\n"
    "c, mn = F['compute'], F['main']\n"
    "if not (near(c['self_pct'], 500/7) and near(c['total_pct'], 500/7) and c['line'] == 20): "
    "fail(c)\n"
    "if not (near(mn['total_pct'], 100) and mn['self_pct'] == 0 and mn['line'] == 10): "
    "fail(mn)\n"
    "if not near(c['cpu_native_pct'], 200/7): fail('fn native')\n"
    "hostile = 'we\"ird<&>\\\\ n\\x01 h\\u00e9llo \\ufffd'\n"
    "if hostile not in F: fail('hostile %r' % list(F))\n"
    "if F[hostile]['file'] != 'dir;x/\\u00fc.py': fail(F[hostile]['file'])\n"
    "T = {t['tid']: t for t in d['threads']}\n"
    "if T[1]['name'] != 'MainThread' or T[1]['samples'] != 6 or T[2]['samples'] != 1: "
    "fail(T)\n"
    "m = d['memory']\n"
    "a = L[('alloc.py', 5)]\n"
    "if not (near(a['alloc_mb'], 3) and near(a['net_mb'], 1) and near(a['peak_mb'], 3)): "
    "fail(a)\n"
    "if not near(a['leak_score'], 0.4, 1e-4) or a['leak_growing']: fail(a)\n"
    "if not near(a['alloc_python_pct'], 100*2/3): fail(a)\n"
    "if a['trend'] != [1, 2, 3, 2, 1]: fail(a['trend'])\n"
    "k = L[('leak.py', 9)]\n"
    "if not (near(k['leak_score'], 1 - 1/32, 1e-4) and k['leak_growing']): fail(k)\n"
    "if len(k['trend']) > 27 or len(k['trend']) < 9: fail(k['trend'])\n"
    "if k['trend'][-1] != 30 or sorted(k['trend']) != k['trend']: fail(k['trend'])\n"
    "cp = L[('copy.py', 3)]\n"
    "if not (near(cp['copy_mb'], 10) and near(cp['copy_mb_s'], 5)): fail(cp)\n"
    "if [x['line'] for x in m['likely_leaks']] != [9]: fail(m['likely_leaks'])\n"
    "if m['top_alloc_lines'][0]['file'] != 'leak.py': fail('top')\n"
    "if not near(m['peak_mb'], 31) or not near(m['net_mb'], 31): fail(m)\n"
    "if m['unmatched_frees'] != 1: fail('unmatched')\n"
    "fp = m['footprint']\n"
    "if not fp or len(fp) > 256 or not near(max(p[1] for p in fp), 31): fail(fp)\n"
    "if any(fp[i][0] > fp[i+1][0] for i in range(len(fp)-1)): fail('fp order')\n";

static const char *empty_checker =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1]))\n"
    "assert d['samples'] == 0 and d['lines'] == [] and d['functions'] == [], d\n"
    "assert 'memory' not in d and 'gil_held_pct' not in d\n";

int main(void)
{
    report_meta_t m = test_meta();
    m.flags = REPORT_F_GIL | REPORT_F_MEMORY;
    report_profile_t *p = report_profile_new(&m);
    CHECK(p);
    const uint64_t ms = 1000000;
    scry_frame_t a[] = {PY("compute", "app.py", 20), PY("main", "app.py", 10)};
    scry_frame_t b[] = {NAT("dot", "libblas.so"), PY("compute", "app.py", 21),
                        PY("main", "app.py", 10)};
    scry_frame_t c[] = {PY("sleeper", "app.py", 30), PY("main", "app.py", 10)};
    scry_frame_t h[] = {PY("we\"ird<&>\\ n\x01 h\xc3\xa9llo \xff", "dir;x/\xc3\xbc.py", 2),
                        PY("main", "app.py", 10)};
    uint64_t t = 1000 * ms;
    for (int i = 0; i < 3; i++)
        add_cpu(p, a, 2, SCRY_CLASS_PYTHON, 10 * ms, 1, t += 10 * ms);
    for (int i = 0; i < 2; i++)
        add_cpu(p, b, 3, SCRY_CLASS_NATIVE, 10 * ms, 1, t += 10 * ms);
    add_cpu(p, c, 2, SCRY_CLASS_SYSTEM, 20 * ms, 1, t += 10 * ms);
    add_cpu(p, h, 2, SCRY_CLASS_PYTHON, 0, 2, t += 10 * ms);

    scry_frame_t al[] = {PY("make", "alloc.py", 5)};
    scry_frame_t lk[] = {PY("grow", "leak.py", 9)};
    scry_frame_t cp[] = {PY("dup", "copy.py", 3)};
    /* one event per 100 ms trend slice, so each shows as one trend point */
    add_mem(p, al, 1, SCRY_METRIC_ALLOC, 0, MB, 0x10000, t += 100 * ms);
    add_mem(p, al, 1, SCRY_METRIC_ALLOC, 1, MB, 0x20000, t += 100 * ms);
    add_mem(p, al, 1, SCRY_METRIC_ALLOC, 0, MB, 0x30000, t += 100 * ms);
    add_mem(p, cp, 1, SCRY_METRIC_FREE, 0, MB, 0x10000, t += 100 * ms); /* freed elsewhere */
    add_mem(p, cp, 1, SCRY_METRIC_FREE, 0, MB, 0x20000, t += 100 * ms);
    add_mem(p, cp, 1, SCRY_METRIC_FREE, 0, MB, 0x999990, t += ms); /* unmatched */
    for (int i = 0; i < 30; i++) /* 30 MB kept over the next second: a leak */
        add_mem(p, lk, 1, SCRY_METRIC_ALLOC, 0, MB, 0x100000 + (uint64_t)i * 0x100000,
                t += 35 * ms);
    add_mem(p, cp, 1, SCRY_METRIC_COPY, 1, 10 * MB, 0, t += ms);

    report_end_t e = {.duration_s = 2.0,
                      .ticks = 200,
                      .errors = 3,
                      .dropped = 1,
                      .target_exited = 1,
                      .gil_fraction = 0.4};
    CHECK(report_profile_set_end(p, &e) == 0);
    char *out = render_checked(p, REPORT_FORMAT_JSON, checker);
    check_renders_same(p, REPORT_FORMAT_JSON, NULL, out);
    free(out);
    report_profile_free(p);

    check_empty(&m, REPORT_FORMAT_JSON, empty_checker);
    return test_done("test_report_json");
}
