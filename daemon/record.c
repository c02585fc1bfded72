/* record.c - 'scry record': parses into a recording (recording.h), runs it, writes the
 * profile where --output says and prints the summary. */
#include "commands.h"

#include "recording.h"
#include "scry_err.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t record_stop;

static void install_signals(void)
{
    recording_stop_on_signals(&record_stop, 0);
    sampler_handle_job_control(NULL, NULL);
}

/* Opens the output: stdout for "-"; a name of scry's own making (no --output, kept in
 * NAME, LEN bytes) is created, never followed or reused. *PATH is set to the name used.
 * Returns NULL having said why. */
static FILE *open_output(const scry_config_t *cfg, const recording_t *r, char *name, size_t len,
                         const char **path)
{
    *path = cfg->output;
    if (!*path) {
        char stamp[32];
        time_t now = time(NULL);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
        snprintf(name, len, "scry-%d-%s.%s", (int)recording_pid(r), stamp,
                 report_format_extension((enum report_format)cfg->format_id));
        *path = name;
    }
    FILE *out = NULL;
    if (strcmp(*path, "-") == 0) {
        out = stdout;
    } else if (*path == name) {
        /* perhaps in a shared directory: create it, never follow or reuse what someone put
         * there first */
        int fd = open(*path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        out = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (fd >= 0 && !out)
            close(fd);
    } else {
        out = fopen(*path, "w");
    }
    if (!out)
        fprintf(stderr, "scry: cannot write %s: %s\n", *path, strerror(errno));
    return out;
}

/* Writes the profile to its output. Returns 0, or -1 having said why. */
static int write_profile(const scry_config_t *cfg, recording_t *r, char *name, size_t len,
                         const char **path)
{
    FILE *out = open_output(cfg, r, name, len, path);
    if (!out)
        return -1;
    /* metric_id -1: automatic (CPU when there are CPU samples) */
    report_options_t ropt = {.color = out == stdout && isatty(1), .metric = cfg->metric_id};
    int werr = recording_write(r, (enum report_format)cfg->format_id, out, &ropt);
    if (out != stdout && fclose(out) != 0)
        werr = werr ? werr : SCRY_E_IO;
    else if (out == stdout)
        fflush(stdout);
    if (werr) {
        fprintf(stderr, "scry: writing %s failed: %s\n", *path, scry_strerror(werr));
        return -1;
    }
    return 0;
}

/* The recording CFG describes (pointers into CFG, which outlives it). */
static recording_opts_t record_opts(const scry_config_t *cfg)
{
    recording_opts_t o = {
        .pid = cfg->pid,
        .argv = cfg->argv,
        .subprocesses = cfg->subprocesses,
        .duration_s = cfg->duration_s,
        .async_tasks = cfg->async_tasks,
        .memory = cfg->memory,
        .memory_sample_bytes = cfg->memory_sample_bytes,
        .inject = cfg->inject,
        .all_lines = cfg->all_lines,
        .include = cfg->include.pat,
        .ninclude = cfg->include.n,
        .exclude = cfg->exclude.pat,
        .nexclude = cfg->exclude.n,
        .quiet = cfg->quiet,
        .progress = !cfg->quiet,
        .stop = &record_stop,
    };
    options_sampler(cfg, &o.sampler);
    return o;
}

int cmd_record(const scry_config_t *cfg)
{
    install_signals();
    recording_opts_t opts = record_opts(cfg);
    recording_t *r = recording_new(&opts);
    int rc = 1;
    const char *path = NULL;
    char outname[600]; /* the output's name when scry makes it up (no --output) */
    if (!r) {
        fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    /* each step has said why it failed */
    if (recording_open(r) != 0 || recording_run(r) != 0)
        goto out;
    if (recording_stopped_by(r)) /* what was collected is written */
        fprintf(stderr, "scry: sampling stopped: %s\n", scry_strerror(recording_stopped_by(r)));
    if (recording_end(r) != 0)
        goto out;
    if (write_profile(cfg, r, outname, sizeof outname, &path) != 0)
        goto out;
    if (!cfg->quiet)
        recording_summary(r, path, stderr);
    rc = 0;
out:
    recording_free(r);
    return rc;
}
