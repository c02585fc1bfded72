/* test_unwind_native.c - native stacks of real interpreters (issue 3, --native).
 *
 * (a) a C extension burning CPU in scry_native_burn: the stack shows it above
 *     _PyEval_EvalFrameDefault (3.11.7, then 3.8, 3.12, 3.13 when installed);
 * (b) hashlib.sha256 over a big buffer: a sha256 symbol from libcrypto;
 * (c) time.sleep: a syscall-ish leaf in libc, thread state S;
 * (d) Debian's static, stripped /usr/bin/python3.11 running numpy: numpy's symbols.
 */
#include "test_unwind_live.h"

#define MAXF 256

static const char burn_script[] = "import os, sys, scryext\n"
                                  "print(os.getpid(), flush=True)\n"
                                  "def f():\n"
                                  "    scryext.burn(30.0)\n"
                                  "f()\n";

/* Samples thread TID of PID up to TRIES times until PRED finds what it wants. */
typedef int (*pred_fn)(const unwind_frame_t *f, size_t n);

static int sample_until(pid_t pid, pid_t tid, pred_fn pred, const char *title)
{
    unwind_t *u = unwind_new(pid);
    CHECK(u != NULL);
    if (!u)
        return 0;
    static unwind_frame_t f[MAXF];
    size_t n = 0;
    int ok = 0;
    for (int t = 0; t < 40 && !ok; t++) {
        int rc = sample_thread(u, tid, f, MAXF, &n);
        if (rc != 0) {
            fprintf(stderr, "sample: %d\n", rc);
            sleep_ms(20);
            continue;
        }
        ok = pred(f, n);
        if (!ok)
            sleep_ms(25);
    }
    print_stack(title, f, n);
    unwind_stats_t st = unwind_stats(u);
    fprintf(stderr,
            "  stats: samples %llu frames %llu tables %llu fallback %llu pages %llu/%llu "
            "loops %llu errors %llu\n",
            (unsigned long long)st.samples, (unsigned long long)st.frames,
            (unsigned long long)st.tables, (unsigned long long)st.table_fallback,
            (unsigned long long)st.page_hits, (unsigned long long)st.page_misses,
            (unsigned long long)st.loops, (unsigned long long)st.step_errors);
    unwind_free(u);
    return ok;
}

static int pred_burn(const unwind_frame_t *f, size_t n)
{
    int b = find_frame(f, n, "scry_native_burn", "scryext");
    int e = -1;
    for (size_t i = 0; i < n; i++)
        if (f[i].is_eval == UNWIND_EVAL_DEFAULT) {
            e = (int)i;
            break;
        }
    /* ... and the stack reaches main (a complete unwind). */
    return b >= 0 && e > b && find_frame(f, n, "__libc_start_main", NULL) > e;
}

/* Runs PYTHON -c SCRIPT (PYTHONPATH=EXTDIR) and checks that its main thread, sampled
 * within sample_until's attempts, gives a stack PRED accepts. */
static void check_script(const char *python, const char *script, const char *extdir, int timeout_ms,
                         int settle_ms, int (*pred)(const unwind_frame_t *, size_t),
                         const char *title)
{
    child_t c;
    start_target(&c, python, script, extdir, timeout_ms, settle_ms);
    int ok = sample_until(c.pid, c.pid, pred, title);
    CHECK(ok, "%s", title);
    stop_child(&c);
}

static void test_burn(const char *ver, const char *minor_dir)
{
    char python[256], inc[256], dir[256];
    snprintf(python, sizeof python, PYENV "%s/bin/python%s", ver, minor_dir);
    snprintf(inc, sizeof inc, PYENV "%s/include/python%s", ver, minor_dir);
    snprintf(dir, sizeof dir, "/tmp/scry-test-unwind-%d/%s", (int)getpid(), ver);
    if (!file_exists(python) || !file_exists(inc)) {
        fprintf(stderr, "skip: %s not installed\n", python);
        return;
    }
    CHECK(build_ext(inc, dir) == 0);
    char title[128];
    snprintf(title, sizeof title, "(a) scryext.burn on %s", ver);
    check_script(python, burn_script, dir, 10000, 100, pred_burn, title);
}

static int pred_sha(const unwind_frame_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (f[i].symbol && f[i].lib && strstr(f[i].lib, "libcrypto") &&
            (strstr(f[i].symbol, "sha256") || strstr(f[i].symbol, "SHA256")))
            return find_frame(f, n, "__libc_start_main", NULL) > (int)i;
    return 0;
}

static int pred_sleep(const unwind_frame_t *f, size_t n)
{
    return n > 3 && f[0].lib && strstr(f[0].lib, "libc") &&
           find_frame(f, n, "__libc_start_main", NULL) > 0;
}

static void test_sleep(void)
{
    const char *python = PYENV "3.11.7/bin/python3.11";
    static const char script[] = "import os, time\n"
                                 "print(os.getpid(), flush=True)\n"
                                 "time.sleep(60)\n";
    child_t c;
    start_target(&c, python, script, NULL, 10000, 200);
    char st = thread_state(c.pid, c.pid);
    fprintf(stderr, "(c) state before stop: %c\n", st);
    CHECK(st == 'S');
    int ok = sample_until(c.pid, c.pid, pred_sleep, "(c) time.sleep on 3.11.7");
    CHECK(ok);
    /* Back to its sleep, not left stopped (after the detach it restarts clock_nanosleep,
     * runnable for a moment: on a loaded machine that moment can be long). */
    for (int i = 0; i < 200; i++) {
        st = thread_state(c.pid, c.pid);
        if (st == 'S')
            break;
        sleep_ms(10);
    }
    CHECK(st == 'S');
    stop_child(&c);
}

static int pred_numpy(const unwind_frame_t *f, size_t n)
{
    int blas = -1, np = -1;
    for (size_t i = 0; i < n; i++) {
        if (blas < 0 && f[i].symbol && f[i].lib && strstr(f[i].lib, "blas") &&
            strstr(f[i].symbol, "gemm"))
            blas = (int)i;
        if (np < 0 && f[i].lib && strstr(f[i].lib, "_multiarray_umath"))
            np = (int)i;
    }
    int eval = find_frame(f, n, "_PyEval_EvalFrameDefault", "python3.11");
    return blas >= 0 && np > blas && eval > np &&
           find_frame(f, n, "__libc_start_main", NULL) > eval;
}

/* Targets whose main thread is sampled until its stack shows what PRED looks for. */
static const struct script_case {
    const char *python;
    int optional; /* skipped when PYTHON is missing (else a failed check) */
    const char *script;
    int timeout_ms, settle_ms;
    int (*pred)(const unwind_frame_t *, size_t);
    const char *title;
} script_cases[] = {
    {PYENV "3.11.7/bin/python3.11", 0,
     "import os, hashlib\n"
     "buf = b'x' * (64 << 20)\n"
     "print(os.getpid(), flush=True)\n"
     "while True:\n"
     "    hashlib.sha256(buf).digest()\n",
     10000, 400, pred_sha, "(b) hashlib.sha256 on 3.11.7"},
    /* A matrix product: numpy's own code is stripped to its exports, but the BLAS it
     * calls (dgemm_) is a symbol, and the numpy frames are named by their library. */
    {"/usr/bin/python3.11", 1,
     "import os, numpy as np\n"
     "a = np.random.rand(500, 500)\n"
     "print(os.getpid(), flush=True)\n"
     "while True:\n"
     "    np.dot(a, a)\n",
     20000, 300, pred_numpy, "(d) numpy on /usr/bin/python3.11"},
};

static void test_scripts(void)
{
    for (size_t i = 0; i < sizeof script_cases / sizeof script_cases[0]; i++) {
        const struct script_case *k = &script_cases[i];
        if (k->optional && !file_exists(k->python)) {
            fprintf(stderr, "skip: no %s\n", k->python);
            continue;
        }
        check_script(k->python, k->script, NULL, k->timeout_ms, k->settle_ms, k->pred, k->title);
    }
}

int main(void)
{
    if (geteuid() != 0)
        fprintf(stderr, "note: not root; ptrace may be refused\n");
    test_burn("3.11.7", "3.11");
    test_sleep();
    test_scripts();
    test_burn("3.8.18", "3.8");
    test_burn("3.12.1", "3.12");
    test_burn("3.13.0", "3.13");
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/scry-test-unwind-%d", (int)getpid());
    check_rmtree(dir);
    return check_summary("test_unwind_native");
}
