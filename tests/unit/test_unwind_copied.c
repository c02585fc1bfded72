/* test_unwind_copied.c - native stacks unwound from the kernel's copies (perf samples with
 * PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER), with no thread ever stopped.
 *
 * A real interpreter hashes with hashlib (libcrypto) in one thread and compresses with
 * zlib in another. For each thread's samples in user mode, unwind_copied must give a stack
 * that has the native leaf (a sha256 function / deflate in libz), an eval-loop frame
 * rootward, and ends at the thread's root (start_thread/clone or main/_start) in at least
 * 80% of samples; no thread of the target is ever in a ptrace stop. unwind_describe_ip
 * names the leaf the same way the unwinder's first frame does, and unwind_ip_in_python
 * agrees with its in_python.
 */
#include <dirent.h>

#include "perfev.h"
#include "test_unwind_live.h"
#include "scry_time.h"

#define MAXF 256

static const char script[] = "import hashlib, os, threading, time, zlib\n"
                             "buf = os.urandom(1 << 22)\n"
                             "ids = {}\n"
                             "def hasher():\n"
                             "    ids['h'] = threading.get_native_id()\n"
                             "    while True:\n"
                             "        hashlib.sha256(buf).digest()\n"
                             "def packer():\n"
                             "    ids['z'] = threading.get_native_id()\n"
                             "    while True:\n"
                             "        zlib.compress(buf, 6)\n"
                             "threading.Thread(target=hasher, daemon=True).start()\n"
                             "threading.Thread(target=packer, daemon=True).start()\n"
                             "while len(ids) < 2:\n"
                             "    time.sleep(0.01)\n"
                             "print(os.getpid(), ids['h'], ids['z'], flush=True)\n"
                             "while True:\n"
                             "    time.sleep(1)\n";

typedef struct acc {
    unwind_t *u;
    pid_t h, z;
    int n[2], leaf[2], eval[2], root[2], same_leaf[2], same_kind[2];
    uint64_t max_ns;
    int printed[2];
} acc_t;

static int is_root(const unwind_frame_t *f)
{
    return f->symbol && (strstr(f->symbol, "clone") || strstr(f->symbol, "start_thread") ||
                         strcmp(f->symbol, "_start") == 0 || strstr(f->symbol, "libc_start"));
}

static void on_sample(const perfev_sample_t *s, void *ctx)
{
    acc_t *a = ctx;
    int k = s->tid == a->h ? 0 : s->tid == a->z ? 1 : -1;
    if (k < 0 || s->kernel || !s->has_regs || !s->stack)
        return;
    const uint64_t *r = s->regs;
    unwind_regs_t regs = {r[PERFEV_REG_AX],  r[PERFEV_REG_BX],  r[PERFEV_REG_CX],
                          r[PERFEV_REG_DX],  r[PERFEV_REG_SI],  r[PERFEV_REG_DI],
                          r[PERFEV_REG_BP],  r[PERFEV_REG_SP],  r[PERFEV_REG_IP],
                          r[PERFEV_REG_R8],  r[PERFEV_REG_R9],  r[PERFEV_REG_R10],
                          r[PERFEV_REG_R11], r[PERFEV_REG_R12], r[PERFEV_REG_R13],
                          r[PERFEV_REG_R14], r[PERFEV_REG_R15]};
    static unwind_frame_t f[MAXF];
    size_t n = 0;
    uint64_t t0 = scry_now_ns();
    CHECK(unwind_copied(a->u, s->tid, &regs, s->stack, s->stack_len, f, MAXF, &n) == 0);
    uint64_t dt = scry_now_ns() - t0;
    if (a->n[k] > 5 && dt > a->max_ns)
        a->max_ns = dt;
    a->n[k]++;
    if (n == 0)
        return;
    int leaf =
        k == 0 ? (find_frame(f, n, "sha256", NULL) >= 0 || find_frame(f, n, "SHA256", NULL) >= 0)
               : find_frame(f, n, NULL, "libz") >= 0;
    int ev = -1;
    for (size_t i = 0; i < n; i++)
        if (f[i].is_eval == UNWIND_EVAL_DEFAULT) {
            ev = (int)i;
            break;
        }
    a->leaf[k] += leaf;
    a->eval[k] += ev > 0;
    a->root[k] += is_root(&f[n - 1]);
    unwind_frame_t d;
    CHECK(unwind_describe_ip(a->u, s->ip, &d) == 0);
    a->same_leaf[k] += d.symbol == f[0].symbol && d.lib == f[0].lib;
    a->same_kind[k] += unwind_ip_in_python(a->u, s->ip) == d.in_python;
    if (!a->printed[k] && leaf && ev > 0) {
        a->printed[k] = 1;
        print_stack(k == 0 ? "hashlib thread (from a copy)" : "zlib thread (from a copy)", f, n);
    }
}

static int any_stopped(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    int stopped = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9') {
            char st = thread_state(pid, (pid_t)atoi(e->d_name));
            stopped += st == 't' || st == 'T';
        }
    if (d)
        closedir(d);
    return stopped;
}

static void run(const char *py)
{
    child_t c = {.pid = -1, .out = -1};
    if (spawn_python(py, script, NULL, &c) != 0)
        return;
    char line[256];
    int pid = 0, h = 0, z = 0;
    if (read_line(&c, line, sizeof line, 20000) < 0 ||
        sscanf(line, "%d %d %d", &pid, &h, &z) != 3) {
        fprintf(stderr, "%s: target did not start\n", py);
        check_failures++;
        stop_child(&c);
        return;
    }
    acc_t a = {.h = h, .z = z};
    a.u = unwind_new(pid);
    perfev_t *p = NULL;
    perfev_opts_t o = {.pid = pid, .rate_hz = 200, .stack_bytes = 16384};
    CHECK(a.u && perfev_open(&o, &p) == 0);
    pid_t tids[2] = {h, z};
    CHECK(perfev_set_threads(p, tids, 2, NULL, NULL) == 2);
    int stopped = 0;
    for (int i = 0; i < 100; i++) {
        sleep_ms(10);
        perfev_read(p, on_sample, &a);
        stopped += any_stopped(pid);
    }
    unwind_stats_t st = unwind_stats(a.u);
    fprintf(stderr,
            "%s: hashlib %d samples (leaf %d, eval %d, root %d), zlib %d (leaf %d, eval %d, "
            "root %d); copies %llu short %llu; slowest unwind %.1f us; stopped seen %d\n",
            py, a.n[0], a.leaf[0], a.eval[0], a.root[0], a.n[1], a.leaf[1], a.eval[1], a.root[1],
            (unsigned long long)st.copies, (unsigned long long)st.copy_short,
            (double)a.max_ns / 1e3, stopped);
    for (int k = 0; k < 2; k++) {
        CHECK(a.n[k] >= 10);
        CHECK(a.leaf[k] * 10 >= a.n[k] * 8);
        CHECK(a.eval[k] * 10 >= a.n[k] * 8);
        CHECK(a.root[k] * 10 >= a.n[k] * 8);
        CHECK(a.same_leaf[k] * 10 >= a.n[k] * 9);
        CHECK(a.same_kind[k] == a.n[k]); /* the record's class without naming its function */
    }
    CHECK(stopped == 0);
    perfev_free(p);
    unwind_free(a.u);
    stop_child(&c);
}

int main(void)
{
    if (perfev_probe(0, 0) != 0) {
        printf("SKIP: perf events refused here\n");
        return 0;
    }
    const char *pys[] = {PYENV "3.12.1/bin/python3.12", PYENV "3.8.18/bin/python3.8",
                         "/usr/bin/python3.11"};
    for (size_t i = 0; i < sizeof pys / sizeof *pys; i++)
        if (file_exists(pys[i]))
            run(pys[i]);
    return check_summary("test_unwind_copied");
}
