/* test_elfsym_python.c - finding the interpreter in real, running Pythons: pyenv 3.12
 * (libpython3.12.so), Debian's non-PIE /usr/bin/python3.11 (bias 0), pyenv 3.6 (interp_head
 * recovered by disassembly and read from memory), and a process that is not Python.
 * Each check of a bias is confirmed by reading Py_Version or a pointer from memory. */
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

static char sleeper[] = "import time; time.sleep(30)";
static char dash_c[] = "-c";

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Starts ARGV and waits (5 s at most) until its maps mention NEEDLE. Returns the pid. */
static pid_t spawn(char *const argv[], const char *needle)
{
    pid_t c = fork();
    if (c == 0) {
        check_child_dies_with_test();
        execv(argv[0], argv);
        _exit(127);
    }
    for (int i = 0; i < 500 && c > 0; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/maps", (int)c);
        FILE *f = fopen(path, "r");
        char line[1024];
        int found = 0;
        while (f && fgets(line, sizeof line, f))
            if (strstr(line, needle))
                found = 1;
        if (f)
            fclose(f);
        if (found)
            return c;
        sleep_ms(10);
    }
    return c;
}

/* Starts the Python EXE sleeping, waits until its maps mention NEEDLE and looks for its
 * interpreter (*MOD). Returns the pid; *RC gets elfsym_find_interpreter's result. */
static pid_t spawn_python(const char *exe, const char *needle, elfsym_module_t *mod, int *rc)
{
    char *argv[] = {(char *)exe, dash_c, sleeper, NULL};
    pid_t c = spawn(argv, needle);
    *rc = elfsym_find_interpreter(c, NULL, mod);
    return c;
}

static void stop(pid_t c)
{
    if (c > 0) {
        kill(c, SIGKILL);
        waitpid(c, NULL, 0);
    }
}

static uint64_t read_u64(pid_t pid, raddr_t addr, int *rc)
{
    uint64_t v = 0;
    rmem_t *m = rmem_open_pid(pid);
    *rc = m ? rmem_read(m, addr, &v, sizeof v) : SCRY_E_NOMEM;
    rmem_free(m);
    return v;
}

static void test_py312(void)
{
    elfsym_module_t mod;
    int rc;
    pid_t c =
        spawn_python("/root/.pyenv/versions/3.12.1/bin/python3.12", "libpython3.12", &mod, &rc);
    CHECK(rc == 0, "3.12: %s", scry_strerror(rc));
    if (rc == 0) {
        CHECK(mod.is_libpython && strstr(mod.path, "/libpython3.12.so") != NULL, "path %s",
              mod.path);
        CHECK(mod.major == 3 && mod.minor == 12, "name version %d.%d", mod.major, mod.minor);
        CHECK(mod.bias != 0 && mod.bias % 4096 == 0 && mod.bias == mod.start,
              "bias %llx start %llx", (unsigned long long)mod.bias, (unsigned long long)mod.start);
        printf("3.12: %s bias %#llx open %s\n", mod.path, (unsigned long long)mod.bias,
               mod.open_path);
        elfsym_sym_t s;
        CHECK(elfsym_obj_lookup(mod.obj, "Py_Version", &s) == 0, "Py_Version");
        uint64_t v = read_u64(c, s.value + mod.bias, &rc);
        CHECK(rc == 0 && (v & 0xffffffffu) == 0x030c01f0u, "Py_Version in memory %llx (rc %d)",
              (unsigned long long)v, rc);
        /* _PyRuntime sits in a writable mapping of the same file. */
        CHECK(elfsym_obj_lookup(mod.obj, "_PyRuntime", &s) == 0, "_PyRuntime");
        elfsym_maps_t *maps = elfsym_maps_new(c, &rc);
        const elfsym_map_t *e = elfsym_maps_find(maps, s.value + mod.bias);
        CHECK(e && (e->perms & ELFSYM_PERM_W) && e->inode == mod.inode, "_PyRuntime mapping");
        /* The symbolizer agrees. */
        elfsym_symbolizer_t *sz = elfsym_symbolizer_new(c, &rc);
        elfsym_loc_t loc;
        CHECK(sz && elfsym_symbolize(sz, s.value + mod.bias + 16, &loc) == 0 &&
                  strcmp(loc.symbol, "_PyRuntime") == 0 && loc.sym_offset == 16 &&
                  strcmp(loc.lib, "libpython3.12.so.1.0") == 0,
              "symbolize _PyRuntime+16: %s in %s", loc.symbol ? loc.symbol : "?", loc.lib);
        CHECK(elfsym_obj_lookup(mod.obj, "_PyEval_EvalFrameDefault", &s) == 0, "eval");
        CHECK(sz && elfsym_symbolize(sz, s.value + mod.bias + 100, &loc) == 0 &&
                  strcmp(loc.symbol, "_PyEval_EvalFrameDefault") == 0,
              "eval: %s", loc.symbol ? loc.symbol : "?");
        /* libc in the target: the module open path goes through /proc/PID/root. */
        CHECK(strncmp(mod.open_path, "/proc/", 6) == 0, "open path %s", mod.open_path);
        elfsym_symbolizer_free(sz);
        elfsym_maps_free(maps);
        elfsym_obj_free(mod.obj);
    }
    stop(c);
    /* Gone: the maps can no longer be read. */
    CHECK(elfsym_find_interpreter(c, NULL, &mod) == SCRY_E_NOPROC, "exited process");
}

static void test_debian311(void)
{
    elfsym_module_t mod;
    int rc;
    pid_t c = spawn_python("/usr/bin/python3.11", "/usr/bin/python3.11", &mod, &rc);
    CHECK(rc == 0, "3.11: %s", scry_strerror(rc));
    if (rc == 0) {
        CHECK(!mod.is_libpython && strcmp(mod.path, "/usr/bin/python3.11") == 0, "exe %s",
              mod.path);
        CHECK(mod.bias == 0 && mod.start == 0x400000, "non-PIE bias %llx",
              (unsigned long long)mod.bias);
        CHECK(mod.major == 3 && mod.minor == 11, "name version");
        elfsym_sym_t s;
        CHECK(elfsym_obj_lookup(mod.obj, "Py_Version", &s) == 0, "Py_Version");
        uint64_t v = read_u64(c, s.value + mod.bias, &rc);
        CHECK(rc == 0 && (v & 0xffffffffu) == 0x030b02f0u, "Py_Version %llx",
              (unsigned long long)v);
        elfsym_pyversion_t pv;
        CHECK(elfsym_obj_pyversion(mod.obj, &pv) == 0 && pv.micro == 2, "3.11.2 from the file");
        elfsym_obj_free(mod.obj);
    }
    stop(c);
}

static void test_py36(void)
{
    elfsym_module_t mod;
    int rc;
    pid_t c =
        spawn_python("/root/.pyenv/versions/3.6.15/bin/python3.6", "libpython3.6m", &mod, &rc);
    CHECK(rc == 0 && mod.major == 3 && mod.minor == 6, "3.6: %s", scry_strerror(rc));
    if (rc == 0) {
        elfsym_ref_t r[2];
        int n = elfsym_obj_func_refs(mod.obj, "PyInterpreterState_Head", ELFSYM_REF_RIP, r, 2);
        CHECK(n == 1, "refs %d", n);
        /* The interpreter state list is set up during start-up: poll for it. */
        uint64_t head = 0;
        for (int i = 0; n == 1 && i < 200 && head == 0; i++) {
            head = read_u64(c, r[0].target + mod.bias, &rc);
            if (!head)
                sleep_ms(10);
        }
        CHECK(rc == 0 && head != 0, "interp_head %llx", (unsigned long long)head);
        /* It points into the heap (an anonymous or [heap] mapping), not into a file. */
        elfsym_maps_t *maps = elfsym_maps_new(c, &rc);
        const elfsym_map_t *e = elfsym_maps_find(maps, head);
        CHECK(e && !elfsym_map_is_file(e) && (e->perms & ELFSYM_PERM_W), "head in %s",
              e ? e->path : "nothing");
        elfsym_maps_free(maps);
        elfsym_obj_free(mod.obj);
    }
    stop(c);
}

static void test_not_python(void)
{
    static char exe[] = "/bin/sleep", secs[] = "30";
    char *argv[] = {exe, secs, NULL};
    pid_t c = spawn(argv, "libc.so");
    elfsym_module_t mod;
    int rc = elfsym_find_interpreter(c, NULL, &mod);
    CHECK(rc == SCRY_E_NOTPY, "sleep: %d", rc);
    stop(c);
}

int main(void)
{
    test_py312();
    test_debian311();
    test_py36();
    test_not_python();
    elfsym_cache_clear();
    return check_summary("test_elfsym_python");
}
