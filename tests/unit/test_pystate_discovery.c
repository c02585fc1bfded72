/* test_pystate_discovery.c - pystate_target_open_opts: every way of finding the runtime on
 * real interpreters (symbols, the .PyRuntime section, disassembly of
 * PyInterpreterState_Head), chosen by the option and never by the environment; the ways
 * agree on the runtime's threads; a bad option is refused. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "pystate.h"
#include "scry_err.h"
#include "strtab.h"

#define PYENV "/root/.pyenv/versions/"

static int out_fd = -1; /* the child's stdout, open while it runs */

static pid_t start(const char *python)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        check_child_dies_with_test();
        dup2(fds[1], 1);
        close(fds[0]);
        execl(python, python, "-c",
              "import sys, time\nprint('ready', flush=True)\ntime.sleep(60)\n", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[16] = "";
    ssize_t n = read(fds[0], buf, sizeof buf - 1); /* Python is initialised once it prints */
    out_fd = fds[0];
    if (n <= 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

static void test_version(const char *python, const char *what, int has_section)
{
    struct stat st;
    if (stat(python, &st) != 0) {
        fprintf(stderr, "skip %s: %s not installed\n", what, python);
        return;
    }
    pid_t pid = start(python);
    CHECK(pid > 0, "%s: start", what);
    if (pid <= 0)
        return;
    static const struct {
        int discovery;
        const char *how; /* prefix of info.how_found */
    } ways[] = {
        {PYSTATE_DISCOVERY_ALL, "symbol"},
        {PYSTATE_DISCOVERY_SECTION, ".PyRuntime section"},
        {PYSTATE_DISCOVERY_DISASM, "disassembly"},
    };
    setenv("SCRY_DISCOVERY", "disasm", 1); /* the environment must change nothing */
    for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++) {
        strtab_t *strings = strtab_new();
        pystate_target_t *t = NULL;
        char err[512] = "";
        pystate_open_opts_t o = {.discovery = ways[i].discovery};
        int rc = pystate_target_open_opts(pid, strings, &o, &t, err, sizeof err);
        CHECK_INT(rc, ==, 0, "%s way %zu: %s", what, i, err);
        if (rc == 0) {
            const char *how = pystate_target_info(t)->how_found;
            const char *want = ways[i].how;
            if (ways[i].discovery == PYSTATE_DISCOVERY_SECTION && !has_section)
                want = "disassembly";
            CHECK(strncmp(how, want, strlen(want)) == 0, "%s way %zu: found by '%s', want '%s'",
                  what, i, how, want);
            pystate_snapshot_t *snap = pystate_snapshot_new();
            CHECK_INT(pystate_sample(t, snap), ==, 0, "%s way %zu", what, i);
            CHECK_UINT(pystate_snapshot_count(snap), ==, 1, "%s way %zu: threads", what, i);
            pystate_snapshot_free(snap);
        }
        pystate_target_free(t);
        strtab_free(strings);
    }
    unsetenv("SCRY_DISCOVERY");
    strtab_t *strings = strtab_new();
    pystate_target_t *t = NULL;
    char err[64];
    pystate_open_opts_t bad = {.discovery = 7};
    CHECK_INT(pystate_target_open_opts(pid, strings, &bad, &t, err, sizeof err), ==, SCRY_E_INVAL);
    CHECK(t == NULL);
    CHECK_INT(pystate_target_open_opts(pid, strings, NULL, &t, err, sizeof err), ==, 0, "%s", what);
    pystate_target_free(t);
    strtab_free(strings);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(out_fd);
}

int main(void)
{
    test_version(PYENV "3.12.1/bin/python3.12", "3.12", 1);
    test_version(PYENV "3.10.13/bin/python3.10", "3.10", 1);
    return check_summary("test_pystate_discovery");
}
