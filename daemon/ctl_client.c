/* ctl_client.c - `scry ctl`, the command-line client of `scry serve`'s control socket
 * (serve/ctl.h: the protocol and serve_ctl_call). */
#include "commands.h"
#include "config.h"
#include "ctl.h"
#include "report.h"
#include "scry_err.h"
#include "scry_parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ctl_usage(FILE *f)
{
    fprintf(f, "usage: scry ctl [--socket PATH] [--json] COMMAND\n"
               "  list                         targets: pid, service, rate, CPU, samples, errors\n"
               "  dump PID [--native]          every thread's stack now, from the warm daemon\n"
               "  flush                        end the current windows now\n"
               "  record PID [--memory] [--duration S] [--rate HZ] [--format F] [--output FILE]\n"
               "                               an on-demand profile of one process (default 10 s\n"
               "                               at scry record's 100 Hz; F as scry record --format\n"
               "                               but pprof, by default from FILE's extension as in\n"
               "                               scry record, else text); the daemon answers at its\n"
               "                               end; FILE is written here\n"
               "  set-rate [PID] HZ            the sampling rate of one target, or of all\n"
               "  reload                       read the configuration again (as SIGHUP)\n"
               "--socket defaults to /run/scry/scry.sock; --json prints the raw reply.\n");
}

static int parse_pid(const char *s, long *out)
{
    long long v;
    if (scry_parse_int(s, 1, 0x3fffffff, &v) != 0)
        return -1;
    *out = (long)v;
    return 0;
}

static void print_list(json_object *reply)
{
    json_object *targets;
    if (!json_object_object_get_ex(reply, "targets", &targets) ||
        !json_object_is_type(targets, json_type_array))
        return;
    printf("%8s  %-24s %-8s %6s %7s %9s %7s  %s\n", "PID", "SERVICE", "PYTHON", "RATE", "CPU%",
           "SAMPLES", "ERRORS", "CONTAINER");
    size_t n = json_object_array_length(targets);
    for (size_t i = 0; i < n; i++) {
        json_object *t = json_object_array_get_idx(targets, i), *v;
#define FIELD(k) (json_object_object_get_ex(t, k, &v) ? v : NULL)
        const char *cont = json_object_get_string(FIELD("container"));
        printf("%8d  %-24.24s %-8.8s %6.1f %7.2f %9lld %7lld  %.12s\n",
               json_object_get_int(FIELD("pid")), json_object_get_string(FIELD("service")),
               json_object_get_string(FIELD("python")), json_object_get_double(FIELD("rate")),
               json_object_get_double(FIELD("cpu_pct")),
               (long long)json_object_get_int64(FIELD("samples")),
               (long long)json_object_get_int64(FIELD("errors")), cont ? cont : "");
#undef FIELD
    }
}

int cmd_ctl(int argc, char **argv)
{
    const char *sock = "/run/scry/scry.sock";
    int json = 0, memory = 0, native = 0;
    double duration = 0, rate = 0;
    const char *format = NULL, *output = NULL;
    const char *pos[3] = {NULL, NULL, NULL};
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--socket") == 0 && i + 1 < argc)
            sock = argv[++i];
        else if (strncmp(a, "--socket=", 9) == 0)
            sock = a + 9;
        else if (strcmp(a, "--json") == 0)
            json = 1;
        else if (strcmp(a, "--memory") == 0)
            memory = 1;
        else if (strcmp(a, "--native") == 0)
            native = 1;
        else if (strcmp(a, "--format") == 0 && i + 1 < argc)
            format = argv[++i];
        else if (strcmp(a, "--output") == 0 && i + 1 < argc)
            output = argv[++i];
        else if (strcmp(a, "--duration") == 0 && i + 1 < argc) {
            if (scry_parse_number(argv[++i], 0.1, 3600, &duration) != 0) {
                fprintf(stderr, "scry ctl: --duration takes 0.1 <= S <= 3600\n");
                return 2;
            }
        } else if (strcmp(a, "--rate") == 0 && i + 1 < argc) {
            if (scry_parse_number(argv[++i], SERVE_RATE_MIN_HZ, SERVE_RATE_MAX_HZ, &rate) != 0) {
                fprintf(stderr, "scry ctl: --rate takes %g <= HZ <= %g\n", SERVE_RATE_MIN_HZ,
                        SERVE_RATE_MAX_HZ);
                return 2;
            }
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            ctl_usage(stdout);
            return 0;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "scry ctl: unknown option '%s'\n", a);
            ctl_usage(stderr);
            return 2;
        } else if (npos < 3) {
            pos[npos++] = a;
        } else {
            fprintf(stderr, "scry ctl: too many arguments\n");
            return 2;
        }
    }
    if (npos == 0) {
        ctl_usage(stderr);
        return 2;
    }
    json_object *req = json_object_new_object();
    const char *cmd = pos[0];
    long pid = 0;
    int bad = 0;
    json_object_object_add(req, "cmd", json_object_new_string(cmd));
    if (strcmp(cmd, "list") == 0 || strcmp(cmd, "flush") == 0 || strcmp(cmd, "reload") == 0) {
        bad = npos != 1;
    } else if (strcmp(cmd, "dump") == 0 || strcmp(cmd, "record") == 0) {
        bad = npos != 2 || parse_pid(pos[1], &pid) != 0;
        if (!bad) {
            json_object_object_add(req, "pid", json_object_new_int((int)pid));
            if (native)
                json_object_object_add(req, "native", json_object_new_boolean(1));
            if (cmd[0] == 'r' && memory)
                json_object_object_add(req, "memory", json_object_new_boolean(1));
            if (cmd[0] == 'r' && duration > 0)
                json_object_object_add(req, "duration", json_object_new_double(duration));
            if (cmd[0] == 'r' && rate > 0)
                json_object_object_add(req, "rate", json_object_new_double(rate));
            if (cmd[0] == 'r') {
                /* scry record's rule: the output name's extension, or a clear refusal */
                char why[512];
                int f = report_format_choose("ctl record", format, output,
                                             REPORT_FORMAT_ALL &
                                                 ~REPORT_FORMAT_BIT(REPORT_FORMAT_PPROF),
                                             REPORT_FORMAT_TEXT, why, sizeof why);
                if (f < 0) {
                    fprintf(stderr, "scry ctl: %s\n", why);
                    json_object_put(req);
                    return 2;
                }
                json_object_object_add(
                    req, "format",
                    json_object_new_string(report_format_name((enum report_format)f)));
            }
        }
    } else if (strcmp(cmd, "set-rate") == 0) {
        double hz = 0;
        bad = npos < 2 ||
              scry_parse_number(pos[npos - 1], SERVE_RATE_MIN_HZ, SERVE_RATE_MAX_HZ, &hz) != 0;
        if (!bad && npos == 3)
            bad = parse_pid(pos[1], &pid) != 0;
        if (!bad) {
            json_object_object_add(req, "rate", json_object_new_double(hz));
            if (pid)
                json_object_object_add(req, "pid", json_object_new_int((int)pid));
        }
    } else {
        fprintf(stderr, "scry ctl: unknown command '%s'\n", cmd);
        ctl_usage(stderr);
        json_object_put(req);
        return 2;
    }
    if (bad) {
        fprintf(stderr, "scry ctl: bad arguments for '%s'\n", cmd);
        ctl_usage(stderr);
        json_object_put(req);
        return 2;
    }
    char *reply = NULL;
    /* a record is answered at its end (10 s without --duration), then written */
    double timeout = strcmp(cmd, "record") == 0 ? 30 + (duration > 0 ? duration : 10) : 10;
    int err = serve_ctl_call(sock, json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN),
                             timeout, &reply);
    json_object_put(req);
    if (err) {
        fprintf(stderr, "scry ctl: %s: %s\n", sock,
                err == SCRY_E_NOTFOUND ? "no scry serve is listening there"
                : err == SCRY_E_PERM   ? "permission denied"
                                       : scry_strerror(err));
        return 3;
    }
    json_object *r = json_tokener_parse(reply), *ok = NULL, *v;
    int rc = 1;
    if (!r || !json_object_object_get_ex(r, "ok", &ok)) {
        fprintf(stderr, "scry ctl: malformed reply from the daemon\n");
        goto out;
    }
    /* record: scry record's own messages (its summary line) */
    if (!json && json_object_object_get_ex(r, "log", &v))
        fputs(json_object_get_string(v), stderr);
    if (!json_object_get_boolean(ok)) {
        v = NULL;
        json_object_object_get_ex(r, "error", &v);
        fprintf(stderr, "scry ctl: %s\n", v ? json_object_get_string(v) : "failed");
        if (json)
            fputs(reply, stdout);
        goto out;
    }
    rc = 0;
    if (json) {
        fputs(reply, stdout);
    } else if (strcmp(cmd, "list") == 0) {
        print_list(r);
    } else if (json_object_object_get_ex(r, "text", &v)) {
        FILE *f = output ? fopen(output, "w") : stdout;
        size_t tl = (size_t)json_object_get_string_len(v);
        if (!f || fwrite(json_object_get_string(v), 1, tl, f) != tl || (output && fclose(f))) {
            fprintf(stderr, "scry ctl: cannot write %s: %s\n", output ? output : "stdout",
                    strerror(errno));
            rc = 1;
        }
    } else if (json_object_object_get_ex(r, "message", &v))
        printf("%s\n", json_object_get_string(v));
out:
    json_object_put(r);
    free(reply);
    return rc;
}
