/* test_inject_native.c - exact restoration, checked with tiny native targets built at test
 * time (the Python tests cover real interpreters; these look at what Python cannot show):
 * - a thread holding a pattern in YMM8 (upper halves included) and in RBX/R12..R15 across a
 *   tight loop, borrowed (1) normally, (2) with the tracer SIGKILLed mid-call (the
 *   trampoline's own XRSTOR and register reload), (3) with inject_abort_all;
 * - a thread in a relative nanosleep (restarted through restart_syscall, -ERESTART_RESTARTBLOCK)
 *   must neither fail with EINTR nor sleep longer than asked; the same under a seccomp
 *   filter that refuses syscall -1 with ENOSYS, as Docker's and podman's profiles do (a
 *   thread given back at the marker's syscall-entry stop got ENOSYS from its sleep). */
#include "inject_test_util.h"

#include <sys/syscall.h>
#include <sys/time.h>

static const char regs_src[] =
    "#include <stdio.h>\n"
    "#include <time.h>\n"
    "static const unsigned long long pat[4] __attribute__((aligned(32))) =\n"
    "    {0x0123456789abcdefull, 0xfedcba9876543210ull, 0x1111222233334444ull, "
    "0x5555666677778888ull};\n"
    "static int spin(long n) {\n"
    "    int bad = 0;\n"
    "    __asm__ volatile(\n"
    "        \"vmovdqa (%[p]), %%ymm8\\n\"\n"
    "        \"mov $0x5151515151515151, %%rbx\\n mov %%rbx, %%r12\\n mov %%rbx, %%r13\\n\"\n"
    "        \"mov %%rbx, %%r14\\n mov %%rbx, %%r15\\n\"\n"
    "        \"1: vpxor (%[p]), %%ymm8, %%ymm9\\n vptest %%ymm9, %%ymm9\\n jnz 2f\\n\"\n"
    "        \"mov %%rbx, %%rax\\n xor %%r12, %%rax\\n xor %%r13, %%rax\\n\"\n"
    "        \"xor %%r14, %%rax\\n xor %%r15, %%rax\\n\"\n" /* rbx^r12^r13^r14^r15 == rbx */
    "        \"cmp %%rbx, %%rax\\n jne 2f\\n\"\n"
    "        \"dec %[n]\\n jnz 1b\\n jmp 3f\\n\"\n"
    "        \"2: movl $1, %[bad]\\n 3: vzeroupper\\n\"\n"
    "        : [n] \"+r\"(n), [bad] \"+m\"(bad)\n"
    "        : [p] \"r\"(pat)\n"
    "        : \"rax\", \"rbx\", \"r12\", \"r13\", \"r14\", \"r15\", \"xmm8\", \"xmm9\", \"cc\", "
    "\"memory\");\n"
    "    return bad;\n"
    "}\n"
    "int main(void) {\n"
    "    struct timespec a, b;\n"
    "    clock_gettime(CLOCK_MONOTONIC, &a);\n"
    "    printf(\"ready\\n\"); fflush(stdout);\n"
    "    int bad = 0; long rounds = 0;\n"
    "    do { bad |= spin(2000000); rounds++; clock_gettime(CLOCK_MONOTONIC, &b); }\n"
    "    while (b.tv_sec - a.tv_sec + (b.tv_nsec - a.tv_nsec) / 1e9 < 2.0);\n"
    "    printf(\"%s %ld\\n\", bad ? \"CORRUPTED\" : \"intact\", rounds);\n"
    "    return bad;\n"
    "}\n";

/* The rest of main() of sleep_src's program: a 1.5 s nanosleep, its result and duration. */
#define SLEEP_BODY                                                                                 \
    "    struct timespec a, b, d = {1, 500000000};\n"                                              \
    "    printf(\"ready\\n\"); fflush(stdout);\n"                                                  \
    "    clock_gettime(CLOCK_MONOTONIC, &a);\n"                                                    \
    "    int r = nanosleep(&d, NULL);\n"                                                           \
    "    int e = errno;\n"                                                                         \
    "    clock_gettime(CLOCK_MONOTONIC, &b);\n"                                                    \
    "    printf(\"rc %d errno %d slept %.3f\\n\", r, r ? e : 0,\n"                                 \
    "           b.tv_sec - a.tv_sec + (b.tv_nsec - a.tv_nsec) / 1e9);\n"                           \
    "    return r != 0;\n"                                                                         \
    "}\n"

static const char sleep_src[] = "#include <errno.h>\n"
                                "#include <stdio.h>\n"
                                "#include <string.h>\n"
                                "#include <time.h>\n"
                                "int main(void) {\n" SLEEP_BODY;

/* sleep_src's program under a seccomp filter: syscall -1 (what a tracer's skipped syscall
 * becomes) refused with ENOSYS, everything else allowed. */
static const char seccomp_sleep_src[] =
    "#include <errno.h>\n"
    "#include <linux/filter.h>\n"
    "#include <linux/seccomp.h>\n"
    "#include <stddef.h>\n"
    "#include <stdio.h>\n"
    "#include <sys/prctl.h>\n"
    "#include <time.h>\n"
    "int main(void) {\n"
    "    struct sock_filter f[] = {\n"
    "        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),\n"
    "        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu, 0, 1),\n"
    "        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),\n"
    "        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};\n"
    "    struct sock_fprog prog = {sizeof f / sizeof f[0], f};\n"
    "    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, "
    "SECCOMP_MODE_FILTER, &prog))\n"
    "        return 3;\n" SLEEP_BODY;

static int build(const char *src, const char *name, char *exe, size_t size)
{
    char c[256], cmd[1024];
    t_path(c, sizeof c, "prog.c");
    t_path(exe, size, name);
    FILE *f = fopen(c, "w");
    if (!f)
        return -1;
    fputs(src, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cc -O1 -mavx2 -o %s %s", exe, c);
    return system(cmd) == 0 ? 0 : -1;
}

/* MODE 0: normal; 1: tracer killed mid-call; 2: inject_abort_all mid-call. */
static void regs_case(const char *exe, int mode)
{
    static const char *const names[] = {"normal", "tracer killed", "abort"};
    t_proc_t p;
    t_start_ready(&p, exe, "", 100000); /* a C program ignores "-u -c" */
    t_unlink("slept");
    inject_report_t rep;
    if (mode == 1) {
        t_kill_tracer_in_call(p.pid, 400, 150000);
    } else {
        inject_opts_t o = {.timeout_ms = 5000};
        inject_session_t *s = NULL;
        int rc = inject_session_open(p.pid, &o, &rep, &s);
        CHECK_RC(rc, 0, rep);
        raddr_t fn = 0;
        if (s) {
            rc = inject_session_dlopen(s, t_lib, NULL);
            CHECK_RC(rc, 0, rep);
            rc = inject_session_symbol(s, t_lib, "scry_test_sleep_ms", &fn);
            CHECK_RC(rc, 0, rep);
            CHECK(rep.in_syscall == 0, "spinning thread");
            struct sigaction old;
            if (mode == 2)
                t_abort_after(&old, 100000);
            uint64_t arg = 300;
            rc = inject_session_call(s, fn, &arg, 1, NULL);
            if (mode == 2) {
                sigaction(SIGALRM, &old, NULL);
                inject_abort_clear();
            }
            CHECK_RC(rc, mode == 2 ? SCRY_E_AGAIN : 0, rep);
            CHECK(inject_session_close(s) == 0, "close");
        }
    }
    int st = t_finish(&p, 20);
    fprintf(stderr, "  registers, %s: %s", names[mode], p.buf + 6);
    CHECK(st == 0 && strstr(p.buf, "intact"), "%s: exit %d: %s", names[mode], st, p.buf);
    if (mode)
        usleep(300000);
    CHECK(t_file_exists("slept"), "%s: the call completed", names[mode]);
}

static void restart_block_case(const char *exe, const char *what)
{
    t_proc_t p;
    t_start_ready(&p, exe, "", 300000); /* a C program ignores "-u -c" */
    inject_report_t rep;
    uint64_t h = 0;
    int rc = inject_call_dlopen(p.pid, t_lib, &h, &rep);
    CHECK_RC(rc, 0, rep);
    CHECK(rep.in_syscall &&
              (rep.syscall_nr == SYS_nanosleep || rep.syscall_nr == SYS_clock_nanosleep),
          "in nanosleep: %d %ld", rep.in_syscall, rep.syscall_nr);
    int st = t_finish(&p, 10);
    double slept = 0;
    int r = -1, e = -1;
    const char *s = strstr(p.buf, "rc ");
    CHECK(s && sscanf(s, "rc %d errno %d slept %lf", &r, &e, &slept) == 3, "%s", p.buf);
    fprintf(stderr, "  %s: rc %d errno %d slept %.3f s (asked 1.5)\n", what, r, e, slept);
    CHECK(st == 0 && r == 0, "%s: nanosleep was not restarted: %s", what, p.buf);
    CHECK(slept >= 1.49 && slept < 1.7, "%s: slept %.3f", what, slept);
}

int main(void)
{
    if (t_setup("native") != 0) {
        fprintf(stderr, "cannot build the test library\n");
        return 1;
    }
    char regs_exe[256], sleep_exe[256], seccomp_exe[256];
    if (build(regs_src, "regs", regs_exe, sizeof regs_exe) ||
        build(sleep_src, "sleeper", sleep_exe, sizeof sleep_exe) ||
        build(seccomp_sleep_src, "seccomp-sleeper", seccomp_exe, sizeof seccomp_exe)) {
        fprintf(stderr, "cannot build the native targets\n");
        return 1;
    }
    regs_case(regs_exe, 0);
    regs_case(regs_exe, 1);
    regs_case(regs_exe, 2);
    restart_block_case(sleep_exe, "relative nanosleep");
    restart_block_case(seccomp_exe, "relative nanosleep under seccomp");
    t_cleanup();
    return t_summary("test_inject_native");
}
