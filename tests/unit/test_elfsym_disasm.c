/* test_elfsym_disasm.c - references found in hand-assembled code and in the real
 * interpreters (3.6's interp_head, _PyRuntime in Debian's non-PIE python3.11), and the
 * syscall check on bytes and on a live child blocked in a system call. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elfsym.h"
#include "scry_err.h"
#include "check.h"

static void test_bytes(void)
{
    /* At 0x1000:
     *   mov rax, [rip+0x10]      48 8b 05 10 00 00 00   -> 0x1007 + 0x10 = 0x1017
     *   lea rdi, [rip-0x20]      48 8d 3d e0 ff ff ff   -> 0x100e - 0x20 = 0xfee
     *   mov eax, [0x600000]      8b 04 25 00 00 60 00   (absolute)
     *   mov edx, 0x6d26fe        ba fe 26 6d 00         (immediate address)
     *   mov ecx, 5               b9 05 00 00 00         (small constant: ignored)
     *   mov [rip+0x8], rax       48 89 05 08 00 00 00   (store)
     *   ret                      c3
     *   mov rax, [rip+0x99]      48 8b 05 99 00 00 00   (after ret) */
    static const uint8_t code[] = {0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00, 0x48, 0x8d, 0x3d,
                                   0xe0, 0xff, 0xff, 0xff, 0x8b, 0x04, 0x25, 0x00, 0x00, 0x60,
                                   0x00, 0xba, 0xfe, 0x26, 0x6d, 0x00, 0xb9, 0x05, 0x00, 0x00,
                                   0x00, 0x48, 0x89, 0x05, 0x08, 0x00, 0x00, 0x00, 0xc3, 0x48,
                                   0x8b, 0x05, 0x99, 0x00, 0x00, 0x00};
    elfsym_ref_t r[16];
    int n = elfsym_disasm_refs(code, sizeof code, 0x1000, ELFSYM_REF_ALL, 1, r, 16);
    CHECK(n == 5, "n=%d", n);
    if (n == 5) {
        CHECK(r[0].kind == ELFSYM_REF_RIP && r[0].target == 0x1017 && r[0].is_load &&
                  !r[0].is_lea && r[0].size == 8 && r[0].insn_addr == 0x1000,
              "mov rip");
        CHECK(r[1].kind == ELFSYM_REF_RIP && r[1].target == 0xfee && r[1].is_lea, "lea %llx",
              (unsigned long long)r[1].target);
        CHECK(r[2].kind == ELFSYM_REF_ABS && r[2].target == 0x600000 && r[2].size == 4, "abs");
        CHECK(r[3].kind == ELFSYM_REF_IMM && r[3].target == 0x6d26fe, "imm");
        CHECK(r[4].kind == ELFSYM_REF_RIP && !r[4].is_load && r[4].target == 0x102e, "store %llx",
              (unsigned long long)r[4].target);
    }
    n = elfsym_disasm_refs(code, sizeof code, 0x1000, ELFSYM_REF_RIP, 0, r, 16);
    CHECK(n == 4 && r[3].target == 0x102e + 0x99, "rip only, past ret: n=%d", n);
    n = elfsym_disasm_refs(code, sizeof code, 0x1000, ELFSYM_REF_ALL, 1, r, 2);
    CHECK(n == 2, "max 2: %d", n);
    /* Garbage and truncated code: stops, never reads past LEN. */
    static const uint8_t junk[] = {0x48, 0x8b};
    n = elfsym_disasm_refs(junk, sizeof junk, 0, ELFSYM_REF_ALL, 1, r, 16);
    CHECK(n == 0, "truncated insn: %d", n);
    CHECK(elfsym_disasm_refs(NULL, 10, 0, ELFSYM_REF_ALL, 1, r, 16) == 0, "NULL code");

    static const uint8_t sc[] = {0x90, 0x0f, 0x05};
    CHECK(elfsym_insn_is_syscall(sc, 3) == 1, "syscall");
    CHECK(elfsym_insn_is_syscall(sc, 2) == 0, "nop;0f");
    static const uint8_t i80[] = {0xcd, 0x80};
    CHECK(elfsym_insn_is_syscall(i80, 2) == 1, "int 0x80");
    CHECK(elfsym_insn_is_syscall(sc, 1) == 0 && elfsym_insn_is_syscall(NULL, 2) == 0, "short");
}

static void test_interpreters(void)
{
    int err;
    /* 3.6: PyInterpreterState_Head is `mov rax, [rip+interp_head]; ret`. */
    elfsym_obj_t *o =
        elfsym_obj_open("/root/.pyenv/versions/3.6.15/lib/libpython3.6m.so.1.0", &err);
    CHECK(o != NULL, "3.6: %s", scry_strerror(err));
    if (o) {
        elfsym_sym_t ih;
        elfsym_ref_t r[4];
        CHECK(elfsym_obj_lookup(o, "interp_head", &ih) == 0, "interp_head in .symtab");
        int n = elfsym_obj_func_refs(o, "PyInterpreterState_Head", ELFSYM_REF_ALL, r, 4);
        CHECK(n == 1 && r[0].target == ih.value, "3.6 disasm: n=%d %llx vs %llx", n,
              n > 0 ? (unsigned long long)r[0].target : 0, (unsigned long long)ih.value);
        CHECK(elfsym_obj_func_refs(o, "no_such_fn", ELFSYM_REF_ALL, r, 4) == SCRY_E_NOTFOUND,
              "missing function");
        elfsym_obj_free(o);
    }
    /* Debian's non-PIE 3.11: the accessors touch _PyRuntime fields directly. */
    o = elfsym_obj_open("/usr/bin/python3.11", &err);
    CHECK(o != NULL, "python3.11: %s", scry_strerror(err));
    if (o) {
        elfsym_sym_t rt;
        elfsym_ref_t r[8];
        CHECK(elfsym_obj_lookup(o, "_PyRuntime", &rt) == 0, "_PyRuntime");
        static const char *fns[] = {"PyInterpreterState_Head", "PyGILState_GetThisThreadState"};
        for (size_t f = 0; f < 2; f++) {
            int n = elfsym_obj_func_refs(o, fns[f], ELFSYM_REF_RIP | ELFSYM_REF_ABS, r, 8);
            CHECK(n >= 1 && r[0].target >= rt.value &&
                          r[0].target<rt.value + rt.size, "%s: n=%d first %llx", fns[f], n, n> 0
                      ? (unsigned long long)r[0].target
                      : 0);
        }
        elfsym_obj_free(o);
    }
}

/* A child sleeping in nanosleep sits just after a `syscall`; /proc/PID/syscall says where. */
static void test_live_syscall(void)
{
    pid_t c = fork();
    if (c == 0) {
        check_child_dies_with_test();
        for (;;)
            pause();
    }
    /* Wait (up to 10 s on a loaded machine) until the child is blocked in pause(). */
    char path[64], line[512] = "";
    snprintf(path, sizeof path, "/proc/%d/syscall", (int)c);
    for (int tries = 0; tries < 1000; tries++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        FILE *f = fopen(path, "r");
        line[0] = '\0';
        if (f) {
            if (!fgets(line, sizeof line, f))
                line[0] = '\0';
            fclose(f);
        }
        if (line[0] && strncmp(line, "running", 7) != 0)
            break;
    }
    /* "nr a1 a2 a3 a4 a5 a6 sp pc" */
    unsigned long long pc = 0;
    char *last = strrchr(line, ' ');
    if (last)
        pc = strtoull(last + 1, NULL, 16);
    CHECK(pc != 0, "pc from '%s'", line);
    rmem_t *m = rmem_open_pid(c);
    int rc = elfsym_remote_is_syscall(m, pc);
    CHECK(rc == 1, "remote syscall at %llx: %d", pc, rc);
    CHECK(elfsym_remote_is_syscall(m, 0x10) < 0, "unmapped pc fails");
    rmem_free(m);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
}

int main(void)
{
    test_bytes();
    test_interpreters();
    test_live_syscall();
    elfsym_cache_clear();
    return check_summary("test_elfsym_disasm");
}
