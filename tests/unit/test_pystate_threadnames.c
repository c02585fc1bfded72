/* test_pystate_threadnames.c - Python thread names read from real interpreters.
 *
 * For every installed CPython 3.6-3.13 (pyenv) and Debian's /usr/bin/python3.11, starts a
 * script with MainThread and threads named 'alpha', 'βeta-名前' (non-ASCII), a default name
 * ("Thread-N" / "Thread-N (worker)") and 'gamma' (whose __dict__ is materialised and grown
 * past the shared keys), then checks that pystate_sample's threads carry exactly the names
 * the script reports, matched by pthread id, with the OS thread id from /proc/PID/task
 * (and equal to threading.get_native_id() where the version has it). Also: a process that
 * has not imported threading, and the cost of one names refresh with 100 threads.
 * Missing interpreters are skipped with a message.
 */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "pystate.h"
#include "scry_err.h"
#include "threadnames.h"
#include "check.h"
#include "python_child.h"
#include "scry_time.h"

#define MAX_EXPECT 128

/* Prints one line per thread: ident, native id (0 before 3.8), name as UTF-8 hex; then
 * READY, and waits for stdin to close. */
static const char script_named[] =
    "import sys, threading, time\n"
    "ev = threading.Event()\n"
    "def worker():\n"
    "    ev.wait()\n"
    "ts = [threading.Thread(target=worker, name='alpha'),\n"
    "      threading.Thread(target=worker, name='\\u03b2eta-\\u540d\\u524d'),\n"
    "      threading.Thread(target=worker),\n"
    "      threading.Thread(target=worker, name='gamma')]\n"
    "for t in ts:\n"
    "    t.daemon = True\n"
    "    t.start()\n"
    "g = ts[3]\n"
    "g.__dict__['extra'] = 1\n"
    "for i in range(40):\n"
    "    setattr(g, 'x%d' % i, i)\n"
    "while len(threading._active) < 5:\n"
    "    time.sleep(0.01)\n"
    "nid = getattr(threading, 'get_native_id', None)\n"
    "for t in [threading.main_thread()] + ts:\n"
    "    print(t.ident, getattr(t, 'native_id', 0) or 0, t.name.encode('utf-8').hex())\n"
    "print('READY', flush=True)\n"
    "sys.stdin.read()\n";

static const char script_many[] =
    "import sys, threading, time\n"
    "ev = threading.Event()\n"
    "ts = [threading.Thread(target=ev.wait, name='worker-%03d' % i, daemon=True)\n"
    "      for i in range(100)]\n"
    "for t in ts:\n"
    "    t.start()\n"
    "while len(threading._active) < 101:\n"
    "    time.sleep(0.01)\n"
    "for t in [threading.main_thread()] + ts:\n"
    "    print(t.ident, 0, t.name.encode('utf-8').hex())\n"
    "print('READY', flush=True)\n"
    "sys.stdin.read()\n";

static const char script_plain[] = "import sys\n"
                                   "print('threading' in sys.modules)\n"
                                   "print('READY', flush=True)\n"
                                   "sys.stdin.read()\n";

/* Threads come and go all the time and one renames itself in a loop: reads are torn. */
static const char script_churn[] =
    "import threading, time\n"
    "def short():\n"
    "    time.sleep(0.001)\n"
    "def renamer():\n"
    "    i = 0\n"
    "    while True:\n"
    "        threading.current_thread().name = 'r%d' % (i % 7)\n"
    "        i += 1\n"
    "threading.Thread(target=renamer, name='r0', daemon=True).start()\n"
    "print('READY', flush=True)\n"
    "while True:\n"
    "    ts = [threading.Thread(target=short, name='churn-%d' % i) for i in range(20)]\n"
    "    for t in ts:\n"
    "        t.start()\n"
    "    for t in ts:\n"
    "        t.join()\n";

typedef struct expect {
    uint64_t ident;
    int32_t native;
    char name[256];
    int seen;
} expect_t;

typedef struct child {
    python_child_t py;
    pid_t pid;
    FILE *out; /* its stdout (py.out_fd) */
} child_t;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int start(const char *python, const char *script, child_t *c)
{
    char *const argv[] = {(char *)python, (char *)"-S", (char *)"-c", (char *)script, NULL};
    if (python_child_exec(&c->py, argv, NULL, 0) != 0)
        return -1;
    c->pid = c->py.pid;
    c->out = fdopen(c->py.out_fd, "r");
    return c->out ? 0 : -1;
}

static void finish(child_t *c)
{
    if (c->out) {
        fclose(c->out); /* closes py.out_fd */
        c->py.out_fd = -1;
    }
    python_child_end(&c->py);
}

static int unhex(const char *h, char *out, size_t max)
{
    size_t n = 0;
    while (h[0] && h[1] && n + 1 < max) {
        unsigned v;
        if (sscanf(h, "%2x", &v) != 1)
            return -1;
        out[n++] = (char)v;
        h += 2;
    }
    out[n] = 0;
    return (int)n;
}

/* Reads the script's thread lines until READY. Returns how many, or -1. */
static int read_expect(child_t *c, expect_t *e, int max)
{
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, c->out)) {
        if (strncmp(line, "READY", 5) == 0)
            return n;
        unsigned long long ident;
        int native;
        char hex[600];
        if (n < max && sscanf(line, "%llu %d %599s", &ident, &native, hex) == 3) {
            e[n].ident = ident;
            e[n].native = native;
            e[n].seen = 0;
            unhex(hex, e[n].name, sizeof e[n].name);
            n++;
        }
    }
    return -1;
}

static int task_exists(pid_t pid, int32_t tid)
{
    char path[96];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/task/%d", (int)pid, (int)tid);
    return tid > 0 && stat(path, &st) == 0;
}

static int open_target(pid_t pid, strtab_t *strings, pystate_target_t **t, const char *what)
{
    char err[512] = "";
    int rc = pystate_target_open(pid, strings, t, err, sizeof err);
    CHECK(rc == 0, "%s: open: %s (%s)", what, scry_err_name(rc), err);
    return rc;
}

static int only_tid(void *ctx, int32_t tid)
{
    return tid == *(const int32_t *)ctx;
}

static void test_named(const char *python, const char *what)
{
    child_t c = {0};
    expect_t e[MAX_EXPECT];
    if (start(python, script_named, &c) != 0) {
        CHECK(0, "%s: cannot start", what);
        return;
    }
    int n = read_expect(&c, e, MAX_EXPECT);
    CHECK(n == 5, "%s: script reported %d threads", what, n);
    strtab_t *strings = strtab_new();
    pystate_snapshot_t *snap = pystate_snapshot_new();
    pystate_target_t *t = NULL;
    if (n != 5 || !strings || !snap || open_target(c.pid, strings, &t, what) != 0)
        goto out;
    CHECK(strcmp(e[0].name, "MainThread") == 0, "%s: main is '%s'", what, e[0].name);
    CHECK(strcmp(e[1].name, "alpha") == 0, "%s: '%s'", what, e[1].name);
    CHECK(strcmp(e[2].name, "\xce\xb2"
                            "eta-\xe5\x90\x8d\xe5\x89\x8d") == 0,
          "%s: '%s'", what, e[2].name);
    CHECK(strncmp(e[3].name, "Thread-", 7) == 0, "%s: default name '%s'", what, e[3].name);
    CHECK(strcmp(e[4].name, "gamma") == 0, "%s: '%s'", what, e[4].name);

    /* 3.13+: the fields taken from _Py_DebugOffsets agree with the generated table. */
    const pystate_layout_t *L = pystate_target_layout(t);
    const pystate_layout_t *G = pystate_layout_for(L->major, L->minor);
    if (pystate_target_info(t)->layout_from_debug_offsets && G) {
#define SAME(f)                                                                                    \
    CHECK(L->f == G->f, "%s: " #f " %lld vs generated %lld", what, (long long)L->f, (long long)G->f)
        SAME(dict_keys);
        SAME(dict_values);
        SAME(long_tag);
        SAME(long_digits);
        SAME(type_flags);
        SAME(type_size);
        SAME(heaptype_cached_keys);
        SAME(dictkeys_indices);
        SAME(object_managed_dict_before);
        SAME(type_flag_inline_values);
#undef SAME
    }

    int rc = pystate_sample(t, snap);
    CHECK(rc == 0, "%s: sample: %s", what, scry_err_name(rc));
    size_t count = rc == 0 ? pystate_snapshot_count(snap) : 0;
    CHECK(count == 5, "%s: %zu threads sampled", what, count);
    for (size_t i = 0; i < count; i++) {
        const pystate_thread_t *th = pystate_snapshot_thread(snap, i);
        expect_t *x = NULL;
        for (int k = 0; k < n && !x; k++)
            if (e[k].ident == th->pthread_id)
                x = &e[k];
        CHECK(x != NULL, "%s: thread pthread 0x%llx not reported by the script", what,
              (unsigned long long)th->pthread_id);
        if (!x)
            continue;
        x->seen++;
        CHECK(task_exists(c.pid, th->tid), "%s: tid %d of '%s' not in /proc/%d/task", what,
              (int)th->tid, x->name, (int)c.pid);
        if (x->native)
            CHECK(th->tid == x->native, "%s: tid %d, native_id %d", what, (int)th->tid, x->native);
        CHECK(th->name && strcmp(th->name, x->name) == 0, "%s: name '%s', expected '%s'", what,
              th->name ? th->name : "(null)", x->name);
    }
    for (int k = 0; k < n; k++)
        CHECK(e[k].seen == 1, "%s: '%s' seen %d times", what, e[k].name, e[k].seen);
    /* The cached map serves the next sample (no refresh within a second). */
    uint64_t refreshed = t->names.refreshed_ns;
    rc = pystate_sample(t, snap);
    CHECK(rc == 0 && t->names.refreshed_ns == refreshed, "%s: second sample refreshed", what);
    for (size_t i = 0; rc == 0 && i < pystate_snapshot_count(snap); i++)
        CHECK(pystate_snapshot_thread(snap, i)->name != NULL, "%s: name lost", what);
    /* The thread filter: only alpha's frames are read; the others are listed, named and
     * marked skipped, without frames; without the filter every thread has its frames. */
    int32_t alpha = 0;
    for (size_t i = 0; rc == 0 && i < pystate_snapshot_count(snap); i++)
        if (pystate_snapshot_thread(snap, i)->pthread_id == e[1].ident)
            alpha = pystate_snapshot_thread(snap, i)->tid;
    CHECK(alpha > 0, "%s: alpha's tid", what);
    pystate_set_thread_filter(t, only_tid, &alpha);
    uint64_t skipped0 = pystate_target_stats(t).threads_skipped;
    rc = pystate_sample(t, snap);
    CHECK(rc == 0 && pystate_snapshot_count(snap) == 5, "%s: filtered sample", what);
    for (size_t i = 0; rc == 0 && i < pystate_snapshot_count(snap); i++) {
        const pystate_thread_t *th = pystate_snapshot_thread(snap, i);
        int is_alpha = th->tid == alpha;
        CHECK(is_alpha ? th->nframes > 0 && !th->skipped : th->nframes == 0 && th->skipped,
              "%s: filter: tid %d has %u frames, skipped %d", what, (int)th->tid, th->nframes,
              th->skipped);
        CHECK(th->name != NULL, "%s: filter: name lost", what);
    }
    CHECK(pystate_target_stats(t).threads_skipped == skipped0 + 4, "%s: 4 threads skipped", what);
    pystate_set_thread_filter(t, NULL, NULL);
    rc = pystate_sample(t, snap);
    for (size_t i = 0; rc == 0 && i < pystate_snapshot_count(snap); i++)
        CHECK(pystate_snapshot_thread(snap, i)->nframes > 0 &&
                  !pystate_snapshot_thread(snap, i)->skipped,
              "%s: unfiltered: thread %zu has no frames", what, i);
    printf("  %-22s ok: %s, %s, %s, %s, %s\n", what, e[0].name, e[1].name, e[2].name, e[3].name,
           e[4].name);
out:
    pystate_target_free(t);
    pystate_snapshot_free(snap);
    strtab_free(strings);
    finish(&c);
}

static void test_plain(const char *python, const char *what)
{
    child_t c = {0};
    char line[64] = "";
    if (start(python, script_plain, &c) != 0) {
        CHECK(0, "%s: cannot start", what);
        return;
    }
    int imported = fgets(line, sizeof line, c.out) && strncmp(line, "True", 4) == 0;
    while (fgets(line, sizeof line, c.out) && strncmp(line, "READY", 5) != 0)
        ;
    strtab_t *strings = strtab_new();
    pystate_snapshot_t *snap = pystate_snapshot_new();
    pystate_target_t *t = NULL;
    if (!strings || !snap || open_target(c.pid, strings, &t, what) != 0)
        goto out;
    int rc = pystate_sample(t, snap);
    CHECK(rc == 0 && pystate_snapshot_count(snap) == 1, "%s: plain sample: %s", what,
          scry_err_name(rc));
    pystate_name_map_t *map = calloc(1, sizeof *map);
    if (rc == 0 && map) {
        const pystate_thread_t *th = pystate_snapshot_thread(snap, 0);
        rc = pystate__thread_names(t, 0, map);
        CHECK(rc == SCRY_E_INVAL, "%s: interp 0 gives %s", what, scry_err_name(rc));
        if (imported)
            CHECK(th->name && strcmp(th->name, "MainThread") == 0, "%s: main '%s'", what,
                  th->name ? th->name : "(null)");
        else
            CHECK(th->name == NULL, "%s: a name without threading: '%s'", what, th->name);
    }
    free(map);
out:
    pystate_target_free(t);
    pystate_snapshot_free(snap);
    strtab_free(strings);
    finish(&c);
}

/* Finds the interpreter address of the first thread via a sample (retried: a sample of a
 * churning target may find the thread list torn). */
static raddr_t first_interp(pystate_target_t *t, pystate_snapshot_t *snap)
{
    const pystate_layout_t *L = pystate_target_layout(t);
    raddr_t interp = 0;
    for (int i = 0; i < 50 && !interp; i++) {
        if (pystate_sample(t, snap) != 0 || pystate_snapshot_count(snap) == 0)
            continue;
        rmem_read_u64(pystate_target_mem(t),
                      pystate_snapshot_thread(snap, 0)->tstate + (uint64_t)L->tstate_interp,
                      &interp);
    }
    return interp;
}

static void test_many(const char *python, const char *what)
{
    child_t c = {0};
    expect_t *e = calloc(MAX_EXPECT, sizeof *e);
    pystate_name_map_t *map = calloc(1, sizeof *map);
    strtab_t *strings = strtab_new();
    pystate_snapshot_t *snap = pystate_snapshot_new();
    pystate_target_t *t = NULL;
    if (!e || !map || !strings || !snap || start(python, script_many, &c) != 0) {
        CHECK(0, "%s: cannot start", what);
        goto out;
    }
    int n = read_expect(&c, e, MAX_EXPECT);
    CHECK(n == 101, "%s: %d threads", what, n);
    if (n != 101 || open_target(c.pid, strings, &t, what) != 0)
        goto out;
    raddr_t interp = first_interp(t, snap);
    CHECK(interp != 0, "%s: no interpreter", what);
    if (!interp)
        goto out;
    rmem_stats_t s0 = rmem_stats(pystate_target_mem(t));
    enum { ROUNDS = 51 };
    uint64_t took[ROUNDS];
    int rc = 0;
    for (int r = 0; r < ROUNDS; r++) {
        map->count = 0;
        uint64_t a = scry_now_ns();
        rc = pystate__thread_names(t, interp, map);
        took[r] = scry_now_ns() - a;
        if (getenv("NAMES_TRACE"))
            fprintf(stderr, "round %d: %.1f us\n", r, took[r] / 1e3);
        if (rc != 0)
            break;
    }
    rmem_stats_t s1 = rmem_stats(pystate_target_mem(t));
    CHECK(rc == 0, "%s: refresh: %s", what, scry_err_name(rc));
    CHECK(map->count == 101, "%s: %zu names", what, map->count);
    if (rc != 0 || map->count != 101)
        goto out;
    qsort(took, ROUNDS, sizeof took[0], cmp_u64);
    for (int k = 0; k < n; k++) {
        const char *nm = pystate__name_map_find(map, e[k].ident);
        CHECK(nm && strcmp(nm, e[k].name) == 0, "%s: '%s' for '%s'", what, nm ? nm : "(null)",
              e[k].name);
    }
    printf("  %-22s 101 threads: names refresh %.1f us median, %.1f us best, %.1f us worst, "
           "%.1f syscalls, %.0f bytes\n",
           what, took[ROUNDS / 2] / 1e3, took[0] / 1e3, took[ROUNDS - 1] / 1e3,
           (double)(s1.syscalls - s0.syscalls) / ROUNDS, (double)(s1.bytes - s0.bytes) / ROUNDS);
out:
    pystate_target_free(t);
    pystate_snapshot_free(snap);
    strtab_free(strings);
    free(map);
    free(e);
    if (c.pid)
        finish(&c);
}

static int churn_name_ok(const char *n)
{
    char *end;
    if (strcmp(n, "MainThread") == 0)
        return 1;
    if (n[0] == 'r' && n[1] >= '0' && n[1] <= '6' && !n[2])
        return 1;
    if (strncmp(n, "churn-", 6) != 0 || !n[6])
        return 0;
    long v = strtol(n + 6, &end, 10);
    return !*end && v >= 0 && v < 20;
}

/* Refreshes for half a second against a churning target: never a crash or an error other
 * than a torn chain, and (almost) only names the script gives. */
static void test_churn(const char *python, const char *what)
{
    child_t c = {0};
    char line[64];
    pystate_name_map_t *map = calloc(1, sizeof *map);
    strtab_t *strings = strtab_new();
    pystate_snapshot_t *snap = pystate_snapshot_new();
    pystate_target_t *t = NULL;
    if (!map || !strings || !snap || start(python, script_churn, &c) != 0) {
        CHECK(0, "%s: cannot start", what);
        goto out;
    }
    while (fgets(line, sizeof line, c.out) && strncmp(line, "READY", 5) != 0)
        ;
    if (open_target(c.pid, strings, &t, what) != 0)
        goto out;
    raddr_t interp = first_interp(t, snap);
    CHECK(interp != 0, "%s: no interpreter", what);
    long calls = 0, ok = 0, names = 0, bad = 0, mains = 0;
    int first_err = 0;
    uint64_t end = scry_now_ns() + 500000000ull;
    while (interp && scry_now_ns() < end) {
        map->count = 0;
        int rc = pystate__thread_names(t, interp, map);
        calls++;
        CHECK(rc == 0 || rc == SCRY_E_CORRUPT || rc == SCRY_E_NOTFOUND, "%s: churn: %s", what,
              scry_err_name(rc));
        ok += rc == 0;
        if (rc && !first_err)
            first_err = rc;
        for (size_t i = 0; i < map->count; i++) {
            names++;
            if (!churn_name_ok(map->items[i].name))
                bad++;
            if (strcmp(map->items[i].name, "MainThread") == 0)
                mains++;
        }
    }
    CHECK(ok * 10 >= calls * 9, "%s: %ld of %ld refreshes succeeded (first error %s)", what, ok,
          calls, first_err ? scry_err_name(first_err) : "none");
    CHECK(mains * 10 >= calls * 9, "%s: MainThread in %ld of %ld", what, mains, calls);
    CHECK(bad * 100 <= names, "%s: %ld unexpected names of %ld", what, bad, names);
    printf("  %-22s churn: %ld refreshes, %ld ok, %ld names, %ld unexpected\n", what, calls, ok,
           names, bad);
out:
    pystate_target_free(t);
    pystate_snapshot_free(snap);
    strtab_free(strings);
    free(map);
    if (c.pid)
        finish(&c);
}

/* The newest pyenv 3.MINOR.x, or "" when none. */
static void pyenv_python(int minor, char *out, size_t max)
{
    const char *root = "/root/.pyenv/versions";
    DIR *d = opendir(root);
    char prefix[16];
    int best = -1;
    out[0] = 0;
    snprintf(prefix, sizeof prefix, "3.%d.", minor);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
            continue;
        char *end;
        long patch = strtol(de->d_name + strlen(prefix), &end, 10);
        if (*end || patch <= best)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s/bin/python3.%d", root, de->d_name, minor);
        if (access(path, X_OK) == 0) {
            best = (int)patch;
            snprintf(out, max, "%s", path);
        }
    }
    if (d)
        closedir(d);
}

static void put64(uint8_t *buf, size_t off, uint64_t v)
{
    memcpy(buf + off, &v, 8);
}

/* glibc's struct pthread as x86_64 glibc 2.36 lays it out: pointers (tcb, dtv, self) whose
 * upper halves are numbers in the range of thread ids come before 'tid' at 0x2d0. */
static void test_tid_offset(void)
{
    uint8_t buf[1024] = {0};
    pid_t tids[] = {22096, 22097, 22100, 32558};
    put64(buf, 0, 0x00007f2e12345640ull);  /* tcb: upper half 32558 */
    put64(buf, 8, 0x00005654129a02c0ull);  /* dtv on the heap: upper half 22100 */
    put64(buf, 16, 0x00007f2e12345640ull); /* self */
    put64(buf, 0x2d0, 22097);              /* tid, then pid_ununsed = 0 */
    int64_t off = pystate__tid_offset_learn(buf, sizeof buf, tids, 4);
    CHECK(off == 0x2d0, "tid offset %lld, expected 0x2d0 (pointer halves skipped)", (long long)off);
    /* glibc before 2.25 kept the process id beside the tid. */
    put64(buf, 0x2d0, (uint64_t)22096 << 32 | 22097);
    off = pystate__tid_offset_learn(buf, sizeof buf, tids, 4);
    CHECK(off == 0x2d0, "old glibc: tid offset %lld, expected 0x2d0", (long long)off);
    /* A tid in the upper half of a word whose lower half is zero is still a tid. */
    memset(buf, 0, sizeof buf);
    put64(buf, 0x2d0, (uint64_t)22097 << 32);
    off = pystate__tid_offset_learn(buf, sizeof buf, tids, 4);
    CHECK(off == 0x2d4, "tid offset %lld, expected 0x2d4", (long long)off);
    memset(buf, 0, sizeof buf);
    CHECK(pystate__tid_offset_learn(buf, sizeof buf, tids, 4) == -1, "no tid: offset found");
}

int main(void)
{
    test_tid_offset();
    signal(SIGPIPE, SIG_IGN);
    int ran = 0;
    for (int minor = 6; minor <= 13; minor++) {
        char py[600], what[32];
        pyenv_python(minor, py, sizeof py);
        snprintf(what, sizeof what, "pyenv 3.%d", minor);
        if (!py[0]) {
            printf("  %-22s skipped: not installed\n", what);
            continue;
        }
        test_named(py, what);
        test_plain(py, what);
        test_many(py, what);
        test_churn(py, what);
        ran++;
    }
    if (access("/usr/bin/python3.11", X_OK) == 0) {
        test_named("/usr/bin/python3.11", "debian 3.11");
        test_plain("/usr/bin/python3.11", "debian 3.11");
        test_many("/usr/bin/python3.11", "debian 3.11");
        test_churn("/usr/bin/python3.11", "debian 3.11");
        ran++;
    } else {
        printf("  %-22s skipped: not installed\n", "debian 3.11");
    }
    printf("test_pystate_threadnames: %d interpreters\n", ran);
    return check_summary("test_pystate_threadnames");
}
