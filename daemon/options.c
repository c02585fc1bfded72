#include "options.h"

#include "report.h"
#include "sample.h"
#include "scry_err.h"
#include "scry_parse.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum opt_kind { OPT_FLAG, OPT_PID, OPT_DOUBLE, OPT_STRING, OPT_BYTES, OPT_GLOB };

typedef struct opt_spec {
    const char *long_name;
    char short_name;
    enum opt_kind kind;
    size_t offset;     /* into scry_config_t */
    unsigned commands; /* bit per enum scry_command */
    const char *arg;
    const char *help;
    double lo, hi; /* OPT_DOUBLE, OPT_BYTES: the accepted range */
} opt_spec_t;

#define ON(c) (1u << (c))
#define REC   ON(CMD_RECORD)
#define DMP   ON(CMD_DUMP)
#define TOP   ON(CMD_TOP)
#define DIF   ON(CMD_DIFF)

static const opt_spec_t opt_table[] = {
    {"pid", 'p', OPT_PID, offsetof(scry_config_t, pid), REC | DMP | TOP, "PID",
     "the Python process to attach to", 0, 0},
    {"rate", 'r', OPT_DOUBLE, offsetof(scry_config_t, rate_hz), REC | TOP, "HZ",
     "samples per second, 1 to 10000 (default 100)", 1, 10000},
    {"duration", 'd', OPT_DOUBLE, offsetof(scry_config_t, duration_s), REC | TOP, "SECONDS",
     "stop after this long (default: until Ctrl-C or the target exits)", 0.001, 1e9},
    {"format", 'f', OPT_STRING, offsetof(scry_config_t, format), REC | DIF, "FMT",
     "record: flamegraph, html, text, json, speedscope, collapsed, pprof (default: from the "
     "--output name's extension, else flamegraph); diff: flamegraph or text (default: from "
     "--output's extension, else text)",
     0, 0},
    {"output", 'o', OPT_STRING, offsetof(scry_config_t, output), REC | DIF, "PATH",
     "where to write ('-' for stdout; record's default scry-PID-TIME.EXT, diff's stdout)", 0, 0},
    {"idle", 'i', OPT_FLAG, offsetof(scry_config_t, idle), REC | DMP | TOP, NULL,
     "include threads that are not running on a CPU", 0, 0},
    {"threads", 't', OPT_FLAG, offsetof(scry_config_t, threads), REC, NULL,
     "give each thread its own root frame", 0, 0},
    {"blocking", 'b', OPT_FLAG, offsetof(scry_config_t, blocking), REC | DMP | TOP, NULL,
     "stop each thread while reading it, for exact snapshots (always resumed)", 0, 0},
    {"native", 'n', OPT_FLAG, offsetof(scry_config_t, native), REC | DMP | TOP, NULL,
     "include native (C) frames, merged with the Python frames", 0, 0},
    {"gil", 'g', OPT_FLAG, offsetof(scry_config_t, gil), REC | TOP, NULL,
     "only sample the thread holding the GIL", 0, 0},
    {"json", 'j', OPT_FLAG, offsetof(scry_config_t, json), DMP, NULL, "print JSON", 0, 0},
    {"async", 'a', OPT_FLAG, offsetof(scry_config_t, async_tasks), REC | DMP, NULL,
     "asyncio (Python 3.14+; older versions are refused): dump shows each event loop's tasks, "
     "their coroutine stacks and the await graph instead of threads; record puts each sample "
     "under its thread's running task and the tasks awaiting it (root frames 'task NAME')",
     0, 0},
    {"locals", 'l', OPT_FLAG, offsetof(scry_config_t, locals), DMP, NULL,
     "each Python frame's arguments and local variables, with short reprs read from outside "
     "(ints, floats, str, bytes, None/bools, lists and tuples with a few items, dict and set "
     "sizes; other objects as <Type object>); no code runs in the target",
     0, 0},
    {"container", 0, OPT_STRING, offsetof(scry_config_t, container), DMP, "ID|CGROUP",
     "every Python process of a container: its id (at least 12 hex digits) or cgroup path", 0, 0},
    {"core", 0, OPT_STRING, offsetof(scry_config_t, core), DMP, "FILE",
     "post-mortem: the threads of a core file (gcore, the kernel's, systemd-coredump's; .zst, "
     ".lz4, .xz read directly): the fatal signal, the thread that took it first",
     0, 0},
    {"exe", 0, OPT_STRING, offsetof(scry_config_t, exe), DMP, "PATH",
     "--core: the executable, when the core does not name it (no NT_FILE note)", 0, 0},
    {"sysroot", 0, OPT_STRING, offsetof(scry_config_t, sysroot), DMP, "DIR",
     "--core: open the files the core names under DIR (a container's root, another "
     "machine's files); each checked against the build-id the core holds",
     0, 0},
    {"memory", 'm', OPT_FLAG, offsetof(scry_config_t, memory), REC, NULL,
     "sample allocations, frees and copies per line (preloads or injects libscry-shim.so)", 0, 0},
    {"inject", 0, OPT_STRING, offsetof(scry_config_t, inject), REC, "HOW",
     "--memory with --pid: how the shim gets into the target: remote-exec (Python 3.14+'s "
     "PEP 768 remote execution at a safe point; refused where the target does not allow it), "
     "ptrace (the trampoline), or auto (default: remote-exec where allowed, else ptrace)",
     0, 0},
    {"memory-sample-bytes", 0, OPT_BYTES, offsetof(scry_config_t, memory_sample_bytes), REC,
     "BYTES", "mean bytes between allocation samples (default 128k; copies: 1M; suffixes k, M, G)",
     1, 1e12},
    {"metric", 0, OPT_STRING, offsetof(scry_config_t, metric), REC, "WHAT",
     "what flame graphs and stack formats weigh: cpu (default), alloc, copy, free, inuse (bytes "
     "still held at the end), peak (bytes held at the highest footprint)",
     0, 0},
    {"include", 0, OPT_GLOB, offsetof(scry_config_t, include), REC | TOP, "GLOB",
     "line views (top: the lines view): files matching GLOB are the user's code (fnmatch on "
     "the whole path, '*' crosses '/'; repeatable)",
     0, 0},
    {"exclude", 0, OPT_GLOB, offsetof(scry_config_t, exclude), REC | TOP, "GLOB",
     "line views: files matching GLOB are not the user's code (wins over --include; "
     "repeatable)",
     0, 0},
    {"all-lines", 0, OPT_FLAG, offsetof(scry_config_t, all_lines), REC | TOP, NULL,
     "line views charge the innermost Python line (library lines too), not the user's line", 0, 0},
    {"function", 'F', OPT_FLAG, offsetof(scry_config_t, function), REC, NULL,
     "aggregate by function instead of line: every Python frame at its function's first line "
     "(stack formats: flamegraph, collapsed, speedscope, pprof, json)",
     0, 0},
    {"quiet", 'q', OPT_FLAG, offsetof(scry_config_t, quiet), REC, NULL,
     "do not print the summary line", 0, 0},
    {"window", 'w', OPT_DOUBLE, offsetof(scry_config_t, window_s), TOP, "SECONDS",
     "top: percentages over the last SECONDS (default 1; key 'w' toggles since start)", 0.001, 1e9},
    {"once", 0, OPT_FLAG, offsetof(scry_config_t, once), TOP, NULL,
     "top: print one plain-text table after --duration (default 2 s) and exit", 0, 0},
    {"assume-version", 0, OPT_STRING, offsetof(scry_config_t, assume_version), REC | DMP | TOP,
     "3.N",
     "read a Python newer than scry knows with 3.N's _Py_DebugOffsets layout (3.15; only when "
     "its block validates; the summary says so)",
     0, 0},
    {"sampler", 0, OPT_STRING, offsetof(scry_config_t, sampler), REC | DMP | TOP, "HOW",
     "perf (the kernel's CPU clock per thread, nothing stopped), ptrace (a wall-clock tick "
     "over /proc), bpf (record: stacks walked in the kernel at each tick of that clock), or "
     "auto (default: perf where allowed)",
     0, 0},
    {"discovery", 0, OPT_STRING, offsetof(scry_config_t, discovery), REC | DMP | TOP, "WAY",
     "for tests: find the runtime without its symbol (section) or without symbol and section "
     "(disasm)",
     0, 0},
    {"subprocesses", 's', OPT_FLAG, offsetof(scry_config_t, subprocesses), REC | DMP | TOP, NULL,
     "also every Python descendant (present or started later, through shells too); each "
     "process is a root frame 'process PID (command)'",
     0, 0},
};

static const char *command_name(enum scry_command c)
{
    switch (c) {
    case CMD_RECORD:
        return "record";
    case CMD_DUMP:
        return "dump";
    case CMD_TOP:
        return "top";
    case CMD_DIFF:
        return "diff";
    default:
        return "";
    }
}

void options_usage(enum scry_command command)
{
    if (command == CMD_DIFF) {
        printf(
            "usage: scry diff [options] BASE.json NEW.json\n\n"
            "Compares two recordings written by 'scry record -f json' (any Python version):\n"
            "  -f flamegraph  a differential flame graph: the new recording's stacks, each frame\n"
            "                 red when its share of its profile's total grew over the base's,\n"
            "                 blue when it shrank (the deeper, the larger the change)\n"
            "  -f text        the lines whose share of the total changed most\n\noptions:\n");
    } else if (command != CMD_RECORD && command != CMD_DUMP && command != CMD_TOP) {
        printf("scry - see which lines of a Python program spend time and memory, from outside.\n"
               "\n"
               "usage:\n"
               "  scry record [options] --pid PID        profile a running process\n"
               "  scry record [options] -- COMMAND ARGS  launch a program and profile it\n"
               "  scry dump --pid PID [--json]           print every thread's stack now\n"
               "  scry dump --pid PID --async [--json]   asyncio tasks, what they await\n"
               "  scry dump --core FILE [--json]         the threads of a core file (post-mortem)\n"
               "  scry top --pid PID                     live view of the hottest functions\n"
               "  scry diff BASE.json NEW.json [-f FMT]  what changed between two recordings\n"
               "  scry serve [options]                   the always-on daemon (scry help serve)\n"
               "  scry ctl [--socket PATH] COMMAND       talk to the daemon (scry help ctl)\n"
               "  scry help COMMAND | scry --version\n"
               "\n"
               "examples:\n"
               "  scry record -o profile.svg --pid 1234\n"
               "  scry record --format collapsed -o out.txt -- python3 app.py\n"
               "  scry dump --pid 1234\n");
        return;
    }
    if (command != CMD_DIFF)
        printf("usage: scry %s [options]%s\n\noptions:\n", command_name(command),
               command != CMD_DUMP ? " (--pid PID | -- COMMAND ARGS...)" : " --pid PID");
    for (size_t i = 0; i < sizeof opt_table / sizeof opt_table[0]; i++) {
        const opt_spec_t *o = &opt_table[i];
        if (!(o->commands & ON(command)))
            continue;
        char left[64];
        if (o->short_name)
            snprintf(left, sizeof left, "-%c, --%s%s%s", o->short_name, o->long_name,
                     o->arg ? " " : "", o->arg ? o->arg : "");
        else
            snprintf(left, sizeof left, "    --%s%s%s", o->long_name, o->arg ? " " : "",
                     o->arg ? o->arg : "");
        printf("  %-30s %s\n", left, o->help);
    }
}

static int set_value(const opt_spec_t *o, const char *value, scry_config_t *cfg)
{
    char *base = (char *)cfg + o->offset;
    switch (o->kind) {
    case OPT_FLAG:
        *(int *)base = 1;
        return 0;
    case OPT_PID: {
        long long v;
        if (scry_parse_int(value, 1, 0x3fffffff, &v) != 0) {
            fprintf(stderr, "scry: --pid needs a process id, not '%s'\n", value);
            return SCRY_E_INVAL;
        }
        *(pid_t *)base = (pid_t)v;
        return 0;
    }
    case OPT_DOUBLE:
        if (scry_parse_number(value, o->lo, o->hi, (double *)base) != 0) {
            fprintf(stderr, "scry: --%s needs a number from %g to %g, not '%s'\n", o->long_name,
                    o->lo, o->hi, value);
            return SCRY_E_INVAL;
        }
        return 0;
    case OPT_STRING:
        *(const char **)base = value;
        return 0;
    case OPT_GLOB: {
        scry_globs_t *g = (scry_globs_t *)base;
        const char *why = NULL;
        if (report_glob_check(value, &why) != 0) {
            fprintf(stderr, "scry: --%s '%s': %s\n", o->long_name, value, why);
            return SCRY_E_INVAL;
        }
        if (g->n >= SCRY_MAX_GLOBS) {
            fprintf(stderr, "scry: more than %d --%s patterns\n", SCRY_MAX_GLOBS, o->long_name);
            return SCRY_E_INVAL;
        }
        g->pat[g->n++] = value;
        return 0;
    }
    case OPT_BYTES:
        if (scry_parse_bytes(value, (uint64_t)o->lo, (uint64_t)o->hi, (uint64_t *)base) != 0) {
            fprintf(stderr,
                    "scry: --%s needs a size such as 512k or 1M (at most 10^12 bytes), not '%s'\n",
                    o->long_name, value);
            return SCRY_E_INVAL;
        }
        return 0;
    }
    return SCRY_E_INVAL;
}

static const opt_spec_t *find_long(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof opt_table / sizeof opt_table[0]; i++)
        if (strlen(opt_table[i].long_name) == len &&
            strncmp(opt_table[i].long_name, name, len) == 0)
            return &opt_table[i];
    return NULL;
}

static const opt_spec_t *find_short(char c)
{
    for (size_t i = 0; i < sizeof opt_table / sizeof opt_table[0]; i++)
        if (opt_table[i].short_name == c)
            return &opt_table[i];
    return NULL;
}

/* Refuses an output path that cannot be written, before any sampling: it must not be a
 * directory; a file that exists is written in place, so it only has to be writable itself
 * (/dev/null, a FIFO, a file in a read-only directory); a new file needs its directory to
 * exist and be writable. Prints the reason. */
static int check_output_path(const char *path)
{
    char dir[4096];
    struct stat st;
    if (strlen(path) >= sizeof dir) {
        fprintf(stderr, "scry: --output path is too long\n");
        return SCRY_E_INVAL;
    }
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            fprintf(stderr, "scry: cannot write %s: it is a directory\n", path);
            return SCRY_E_INVAL;
        }
        if (access(path, W_OK) != 0) {
            fprintf(stderr, "scry: cannot write %s: %s\n", path, strerror(errno));
            return SCRY_E_INVAL;
        }
        return 0;
    }
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "scry: cannot write %s: the directory %s does not exist\n", path, dir);
        return SCRY_E_INVAL;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "scry: cannot write %s: %s: %s\n", path, dir, strerror(errno));
        return SCRY_E_INVAL;
    }
    return 0;
}

/* dump --core reads a process that is gone: what needs a live one is refused. Returns 0 or
 * SCRY_E_INVAL after a message. */
static int options_check_core(const scry_config_t *cfg)
{
    if (!cfg->core) {
        if (cfg->exe || cfg->sysroot) {
            fprintf(stderr, "scry: --%s is for dump --core FILE\n", cfg->exe ? "exe" : "sysroot");
            return SCRY_E_INVAL;
        }
        return 0;
    }
    const char *live = cfg->pid            ? "--pid"
                       : cfg->container    ? "--container"
                       : cfg->subprocesses ? "--subprocesses"
                       : cfg->blocking     ? "--blocking"
                       : cfg->sampler      ? "--sampler"
                                           : NULL;
    if (live) {
        fprintf(stderr,
                "scry: dump --core reads a core file, not a running process: %s does not apply "
                "to it\n",
                live);
        return SCRY_E_INVAL;
    }
    return 0;
}

/* A container id prefix of 12 to 64 hex digits, or an absolute cgroup path. */
static int container_arg_ok(const char *s)
{
    if (s[0] == '/')
        return strlen(s) < 1024;
    size_t n = strspn(s, "0123456789abcdefABCDEF");
    return s[n] == 0 && n >= 12 && n <= 64;
}

/* What the command acts on: record's --pid or command, diff's two reports (and its whole
 * check: diff takes nothing else), dump's and top's --pid, --container or --core. Returns
 * 0, 1 when nothing else is to be checked, or SCRY_E_INVAL after a message. */
static int check_command(scry_config_t *cfg)
{
    const char *cmd = command_name(cfg->command);
    if (cfg->command == CMD_RECORD) {
        if (cfg->pid && cfg->argv) {
            fprintf(stderr, "scry: give either --pid or a command after --, not both\n");
            return SCRY_E_INVAL;
        }
        if (!cfg->pid && !cfg->argv) {
            fprintf(stderr, "scry: record needs --pid PID or -- COMMAND ARGS...\n"
                            "try 'scry help record'\n");
            return SCRY_E_INVAL;
        }
    } else if (cfg->command == CMD_DIFF) {
        if (cfg->argv || !cfg->diff_files[1]) {
            fprintf(stderr, "scry: diff needs two JSON reports: scry diff BASE.json NEW.json\n");
            return SCRY_E_INVAL;
        }
        char why[512];
        int f = report_format_choose("diff", cfg->format, cfg->output,
                                     REPORT_FORMAT_BIT(REPORT_FORMAT_TEXT) |
                                         REPORT_FORMAT_BIT(REPORT_FORMAT_FLAMEGRAPH),
                                     REPORT_FORMAT_TEXT, why, sizeof why);
        if (f < 0) {
            fprintf(stderr, "scry: %s\n", why);
            return SCRY_E_INVAL;
        }
        cfg->format_id = f;
        if (cfg->output && strcmp(cfg->output, "-") != 0 && check_output_path(cfg->output) != 0)
            return SCRY_E_INVAL;
        return 1;
    } else if (cfg->command == CMD_DUMP || cfg->command == CMD_TOP) {
        if (cfg->argv && cfg->command == CMD_DUMP) {
            fprintf(stderr, "scry: %s takes --pid PID, not a command\n", cmd);
            return SCRY_E_INVAL;
        }
        if (cfg->container && cfg->pid) {
            fprintf(stderr, "scry: give either --pid or --container, not both\n");
            return SCRY_E_INVAL;
        }
        if (cfg->container && cfg->subprocesses) {
            fprintf(stderr, "scry: --container dumps every Python process of the container "
                            "already; --subprocesses is for --pid\n");
            return SCRY_E_INVAL;
        }
        if (cfg->container && !container_arg_ok(cfg->container)) {
            fprintf(stderr,
                    "scry: --container takes a container id (at least 12 hex digits) or a "
                    "cgroup path (starting with '/'), not '%s'\n",
                    cfg->container);
            return SCRY_E_INVAL;
        }
        if (cfg->command == CMD_DUMP && options_check_core(cfg) != 0)
            return SCRY_E_INVAL;
        if (!cfg->pid && !cfg->container && !cfg->core && !(cfg->command == CMD_TOP && cfg->argv)) {
            fprintf(stderr, "scry: %s needs --pid PID%s\n", cmd,
                    cfg->command == CMD_DUMP ? " or --container ID" : "");
            return SCRY_E_INVAL;
        }
    }
    return 0;
}

/* --metric, the output format (sets cfg->metric_id, cfg->format_id) and the user's-code
 * options. Returns 0 or SCRY_E_INVAL after a message. */
static int check_report(scry_config_t *cfg)
{
    cfg->metric_id = -1;
    if (cfg->metric) {
        static const char *const words[] = {"cpu", "alloc", "copy", "free", "inuse", "peak"};
        static const int ids[] = {SCRY_METRIC_CPU,  SCRY_METRIC_ALLOC,   SCRY_METRIC_COPY,
                                  SCRY_METRIC_FREE, REPORT_METRIC_INUSE, REPORT_METRIC_PEAK};
        int w = scry_parse_word(cfg->metric, strlen(cfg->metric), words, 6);
        cfg->metric_id = w < 0 ? -1 : ids[w];
        if (cfg->metric_id < 0) {
            fprintf(stderr, "scry: --metric is cpu, alloc, copy, free, inuse or peak, not '%s'\n",
                    cfg->metric);
            return SCRY_E_INVAL;
        }
        if (cfg->metric_id != SCRY_METRIC_CPU && !cfg->memory) {
            fprintf(stderr, "scry: --metric %s needs --memory\n", cfg->metric);
            return SCRY_E_INVAL;
        }
    }
    /* The output format: --format, else the output name's extension, else a flame graph
     * (report_format_choose: the one rule; a name that contradicts --format is refused). */
    {
        char why[512];
        int f = report_format_choose(command_name(cfg->command), cfg->format, cfg->output,
                                     REPORT_FORMAT_ALL, REPORT_FORMAT_FLAMEGRAPH, why, sizeof why);
        if (f < 0) {
            fprintf(stderr, "scry: %s\n", why);
            return SCRY_E_INVAL;
        }
        cfg->format_id = f;
    }
    /* The user's-code options act on line views only: never accepted and ignored. */
    const char *scope = cfg->all_lines   ? "--all-lines"
                        : cfg->include.n ? "--include"
                        : cfg->exclude.n ? "--exclude"
                                         : NULL;
    if (scope && cfg->all_lines && (cfg->include.n || cfg->exclude.n)) {
        fprintf(stderr, "scry: --all-lines charges every library line itself: --include and "
                        "--exclude would have no effect with it\n");
        return SCRY_E_INVAL;
    }
    if (scope && cfg->command == CMD_RECORD && cfg->format_id != REPORT_FORMAT_TEXT &&
        cfg->format_id != REPORT_FORMAT_HTML && cfg->format_id != REPORT_FORMAT_JSON) {
        fprintf(stderr,
                "scry: %s chooses the lines of line views (text, html, json); the %s "
                "format keeps whole stacks\n",
                scope, report_format_name(cfg->format_id));
        return SCRY_E_INVAL;
    }
    return 0;
}

/* The values of --assume-version (sets cfg->assume_minor), --inject and --sampler. Returns 0
 * or SCRY_E_INVAL after a message. */
static int check_values(scry_config_t *cfg)
{
    if (cfg->assume_version) {
        long long n = -1;
        if (strncmp(cfg->assume_version, "3.", 2) != 0 ||
            scry_parse_int(cfg->assume_version + 2, 13, 99, &n) != 0)
            n = -1;
        if (n < 13 || n > 99) {
            fprintf(stderr, "scry: --assume-version takes a version such as 3.15, not '%s'\n",
                    cfg->assume_version);
            return SCRY_E_INVAL;
        }
        cfg->assume_minor = (int)n;
    }
    static const char *const how[] = {"remote-exec", "ptrace", "auto"};
    if (cfg->inject && scry_parse_word(cfg->inject, strlen(cfg->inject), how, 3) < 0) {
        fprintf(stderr, "scry: --inject is remote-exec, ptrace or auto, not '%s'\n", cfg->inject);
        return SCRY_E_INVAL;
    }
    if (cfg->inject && (!cfg->memory || !cfg->pid)) {
        fprintf(stderr, "scry: --inject is for --memory with --pid (a launched program "
                        "preloads the shim)\n");
        return SCRY_E_INVAL;
    }
    static const char *const samplers[] = {"perf", "ptrace", "bpf", "auto"};
    if (cfg->sampler && scry_parse_word(cfg->sampler, strlen(cfg->sampler), samplers, 4) < 0) {
        fprintf(stderr, "scry: --sampler is perf, ptrace, bpf or auto, not '%s'\n", cfg->sampler);
        return SCRY_E_INVAL;
    }
    return 0;
}

/* The modes that exclude each other: samplers, --blocking, --async, --locals, --function.
 * Returns 0 or SCRY_E_INVAL after a message. */
static int check_modes(const scry_config_t *cfg)
{
    if (cfg->sampler && !strcmp(cfg->sampler, "bpf") &&
        ((cfg->command != CMD_RECORD && cfg->command != CMD_TOP) || cfg->blocking ||
         cfg->async_tasks)) {
        fprintf(stderr, "scry: the bpf sampler is for record and top, without "
                        "--blocking or --async so far\n");
        return SCRY_E_INVAL;
    }
    if (cfg->sampler && !strcmp(cfg->sampler, "perf") && cfg->command == CMD_DUMP) {
        fprintf(stderr, "scry: dump reads every thread at one instant; the perf sampler is for "
                        "recordings over time (record, top)\n");
        return SCRY_E_INVAL;
    }
    if (cfg->locals && cfg->async_tasks) {
        fprintf(stderr, "scry: dump --locals shows the locals of thread stacks; --async shows "
                        "asyncio tasks instead of threads\n");
        return SCRY_E_INVAL;
    }
    if (cfg->async_tasks && cfg->command == CMD_DUMP &&
        (cfg->native || cfg->blocking || cfg->idle)) {
        fprintf(stderr, "scry: dump --async reads the asyncio tasks without stopping anything; "
                        "--native, --blocking and --idle are for thread stacks\n");
        return SCRY_E_INVAL;
    }
    if (cfg->sampler && !strcmp(cfg->sampler, "perf") && cfg->blocking) {
        fprintf(stderr, "scry: --blocking stops threads, which the perf sampler never does; "
                        "use --sampler ptrace (or leave --sampler out)\n");
        return SCRY_E_INVAL;
    }
    if (cfg->function &&
        (cfg->format_id == REPORT_FORMAT_TEXT || cfg->format_id == REPORT_FORMAT_HTML)) {
        fprintf(stderr,
                "scry: --function is for stack formats (flamegraph, collapsed, speedscope, "
                "pprof, json); the %s report already lists its hottest functions\n",
                report_format_name((enum report_format)cfg->format_id));
        return SCRY_E_INVAL;
    }
    return 0;
}

/* Fills cfg->open_opts (--function, --assume-version, --discovery) and checks record's
 * output path. Returns 0 or SCRY_E_INVAL after a message. */
static int check_open_opts(scry_config_t *cfg)
{
    cfg->open_opts.function_lines = cfg->function;
    cfg->open_opts.assume_minor = cfg->assume_minor;
    cfg->open_opts.discovery = PYSTATE_DISCOVERY_ALL;
    if (cfg->discovery) {
        static const char *const ways[] = {"section", "disasm"};
        int w = scry_parse_word(cfg->discovery, strlen(cfg->discovery), ways, 2);
        if (w >= 0)
            cfg->open_opts.discovery =
                w == 0 ? PYSTATE_DISCOVERY_SECTION : PYSTATE_DISCOVERY_DISASM;
        else {
            fprintf(stderr, "scry: --discovery is section or disasm, not '%s'\n", cfg->discovery);
            return SCRY_E_INVAL;
        }
    }
    if (cfg->command == CMD_RECORD && cfg->output && strcmp(cfg->output, "-") != 0 &&
        check_output_path(cfg->output) != 0)
        return SCRY_E_INVAL;
    return 0;
}

static int check_conflicts(scry_config_t *cfg)
{
    int rc = check_command(cfg);
    if (rc)
        return rc > 0 ? 0 : rc;
    if ((rc = check_report(cfg)) != 0 || (rc = check_values(cfg)) != 0 ||
        (rc = check_modes(cfg)) != 0)
        return rc;
    return check_open_opts(cfg);
}

int options_parse(int argc, char **argv, scry_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->rate_hz = 100;
    cfg->window_s = 1;
    cfg->memory_sample_bytes = 0; /* the shim's default */
    if (argc < 2) {
        cfg->command = CMD_HELP;
        return 0;
    }
    const char *c = argv[1];
    if (!strcmp(c, "record"))
        cfg->command = CMD_RECORD;
    else if (!strcmp(c, "dump"))
        cfg->command = CMD_DUMP;
    else if (!strcmp(c, "top"))
        cfg->command = CMD_TOP;
    else if (!strcmp(c, "diff"))
        cfg->command = CMD_DIFF;
    else if (!strcmp(c, "help") || !strcmp(c, "--help") || !strcmp(c, "-h")) {
        cfg->command = CMD_HELP;
        if (argc > 2) {
            if (!strcmp(argv[2], "record"))
                cfg->help_for = CMD_RECORD;
            else if (!strcmp(argv[2], "dump"))
                cfg->help_for = CMD_DUMP;
            else if (!strcmp(argv[2], "top"))
                cfg->help_for = CMD_TOP;
            else if (!strcmp(argv[2], "diff"))
                cfg->help_for = CMD_DIFF;
        }
        return 0;
    } else if (!strcmp(c, "--version") || !strcmp(c, "-V") || !strcmp(c, "version")) {
        cfg->command = CMD_VERSION;
        return 0;
    } else {
        fprintf(stderr, "scry: unknown command '%s' (record, dump, top, diff, serve, ctl, help)\n",
                c);
        return SCRY_E_INVAL;
    }
    unsigned mask = ON(cfg->command);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "scry: nothing to run after --\n");
                return SCRY_E_INVAL;
            }
            cfg->argv = &argv[i + 1];
            break;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cfg->help_for = cfg->command;
            cfg->command = CMD_HELP;
            return 0;
        }
        const opt_spec_t *o = NULL;
        const char *value = NULL;
        if (a[0] == '-' && a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
            o = find_long(a + 2, len);
            if (eq)
                value = eq + 1;
        } else if (a[0] == '-' && a[1] && !a[2]) {
            o = find_short(a[1]);
        } else if (cfg->command == CMD_DIFF) {
            if (cfg->diff_files[1]) {
                fprintf(stderr, "scry: diff compares two reports; '%s' is a third\n", a);
                return SCRY_E_INVAL;
            }
            cfg->diff_files[cfg->diff_files[0] ? 1 : 0] = a;
            continue;
        } else {
            /* py-spy style: a bare program name starts the command. */
            cfg->argv = &argv[i];
            break;
        }
        if (!o || !(o->commands & mask)) {
            fprintf(stderr, "scry: %s does not take the option '%s' (see 'scry help %s')\n",
                    command_name(cfg->command), a, command_name(cfg->command));
            return SCRY_E_INVAL;
        }
        if (o->kind != OPT_FLAG && !value) {
            if (i + 1 >= argc) {
                fprintf(stderr, "scry: %s needs a value\n", a);
                return SCRY_E_INVAL;
            }
            value = argv[++i];
        } else if (o->kind == OPT_FLAG && value) {
            fprintf(stderr, "scry: %s takes no value\n", a);
            return SCRY_E_INVAL;
        }
        int err = set_value(o, value, cfg);
        if (err)
            return err;
    }
    return check_conflicts(cfg);
}

void options_sampler(const scry_config_t *cfg, sampler_opts_t *out)
{
    *out = (sampler_opts_t){
        .rate_hz = cfg->rate_hz,
        .backend = cfg->sampler,
        .instant = cfg->command == CMD_DUMP,
        .idle = cfg->idle,
        .threads = cfg->threads,
        .blocking = cfg->blocking,
        .native = cfg->native,
        .gil = cfg->gil,
        .async_labels = cfg->async_tasks && cfg->command == CMD_RECORD,
        .open_opts = cfg->open_opts,
    };
}
