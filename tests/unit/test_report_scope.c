/* test_report_scope.c - the line views charge a sample to the innermost frame in the user's
 * code (not the standard library, site-/dist-packages or <...> pseudo-files), functions keep
 * the leaf, --all-lines restores the leaf line, --include/--exclude patterns adjust. */
#include "test_report_util.h"

#include "scry_err.h"

static const char *checker =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
    "want = sys.argv[2] if len(sys.argv) > 2 else None\n"
    "L = {(l['file'], l['line']): l for l in d['lines']}\n"
    "F = {f['function']: f for f in d['functions']}\n"
    "def share(k): l = L.get(k); return 0 if not l else l['cpu_python_pct'] + "
    "l['cpu_native_pct'] + l['cpu_system_pct']\n"
    "def fail(m): print('scope check failed:', m, d['lines']); sys.exit(1)\n"
    "import os\n"
    "mode = os.path.basename(sys.argv[1])\n"
    "if d['mode']['all_lines']:\n"
    "    if abs(share(('/usr/lib/python3.11/csv.py', 110)) - 50) > 0.01: fail('all csv')\n"
    "    if abs(share(('<__array_function__ internals>', 200)) - 25) > 0.01: fail('all af')\n"
    "    if abs(share(('/app/main.py', 7)) - 25) > 0.01: fail('all main')\n"
    "else:\n"
    "    if abs(share(('/app/main.py', 5)) - 50) > 0.01: fail('csv -> 5')\n"
    "    if abs(share(('/app/main.py', 6)) - 25) > 0.01: fail('np -> 6')\n"
    "    if abs(share(('/app/main.py', 7)) - 25) > 0.01: fail('7')\n"
    "    if not all(l['user'] for l in d['lines'][:3]): fail('user first')\n"
    "    a = L[('/app/main.py', 6)]\n"
    "    if abs(a['alloc_mb'] - 2) > 1e-6 or abs(a['net_mb'] - 2) > 1e-6: fail(a)\n"
    "if abs(F['reader']['self_pct'] - 50) > 0.01: fail('functions keep the leaf')\n";

int main(void)
{
    CHECK(report_is_user_file("app.py"));
    CHECK(report_is_user_file("/home/me/proj/lib/python_tools/x.py"));
    CHECK(!report_is_user_file("/usr/lib/python3.11/csv.py"));
    CHECK(!report_is_user_file("/root/.pyenv/versions/3.12.1/lib/python3.12/json/decoder.py"));
    CHECK(!report_is_user_file("/usr/lib64/python3.9/re.py"));
    CHECK(!report_is_user_file("/usr/lib/python311.zip/re.py"));
    CHECK(!report_is_user_file("/usr/lib/python3/dist-packages/numpy/core/numeric.py"));
    CHECK(!report_is_user_file("/venv/lib/python3.12/site-packages/numpy/_core/numeric.py"));
    CHECK(!report_is_user_file("<frozen importlib._bootstrap>"));
    CHECK(!report_is_user_file("<__array_function__ internals>"));
    CHECK(!report_is_user_file(""));
    CHECK(!report_is_user_file(NULL));

    /* patterns: refused with a reason when fnmatch would take them silently otherwise */
    const char *why = NULL;
    CHECK(report_glob_check("*/scopelib/*", &why) == 0 && !why);
    CHECK(report_glob_check("/app/[a-c]*.py", NULL) == 0);
    CHECK(report_glob_check("/app/[]x]*.py", NULL) == 0); /* ']' first is a member */
    CHECK(report_glob_check("/app/[!]]*.py", NULL) == 0); /* negated ']' */
    CHECK(report_glob_check("*[[:digit:]]*", NULL) == 0); /* a class inside */
    CHECK(report_glob_check("a\\[b", NULL) == 0);         /* an escaped '[' is a '[' */
    CHECK(report_glob_check("[abc", &why) == SCRY_E_INVAL && why && strstr(why, "never closed"));
    CHECK(report_glob_check("x[[:digit:]", NULL) == SCRY_E_INVAL);
    CHECK(report_glob_check("x[[:digit]", NULL) == SCRY_E_INVAL);
    CHECK(report_glob_check("[]", NULL) == SCRY_E_INVAL);
    CHECK(report_glob_check("x\\", &why) == SCRY_E_INVAL && why && strstr(why, "lone"));
    CHECK(report_glob_check("", &why) == SCRY_E_INVAL && why && strstr(why, "empty"));
    CHECK(report_glob_check(NULL, NULL) == SCRY_E_INVAL);
    char big[REPORT_GLOB_MAX + 2];
    memset(big, '*', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK(report_glob_check(big, &why) == SCRY_E_INVAL && why && strstr(why, "longer"));
    big[REPORT_GLOB_MAX] = 0;
    CHECK(report_glob_check(big, NULL) == 0);

    for (int all = 0; all < 2; all++) {
        report_meta_t m = test_meta();
        m.flags = REPORT_F_MEMORY | (all ? REPORT_F_ALL_LINES : 0);
        report_profile_t *p = report_profile_new(&m);
        CHECK(p);
        const uint64_t ms = 1000000;
        scry_frame_t csv[] = {PY("reader", "/usr/lib/python3.11/csv.py", 110),
                              PY("<genexpr>", "/usr/lib/python3.11/csv.py", 100),
                              PY("main", "/app/main.py", 5), PY("<module>", "/app/main.py", 9)};
        scry_frame_t np[] = {NAT("PyArray_Concatenate", "_multiarray_umath.so"),
                             PY("concatenate", "<__array_function__ internals>", 200),
                             PY("main", "/app/main.py", 6), PY("<module>", "/app/main.py", 9)};
        scry_frame_t own[] = {PY("main", "/app/main.py", 7), PY("<module>", "/app/main.py", 9)};
        scry_frame_t ones[] = {
            PY("ones", "/usr/lib/python3/dist-packages/numpy/core/numeric.py", 191),
            PY("main", "/app/main.py", 6), PY("<module>", "/app/main.py", 9)};
        uint64_t t = 1000 * ms;
        for (int i = 0; i < 2; i++)
            add_cpu(p, csv, 4, SCRY_CLASS_PYTHON, 10 * ms, 1, t += 10 * ms);
        add_cpu(p, np, 4, SCRY_CLASS_NATIVE, 10 * ms, 1, t += 10 * ms);
        add_cpu(p, own, 2, SCRY_CLASS_PYTHON, 10 * ms, 1, t += 10 * ms);
        add_mem(p, ones, 3, SCRY_METRIC_ALLOC, 1, 2u << 20, 0x10000, t += ms);
        free(render_checked(p, REPORT_FORMAT_JSON, checker));
        /* text: the user's line first, with the library line absent by default */
        int rc;
        char *out = render(p, REPORT_FORMAT_TEXT, NULL, &rc);
        CHECK(rc == 0 && out);
        char *fn = out ? strstr(out, "Hottest functions") : NULL;
        if (fn)
            *fn = 0; /* the lines section only */
        if (out && !all)
            CHECK(!strstr(out, "csv.py:110") && strstr(out, "main.py:5"));
        if (out && all)
            CHECK(strstr(out, "csv.py:110") != NULL);
        free(out);
        report_profile_free(p);
    }

    /* --exclude makes /app/main.py:5's callee chain skip main.py's line 5; --include makes
     * csv.py the user's */
    const char *inc[] = {"*/csv.py"};
    const char *exc[] = {"*/main.py"};
    report_meta_t m = test_meta();
    m.include = inc;
    m.ninclude = 1;
    report_profile_t *p = report_profile_new(&m);
    scry_frame_t csv[] = {PY("reader", "/usr/lib/python3.11/csv.py", 110),
                          PY("main", "/app/main.py", 5), PY("<module>", "/app/other.py", 9)};
    add_cpu(p, csv, 3, SCRY_CLASS_PYTHON, 10, 1, 10);
    char *out = render(p, REPORT_FORMAT_TEXT, NULL, NULL);
    char *fn = out ? strstr(out, "Hottest functions") : NULL;
    if (fn)
        *fn = 0;
    CHECK(out && strstr(out, "csv.py:110"));
    free(out);
    report_profile_free(p);
    m.include = NULL;
    m.ninclude = 0;
    m.exclude = exc;
    m.nexclude = 1;
    p = report_profile_new(&m);
    add_cpu(p, csv, 3, SCRY_CLASS_PYTHON, 10, 1, 10);
    out = render(p, REPORT_FORMAT_TEXT, NULL, NULL);
    fn = out ? strstr(out, "Hottest functions") : NULL;
    if (fn)
        *fn = 0;
    CHECK(out && strstr(out, "other.py:9") && !strstr(out, "main.py:5"));
    free(out);
    report_profile_free(p);
    return test_done("test_report_scope");
}
