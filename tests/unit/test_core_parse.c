/* test_core_parse.c - core/core.h on a core built here the way the kernel writes one: two
 * threads (the first took SIGSEGV at 0x10), the process, the auxiliary vector, one mapped
 * file whose first page (with its build-id) is dumped and whose second page is not, and a
 * stack page. Known answers for the notes, the maps, the reader (dumped bytes, the file's
 * bytes under a sysroot whose file has the core's build-id, nothing from a file of another
 * build, which is refused by name) and every truncation of the core. */
#include "check.h"
#include "core.h"
#include "maps.h"
#include "scry_err.h"

#include <elf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096

typedef struct buf {
    uint8_t d[6 * PAGE];
    size_t n;
} buf_t;

static void put(buf_t *b, const void *p, size_t n)
{
    memcpy(b->d + b->n, p, n);
    b->n += n;
}

static void note(buf_t *b, const char *name, uint32_t type, const void *desc, uint32_t len)
{
    uint32_t h[3] = {(uint32_t)strlen(name) + 1, len, type};
    put(b, h, sizeof h);
    put(b, name, h[0]);
    b->n += (4 - h[0] % 4) % 4;
    put(b, desc, len);
    b->n += (4 - len % 4) % 4;
}

static void prstatus(buf_t *b, int32_t tid, int16_t sig, uint64_t ip, uint64_t sp)
{
    uint8_t d[336] = {0};
    memcpy(d, &(int32_t){sig}, 4);
    memcpy(d + 12, &sig, 2);
    memcpy(d + 32, &tid, 4);
    memcpy(d + 112 + 16 * 8, &ip, 8);
    memcpy(d + 112 + 19 * 8, &sp, 8);
    note(b, "CORE", NT_PRSTATUS, d, sizeof d);
}

/* An x86-64 ELF header of TYPE with PHNUM program headers right after it. */
static Elf64_Ehdr ehdr(uint16_t type, uint16_t phnum)
{
    Elf64_Ehdr eh = {.e_type = type,
                     .e_machine = EM_X86_64,
                     .e_version = 1,
                     .e_phoff = 64,
                     .e_ehsize = 64,
                     .e_phentsize = 56,
                     .e_phnum = phnum};
    memcpy(eh.e_ident,
           "\x7f"
           "ELF\x02\x01\x01",
           7);
    return eh;
}

/* The mapped object's two pages: an ELF header, PT_LOAD and PT_NOTE with build-id ID0..;
 * "MARK" at 0x1000; a syscall instruction ending at 0xf00. */
static void object(uint8_t *o, uint8_t id0)
{
    memset(o, 0, 2 * PAGE);
    Elf64_Ehdr eh = ehdr(ET_EXEC, 2);
    Elf64_Phdr load = {.p_type = PT_LOAD,
                       .p_flags = PF_R | PF_X,
                       .p_vaddr = 0x400000,
                       .p_filesz = 2 * PAGE,
                       .p_memsz = 2 * PAGE,
                       .p_align = PAGE};
    Elf64_Phdr nt = {.p_type = PT_NOTE, .p_offset = 176, .p_filesz = 36, .p_memsz = 36};
    memcpy(o, &eh, sizeof eh);
    memcpy(o + 64, &load, sizeof load);
    memcpy(o + 120, &nt, sizeof nt);
    uint32_t h[3] = {4, 20, NT_GNU_BUILD_ID};
    memcpy(o + 176, h, 12);
    memcpy(o + 188, "GNU", 4);
    for (int i = 0; i < 20; i++)
        o[192 + i] = (uint8_t)(id0 + i);
    memcpy(o + 0xefe, "\x0f\x05", 2);
    memcpy(o + PAGE, "MARK", 4);
}

/* The core into B: notes, the object's first page (of two), a stack page. */
static void make_core(buf_t *b)
{
    buf_t notes = {.n = 0};
    prstatus(&notes, 100, SIGSEGV, 0x400ff0, 0x7ffff000);
    uint8_t ps[136] = {0};
    memcpy(ps + 24, &(int32_t){100}, 4);
    memcpy(ps + 40, "python3", 7);
    memcpy(ps + 56, "python3 x.py", 12);
    note(&notes, "CORE", NT_PRPSINFO, ps, sizeof ps);
    uint8_t si[128] = {0};
    memcpy(si, &(int32_t){SIGSEGV}, 4);
    memcpy(si + 8, &(int32_t){1}, 4);
    memcpy(si + 16, &(uint64_t){0x10}, 8);
    note(&notes, "CORE", 0x53494749, si, sizeof si);
    uint64_t auxv[6] = {AT_ENTRY, 0x400100, AT_PHDR, 0x400040, AT_NULL, 0};
    note(&notes, "CORE", NT_AUXV, auxv, sizeof auxv);
    uint8_t files[40 + 17];
    uint64_t fh[5] = {1, PAGE, 0x400000, 0x402000, 0};
    memcpy(files, fh, 40);
    memcpy(files + 40, "/usr/bin/python3", 17);
    note(&notes, "CORE", 0x46494c45, files, sizeof files);
    prstatus(&notes, 101, 0, 0x400f00, 0x7ffff800);

    size_t at = 64 + 3 * 56, load1 = (at + notes.n + PAGE - 1) / PAGE * PAGE;
    Elf64_Ehdr eh = ehdr(ET_CORE, 3);
    Elf64_Phdr ph[3] = {{.p_type = PT_NOTE, .p_offset = at, .p_filesz = notes.n},
                        {.p_type = PT_LOAD,
                         .p_flags = PF_R | PF_X,
                         .p_offset = load1,
                         .p_vaddr = 0x400000,
                         .p_filesz = PAGE,
                         .p_memsz = 2 * PAGE},
                        {.p_type = PT_LOAD,
                         .p_flags = PF_R | PF_W,
                         .p_offset = load1 + PAGE,
                         .p_vaddr = 0x7ffff000,
                         .p_filesz = PAGE,
                         .p_memsz = PAGE}};
    b->n = 0;
    memset(b->d, 0, sizeof b->d);
    put(b, &eh, sizeof eh);
    put(b, ph, sizeof ph);
    put(b, notes.d, notes.n);
    uint8_t obj[2 * PAGE];
    object(obj, 0);
    memcpy(b->d + load1, obj, PAGE);
    for (int i = 0; i < PAGE; i++)
        b->d[load1 + PAGE + i] = (uint8_t)i;
    b->n = load1 + 2 * PAGE;
}

/* A sysroot holding /usr/bin/python3 built with build-id ID0..: its path (static). */
static const char *sysroot(const char *tag, uint8_t id0)
{
    static char dir[2][128];
    char *d = dir[id0 != 0];
    snprintf(d, sizeof dir[0], "/tmp/scry-test-core-%s-%d", tag, (int)getpid());
    char path[256];
    snprintf(path, sizeof path, "%s/usr", d);
    mkdir(d, 0700);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/usr/bin", d);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/usr/bin/python3", d);
    uint8_t obj[2 * PAGE];
    object(obj, id0);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(obj, 1, sizeof obj, f);
        fclose(f);
    }
    return d;
}

static void remove_root(const char *d)
{
    char path[256];
    snprintf(path, sizeof path, "%s/usr/bin/python3", d);
    unlink(path);
    snprintf(path, sizeof path, "%s/usr/bin", d);
    rmdir(path);
    snprintf(path, sizeof path, "%s/usr", d);
    rmdir(path);
    rmdir(d);
}

static void test_notes(const buf_t *b)
{
    char why[256];
    int err = 0;
    core_t *c = core_open_mem(b->d, b->n, NULL, &err, why, sizeof why);
    CHECK(c != NULL, "opens (%d: %s)", err, c ? "" : why);
    if (!c)
        return;
    CHECK_INT(core_nthreads(c), ==, 2, "two threads");
    CHECK_INT(core_thread(c, 0)->tid, ==, 100, "the crashing thread first");
    CHECK_HEX(core_thread(c, 0)->regs.ip, ==, 0x400ff0, "its pc");
    CHECK_HEX(core_thread(c, 1)->regs.sp, ==, 0x7ffff800, "the other's sp");
    CHECK_INT(core_thread(c, 0)->in_syscall, ==, 0, "a fault is not a system call");
    CHECK_INT(core_thread(c, 1)->in_syscall, ==, 1, "a pc after 0f 05 waits in the kernel");
    const core_siginfo_t *si = core_siginfo(c);
    CHECK(si->signo == SIGSEGV && si->code == 1 && si->addr == 0x10 && si->tid == 100,
          "SIGSEGV at 0x10 in 100 (%d %d %llx %d)", si->signo, si->code,
          (unsigned long long)si->addr, si->tid);
    CHECK_INT(core_pid(c), ==, 100, "pid");
    CHECK_STR(core_comm(c), ==, "python3", "comm");
    CHECK_STR(core_args(c), ==, "python3 x.py", "args");
    CHECK_STR(core_exe(c), ==, "/usr/bin/python3", "the executable holds AT_ENTRY");
    rmem_t *m = core_reader(c);
    char *text = NULL;
    size_t len = 0;
    CHECK_INT(rmem_maps_text(m, &text, &len), ==, 0, "maps text");
    elfsym_maps_t *maps = text ? elfsym_maps_parse(text, len, &err) : NULL;
    const elfsym_map_t *e = elfsym_maps_find(maps, 0x400800);
    CHECK(e && e->start == 0x400000 && e->end == 0x402000 && elfsym_map_is_file(e) &&
              !strcmp(e->path, "/usr/bin/python3") && (e->perms & ELFSYM_PERM_X),
          "the file mapping: %s", text ? text : "");
    e = elfsym_maps_find(maps, 0x7ffff010);
    CHECK(e && !elfsym_map_is_file(e) && (e->perms & ELFSYM_PERM_W), "the stack, anonymous");
    elfsym_maps_free(maps);
    free(text);
    uint8_t got[8];
    CHECK(rmem_read(m, 0x7ffff005, got, 3) == 0 && got[0] == 5 && got[2] == 7, "stack bytes");
    CHECK(rmem_read(m, 0x400000, got, 4) == 0 && !memcmp(got,
                                                         "\x7f"
                                                         "ELF",
                                                         4),
          "dumped page");
    CHECK_INT(rmem_read(m, 0x3ff000, got, 4), ==, SCRY_E_FAULT, "unmapped");
    CHECK_INT(rmem_pid(m), ==, 0, "no live pid");
    rmem_free(m);
    core_free(c);
}

static void test_files(const buf_t *b)
{
    char why[256], path[512];
    int err = 0;
    const char *good = sysroot("good", 0), *bad = sysroot("bad", 7);
    core_opts_t opts = {.sysroot = good};
    core_t *c = core_open_mem(b->d, b->n, &opts, &err, why, sizeof why);
    rmem_t *m = c ? core_reader(c) : NULL;
    uint8_t got[4];
    CHECK(m && rmem_read(m, 0x401000, got, 4) == 0 && !memcmp(got, "MARK", 4),
          "the undumped page from the file of the same build");
    CHECK(m && rmem_file_path(m, "/usr/bin/python3", path, sizeof path) == 0 &&
              strstr(path, good) == path,
          "opened under the sysroot: %s", path);
    CHECK(c && core_file_problem(c, "/usr/bin/python3") == NULL, "no problem");
    rmem_free(m);
    core_free(c);
    opts.sysroot = bad;
    c = core_open_mem(b->d, b->n, &opts, &err, why, sizeof why);
    m = c ? core_reader(c) : NULL;
    CHECK(m && rmem_read(m, 0x401000, got, 4) == SCRY_E_FAULT, "another build is never read");
    CHECK(m && rmem_file_path(m, "/usr/bin/python3", path, sizeof path) == SCRY_E_NOTFOUND,
          "nor opened");
    const char *p = c ? core_file_problem(c, "/usr/bin/python3") : NULL;
    CHECK(p && strstr(p, "/usr/bin/python3") && strstr(p, "000102030405") &&
              strstr(p, "0708090a0b0c"),
          "refused by name with both build-ids: %s", p ? p : "(none)");
    CHECK(c && core_check_files(c) == 1 && strstr(core_problems(c), "another build"),
          "one file refused");
    rmem_free(m);
    core_free(c);
    remove_root(good);
    remove_root(bad);
}

/* Every prefix of the core, and bytes flipped in the headers: NULL with a reason, or a core
 * whose reads stay inside what it holds. */
static void test_hostile(const buf_t *b)
{
    char why[256];
    int err = 0, opened = 0, refused = 0;
    uint8_t *copy = malloc(b->n);
    for (size_t n = 0; copy && n <= b->n; n += 61) {
        memcpy(copy, b->d, n);
        core_t *c = core_open_mem(copy, n, NULL, &err, why, sizeof why);
        if (!c) {
            refused += err < 0 && why[0];
            continue;
        }
        opened++;
        rmem_t *m = core_reader(c);
        uint8_t got[PAGE];
        long k = rmem_read_partial(m, 0x7ffff000, got, sizeof got);
        CHECK(k >= 0 && (size_t)k <= sizeof got, "prefix %zu: a bounded read", n);
        rmem_free(m);
        core_free(c);
    }
    CHECK(opened > 0 && refused > 0, "prefixes opened %d, refused %d", opened, refused);
    for (size_t i = 0; copy && i < 64 + 3 * 56; i++) {
        memcpy(copy, b->d, b->n);
        copy[i] ^= 0xff;
        core_t *c = core_open_mem(copy, b->n, NULL, &err, why, sizeof why);
        core_free(c);
    }
    free(copy);
}

int main(void)
{
    static buf_t b;
    make_core(&b);
    test_notes(&b);
    test_files(&b);
    test_hostile(&b);
    return check_summary("test_core_parse");
}
