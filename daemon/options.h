/* options.h - the command line: one table fills one config struct. */
#ifndef SCRY_OPTIONS_H
#define SCRY_OPTIONS_H

#include <stdint.h>
#include <sys/types.h>

#include "pystate.h"
#include "sampler.h"

enum scry_command { CMD_NONE, CMD_RECORD, CMD_DUMP, CMD_TOP, CMD_HELP, CMD_VERSION, CMD_DIFF };

/* A repeatable pattern option (--include, --exclude): the patterns in the order given. */
#define SCRY_MAX_GLOBS 32
typedef struct scry_globs {
    const char *pat[SCRY_MAX_GLOBS]; /* point into argv */
    unsigned n;
} scry_globs_t;

typedef struct scry_config {
    enum scry_command command;
    enum scry_command help_for; /* with CMD_HELP: which command's help */
    pid_t pid;                  /* --pid; 0 when launching */
    char **argv;           /* the program to launch (after --), NULL-terminated; NULL with --pid */
    double rate_hz;        /* --rate */
    double duration_s;     /* --duration; 0 = until interrupted or the target exits */
    const char *format;    /* --format; NULL = the command's default */
    const char *output;    /* --output; NULL = a generated name; "-" = stdout */
    int idle;              /* --idle */
    int threads;           /* --threads */
    int blocking;          /* --blocking */
    int native;            /* --native */
    int gil;               /* --gil */
    int json;              /* dump --json */
    int async_tasks;       /* dump --async */
    int locals;            /* dump --locals */
    int memory;            /* --memory */
    const char *container; /* dump --container: an id (12+ hex digits) or a cgroup path */
    const char *core;      /* dump --core: a core file (post-mortem) */
    const char *exe;       /* dump --core --exe: the executable when the core names none */
    const char *sysroot;   /* dump --core --sysroot: the root the core's files are under */
    uint64_t memory_sample_bytes; /* --memory-sample-bytes */
    int quiet;                    /* --quiet: no summary line */
    const char *metric;           /* --metric: what flame graphs and stacks weigh */
    scry_globs_t include;         /* --include: files that are the user's code (line views) */
    scry_globs_t exclude;         /* --exclude: files that are not the user's code */
    int all_lines;                /* --all-lines: line views charge the leaf Python line */
    int subprocesses;             /* --subprocesses: the target's Python descendants too */
    int function;                 /* --function: Python frames at their function's first line */
    int once;                     /* top --once: one plain-text table after --duration, then exit */
    double window_s; /* top --window: seconds of the 'last N s' percentages (default 1) */
    const char *assume_version; /* --assume-version 3.N, as given */
    const char *inject;         /* --inject remote-exec|ptrace|auto, as given (NULL: auto) */
    const char *sampler;        /* --sampler perf|ptrace|auto; NULL = auto */
    int format_id; /* record: enum report_format of --format, else inferred from --output's
                      extension, else flame graph (filled by options_parse) */
    int metric_id; /* SCRY_METRIC_* or REPORT_METRIC_INUSE/PEAK of --metric, or -1 (automatic) */
    const char *diff_files[2];     /* diff: BASE.json and NEW.json */
    const char *discovery;         /* --discovery: section or disasm (tests of the fallbacks) */
    pystate_open_opts_t open_opts; /* how to open the target: assume_minor (copy of the
                                      field below) and discovery (filled by options_parse) */
    int assume_minor; /* N of --assume-version (0 = none): read a Python newer than every known
                         _Py_DebugOffsets layout with 3.N's (pystate_target_open_as) */
} scry_config_t;

/* Parses ARGV into CFG. Returns 0, or a negative code after printing a message to stderr
 * (unknown option, missing value, conflicting options). CMD_HELP/CMD_VERSION need no more. */
int options_parse(int argc, char **argv, scry_config_t *cfg);

/* The sampler's options for the command CFG describes (record, top, dump). */
void options_sampler(const scry_config_t *cfg, sampler_opts_t *out);

/* Prints the usage text for COMMAND (CMD_NONE: the overview) to stdout. */
void options_usage(enum scry_command command);

#endif
