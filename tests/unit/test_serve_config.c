/* test_serve_config.c - the daemon's configuration: INI file, flags, rules, errors. */
#include "config.h"
#include "scry_err.h"
#include "test_serve_util.h"

#include <stdarg.h>
#include <unistd.h>

static char dir[] = "/tmp/scry-test-config-XXXXXX";

static serve_config_t *from_args(char *msg, size_t len, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, len);
    for (char *a; argc < 31 && (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    return serve_config_from_args(argc, argv, msg, len);
}

static void test_defaults(void)
{
    char msg[512] = "";
    char conf[256];
    snprintf(conf, sizeof conf, "%s/empty.conf", dir);
    test_write_file(conf, "; nothing\n");
    serve_config_t *c = from_args(msg, sizeof msg, "--config", conf, NULL);
    CHECK(c != NULL, "%s", msg);
    if (!c)
        return;
    CHECK(c->rate_hz == 19, "%g", c->rate_hz);
    CHECK(c->interval_s == 60, "%g", c->interval_s);
    CHECK(c->all_python == 1, "all-python is the default without rules");
    CHECK(strcmp(c->out_dir, "/var/lib/scry") == 0, "%s", c->out_dir);
    CHECK(strcmp(c->spool_dir, "/var/lib/scry/spool") == 0, "%s", c->spool_dir);
    CHECK(strcmp(c->socket_path, "/run/scry/scry.sock") == 0, "%s", c->socket_path);
    CHECK(c->fmt_collapsed && c->fmt_flamegraph && c->fmt_pprof, "formats");
    CHECK(c->host && c->host[0], "host");
    CHECK(c->scan_interval_s == 10, "scan with the connector: %g", c->scan_interval_s);
    CHECK(c->out_gid == (gid_t)-1, "no out-group: root only");
    serve_config_free(c);
    c = from_args(msg, sizeof msg, "--config", conf, "--out-group", "root", NULL);
    CHECK(c && c->out_gid == 0, "out-group root: %s", c ? "" : msg);
    serve_config_free(c);
    c = from_args(msg, sizeof msg, "--config", conf, "--out-group", "4242", NULL);
    CHECK(c && c->out_gid == 4242, "out-group by number: %s", c ? "" : msg);
    serve_config_free(c);
}

static void test_file_and_flags(void)
{
    char msg[512] = "", conf[256];
    snprintf(conf, sizeof conf, "%s/scry.conf", dir);
    test_write_file(conf, "# scry serve\n"
                          "out-dir = /srv/profiles\n"
                          "interval = 2m\n"
                          "rate = 25\n"
                          "max-cpu = 1%\n"
                          "sampler = perf\n"
                          "retention-age = 2d\n"
                          "retention-size = 512M\n"
                          "formats = collapsed, pprof\n"
                          "proc-connector = no\n"
                          "pyroscope-url = http://127.0.0.1:4040\n"
                          "pyroscope-tenant = team-a\n"
                          "match = gunicorn\n"
                          "\n"
                          "[service web]\n"
                          "match = ^/usr/bin/python3 .*web\\.py\n"
                          "user = root\n"
                          "rate = 50\n"
                          "\n"
                          "[service batch]\n"
                          "cgroup = /system.slice/batch.service\n"
                          "container = 0123abcd\n");
    serve_config_t *c = from_args(msg, sizeof msg, "--config", conf, "--rate=30", "--interval", "5",
                                  "--sampler", "bpf", NULL);
    CHECK(c != NULL, "%s", msg);
    if (!c)
        return;
    CHECK(strcmp(c->out_dir, "/srv/profiles") == 0, "%s", c->out_dir);
    CHECK(c->interval_s == 5, "flag wins over file: %g", c->interval_s);
    CHECK(c->rate_hz == 30, "flag wins: %g", c->rate_hz);
    CHECK(c->max_cpu_pct == 1, "%g", c->max_cpu_pct);
    CHECK(c->sampler && strcmp(c->sampler, "bpf") == 0, "flag wins: %s",
          c->sampler ? c->sampler : "(none)");
    CHECK(c->retention_age_s == 2 * 86400, "%g", c->retention_age_s);
    CHECK(c->retention_bytes == 512ull << 20, "%llu", (unsigned long long)c->retention_bytes);
    CHECK(c->fmt_collapsed && !c->fmt_flamegraph && c->fmt_pprof, "formats");
    CHECK(c->proc_connector == 0 && c->scan_interval_s == 0.5, "scan %g", c->scan_interval_s);
    CHECK(c->all_python == 0, "rules given: all-python off by default");
    CHECK(c->n_rules == 3, "%zu rules", c->n_rules);
    if (c->n_rules == 3) {
        CHECK(c->rules[0].name == NULL && c->rules[0].n_match == 1, "anonymous match rule");
        CHECK(strcmp(c->rules[1].name, "web") == 0 && c->rules[1].rate_hz == 50 &&
                  c->rules[1].n_uid == 1 && c->rules[1].uid[0] == 0,
              "web");
        CHECK(strcmp(c->rules[2].name, "batch") == 0 && c->rules[2].n_cgroup == 1 &&
                  strcmp(c->rules[2].container[0], "0123abcd") == 0,
              "batch");
    }
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream(&out, &outlen);
    serve_config_print(c, f);
    fclose(f);
    CHECK(strstr(out, "[service web]") && strstr(out, "rate = 50") &&
              strstr(out, "pyroscope-tenant = team-a"),
          "print: %s", out);
    free(out);
    serve_config_free(c);

    /* --match on the command line adds a rule; --all-python turns the rest on too */
    c = from_args(msg, sizeof msg, "--config", conf, "--match", "celery", "--all-python", NULL);
    CHECK(c && c->n_rules == 4 && c->all_python == 1, "%s", c ? "" : msg);
    serve_config_free(c);
    c = from_args(msg, sizeof msg, "--config", conf, "--no-proc-connector", "--check-config", NULL);
    CHECK(c && c->check_only && !c->proc_connector, "%s", c ? "" : msg);
    serve_config_free(c);
}

static void expect_error(const char *text, const char *want)
{
    char msg[512] = "", conf[256];
    snprintf(conf, sizeof conf, "%s/bad.conf", dir);
    test_write_file(conf, text);
    serve_config_t *c = from_args(msg, sizeof msg, "--config", conf, NULL);
    CHECK(c == NULL, "accepted: %s", text);
    CHECK(strstr(msg, want) != NULL, "message '%s' lacks '%s'", msg, want);
    serve_config_free(c);
}

static void test_errors(void)
{
    expect_error("rate = 19\nbogus = 1\n", "bad.conf:2: unknown option 'bogus'");
    expect_error("rate = fast\n", "rate: bad value 'fast'");
    expect_error("rate = -1\n", "rate: bad value");
    expect_error("interval = 0.2\n", "interval: bad value '0.2' (expected SECONDS from 1 to");
    /* one validator per kind of value (issue 24.9): ranges, NaN, names */
    expect_error("rate = 1e-300\n", "rate: bad value '1e-300'");
    expect_error("rate = nan\n", "rate: bad value 'nan'");
    expect_error("rate = 0x10\n", "rate: bad value '0x10'");
    expect_error("push-timeout = 1e300\n", "push-timeout: bad value '1e300'");
    expect_error("retention-age = inf\n", "retention-age: bad value 'inf'");
    expect_error("spool-max-bytes = nan\n", "spool-max-bytes: bad value 'nan'");
    expect_error("max-stacks = 1e3\n", "max-stacks: bad value '1e3'");
    expect_error("proc-connector = maybe\n", "proc-connector: bad value 'maybe' (expected yes/no");
    expect_error("[service web]\nmatch = x\nrate = 1e-300\n", "rate: bad value '1e-300'");
    expect_error("[service ../../etc]\n", "bad.conf:1: [service ../../etc]: a service name");
    expect_error("[service .hidden]\nmatch = x\n", "service name");
    expect_error("[bogus]\n", "unknown section [bogus]");
    expect_error("[service web]\nrate = 5\n", "selects nothing");
    expect_error("[service w/eb]\nmatch = x\n", "service name");
    expect_error("[other]\nmatch = x\n", "unknown section");
    expect_error("match = (unclosed\n", "bad regular expression");
    expect_error("pid = 12abc\n", "not a process id");
    expect_error("user = no-such-user-here\n", "no such user");
    expect_error("container = xyz\n", "not a container id");
    expect_error("cgroup = relative/path\n", "absolute cgroup path");
    expect_error("max-cpu = 200%\n", "max-cpu: bad value");
    expect_error("formats = png\n", "formats: bad value");
    expect_error("sampler = ebpf\n", "sampler is perf, ptrace, bpf or auto, not 'ebpf'");
    expect_error("out-dir = relative\n", "out-dir must be an absolute path");
    expect_error("out-group = no-such-group-here\n", "out-group: no group");
    expect_error("pyroscope-url = ftp://x\n", "must start with http");
    expect_error("pyroscope-url = http://x\npyroscope-user = u\n", "go together");
    expect_error("pyroscope-tenant = t\n", "without pyroscope-url");
    expect_error("pyroscope-url = http://x\npyroscope-token-file = /nonexistent/token\n",
                 "/nonexistent/token");
    expect_error("this line has no equals sign\n", "bad.conf:1:");
    expect_error("all-python = no\n", "no rule selects");

    char msg[512] = "";
    serve_config_t *c = from_args(msg, sizeof msg, "--config", "/nonexistent/scry.conf", NULL);
    CHECK(c == NULL && strstr(msg, "no such file"), "%s", msg);
    c = from_args(msg, sizeof msg, "--config", "/dev/null", "--rate", NULL);
    CHECK(c == NULL && strstr(msg, "--rate needs a value"), "%s", msg);
    c = from_args(msg, sizeof msg, "--config", "/dev/null", "--frobnicate", NULL);
    CHECK(c == NULL && strstr(msg, "unknown option '--frobnicate'"), "%s", msg);
    c = from_args(msg, sizeof msg, "--config", "/dev/null", "stray", NULL);
    CHECK(c == NULL && strstr(msg, "unexpected argument"), "%s", msg);
}

/* Every form of a boolean flag that `scry serve --help` shows (issue 25.7). */
static void test_bool_flags(void)
{
    char msg[512] = "";
    static const struct {
        const char *a, *b;
        int want;
    } forms[] = {
        {"--all-python", NULL, 1},    {"--all-python", "true", 1},  {"--all-python", "yes", 1},
        {"--all-python=on", NULL, 1}, {"--all-python", "0", 0},     {"--all-python", "FALSE", 0},
        {"--all-python=no", NULL, 0}, {"--no-all-python", NULL, 0},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        serve_config_t *c = forms[i].b ? from_args(msg, sizeof msg, "--config", "/dev/null",
                                                   "--match", "x", forms[i].a, forms[i].b, NULL)
                                       : from_args(msg, sizeof msg, "--config", "/dev/null",
                                                   "--match", "x", forms[i].a, NULL);
        CHECK(c && c->all_python == forms[i].want, "%s %s: %s", forms[i].a,
              forms[i].b ? forms[i].b : "", c ? "wrong value" : msg);
        serve_config_free(c);
    }
    /* a flag followed by another flag takes no value from it */
    serve_config_t *c = from_args(msg, sizeof msg, "--config", "/dev/null", "--all-python",
                                  "--no-proc-connector", NULL);
    CHECK(c && c->all_python == 1 && c->proc_connector == 0, "%s", c ? "" : msg);
    serve_config_free(c);
    c = from_args(msg, sizeof msg, "--config", "/dev/null", "--all-python=maybe", NULL);
    CHECK(c == NULL && strstr(msg, "yes/no"), "%s", msg);
    serve_config_free(c);
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream(&out, &outlen);
    serve_config_usage(f);
    fclose(f);
    CHECK(strstr(out, "--all-python [BOOL]") && strstr(out, "true/false") &&
              strstr(out, "--no-KEY"),
          "help shows the forms: %s", out);
    free(out);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_defaults();
    test_file_and_flags();
    test_errors();
    test_bool_flags();
    check_rmtree(dir);
    return test_summary("test_serve_config");
}
