/* test_elfsym_maps.c - /proc/PID/maps parsing (own process and captured text with odd
 * paths), errors for missing and forbidden processes, the load bias of this PIE test
 * executable and of its shared libraries, and native symbolisation of our own code. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <capstone/capstone.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elfsym.h"
#include "scry_err.h"
#include "check.h"
#include "scry_time.h"

/* A function of our own, not inlined, to find in the maps and the symbols. */
__attribute__((noinline)) int test_elfsym_marker_function(int x);
__attribute__((noinline)) int test_elfsym_marker_function(int x)
{
    return x * 3 + 1;
}

static void test_parse_text(void)
{
    static const char text[] =
        "00400000-00420000 r--p 00000000 08:01 1234                               "
        "/usr/bin/python3.11\n"
        "00420000-006d3000 r-xp 0001f000 08:01 1234  /usr/bin/python3.11\n"
        "7f0000000000-7f0000001000 rw-s 00000000 00:05 99 /dev/shm/my file with spaces\n"
        "7f0000001000-7f0000002000 r-xp 00001000 fd:00 77 /tmp/lib old.so (deleted)\n"
        "7f0000002000-7f0000003000 rw-p 00000000 00:00 0 \n"
        "7f0000003000-7f0000004000 rw-p 00000000 00:00 0\n"
        "garbage line\n"
        "7f0000003800-7f0000005000 rw-p 00000000 00:00 0 overlapping: dropped\n"
        "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
        "7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0  [vdso]\n"
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]";
    int err = -99;
    elfsym_maps_t *m = elfsym_maps_parse(text, sizeof text - 1, &err);
    CHECK(m != NULL && err == 0, "parse: %d", err);
    if (!m)
        return;
    CHECK(elfsym_maps_count(m) == 9, "count %zu", elfsym_maps_count(m));
    const elfsym_map_t *e = elfsym_maps_get(m, 0);
    CHECK(e->start == 0x400000 && e->end == 0x420000 && e->offset == 0 && e->inode == 1234 &&
              e->dev_major == 8 && e->dev_minor == 1 && e->perms == (ELFSYM_PERM_R | ELFSYM_PERM_P),
          "entry 0");
    CHECK(strcmp(e->path, "/usr/bin/python3.11") == 0, "path0 '%s'", e->path);
    e = elfsym_maps_get(m, 1);
    CHECK(e->offset == 0x1f000 && (e->perms & ELFSYM_PERM_X) &&
              strcmp(e->path, "/usr/bin/python3.11") == 0,
          "entry 1");
    e = elfsym_maps_get(m, 2);
    CHECK(strcmp(e->path, "/dev/shm/my file with spaces") == 0 && !(e->perms & ELFSYM_PERM_P) &&
              (e->perms & ELFSYM_PERM_W),
          "spaces '%s'", e->path);
    e = elfsym_maps_get(m, 3);
    CHECK(strcmp(e->path, "/tmp/lib old.so") == 0 && e->deleted && e->dev_major == 0xfd,
          "deleted '%s'", e->path);
    e = elfsym_maps_get(m, 4);
    CHECK(e->path[0] == '\0' && !elfsym_map_is_file(e), "anonymous '%s'", e->path);
    e = elfsym_maps_get(m, 6);
    CHECK(strcmp(e->path, "[stack]") == 0 && !elfsym_map_is_file(e), "stack");
    e = elfsym_maps_get(m, 8);
    CHECK(e->start == 0xffffffffff600000ull && strcmp(e->path, "[vsyscall]") == 0, "vsyscall");
    CHECK(elfsym_maps_find(m, 0x41ffff) == elfsym_maps_get(m, 0), "find end-1");
    CHECK(elfsym_maps_find(m, 0x420000) == elfsym_maps_get(m, 1), "find next start");
    CHECK(elfsym_maps_find(m, 0x3fffff) == NULL, "find below");
    CHECK(elfsym_maps_find(m, 0x7f0000004000) == NULL, "find hole");
    CHECK(elfsym_maps_get(m, 9) == NULL, "get out of range");
    elfsym_maps_free(m);

    /* Empty and hostile input. */
    m = elfsym_maps_parse("", 0, &err);
    CHECK(m && elfsym_maps_count(m) == 0, "empty");
    elfsym_maps_free(m);
    char *junk = malloc(1 << 16);
    uint64_t x = 12345;
    for (int i = 0; i < (1 << 16); i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        junk[i] = "0123456789abcdef- :/\n rwxp"[x % 26];
    }
    m = elfsym_maps_parse(junk, 1 << 16, &err);
    CHECK(m != NULL, "junk parses to something");
    for (size_t i = 1; m && i < elfsym_maps_count(m); i++)
        CHECK(elfsym_maps_get(m, i)->start >= elfsym_maps_get(m, i - 1)->end, "sorted junk");
    elfsym_maps_free(m);
    free(junk);
    /* More lines than the bound: refused. */
    size_t big = (size_t)(ELFSYM_MAPS_MAX_LINES + 1);
    char *many = malloc(big);
    memset(many, '\n', big);
    m = elfsym_maps_parse(many, big, &err);
    CHECK(m == NULL && err == SCRY_E_TRUNC, "too many lines: %d", err);
    free(many);
    elfsym_maps_free(NULL);
}

static void test_self(void)
{
    int err;
    elfsym_maps_t *m = elfsym_maps_new(getpid(), &err);
    CHECK(m != NULL, "own maps: %s", scry_strerror(err));
    if (!m)
        return;
    CHECK(elfsym_maps_count(m) > 10, "count %zu", elfsym_maps_count(m));
    const elfsym_map_t *e = elfsym_maps_find(m, (raddr_t)(uintptr_t)&test_elfsym_marker_function);
    CHECK(e && (e->perms & ELFSYM_PERM_X) && elfsym_map_is_file(e), "own code mapping");
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    CHECK(e && strcmp(e->path, exe) == 0, "path %s vs %s", e ? e->path : "-", exe);
    int on_stack = 0;
    e = elfsym_maps_find(m, (raddr_t)(uintptr_t)&on_stack);
    CHECK(e && strcmp(e->path, "[stack]") == 0, "stack");

    /* The executable: PIE, so a nonzero bias that puts our function where it runs. */
    long idx = elfsym_find_exe_mapping(getpid(), m);
    CHECK(idx >= 0, "exe mapping %ld", idx);
    elfsym_module_t mod;
    if (idx >= 0) {
        err = elfsym_module_locate(getpid(), m, (size_t)idx, &mod);
        CHECK(err == 0, "locate exe: %s", scry_strerror(err));
        if (err == 0) {
            elfsym_sym_t s;
            CHECK(elfsym_obj_lookup(mod.obj, "test_elfsym_marker_function", &s) == 0, "own symbol");
            CHECK(s.value + mod.bias == (uintptr_t)&test_elfsym_marker_function,
                  "bias %llx: %llx vs %p", (unsigned long long)mod.bias,
                  (unsigned long long)(s.value + mod.bias), (void *)&test_elfsym_marker_function);
            CHECK(elfsym_obj_type(mod.obj) == ET_DYN && mod.bias != 0, "PIE");
            CHECK(strncmp(mod.open_path, "/proc/", 6) == 0, "open path %s", mod.open_path);
            CHECK(!mod.is_libpython, "not libpython");
            printf("self: %s bias %#llx open %s\n", mod.path, (unsigned long long)mod.bias,
                   mod.open_path);
            elfsym_obj_free(mod.obj);
        }
    }

    /* Shared libraries: symbols land on the functions the dynamic linker resolved. */
    struct {
        const char *name;
        uintptr_t addr;
    } libs[] = {
        {"elf_begin", (uintptr_t)&elf_begin},
        {"cs_open", (uintptr_t)&cs_open},
        {"clock_gettime", (uintptr_t)&clock_gettime},
    };
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        long li = elfsym_maps_find_index(m, libs[i].addr);
        CHECK(li >= 0, "%s mapped", libs[i].name);
        if (li < 0)
            continue;
        err = elfsym_module_locate(getpid(), m, (size_t)li, &mod);
        CHECK(err == 0, "locate %s: %s", libs[i].name, scry_strerror(err));
        if (err)
            continue;
        elfsym_sym_t s;
        CHECK(elfsym_obj_lookup(mod.obj, libs[i].name, &s) == 0 &&
                  s.value + mod.bias == libs[i].addr,
              "%s bias", libs[i].name);
        CHECK(mod.start <= libs[i].addr && libs[i].addr < mod.end, "%s extent", libs[i].name);
        elfsym_obj_free(mod.obj);
    }
    /* Not a Python process. */
    err = elfsym_find_interpreter(getpid(), m, &mod);
    CHECK(err == SCRY_E_NOTPY, "self is not python: %d", err);
    elfsym_maps_free(m);
}

static void test_symbolizer_self(void)
{
    int err;
    elfsym_symbolizer_t *s = elfsym_symbolizer_new(getpid(), &err);
    CHECK(s != NULL, "symbolizer: %s", scry_strerror(err));
    if (!s)
        return;
    elfsym_loc_t loc;
    raddr_t a = (uintptr_t)&test_elfsym_marker_function + 2;
    CHECK(elfsym_symbolize(s, a, &loc) == 0 && loc.symbol &&
              strcmp(loc.symbol, "test_elfsym_marker_function") == 0 && loc.sym_offset == 2,
          "own function: %s+%llu", loc.symbol ? loc.symbol : "?",
          (unsigned long long)loc.sym_offset);
    CHECK(strcmp(loc.lib, "test_elfsym_maps") == 0, "lib %s", loc.lib);
    a = (uintptr_t)&elf_begin + 1;
    CHECK(elfsym_symbolize(s, a, &loc) == 0 && strcmp(loc.symbol, "elf_begin") == 0 &&
              strncmp(loc.lib, "libelf", 6) == 0,
          "elf_begin: %s in %s", loc.symbol ? loc.symbol : "?", loc.lib);
    a = (uintptr_t)&cs_disasm + 4;
    CHECK(elfsym_symbolize(s, a, &loc) == 0 && strcmp(loc.symbol, "cs_disasm") == 0 &&
              strcmp(loc.lib, "libcapstone.so.4") == 0,
          "cs_disasm: %s in %s", loc.symbol ? loc.symbol : "?", loc.lib);
    int on_stack = 0;
    CHECK(elfsym_symbolize(s, (uintptr_t)&on_stack, &loc) == SCRY_E_NOTFOUND &&
              strcmp(loc.lib, "[stack]") == 0 && loc.symbol == NULL,
          "stack: %s", loc.lib);
    CHECK(elfsym_symbolize(s, 16, &loc) == SCRY_E_NOTFOUND && loc.lib[0] == '\0', "unmapped");

    /* The vDSO: symbols from the kernel's image. */
    elfsym_obj_t *v = elfsym_obj_open_vdso(&err);
    CHECK(v != NULL, "vdso: %s", scry_strerror(err));
    elfsym_sym_t vs;
    if (v && elfsym_obj_lookup(v, "__vdso_clock_gettime", &vs) == 0) {
        raddr_t at = (raddr_t)getauxval(AT_SYSINFO_EHDR) + vs.value + 3;
        CHECK(elfsym_symbolize(s, at, &loc) == 0 && strcmp(loc.lib, "[vdso]") == 0 &&
                  strstr(loc.symbol, "clock_gettime") != NULL && loc.sym_offset == 3,
              "vdso symbol: %s in %s", loc.symbol ? loc.symbol : "?", loc.lib);
    } else {
        CHECK(0, "__vdso_clock_gettime in the vdso");
    }
    CHECK(elfsym_obj_open_vdso(&err) == v, "vdso loaded once");
    elfsym_obj_free(v);
    elfsym_obj_free(v);

    /* dlopen-like change: a new file mapping appears, refresh finds it. */
    char path[] = "/tmp/elfsym_map_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && ftruncate(fd, 8192) == 0, "tmp file");
    void *p = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, fd, 0);
    CHECK(p != MAP_FAILED, "mmap");
    struct timespec ts = {0, 120 * 1000 * 1000};
    nanosleep(&ts, NULL); /* past the auto-refresh rate limit */
    uint64_t before = elfsym_symbolizer_stats(s).refreshes;
    CHECK(elfsym_symbolize(s, (uintptr_t)p + 100, &loc) == SCRY_E_NOTFOUND &&
              strcmp(loc.path, path) == 0 && loc.lib_offset == 100,
          "new mapping: '%s' off %llu", loc.path, (unsigned long long)loc.lib_offset);
    CHECK(elfsym_symbolizer_stats(s).refreshes == before + 1, "auto refresh");
    /* Earlier strings stay valid after an explicit refresh. */
    const char *keep = loc.path;
    CHECK(elfsym_symbolizer_refresh(s) == 0, "refresh");
    CHECK(strcmp(keep, path) == 0, "string kept");
    munmap(p, 8192);
    close(fd);
    unlink(path);

    /* Speed: repeated lookups in loaded modules. */
    raddr_t addrs[3] = {(uintptr_t)&elf_begin + 5, (uintptr_t)&cs_disasm + 9,
                        (uintptr_t)&test_elfsym_marker_function + 1};
    uint64_t t0 = scry_now_ns();
    int hits = 0;
    for (int i = 0; i < 300000; i++)
        hits += elfsym_symbolize(s, addrs[i % 3], &loc) == 0;
    double ns = (double)(scry_now_ns() - t0) / 300000;
    printf("symbolize: %.0f ns per lookup (%d hits)\n", ns, hits);
    CHECK(hits == 300000, "hits");
    elfsym_symbolizer_stats_t st = elfsym_symbolizer_stats(s);
    printf("symbolizer: %llu lookups, %llu modules loaded, %llu refreshes\n",
           (unsigned long long)st.lookups, (unsigned long long)st.modules_loaded,
           (unsigned long long)st.refreshes);
    elfsym_symbolizer_free(s);
    elfsym_symbolizer_free(NULL);
}

static void test_errors(void)
{
    int err = 0;
    CHECK(elfsym_maps_new(999999999, &err) == NULL && err == SCRY_E_NOPROC, "no proc: %d", err);
    CHECK(elfsym_maps_new(0, &err) == NULL && err == SCRY_E_NOPROC, "pid 0: %d", err);
    CHECK(elfsym_symbolizer_new(999999999, &err) == NULL && err == SCRY_E_NOPROC, "sym no proc");
    elfsym_module_t mod;
    CHECK(elfsym_find_interpreter(999999999, NULL, &mod) == SCRY_E_NOPROC, "interp no proc");

    /* As an unprivileged user, another user's maps are forbidden. */
    if (geteuid() != 0)
        return;
    pid_t c = fork();
    if (c == 0) {
        check_child_dies_with_test();
        if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
            _exit(3);
        elfsym_maps_t *m = elfsym_maps_new(1, &err);
        _exit(m == NULL && err == SCRY_E_PERM ? 0 : 1);
    }
    int st = 0;
    waitpid(c, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "PERM as nobody: status %d", st);
}

int main(void)
{
    test_parse_text();
    test_self();
    test_symbolizer_self();
    test_errors();
    elfsym_cache_clear();
    return check_summary("test_elfsym_maps");
}
