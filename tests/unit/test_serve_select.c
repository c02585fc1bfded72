/* test_serve_select.c - process facts from /proc, service names, container ids, and the
 * selection rules, on real processes (a real Python among them). */
#include "config.h"
#include "process.h"
#include "scry_proc.h"
#include "scry_err.h"
#include "select.h"
#include "test_serve_util.h"

#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_service_names(void)
{
    struct {
        const char *argv[6];
        const char *want;
    } cases[] = {
        {{"python3", "-m", "pkg.mod", "--x"}, "pkg.mod"},
        {{"/usr/bin/python3.11", "-u", "/srv/app/web.py", "--port", "80"}, "web"},
        {{"/usr/bin/python3", "/usr/bin/gunicorn", "app:app"}, "gunicorn"},
        {{"python3", "-c", "print(1)"}, "python-c"},
        {{"python3", "-X", "dev", "-W", "ignore", "job.py"}, "job"},
        {{"python3", "-mhttp.server"}, "http.server"},
        {{"/opt/venv/bin/uwsgi", "--ini", "x.ini"}, "uwsgi"},
        {{"python3", "/tmp/we ird$name.py"}, "we_ird_name"},
        {{"python3"}, "comm"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t argc = 0;
        while (argc < 6 && cases[i].argv[argc])
            argc++;
        char out[80];
        proc_service_name(cases[i].argv, argc, "comm", out, sizeof out);
        CHECK(strcmp(out, cases[i].want) == 0, "case %zu: '%s' != '%s'", i, out, cases[i].want);
    }
}

static pid_t spawn(const char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        check_child_dies_with_test();
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static void test_real_processes(void)
{
    proc_process_t *p = malloc(sizeof *p);
    CHECK(proc_process_read(getpid(), p, 1) == 0, "read self");
    CHECK(p->uid == getuid() && !p->is_python, "self uid %u python %d", (unsigned)p->uid,
          p->is_python);
    CHECK(strstr(p->cmdline, "test_serve_select") != NULL, "cmdline %s", p->cmdline);
    CHECK(p->start_time > 0, "start time");

    const char *py = "/usr/bin/python3.11";
    if (access(py, X_OK) != 0) {
        printf("SKIP python part: %s missing\n", py);
        free(p);
        return;
    }
    const char *argv[] = {py, "-c", "import time; time.sleep(30)", "--tag=serve-select", NULL};
    pid_t child = spawn(argv);
    usleep(300 * 1000);
    int rc = proc_process_read(child, p, 1);
    CHECK(rc == 0, "read child: %d", rc);
    CHECK(p->is_python, "python detected (exe %s)", p->exe);
    CHECK(strcmp(p->exe, py) == 0, "exe %s", p->exe);
    CHECK(p->argc == 4 && strcmp(p->argv[3], "--tag=serve-select") == 0, "argv");
    uint64_t st = 0;
    CHECK(proc_read_identity(child, &st, NULL, 0) == 0 && st == p->start_time, "identity stable");

    char msg[256], name[80];
    double rate;
    serve_config_t *c = serve_config_new();
    serve_config_finish(c, msg, sizeof msg);
    CHECK(serve_select(c, p, name, sizeof name, &rate) == SERVE_SELECT_ALL &&
              strcmp(name, "python-c") == 0,
          "all-python: %s", name);
    serve_config_free(c);

    c = serve_config_new();
    CHECK(serve_config_set(c, "sleepy", "match", "tag=serve-sel", msg, sizeof msg) == 0, "%s", msg);
    CHECK(serve_config_set(c, "sleepy", "rate", "7", msg, sizeof msg) == 0, "%s", msg);
    char pidtxt[32];
    snprintf(pidtxt, sizeof pidtxt, "%d", (int)child);
    CHECK(serve_config_set(c, "bypid", "pid", pidtxt, msg, sizeof msg) == 0, "%s", msg);
    CHECK(serve_config_set(c, "nobody", "user", "65534", msg, sizeof msg) == 0, "%s", msg);
    CHECK(serve_config_set(c, "nobody", "match", "python", msg, sizeof msg) == 0, "%s", msg);
    CHECK(serve_config_finish(c, msg, sizeof msg) == 0, "%s", msg);
    CHECK(c->all_python == 0, "rules: no all-python");
    CHECK(serve_select(c, p, name, sizeof name, &rate) == 0 && strcmp(name, "sleepy") == 0 &&
              rate == 7,
          "first rule wins: %s %g", name, rate);
    /* the cheap first look: only the command is known */
    proc_process_t *cmd = calloc(1, sizeof *cmd);
    CHECK(proc_process_read_command(child, cmd) == 0 && strcmp(cmd->exe, py) == 0, "command");
    CHECK(serve_select_may_hold(c, cmd), "a pid rule may hold");
    serve_config_t *mo = serve_config_new();
    serve_config_set(mo, NULL, "match", "tag=serve-sel", msg, sizeof msg);
    serve_config_finish(mo, msg, sizeof msg);
    CHECK(serve_select_may_hold(mo, cmd), "match holds");
    serve_config_free(mo);
    mo = serve_config_new();
    serve_config_set(mo, NULL, "match", "no-such-tag", msg, sizeof msg);
    serve_config_finish(mo, msg, sizeof msg);
    CHECK(!serve_select_may_hold(mo, cmd), "no match rule can hold");
    serve_config_free(mo);
    free(cmd);
    /* the user rule (AND match) does not hold: wrong uid */
    CHECK(!serve_select_rule_holds(&c->rules[2], p), "uid 65534 rule");
    CHECK(serve_select_rule_holds(&c->rules[1], p), "pid rule");
    /* cgroup rules: the child's own cgroup and a parent of it hold, a sibling does not */
    serve_rule_t r;
    memset(&r, 0, sizeof r);
    r.cgroup[0] = p->cgroup;
    r.n_cgroup = 1;
    CHECK(serve_select_rule_holds(&r, p), "own cgroup %s", p->cgroup);
    r.cgroup[0] = (char *)"/";
    CHECK(serve_select_rule_holds(&r, p), "root cgroup");
    r.cgroup[0] = (char *)"/no-such.slice";
    CHECK(!serve_select_rule_holds(&r, p), "other cgroup");
    /* a non-Python process is not picked by all-python */
    proc_process_t *self = malloc(sizeof *self);
    proc_process_read(getpid(), self, 1);
    serve_config_t *all = serve_config_new();
    serve_config_finish(all, msg, sizeof msg);
    CHECK(serve_select(all, self, name, sizeof name, &rate) == SERVE_SELECT_NONE, "not python");
    serve_config_free(all);
    free(self);
    serve_config_free(c);

    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK(proc_process_read(child, p, 1) == SCRY_E_NOPROC, "gone");
    free(p);
}

int main(void)
{
    test_service_names();
    test_real_processes();
    return test_summary("test_serve_select");
}
