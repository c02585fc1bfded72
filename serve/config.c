/* config.c - the options of scry serve: one table for the INI file and the command line. */
#include "config.h"
#include "scry_err.h"
#include "scry_parse.h"

#include <ini.h>

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum opt_kind {
    OPT_STR,      /* char * */
    OPT_SECONDS,  /* double, "90", "1.5s", "10m", "2h", "7d" */
    OPT_HZ,       /* double > 0 */
    OPT_PCT,      /* double, "1%" or "1" */
    OPT_BYTES,    /* uint64_t, "512M", "2G" */
    OPT_BOOL,     /* int */
    OPT_U32,      /* uint32_t */
    OPT_FORMATS,  /* fmt_* flags */
    OPT_SELECTOR, /* a rule selector (match, pid, user, container, cgroup) */
};

typedef struct opt {
    const char *key;
    enum opt_kind kind;
    size_t off; /* into serve_config_t; unused for selectors */
    const char *arg;
    const char *help;
    double lo, hi; /* numbers, durations, sizes: the accepted range */
} opt_t;

#define OFF(f) offsetof(serve_config_t, f)

static const opt_t opts[] = {
    {"out-dir", OPT_STR, OFF(out_dir), "DIR", "where window files and index.json go", 0, 0},
    {"interval", OPT_SECONDS, OFF(interval_s), "SECONDS", "length of one window (default 60)", 1,
     86400},
    {"socket", OPT_STR, OFF(socket_path), "PATH", "control socket (default /run/scry/scry.sock)", 0,
     0},
    {"rate", OPT_HZ, OFF(rate_hz), "HZ", "samples per second per target, 1 to 1000 (default 19)",
     SERVE_RATE_MIN_HZ, SERVE_RATE_MAX_HZ},
    {"sampler", OPT_STR, OFF(sampler), "HOW",
     "perf (each thread's CPU clock: the default where the kernel allows it), ptrace (/proc, "
     "where perf events are refused) or bpf (perf's clock, the Python stack walked in the "
     "kernel at each tick; perf where BPF is refused, logged); a reload applies to the targets "
     "found after it",
     0, 0},
    {"max-cpu", OPT_PCT, OFF(max_cpu_pct), "PCT",
     "CPU budget, share of one core (\"1%\"); rates are lowered to keep it (default: none)", 0,
     100},
    {"retention-age", OPT_SECONDS, OFF(retention_age_s), "SECONDS",
     "delete windows older than this (\"7d\"; default 7 days)", 60, 3650 * 86400.0},
    {"retention-size", OPT_BYTES, OFF(retention_bytes), "BYTES",
     "keep the window files under this total (\"1G\"; default 1 GiB)", 1 << 20, 1ull << 50},
    {"formats", OPT_FORMATS, 0, "LIST",
     "window files to write: collapsed,flamegraph,pprof (default all)", 0, 0},
    {"max-stacks", OPT_U32, OFF(max_stacks), "N",
     "distinct stacks kept per window and service; the rest go to \"other\" (default 10000)", 1,
     10000000},
    {"all-python", OPT_BOOL, OFF(all_python), "[BOOL]",
     "profile every Python process (default when no rule is given)", 0, 0},
    {"proc-connector", OPT_BOOL, OFF(proc_connector), "[BOOL]",
     "learn of new processes from the kernel's process-events connector (default yes)", 0, 0},
    {"scan-interval", OPT_SECONDS, OFF(scan_interval_s), "SECONDS",
     "period of the /proc scan (default 0.5 without the connector, 10 with it)", 0.05, 3600},
    {"host", OPT_STR, OFF(host), "NAME", "host label (default: the host name)", 0, 0},
    {"pyroscope-url", OPT_STR, OFF(pyroscope_url), "URL",
     "push every window to this Pyroscope server (http://host:4040)", 0, 0},
    {"pyroscope-user", OPT_STR, OFF(pyroscope_user), "USER", "basic-auth user", 0, 0},
    {"pyroscope-password-file", OPT_STR, OFF(pyroscope_password_file), "PATH",
     "file holding the basic-auth password", 0, 0},
    {"pyroscope-token-file", OPT_STR, OFF(pyroscope_token_file), "PATH",
     "file holding a bearer token", 0, 0},
    {"pyroscope-tenant", OPT_STR, OFF(pyroscope_tenant), "ID", "tenant id (X-Scope-OrgID)", 0, 0},
    {"push-timeout", OPT_SECONDS, OFF(push_timeout_s), "SECONDS",
     "timeout of one push (default 10)", 0.1, 600},
    {"out-group", OPT_STR, OFF(out_group), "GROUP",
     "group that may read the window files (dirs 0750, files 0640; default: root only)", 0, 0},
    {"spool-dir", OPT_STR, OFF(spool_dir), "DIR",
     "windows waiting for the server (default OUT_DIR/spool)", 0, 0},
    {"spool-max-bytes", OPT_BYTES, OFF(spool_max_bytes), "BYTES",
     "spool limit; the oldest windows are dropped (and counted) beyond it (default 256M)", 1 << 20,
     1ull << 50},
    {"match", OPT_SELECTOR, 0, "REGEX", "processes whose command line or executable matches", 0, 0},
    {"pid", OPT_SELECTOR, 0, "PID", "this process", 0, 0},
    {"user", OPT_SELECTOR, 0, "USER", "processes of this user (name or uid)", 0, 0},
    {"container", OPT_SELECTOR, 0, "ID", "processes of this container (id or prefix)", 0, 0},
    {"cgroup", OPT_SELECTOR, 0, "PATH", "processes in this cgroup or below", 0, 0},
};

#define N_OPTS (sizeof opts / sizeof opts[0])

static void set_msg(char *msg, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_msg(char *msg, size_t len, const char *fmt, ...)
{
    if (!msg || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
}

serve_config_t *serve_config_new(void)
{
    serve_config_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->out_dir = strdup("/var/lib/scry");
    c->socket_path = strdup("/run/scry/scry.sock");
    if (!c->out_dir || !c->socket_path) {
        serve_config_free(c);
        return NULL;
    }
    c->interval_s = 60;
    c->rate_hz = 19;
    c->retention_age_s = 7 * 86400.0;
    c->retention_bytes = 1ull << 30;
    c->fmt_collapsed = c->fmt_flamegraph = c->fmt_pprof = 1;
    c->max_stacks = 10000;
    c->all_python = -1; /* decided in serve_config_finish */
    c->proc_connector = 1;
    c->push_timeout_s = 10;
    c->spool_max_bytes = 256ull << 20;
    return c;
}

static void rule_clear(serve_rule_t *r)
{
    free(r->name);
    for (size_t i = 0; i < r->n_match; i++) {
        regfree(&r->match[i]);
        free(r->match_src[i]);
    }
    for (size_t i = 0; i < r->n_container; i++)
        free(r->container[i]);
    for (size_t i = 0; i < r->n_cgroup; i++)
        free(r->cgroup[i]);
    memset(r, 0, sizeof *r);
}

void serve_config_free(serve_config_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_rules; i++)
        rule_clear(&c->rules[i]);
    for (size_t i = 0; i < N_OPTS; i++)
        if (opts[i].kind == OPT_STR)
            free(*(char **)((char *)c + opts[i].off));
    free(c->config_path);
    free(c);
}

static const opt_t *opt_find(const char *key)
{
    for (size_t i = 0; i < N_OPTS; i++)
        if (strcmp(opts[i].key, key) == 0)
            return &opts[i];
    return NULL;
}

static int parse_formats(serve_config_t *c, const char *v)
{
    int col = 0, svg = 0, pb = 0;
    char buf[256];
    if (strlen(v) >= sizeof buf)
        return SCRY_E_INVAL;
    strcpy(buf, v);
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (strcmp(t, "collapsed") == 0)
            col = 1;
        else if (strcmp(t, "flamegraph") == 0 || strcmp(t, "svg") == 0)
            svg = 1;
        else if (strcmp(t, "pprof") == 0)
            pb = 1;
        else
            return SCRY_E_INVAL;
    }
    if (!col && !svg && !pb)
        return SCRY_E_INVAL;
    c->fmt_collapsed = col, c->fmt_flamegraph = svg, c->fmt_pprof = pb;
    return 0;
}

static int parse_uid(const char *v, uid_t *out)
{
    long long u;
    if (scry_parse_int(v, 0, 0xfffffffe, &u) == 0) {
        *out = (uid_t)u;
        return 0;
    }
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwnam_r(v, &pw, buf, sizeof buf, &res) != 0 || !res)
        return SCRY_E_NOTFOUND;
    *out = res->pw_uid;
    return 0;
}

/* The rule a selector goes to: the named section's rule (created on first use), or a new
 * anonymous one for a top-level selector. */
static serve_rule_t *rule_for(serve_config_t *c, const char *section, char *msg, size_t msglen)
{
    if (section) {
        for (size_t i = 0; i < c->n_rules; i++)
            if (c->rules[i].name && strcmp(c->rules[i].name, section) == 0)
                return &c->rules[i];
    }
    if (c->n_rules >= SERVE_MAX_RULES) {
        set_msg(msg, msglen, "too many rules (at most %d)", SERVE_MAX_RULES);
        return NULL;
    }
    serve_rule_t *r = &c->rules[c->n_rules];
    memset(r, 0, sizeof *r);
    if (section && !(r->name = strdup(section))) {
        set_msg(msg, msglen, "out of memory");
        return NULL;
    }
    c->n_rules++;
    return r;
}

static int set_selector(serve_config_t *c, const char *section, const char *key, const char *v,
                        char *msg, size_t msglen)
{
    serve_rule_t *r = rule_for(c, section, msg, msglen);
    if (!r)
        return SCRY_E_INVAL;
    size_t *count = strcmp(key, "match") == 0       ? &r->n_match
                    : strcmp(key, "pid") == 0       ? &r->n_pid
                    : strcmp(key, "user") == 0      ? &r->n_uid
                    : strcmp(key, "container") == 0 ? &r->n_container
                                                    : &r->n_cgroup;
    if (*count >= SERVE_MAX_SELECTORS) {
        set_msg(msg, msglen, "%s: at most %d per rule", key, SERVE_MAX_SELECTORS);
        return SCRY_E_INVAL;
    }
    if (strcmp(key, "match") == 0) {
        int rc = regcomp(&r->match[r->n_match], v, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char e[128];
            regerror(rc, &r->match[r->n_match], e, sizeof e);
            set_msg(msg, msglen, "match: bad regular expression '%s': %s", v, e);
            return SCRY_E_INVAL;
        }
        if (!(r->match_src[r->n_match] = strdup(v))) {
            regfree(&r->match[r->n_match]);
            return SCRY_E_NOMEM;
        }
        r->n_match++;
    } else if (strcmp(key, "pid") == 0) {
        long long p;
        if (scry_parse_int(v, 1, 0x3fffffff, &p) != 0) {
            set_msg(msg, msglen, "pid: '%s' is not a process id", v);
            return SCRY_E_INVAL;
        }
        r->pid[r->n_pid++] = (pid_t)p;
    } else if (strcmp(key, "user") == 0) {
        if (parse_uid(v, &r->uid[r->n_uid]) != 0) {
            set_msg(msg, msglen, "user: no such user '%s'", v);
            return SCRY_E_INVAL;
        }
        r->n_uid++;
    } else if (strcmp(key, "container") == 0) {
        size_t n = strlen(v);
        int hex = n >= 4 && n <= 64;
        for (size_t i = 0; hex && i < n; i++)
            hex = isxdigit((unsigned char)v[i]) != 0;
        if (!hex) {
            set_msg(msg, msglen, "container: '%s' is not a container id (4-64 hex digits)", v);
            return SCRY_E_INVAL;
        }
        if (!(r->container[r->n_container] = strdup(v)))
            return SCRY_E_NOMEM;
        for (char *p = r->container[r->n_container]; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        r->n_container++;
    } else {
        if (v[0] != '/' || strlen(v) > 1024) {
            set_msg(msg, msglen, "cgroup: '%s' is not an absolute cgroup path", v);
            return SCRY_E_INVAL;
        }
        if (!(r->cgroup[r->n_cgroup++] = strdup(v)))
            return SCRY_E_NOMEM;
    }
    return 0;
}

int serve_config_set(serve_config_t *c, const char *section, const char *key, const char *v,
                     char *msg, size_t msglen)
{
    if (section) {
        if (scry_parse_name(section, strlen(section), 64) != 0) {
            set_msg(msg, msglen,
                    "[service %s]: a service name is 1-64 letters, digits, '.', '_' or '-'",
                    section);
            return SCRY_E_INVAL;
        }
        if (strcmp(key, "rate") == 0) {
            serve_rule_t *r = rule_for(c, section, msg, msglen);
            if (!r)
                return SCRY_E_INVAL;
            if (scry_parse_number(v, SERVE_RATE_MIN_HZ, SERVE_RATE_MAX_HZ, &r->rate_hz) != 0) {
                set_msg(msg, msglen, "rate: bad value '%s' (expected HZ from %g to %g)", v,
                        SERVE_RATE_MIN_HZ, SERVE_RATE_MAX_HZ);
                return SCRY_E_INVAL;
            }
            return 0;
        }
        const opt_t *o = opt_find(key);
        if (!o || o->kind != OPT_SELECTOR) {
            set_msg(msg, msglen,
                    "[service %s]: unknown key '%s' (a service takes match, pid, user, "
                    "container, cgroup, rate)",
                    section, key);
            return SCRY_E_INVAL;
        }
        return set_selector(c, section, key, v, msg, msglen);
    }
    const opt_t *o = opt_find(key);
    if (!o) {
        set_msg(msg, msglen, "unknown option '%s'", key);
        return SCRY_E_INVAL;
    }
    void *field = (char *)c + o->off;
    int err = 0;
    switch (o->kind) {
    case OPT_STR: {
        if (strlen(v) > 4096) {
            err = SCRY_E_INVAL;
            break;
        }
        char *s = strdup(v);
        if (!s)
            return SCRY_E_NOMEM;
        free(*(char **)field);
        *(char **)field = s[0] ? s : (free(s), NULL);
        break;
    }
    case OPT_SECONDS:
        err = scry_parse_seconds(v, o->lo, o->hi, field);
        break;
    case OPT_HZ:
        err = scry_parse_number(v, o->lo, o->hi, field);
        break;
    case OPT_PCT:
        err = scry_parse_quantity(v, scry_units_percent, o->lo, o->hi, field);
        break;
    case OPT_BYTES:
        err = scry_parse_bytes(v, (uint64_t)o->lo, (uint64_t)o->hi, field);
        break;
    case OPT_BOOL:
        err = scry_parse_bool(v, field);
        break;
    case OPT_U32: {
        long long u;
        err = scry_parse_int(v, (long long)o->lo, (long long)o->hi, &u);
        if (err == 0)
            *(uint32_t *)field = (uint32_t)u;
        break;
    }
    case OPT_FORMATS:
        err = parse_formats(c, v);
        break;
    case OPT_SELECTOR:
        return set_selector(c, NULL, key, v, msg, msglen);
    }
    if (err != 0) {
        if (err == SCRY_E_NOMEM)
            set_msg(msg, msglen, "out of memory");
        else if (o->kind == OPT_BOOL)
            set_msg(msg, msglen, "%s: bad value '%s' (expected %s)", key, v, SCRY_PARSE_BOOL_WORDS);
        else if (o->hi > o->lo)
            set_msg(msg, msglen, "%s: bad value '%s' (expected %s from %g to %g)", key, v, o->arg,
                    o->lo, o->hi);
        else
            set_msg(msg, msglen, "%s: bad value '%s' (expected %s)", key, v, o->arg);
    }
    return err;
}

typedef struct ini_ctx {
    serve_config_t *cfg;
    char *msg;
    size_t msglen;
    int failed;
    FILE *f;
    int line; /* lines handed to the parser */
} ini_ctx_t;

/* Checks a section header "[service NAME]" (LINE, the raw text) with the validator for
 * names. The parser reports sections only with their first key, so a header without keys
 * is checked here, as the line passes. Returns 0 or SCRY_E_INVAL with the reason in X. */
static int check_section(ini_ctx_t *x, const char *line)
{
    const char *p = line + strspn(line, " \t");
    if (*p != '[')
        return 0;
    const char *end = strchr(p, ']');
    if (!end) {
        set_msg(x->msg, x->msglen, "a section header without ']'");
        return SCRY_E_INVAL;
    }
    p++;
    if ((size_t)(end - p) < 8 || strncmp(p, "service ", 8) != 0) {
        set_msg(x->msg, x->msglen, "unknown section [%.*s] (expected [service NAME])",
                (int)(end - p), p);
        return SCRY_E_INVAL;
    }
    p += 8;
    while (*p == ' ')
        p++;
    size_t n = (size_t)(end - p);
    while (n > 0 && p[n - 1] == ' ')
        n--;
    if (scry_parse_name(p, n, 64) != 0) {
        set_msg(x->msg, x->msglen,
                "[service %.*s]: a service name is 1-64 letters, digits, '.', '_' or '-', "
                "not starting with '.' or '-'",
                (int)n, p);
        return SCRY_E_INVAL;
    }
    return 0;
}

/* The parser's line reader: fgets, with every section header checked on the way. */
static char *ini_read(char *str, int num, void *stream)
{
    ini_ctx_t *x = stream;
    if (x->failed || !fgets(str, num, x->f))
        return NULL;
    x->line++;
    if (check_section(x, str) != 0) {
        x->failed = x->line;
        return NULL;
    }
    return str;
}

static int ini_cb(void *user, const char *section, const char *name, const char *value)
{
    ini_ctx_t *x = user;
    if (x->failed)
        return 0;
    const char *svc = NULL;
    if (section && section[0]) {
        if (strncmp(section, "service ", 8) != 0) {
            set_msg(x->msg, x->msglen, "unknown section [%s] (expected [service NAME])", section);
            x->failed = 1;
            return 0;
        }
        svc = section + 8;
        while (*svc == ' ')
            svc++;
    }
    if (serve_config_set(x->cfg, svc, name, value ? value : "", x->msg, x->msglen) != 0) {
        x->failed = 1;
        return 0;
    }
    return 1;
}

int serve_config_load_file(serve_config_t *c, const char *path, char *msg, size_t msglen)
{
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        set_msg(msg, msglen, "%s: no such file", path);
        return SCRY_E_NOTFOUND;
    }
    FILE *f = fopen(path, "re");
    if (!f) {
        set_msg(msg, msglen, "%s: %s", path, strerror(errno));
        return SCRY_E_IO;
    }
    char inner[512] = "";
    ini_ctx_t x = {c, inner, sizeof inner, 0, f, 0};
    int line = ini_parse_stream(ini_read, &x, ini_cb, &x);
    fclose(f);
    if (line == 0 && x.failed)
        line = x.failed;
    if (line != 0) {
        if (line > 0)
            set_msg(msg, msglen, "%s:%d: %s", path, line, inner[0] ? inner : "syntax error");
        else
            set_msg(msg, msglen, "%s: cannot be parsed", path);
        return SCRY_E_INVAL;
    }
    char *p = strdup(path);
    if (!p)
        return SCRY_E_NOMEM;
    free(c->config_path);
    c->config_path = p;
    return 0;
}

/* The gid of group NAME (a name, or a number). Returns 0 or -1. */
static int resolve_group(const char *name, gid_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(name, &end, 10);
    if (name[0] >= '0' && name[0] <= '9' && !*end && errno == 0 && v < (gid_t)-1) {
        *out = (gid_t)v;
        return 0;
    }
    struct group gr, *res = NULL;
    char buf[16384];
    if (getgrnam_r(name, &gr, buf, sizeof buf, &res) != 0 || !res)
        return -1;
    *out = res->gr_gid;
    return 0;
}

int serve_config_finish(serve_config_t *c, char *msg, size_t msglen)
{
    if (c->all_python < 0)
        c->all_python = c->n_rules == 0;
    if (!c->all_python && c->n_rules == 0) {
        set_msg(msg, msglen, "all-python is off and no rule selects a target");
        return SCRY_E_INVAL;
    }
    for (size_t i = 0; i < c->n_rules; i++) {
        const serve_rule_t *r = &c->rules[i];
        if (!r->n_match && !r->n_pid && !r->n_uid && !r->n_container && !r->n_cgroup) {
            set_msg(msg, msglen,
                    "[service %s] selects nothing (give match, pid, user, "
                    "container or cgroup)",
                    r->name ? r->name : "?");
            return SCRY_E_INVAL;
        }
    }
    if (!c->out_dir || c->out_dir[0] != '/') {
        set_msg(msg, msglen, "out-dir must be an absolute path");
        return SCRY_E_INVAL;
    }
    if (!c->socket_path || c->socket_path[0] != '/' || strlen(c->socket_path) >= 108) {
        set_msg(msg, msglen, "socket must be an absolute path shorter than 108 bytes");
        return SCRY_E_INVAL;
    }
    if (c->sampler && strcmp(c->sampler, "perf") != 0 && strcmp(c->sampler, "ptrace") != 0 &&
        strcmp(c->sampler, "bpf") != 0 && strcmp(c->sampler, "auto") != 0) {
        set_msg(msg, msglen, "sampler is perf, ptrace, bpf or auto, not '%s'", c->sampler);
        return SCRY_E_INVAL;
    }
    if (c->max_cpu_pct != 0 && c->max_cpu_pct < 0.01) {
        set_msg(msg, msglen, "max-cpu below 0.01%% cannot be kept");
        return SCRY_E_INVAL;
    }
    if (c->pyroscope_url && strncmp(c->pyroscope_url, "http://", 7) != 0 &&
        strncmp(c->pyroscope_url, "https://", 8) != 0) {
        set_msg(msg, msglen, "pyroscope-url must start with http:// or https://");
        return SCRY_E_INVAL;
    }
    if ((c->pyroscope_user != NULL) != (c->pyroscope_password_file != NULL)) {
        set_msg(msg, msglen, "pyroscope-user and pyroscope-password-file go together");
        return SCRY_E_INVAL;
    }
    if (c->pyroscope_user && c->pyroscope_token_file) {
        set_msg(msg, msglen, "basic auth and a bearer token are exclusive");
        return SCRY_E_INVAL;
    }
    if ((c->pyroscope_user || c->pyroscope_token_file || c->pyroscope_tenant) &&
        !c->pyroscope_url) {
        set_msg(msg, msglen, "pyroscope credentials given without pyroscope-url");
        return SCRY_E_INVAL;
    }
    const char *files[] = {c->pyroscope_password_file, c->pyroscope_token_file};
    for (size_t i = 0; i < 2; i++) {
        if (files[i] && access(files[i], R_OK) != 0) {
            set_msg(msg, msglen, "%s: %s", files[i], strerror(errno));
            return SCRY_E_INVAL;
        }
    }
    if (c->scan_interval_s == 0)
        c->scan_interval_s = c->proc_connector ? 10 : 0.5;
    c->out_gid = (gid_t)-1;
    if (c->out_group && resolve_group(c->out_group, &c->out_gid) != 0) {
        set_msg(msg, msglen, "out-group: no group '%s'", c->out_group);
        return SCRY_E_INVAL;
    }
    if (!c->spool_dir) {
        size_t n = strlen(c->out_dir) + sizeof "/spool";
        if (!(c->spool_dir = malloc(n)))
            return SCRY_E_NOMEM;
        snprintf(c->spool_dir, n, "%s/spool", c->out_dir);
    }
    if (!c->host) {
        char h[256] = "";
        if (gethostname(h, sizeof h - 1) != 0 || !h[0])
            strcpy(h, "localhost");
        if (!(c->host = strdup(h)))
            return SCRY_E_NOMEM;
    }
    return 0;
}

serve_config_t *serve_config_from_args(int argc, char **argv, char *msg, size_t msglen)
{
    serve_config_t *c = serve_config_new();
    const char *path = NULL;
    if (!c) {
        set_msg(msg, msglen, "out of memory");
        return NULL;
    }
    /* First pass: --config and --check-config, so the file is read before the flags. */
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--check-config") == 0) {
            c->check_only = 1;
        } else if (strcmp(argv[i], "--config") == 0) {
            if (i + 1 >= argc) {
                set_msg(msg, msglen, "--config needs a value");
                goto fail;
            }
            path = argv[++i];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            path = argv[i] + 9;
        }
    }
    if (path) {
        if (serve_config_load_file(c, path, msg, msglen) != 0)
            goto fail;
    } else if (access(SERVE_CONFIG_DEFAULT_PATH, F_OK) == 0) {
        if (serve_config_load_file(c, SERVE_CONFIG_DEFAULT_PATH, msg, msglen) != 0)
            goto fail;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--check-config") == 0)
            continue;
        if (strcmp(a, "--config") == 0) {
            i++;
            continue;
        }
        if (strncmp(a, "--config=", 9) == 0)
            continue;
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            set_msg(msg, msglen, "unexpected argument '%s' (options are --KEY VALUE)", a);
            goto fail;
        }
        char key[64];
        const char *eq = strchr(a + 2, '=');
        size_t klen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (klen >= sizeof key) {
            set_msg(msg, msglen, "unknown option '%s'", a);
            goto fail;
        }
        memcpy(key, a + 2, klen);
        key[klen] = '\0';
        const char *val = eq ? eq + 1 : NULL;
        const opt_t *o = opt_find(key);
        if (!val && !o && strncmp(key, "no-", 3) == 0 && (o = opt_find(key + 3)) &&
            o->kind == OPT_BOOL) {
            memmove(key, key + 3, strlen(key + 3) + 1);
            val = "no";
        }
        if (!o) {
            set_msg(msg, msglen, "unknown option '--%s' (see scry help serve)", key);
            goto fail;
        }
        /* a boolean flag: --KEY, --KEY BOOL, --KEY=BOOL or --no-KEY (serve takes no
         * positional arguments, so a following word that is a boolean is the value) */
        int b;
        if (!val && o->kind == OPT_BOOL)
            val = i + 1 < argc && scry_parse_bool(argv[i + 1], &b) == 0 ? argv[++i] : "yes";
        if (!val) {
            if (i + 1 >= argc) {
                set_msg(msg, msglen, "--%s needs a value (%s)", key, o->arg);
                goto fail;
            }
            val = argv[++i];
        }
        if (serve_config_set(c, NULL, key, val, msg, msglen) != 0)
            goto fail;
    }
    if (serve_config_finish(c, msg, msglen) != 0)
        goto fail;
    return c;
fail:
    serve_config_free(c);
    return NULL;
}

static void print_rule(const serve_rule_t *r, FILE *f)
{
    for (size_t i = 0; i < r->n_match; i++)
        fprintf(f, "match = %s\n", r->match_src[i]);
    for (size_t i = 0; i < r->n_pid; i++)
        fprintf(f, "pid = %d\n", (int)r->pid[i]);
    for (size_t i = 0; i < r->n_uid; i++)
        fprintf(f, "user = %u\n", (unsigned)r->uid[i]);
    for (size_t i = 0; i < r->n_container; i++)
        fprintf(f, "container = %s\n", r->container[i]);
    for (size_t i = 0; i < r->n_cgroup; i++)
        fprintf(f, "cgroup = %s\n", r->cgroup[i]);
    if (r->rate_hz > 0)
        fprintf(f, "rate = %g\n", r->rate_hz);
}

void serve_config_print(const serve_config_t *c, FILE *f)
{
    fprintf(f, "; effective configuration%s%s\n", c->config_path ? " from " : "",
            c->config_path ? c->config_path : "");
    for (size_t i = 0; i < N_OPTS; i++) {
        const opt_t *o = &opts[i];
        const void *field = (const char *)c + o->off;
        switch (o->kind) {
        case OPT_STR: {
            const char *s = *(char *const *)field;
            if (s)
                fprintf(f, "%s = %s\n", o->key, s);
            break;
        }
        case OPT_SECONDS:
        case OPT_HZ:
            fprintf(f, "%s = %g\n", o->key, *(const double *)field);
            break;
        case OPT_PCT:
            fprintf(f, "%s = %g%%\n", o->key, *(const double *)field);
            break;
        case OPT_BYTES:
            fprintf(f, "%s = %llu\n", o->key, (unsigned long long)*(const uint64_t *)field);
            break;
        case OPT_BOOL:
            fprintf(f, "%s = %s\n", o->key, *(const int *)field > 0 ? "yes" : "no");
            break;
        case OPT_U32:
            fprintf(f, "%s = %u\n", o->key, *(const uint32_t *)field);
            break;
        case OPT_FORMATS:
            fprintf(f, "formats = %s%s%s\n", c->fmt_collapsed ? "collapsed," : "",
                    c->fmt_flamegraph ? "flamegraph," : "", c->fmt_pprof ? "pprof" : "");
            break;
        case OPT_SELECTOR:
            break;
        }
    }
    for (size_t i = 0; i < c->n_rules; i++) {
        const serve_rule_t *r = &c->rules[i];
        if (r->name)
            fprintf(f, "\n[service %s]\n", r->name);
        else
            fprintf(f, "; rule %zu\n", i + 1);
        print_rule(r, f);
    }
}

void serve_config_usage(FILE *f)
{
    fprintf(f, "Options (each is also a key of %s; flags win over the file):\n",
            SERVE_CONFIG_DEFAULT_PATH);
    fprintf(f, "  --config PATH          read this file instead\n");
    fprintf(f, "  --check-config         check the configuration, print it and exit\n");
    fprintf(f, "  A BOOL is %s; --KEY alone is --KEY yes, --no-KEY is --KEY no.\n",
            SCRY_PARSE_BOOL_WORDS);
    for (size_t i = 0; i < N_OPTS; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s %s", opts[i].key, opts[i].arg);
        fprintf(f, "  %-30s %s\n", left, opts[i].help);
    }
}
