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
               "  dump PID [--native]          every thread's stack now, from scry serve\n"
               "  flush                        end the current windows now\n"
               "  record PID [--memory] [--duration S] [--rate HZ] [--format F] [--output FILE]\n"
               "                               an on-demand profile of one process (default 10 s\n"
               "                               at scry record's 100 Hz; F as scry record --format\n"
               "                               but pprof, by default from FILE's extension as in\n"
               "                               scry record, else text); scry serve answers at its\n"
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

/* What `scry ctl` was asked, from its command line. */
typedef struct ctl_args {
    const char *sock;
    int json, memory, native;
    double duration, rate;
    const char *format, *output;
    const char *pos[3];
    int npos;
} ctl_args_t;

/* Parses the command line into A. Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, ctl_args_t *a)
{
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--socket") == 0 && i + 1 < argc)
            a->sock = argv[++i];
        else if (strncmp(s, "--socket=", 9) == 0)
            a->sock = s + 9;
        else if (strcmp(s, "--json") == 0)
            a->json = 1;
        else if (strcmp(s, "--memory") == 0)
            a->memory = 1;
        else if (strcmp(s, "--native") == 0)
            a->native = 1;
        else if (strcmp(s, "--format") == 0 && i + 1 < argc)
            a->format = argv[++i];
        else if (strcmp(s, "--output") == 0 && i + 1 < argc)
            a->output = argv[++i];
        else if (strcmp(s, "--duration") == 0 && i + 1 < argc) {
            if (scry_parse_number(argv[++i], 0.1, 3600, &a->duration) != 0) {
                fprintf(stderr, "scry ctl: --duration takes 0.1 <= S <= 3600\n");
                return 2;
            }
        } else if (strcmp(s, "--rate") == 0 && i + 1 < argc) {
            if (scry_parse_number(argv[++i], SERVE_RATE_MIN_HZ, SERVE_RATE_MAX_HZ, &a->rate) != 0) {
                fprintf(stderr, "scry ctl: --rate takes %g <= HZ <= %g\n", SERVE_RATE_MIN_HZ,
                        SERVE_RATE_MAX_HZ);
                return 2;
            }
        } else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            ctl_usage(stdout);
            return 0;
        } else if (s[0] == '-' && s[1] != '\0') {
            fprintf(stderr, "scry ctl: unknown option '%s'\n", s);
            ctl_usage(stderr);
            return 2;
        } else if (a->npos < 3) {
            a->pos[a->npos++] = s;
        } else {
            fprintf(stderr, "scry ctl: too many arguments\n");
            return 2;
        }
    }
    if (a->npos == 0) {
        ctl_usage(stderr);
        return 2;
    }
    return -1;
}

/* Adds dump's and record's fields to REQ. Returns 0, 1 for bad arguments, or 2 after a
 * message (an output name and format that disagree). */
static int add_target_fields(const ctl_args_t *a, json_object *req)
{
    long pid = 0;
    if (a->npos != 2 || parse_pid(a->pos[1], &pid) != 0)
        return 1;
    int record = a->pos[0][0] == 'r';
    json_object_object_add(req, "pid", json_object_new_int((int)pid));
    if (a->native)
        json_object_object_add(req, "native", json_object_new_boolean(1));
    if (!record)
        return 0;
    if (a->memory)
        json_object_object_add(req, "memory", json_object_new_boolean(1));
    if (a->duration > 0)
        json_object_object_add(req, "duration", json_object_new_double(a->duration));
    if (a->rate > 0)
        json_object_object_add(req, "rate", json_object_new_double(a->rate));
    /* scry record's rule: the output name's extension, or a clear refusal */
    char why[512];
    int f = report_format_choose("ctl record", a->format, a->output,
                                 REPORT_FORMAT_ALL & ~REPORT_FORMAT_BIT(REPORT_FORMAT_PPROF),
                                 REPORT_FORMAT_TEXT, why, sizeof why);
    if (f < 0) {
        fprintf(stderr, "scry ctl: %s\n", why);
        return 2;
    }
    json_object_object_add(req, "format",
                           json_object_new_string(report_format_name((enum report_format)f)));
    return 0;
}

/* The request for A in *OUT. Returns 0 or the exit status after a message. */
static int build_request(const ctl_args_t *a, json_object **out)
{
    json_object *req = json_object_new_object();
    const char *cmd = a->pos[0];
    int bad = 0;
    json_object_object_add(req, "cmd", json_object_new_string(cmd));
    if (strcmp(cmd, "list") == 0 || strcmp(cmd, "flush") == 0 || strcmp(cmd, "reload") == 0) {
        bad = a->npos != 1;
    } else if (strcmp(cmd, "dump") == 0 || strcmp(cmd, "record") == 0) {
        bad = add_target_fields(a, req);
        if (bad == 2) {
            json_object_put(req);
            return 2;
        }
    } else if (strcmp(cmd, "set-rate") == 0) {
        double hz = 0;
        long pid = 0;
        bad = a->npos < 2 || scry_parse_number(a->pos[a->npos - 1], SERVE_RATE_MIN_HZ,
                                               SERVE_RATE_MAX_HZ, &hz) != 0;
        if (!bad && a->npos == 3)
            bad = parse_pid(a->pos[1], &pid) != 0;
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
    *out = req;
    return 0;
}

/* Prints REPLY (the text of R) as A asked. Returns the exit status. */
static int print_reply(const ctl_args_t *a, json_object *r, const char *reply)
{
    json_object *ok = NULL, *v;
    if (!r || !json_object_object_get_ex(r, "ok", &ok)) {
        fprintf(stderr, "scry ctl: malformed reply from scry serve\n");
        return 1;
    }
    /* record: scry record's own messages (its summary line) */
    if (!a->json && json_object_object_get_ex(r, "log", &v))
        fputs(json_object_get_string(v), stderr);
    if (!json_object_get_boolean(ok)) {
        v = NULL;
        json_object_object_get_ex(r, "error", &v);
        fprintf(stderr, "scry ctl: %s\n", v ? json_object_get_string(v) : "failed");
        if (a->json)
            fputs(reply, stdout);
        return 1;
    }
    if (a->json) {
        fputs(reply, stdout);
    } else if (strcmp(a->pos[0], "list") == 0) {
        print_list(r);
    } else if (json_object_object_get_ex(r, "text", &v)) {
        FILE *f = a->output ? fopen(a->output, "w") : stdout;
        size_t tl = (size_t)json_object_get_string_len(v);
        if (!f || fwrite(json_object_get_string(v), 1, tl, f) != tl || (a->output && fclose(f))) {
            fprintf(stderr, "scry ctl: cannot write %s: %s\n", a->output ? a->output : "stdout",
                    strerror(errno));
            return 1;
        }
    } else if (json_object_object_get_ex(r, "message", &v)) {
        printf("%s\n", json_object_get_string(v));
    }
    return 0;
}

int cmd_ctl(int argc, char **argv)
{
    ctl_args_t a = {.sock = "/run/scry/scry.sock"};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    json_object *req = NULL;
    if ((rc = build_request(&a, &req)) != 0)
        return rc;
    char *reply = NULL;
    /* a record is answered at its end (10 s without --duration), then written */
    double timeout = strcmp(a.pos[0], "record") == 0 ? 30 + (a.duration > 0 ? a.duration : 10) : 10;
    int err = serve_ctl_call(a.sock, json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN),
                             timeout, &reply);
    json_object_put(req);
    if (err) {
        fprintf(stderr, "scry ctl: %s: %s\n", a.sock,
                err == SCRY_E_NOTFOUND ? "no scry serve is listening there"
                : err == SCRY_E_PERM   ? "permission denied"
                                       : scry_strerror(err));
        return 3;
    }
    json_object *r = json_tokener_parse(reply);
    rc = print_reply(&a, r, reply);
    json_object_put(r);
    free(reply);
    return rc;
}
