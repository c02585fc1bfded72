/* test_elfsym_obj.c - ELF objects on the real interpreters of this machine: symbols from
 * .symtab/.dynsym, sections, segments, build-id, GOT slots, the cache, C++ demangling, a
 * separate debug file found through .gnu_debuglink, and bad input (missing, non-ELF,
 * truncated and corrupted files) that must fail cleanly. */
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elfsym.h"
#include "scry_err.h"
#include "check.h"
#include "scry_time.h"

/* PATH opened as an ELF object, the open checked. NULL when it failed. */
static elfsym_obj_t *open_checked(const char *path)
{
    int err = 0;
    elfsym_obj_t *o = elfsym_obj_open(path, &err);
    CHECK(o != NULL, "open %s: %s", path, scry_strerror(err));
    return o;
}

#define PY311_LIB "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0"
#define PY36_LIB  "/root/.pyenv/versions/3.6.15/lib/libpython3.6m.so.1.0"
#define DEB_PY311 "/usr/bin/python3.11"

static void test_libpython311(void)
{
    int err = 0;
    double t0 = ((double)scry_now_ns() / 1e6);
    elfsym_obj_t *o = elfsym_obj_open(PY311_LIB, &err);
    double t1 = ((double)scry_now_ns() / 1e6);
    CHECK(o != NULL, "open %s: %s", PY311_LIB, scry_strerror(err));
    if (!o)
        return;
    printf("load libpython3.11: %.1f ms, %zu symbols\n", t1 - t0, elfsym_obj_nsyms(o));
    CHECK(elfsym_obj_type(o) == ET_DYN, "type %d", elfsym_obj_type(o));
    elfsym_sym_t rt, ver, head;
    CHECK(elfsym_obj_lookup(o, "_PyRuntime", &rt) == 0, "_PyRuntime");
    CHECK(elfsym_obj_lookup(o, "Py_Version", &ver) == 0, "Py_Version");
    CHECK(elfsym_obj_lookup(o, "PyInterpreterState_Head", &head) == 0, "Head");
    CHECK(elfsym_obj_lookup(o, "no_such_symbol_xyz", NULL) == SCRY_E_NOTFOUND, "missing");
    CHECK(ver.size == 8 && ver.type == STT_OBJECT, "Py_Version size %llu",
          (unsigned long long)ver.size);
    CHECK(head.type == STT_FUNC && head.size > 0, "Head type %d", head.type);

    /* .PyRuntime holds _PyRuntime. */
    elfsym_section_t sec;
    CHECK(elfsym_obj_section(o, ".PyRuntime", &sec) == 0, ".PyRuntime");
    CHECK(sec.addr == rt.value, "section %llx sym %llx", (unsigned long long)sec.addr,
          (unsigned long long)rt.value);

    /* Py_Version's bytes from the file: 3.11.7 final = 0x030b07f0. */
    uint32_t pv = 0;
    CHECK(elfsym_obj_read_vaddr(o, ver.value, &pv, 4) == 0, "read Py_Version");
    CHECK(pv == 0x030b07f0u, "Py_Version %08x", pv);

    /* PIC code reaches _PyRuntime through a GOT slot; the relocations resolve it. */
    elfsym_ref_t refs[4];
    int n = elfsym_obj_func_refs(o, "PyInterpreterState_Head", ELFSYM_REF_RIP, refs, 4);
    CHECK(n >= 1, "refs %d", n);
    uint64_t target = 0;
    if (n >= 1) {
        CHECK(refs[0].is_load, "is_load");
        CHECK(elfsym_obj_resolve_slot(o, refs[0].target, &target) == 0, "slot %llx",
              (unsigned long long)refs[0].target);
        CHECK(target == rt.value, "slot -> %llx, _PyRuntime %llx", (unsigned long long)target,
              (unsigned long long)rt.value);
    }

    /* Address -> symbol round trip over every sized function. */
    size_t ns = elfsym_obj_nsyms(o), tried = 0, ok = 0;
    uint64_t prev = 0;
    for (size_t i = 0; i < ns; i++) {
        const elfsym_sym_t *s = elfsym_obj_sym(o, i);
        CHECK(s->value >= prev, "sorted at %zu", i);
        prev = s->value;
        if (s->type != STT_FUNC || s->size < 2)
            continue;
        elfsym_sym_t got;
        uint64_t off = 0;
        tried++;
        if (elfsym_obj_addr_lookup(o, s->value + s->size / 2, &got, &off) == 0 &&
            got.value == s->value && off == s->size / 2)
            ok++;
    }
    CHECK(tried > 1000 && ok == tried, "round trip %zu/%zu", ok, tried);
    elfsym_sym_t got;
    uint64_t off;
    CHECK(elfsym_obj_addr_lookup(o, head.value + 3, &got, &off) == 0 &&
              strcmp(got.name, "PyInterpreterState_Head") == 0 && off == 3,
          "Head+3");
    CHECK(elfsym_obj_addr_lookup(o, 1, &got, &off) == SCRY_E_NOTFOUND, "addr 1");

    /* Timing of address lookups. */
    t0 = ((double)scry_now_ns() / 1e6);
    volatile uint64_t sink = 0;
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 1000000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (elfsym_obj_addr_lookup(o, sec.addr / 2 + x % (sec.addr / 2), &got, &off) == 0)
            sink += off;
    }
    t1 = ((double)scry_now_ns() / 1e6);
    printf("addr lookup: %.0f ns each\n", (t1 - t0) * 1e6 / 1000000);

    /* The cache gives the same object back, without loading again. */
    uint64_t loads = elfsym_cache_loads();
    t0 = ((double)scry_now_ns() / 1e6);
    elfsym_obj_t *o2 = elfsym_obj_open(PY311_LIB, &err);
    t1 = ((double)scry_now_ns() / 1e6);
    CHECK(o2 == o, "cache returned %p vs %p", (void *)o2, (void *)o);
    CHECK(elfsym_cache_loads() == loads, "no reload");
    printf("cached open: %.3f ms\n", t1 - t0);
    /* Same file through another path (a symlink in the pyenv tree) is the same object. */
    elfsym_obj_t *o3 = elfsym_obj_open("/root/.pyenv/versions/3.11.7/lib/libpython3.11.so", &err);
    CHECK(o3 == o, "symlink path gives the same object");
    elfsym_obj_free(o3);
    elfsym_obj_free(o2);
    CHECK(elfsym_obj_build_id_hex(o)[0] != '\0', "build-id present");
    elfsym_obj_free(o);
}

static void test_debian_python(void)
{
    elfsym_obj_t *o = open_checked(DEB_PY311);
    if (!o)
        return;
    CHECK(elfsym_obj_type(o) == ET_EXEC, "ET_EXEC");
    CHECK(strcmp(elfsym_obj_build_id_hex(o), "571d98e01096d5c1c32420d229a6731a0a50d2a0") == 0,
          "build-id %s", elfsym_obj_build_id_hex(o));
    elfsym_sym_t rt, ver;
    CHECK(elfsym_obj_lookup(o, "_PyRuntime", &rt) == 0, "_PyRuntime in .dynsym");
    CHECK(elfsym_obj_lookup(o, "Py_Version", &ver) == 0, "Py_Version");
    elfsym_section_t sec;
    CHECK(elfsym_obj_section(o, ".PyRuntime", &sec) == 0 && sec.addr == rt.value,
          ".PyRuntime %llx vs %llx", (unsigned long long)sec.addr, (unsigned long long)rt.value);
    CHECK(rt.value == 0xa5b740, "_PyRuntime %llx", (unsigned long long)rt.value);
    uint32_t pv = 0;
    CHECK(elfsym_obj_read_vaddr(o, ver.value, &pv, 4) == 0 && pv == 0x030b02f0u, "Py_Version %08x",
          pv);
    CHECK(elfsym_obj_nsegments(o) >= 4, "segments %zu", elfsym_obj_nsegments(o));
    const elfsym_segment_t *s0 = elfsym_obj_segment(o, 0);
    CHECK(s0 && s0->vaddr == 0x400000 && s0->offset == 0, "first PT_LOAD");
    /* .rodata read: the section's bytes equal the same range read by address. */
    elfsym_section_t ro;
    CHECK(elfsym_obj_section(o, ".rodata", &ro) == 0, ".rodata");
    char a[256], b[256];
    CHECK(elfsym_obj_read_section(o, ".rodata", a, sizeof a) == (long)sizeof a, "read section");
    CHECK(elfsym_obj_read_vaddr(o, ro.addr, b, sizeof b) == 0 && memcmp(a, b, sizeof a) == 0,
          "vaddr == section");
    CHECK(elfsym_obj_read_section(o, ".bss", a, sizeof a) == SCRY_E_INVAL, ".bss has no bytes");
    CHECK(elfsym_obj_read_vaddr(o, 0x10, a, 4) == SCRY_E_FAULT, "unmapped vaddr");
    /* Local symbols are absent (stripped), so addresses of static code are not named. */
    elfsym_sym_t got;
    uint64_t off;
    CHECK(elfsym_obj_addr_lookup(o, rt.value + 8, &got, &off) == 0 &&
              strcmp(got.name, "_PyRuntime") == 0 && off == 8,
          "_PyRuntime+8");
    elfsym_obj_free(o);
}

/* 3.6: the LOCAL interp_head comes from .symtab; the exported accessor's code points at it. */
static void test_py36(void)
{
    elfsym_obj_t *o = open_checked(PY36_LIB);
    if (!o)
        return;
    elfsym_sym_t ih;
    CHECK(elfsym_obj_lookup(o, "interp_head", &ih) == 0 && ih.bind == STB_LOCAL, "interp_head");
    elfsym_ref_t refs[2];
    int n = elfsym_obj_func_refs(o, "PyInterpreterState_Head", ELFSYM_REF_RIP, refs, 2);
    CHECK(n == 1 && refs[0].target == ih.value && refs[0].is_load && refs[0].size == 8,
          "n=%d target %llx interp_head %llx", n, n > 0 ? (unsigned long long)refs[0].target : 0,
          (unsigned long long)ih.value);
    elfsym_obj_free(o);
}

static void test_demangle(void)
{
    int err;
    elfsym_obj_t *o = elfsym_obj_open("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", &err);
    CHECK(o != NULL, "libstdc++: %s", scry_strerror(err));
    if (!o)
        return;
    size_t mangled = 0, demangled = 0;
    for (size_t i = 0; i < elfsym_obj_nsyms(o); i++) {
        const elfsym_sym_t *s = elfsym_obj_sym(o, i);
        if (strncmp(s->raw_name, "_Z", 2) != 0)
            continue;
        mangled++;
        if (s->name != s->raw_name && strstr(s->name, "::"))
            demangled++;
    }
    printf("libstdc++: %zu mangled names, %zu demangled\n", mangled, demangled);
    CHECK(mangled > 1000 && demangled > mangled / 2, "demangled %zu/%zu", demangled, mangled);
    /* Lookup is by the raw name. */
    CHECK(elfsym_obj_lookup(o, "_ZSt9terminatev", NULL) == 0, "std::terminate by raw name");
    elfsym_obj_free(o);
}

static int run(const char *cmd)
{
    int rc = system(cmd);
    return rc;
}

/* A stripped copy of libpython3.6m with its symbols in dir/.debug/ via .gnu_debuglink. */
static void test_debuglink(void)
{
    char dir[] = "/tmp/elfsym_dbg_XXXXXX";
    char cmd[1024], lib[256];
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    snprintf(lib, sizeof lib, "%s/libx.so", dir);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/.debug && objcopy --only-keep-debug %s %s/.debug/libx.debug && "
             "objcopy --strip-all --remove-section=.note.gnu.build-id "
             "--add-gnu-debuglink=%s/.debug/libx.debug %s %s",
             dir, PY36_LIB, dir, dir, PY36_LIB, lib);
    CHECK(run(cmd) == 0, "objcopy");
    int err;
    elfsym_obj_t *o = elfsym_obj_open(lib, &err);
    CHECK(o != NULL, "open stripped: %s", scry_strerror(err));
    if (o) {
        CHECK(elfsym_obj_debuglink(o) && strcmp(elfsym_obj_debuglink(o), "libx.debug") == 0,
              "debuglink %s", elfsym_obj_debuglink(o) ? elfsym_obj_debuglink(o) : "(null)");
        CHECK(elfsym_obj_debug_path(o) && strstr(elfsym_obj_debug_path(o), "/.debug/libx.debug"),
              "debug path %s", elfsym_obj_debug_path(o) ? elfsym_obj_debug_path(o) : "(null)");
        /* interp_head is local: only the debug file has it. */
        CHECK(elfsym_obj_lookup(o, "interp_head", NULL) == 0, "interp_head via debug file");
        elfsym_obj_free(o);
    }
    /* A debug file with the wrong CRC is refused. */
    char lib2[256];
    snprintf(lib2, sizeof lib2, "%s/liby.so", dir);
    snprintf(cmd, sizeof cmd,
             "cp %s/.debug/libx.debug %s/.debug/liby.debug && "
             "objcopy --strip-all --remove-section=.note.gnu.build-id "
             "--add-gnu-debuglink=%s/.debug/liby.debug %s %s && "
             "printf x >> %s/.debug/liby.debug",
             dir, dir, dir, PY36_LIB, lib2, dir);
    CHECK(run(cmd) == 0, "objcopy 2");
    o = elfsym_obj_open(lib2, &err);
    CHECK(o != NULL, "open liby");
    if (o) {
        CHECK(elfsym_obj_debug_path(o) == NULL, "bad CRC refused");
        CHECK(elfsym_obj_lookup(o, "interp_head", NULL) == SCRY_E_NOTFOUND, "no local syms");
        elfsym_obj_free(o);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    run(cmd);
}

static int write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, data, len);
    close(fd);
    return w == (ssize_t)len ? 0 : -1;
}

static void test_bad_input(void)
{
    int err = 0;
    CHECK(elfsym_obj_open("/nonexistent/file.so", &err) == NULL && err == SCRY_E_NOTFOUND,
          "missing: %d", err);
    CHECK(elfsym_obj_open("", &err) == NULL && err == SCRY_E_INVAL, "empty path");
    CHECK(elfsym_obj_open("/tmp", &err) == NULL && err == SCRY_E_ELF, "directory: %d", err);
    CHECK(elfsym_obj_open("/etc/passwd", &err) == NULL && err == SCRY_E_ELF, "text: %d", err);
    /* A FIFO where a mapped file was (the target can rename one there): refused at once,
     * never waited on (the open used to block until a writer came). */
    char fifo[] = "/tmp/scry_elfobj_fifoXXXXXX";
    if (mkdtemp(fifo)) {
        char p[64];
        snprintf(p, sizeof p, "%s/lib.so", fifo);
        CHECK(mkfifo(p, 0600) == 0, "mkfifo");
        CHECK(elfsym_obj_open(p, &err) == NULL && err == SCRY_E_ELF, "fifo: %d", err);
        unlink(p);
        rmdir(fifo);
    }

    /* Truncations and corruptions of a real library: must never crash. */
    FILE *f = fopen(PY36_LIB, "rb");
    CHECK(f != NULL, "open 3.6 lib");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *img = malloc((size_t)size);
    CHECK(img && fread(img, 1, (size_t)size, f) == (size_t)size, "read lib");
    fclose(f);
    if (!img)
        return;
    char path[64];
    snprintf(path, sizeof path, "/tmp/elfsym_bad_%d.so", (int)getpid());
    static const long cuts[] = {0, 1, 4, 16, 63, 64, 100, 4096, 65536, 1 << 20};
    int ok_fail = 0;
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_file(path, img, (size_t)cuts[i]);
        elfsym_obj_t *o = elfsym_obj_open(path, &err);
        if (!o)
            ok_fail++;
        else {
            /* Opened from a prefix (headers intact): queries still must not crash. */
            char buf[64];
            (void)elfsym_obj_read_section(o, ".rodata", buf, sizeof buf);
            (void)elfsym_obj_lookup(o, "PyInterpreterState_Head", NULL);
            elfsym_ref_t r[4];
            (void)elfsym_obj_func_refs(o, "PyInterpreterState_Head", ELFSYM_REF_ALL, r, 4);
            elfsym_pyversion_t v;
            (void)elfsym_obj_pyversion(o, &v);
            elfsym_obj_free(o);
        }
        elfsym_cache_clear();
    }
    CHECK(ok_fail == (int)(sizeof cuts / sizeof cuts[0]), "truncations fail: %d", ok_fail);
    /* The section header table cut off: the end of the file is gone. */
    write_file(path, img, (size_t)size - 4096);
    elfsym_obj_t *o = elfsym_obj_open(path, &err);
    CHECK(o == NULL && err == SCRY_E_ELF, "cut tail: %d", err);
    elfsym_obj_free(o);
    elfsym_cache_clear();
    /* Random byte corruption in the headers and tables. */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    unsigned char *copy = malloc((size_t)size);
    int opened = 0;
    for (int round = 0; round < 60 && copy; round++) {
        memcpy(copy, img, (size_t)size);
        for (int k = 0; k < 64; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t at = round % 2 ? x % 4096 : (size_t)(x % (uint64_t)size);
            if (round % 3 == 0) /* hit the section headers at the end */
                at = (size_t)size - 1 - x % 8192;
            copy[at] = (unsigned char)(x >> 32);
        }
        write_file(path, copy, (size_t)size);
        o = elfsym_obj_open(path, &err);
        if (o) {
            opened++;
            elfsym_sym_t s;
            uint64_t off;
            for (size_t i = 0; i < elfsym_obj_nsyms(o); i += 97)
                (void)elfsym_obj_addr_lookup(o, elfsym_obj_sym(o, i)->value + 1, &s, &off);
            char buf[64];
            (void)elfsym_obj_read_section(o, ".rodata", buf, sizeof buf);
            elfsym_pyversion_t v;
            (void)elfsym_obj_pyversion(o, &v);
            elfsym_obj_free(o);
        } else {
            CHECK(err < 0, "error code set");
        }
        elfsym_cache_clear();
    }
    printf("corrupted files: %d/60 still opened\n", opened);
    unlink(path);
    free(copy);
    free(img);
}

int main(void)
{
    test_libpython311();
    test_debian_python();
    test_py36();
    test_demangle();
    test_debuglink();
    test_bad_input();
    elfsym_cache_clear();
    return check_summary("test_elfsym_obj");
}
