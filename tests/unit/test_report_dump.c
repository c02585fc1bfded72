/* test_report_dump.c - 'scry dump' text and JSON written by report/: exact text, JSON that
 * parses with every field (gil_wait and partial included), escaping, a partial stack, an
 * empty snapshot, bad arguments. */
#include "scry_err.h"
#include "test_report_util.h"

static char *write_dump(const report_dump_t *d, enum report_dump_format fmt, int *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    *rc = report_dump_write(d, fmt, f);
    fclose(f);
    return buf;
}

int main(void)
{
    scry_frame_t main_frames[] = {PY("compute", "app.py", 20), PY("main", "app.py", 10)};
    scry_frame_t wait_frames[] = {
        {S("<waiting for the GIL>"), S(""), 0, SCRY_FRAME_OTHER},
        NAT("take_gil", "libpython3.12.so"),
        PY("run \"q\"", "w\\x.py", 3),
    };
    scry_frame_t torn_frames[] = {PY("descend", "r.py", 14),
                                  {S("<changed while reading>"), S(""), 0, SCRY_FRAME_OTHER}};
    report_dump_thread_t th[] = {
        {.tid = 100,
         .name = "MainThread",
         .gil = 1,
         .running = 1,
         .nframes = 2,
         .frames = main_frames},
        {.tid = 101,
         .name = "worker\n1",
         .gil_wait = 1,
         .truncated = 1,
         .nframes = 3,
         .frames = wait_frames},
        {.tid = 102, .running = 1, .partial = 1, .nframes = 2, .frames = torn_frames},
    };
    report_dump_t d = {.pid = 100,
                       .process = "python3 (/usr/bin/python3)",
                       .version = "3.12.1",
                       .interp_path = "/usr/lib/libpython3.12.so",
                       .how_found = "symbol _PyRuntime",
                       .threads = th,
                       .nthreads = 3};
    int rc = -1;
    char *text = write_dump(&d, REPORT_DUMP_TEXT, &rc);
    CHECK_INT(rc, ==, 0);
    CHECK_STR(text, ==,
              "Process 100: python3 (/usr/bin/python3)\n"
              "Python v3.12.1 (/usr/lib/libpython3.12.so; runtime found by symbol _PyRuntime)\n"
              "\n"
              "Thread 100 (running+gil): \"MainThread\"\n"
              "    compute (app.py:20)\n"
              "    main (app.py:10)\n"
              "\n"
              "Thread 101 (waiting for the GIL): \"worker\n1\" [truncated]\n"
              "    <waiting for the GIL>\n"
              "    take_gil (libpython3.12.so)\n"
              "    run \"q\" (w\\x.py:3)\n"
              "\n"
              "Thread 102 (running): \"\" [partial: the stack changed while it was read]\n"
              "    descend (r.py:14)\n"
              "    <changed while reading>\n");
    free(text);

    char *json = write_dump(&d, REPORT_DUMP_JSON, &rc);
    CHECK_INT(rc, ==, 0);
    CHECK(json != NULL);
    if (json)
        CHECK_INT(
            run_python(
                "import json, sys\n"
                "d = json.load(open(sys.argv[1]))\n"
                "assert d['pid'] == 100 and d['python_version'] == '3.12.1', d\n"
                "a, b, c = d['threads']\n"
                "assert a == {'tid': 100, 'name': 'MainThread', 'gil': True,\n"
                "  'gil_wait': False, 'state': 'running', 'truncated': False,\n"
                "  'partial': False,\n"
                "  'frames': [\n"
                "   {'function': 'compute', 'file': 'app.py', 'line': 20, 'kind': 'python'},\n"
                "   {'function': 'main', 'file': 'app.py', 'line': 10, 'kind': 'python'}]}, a\n"
                "assert b['name'] == 'worker\\n1' and b['gil_wait'] is True, b\n"
                "assert b['gil'] is False and b['state'] == 'idle', b\n"
                "assert b['truncated'] is True and b['partial'] is False, b\n"
                "assert c['partial'] is True and c['truncated'] is False, c\n"
                "assert [f['function'] for f in c['frames']] == [\n"
                "  'descend', '<changed while reading>'], c\n"
                "assert [f['kind'] for f in b['frames']] == ['other', 'native', 'python'], b\n"
                "assert b['frames'][2]['function'] == 'run \"q\"', b\n"
                "assert b['frames'][2]['file'] == 'w\\\\x.py', b\n",
                json),
            ==, 0);
    free(json);

    /* No threads: still a document. */
    report_dump_t empty = {.pid = 7, .version = NULL};
    json = write_dump(&empty, REPORT_DUMP_JSON, &rc);
    CHECK_INT(rc, ==, 0);
    CHECK_STR(json, ==, "{\"pid\": 7, \"python_version\": \"\", \"threads\": [\n]}\n");
    free(json);
    text = write_dump(&empty, REPORT_DUMP_TEXT, &rc);
    CHECK_INT(rc, ==, 0);
    CHECK_STR(text, ==, "Process 7: \nPython v (; runtime found by )\n");
    free(text);

    FILE *null = fopen("/dev/null", "w");
    CHECK_INT(report_dump_write(NULL, REPORT_DUMP_TEXT, null), ==, SCRY_E_INVAL);
    CHECK_INT(report_dump_write(&d, REPORT_DUMP_TEXT, NULL), ==, SCRY_E_INVAL);
    CHECK_INT(report_dump_write(&d, (enum report_dump_format)9, null), ==, SCRY_E_INVAL);
    report_dump_t broken = {.nthreads = 3};
    CHECK_INT(report_dump_write(&broken, REPORT_DUMP_JSON, null), ==, SCRY_E_INVAL);
    fclose(null);
    return test_done("test_report_dump");
}
