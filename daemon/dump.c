/* dump.c - 'scry dump': every thread's stack, now, of a process, a container's processes
 * or a family (recording/'s snapshot for each), printed instead of aggregated. */
#include "commands.h"
#include "discover.h"

#include "process.h"
#include "pyrepr.h"
#include "recording.h"
#include "procinfo.h"
#include "report.h"
#include "sampler.h"
#include "scry_err.h"
#include "scry_proc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define DUMP_MAX_PROCS 4096   /* processes of one container, or of one family */
#define DUMP_SCAN_MAX  262144 /* processes listed to find a family */
/* Dumps process PID to OUT (JSON when cfg->json). Returns 0 or 1 after a message. */
static int dump_one(const scry_config_t *cfg, pid_t pid, FILE *out)
{
    if (cfg->async_tasks) {
        scry_config_t one = *cfg;
        one.pid = pid;
        return cmd_dump_async(&one, out);
    }
    strtab_t *strings = NULL;
    pystate_target_t *t = NULL;
    int rc = 1;
    if (recording_dump_open(pid, &cfg->open_opts, &strings, &t) != 0)
        goto out;
    sampler_opts_t so;
    options_sampler(cfg, &so);
    char msg[512];
    if (recording_dump_write(t, strings, &so, cfg->locals,
                             cfg->json ? REPORT_DUMP_JSON : REPORT_DUMP_TEXT, out, msg,
                             sizeof msg) != 0) {
        if (msg[0])
            fprintf(stderr, "scry: %s\n", msg);
        goto out;
    }
    rc = 0;
out:
    pystate_target_free(t);
    strtab_free(strings);
    return rc;
}

/* 1 when process PID belongs to the container WHICH: an id prefix or a cgroup path (the
 * process's cgroup is it or below it). */
static int in_container(pid_t pid, const char *which)
{
    proc_container_t ct;
    if (proc_read_container(pid, &ct) != 0)
        return 0;
    if (which[0] != '/')
        return ct.id[0] && strncasecmp(ct.id, which, strlen(which)) == 0;
    size_t n = strlen(which);
    while (n > 1 && which[n - 1] == '/')
        n--;
    const char *paths[2] = {ct.cgroup, ct.id_cgroup};
    for (int i = 0; i < 2; i++)
        if (strncmp(paths[i], which, n) == 0 && (paths[i][n] == 0 || paths[i][n] == '/' || n == 1))
            return 1;
    return 0;
}

/* 1 when PID runs Python by its executable's or comm's name or a mapped libpython (the
 * rule of scry serve, proc_process_read). */
static int is_python(pid_t pid)
{
    static proc_process_t p; /* 12 KiB: not on the stack; dump is single-threaded */
    return proc_process_read(pid, &p, 1) == 0 && p.is_python;
}

/* 1 when process P->pid is still the one listed (start time P->start_time, 0 unknown: not
 * checked), or is gone and GONE_OK (it exited after it was dumped), else 0 after a message
 * naming WHAT was listed. The sampler's pid-reuse test: a pid given to another process
 * has a later start time. */
static int still_listed(const proc_entry_t *p, const char *what, int gone_ok)
{
    uint64_t now = 0;
    int err = proc_read_identity(p->pid, &now, NULL, 0);
    if (err == 0 ? now == p->start_time || !p->start_time : gone_ok)
        return 1;
    if (err == 0)
        fprintf(stderr,
                "scry: process %d is not the one listed in %s: its pid was reused (start "
                "time %llu, listed %llu); not dumped\n",
                (int)p->pid, what, (unsigned long long)now, (unsigned long long)p->start_time);
    else
        fprintf(stderr, "scry: process %d of %s is gone: %s\n", (int)p->pid, what,
                scry_strerror(err));
    return 0;
}

/* Dumps listed process P into a new buffer *BUF (*LEN bytes; the caller frees it, also on
 * failure), and only when P's pid names the listed process (still_listed) before and after
 * the dump (or no process after it: it exited): what is read in between is that
 * process's. Returns 0 or 1 after a message. */
static int dump_listed(const scry_config_t *cfg, const proc_entry_t *p, const char *what,
                       char **buf, size_t *len)
{
    int rc = 1;
    FILE *mem = NULL;
    if (!still_listed(p, what, 0))
        goto out;
    if (!(mem = open_memstream(buf, len))) {
        fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    rc = dump_one(cfg, p->pid, mem);
    if (fclose(mem) != 0 && !rc) {
        fprintf(stderr, "scry: out of memory\n");
        rc = 1;
    }
    if (!rc && !still_listed(p, what, 1))
        rc = 1;
out:
    return rc;
}

/* Dumps each of PROCS[0..N) in turn (a blank line between; with --json one array), each
 * only while its pid names the process WHAT listed (dump_listed). Returns 0 when every
 * dump was written, else 1. */
static int dump_list(const scry_config_t *cfg, const proc_entry_t *procs, size_t n,
                     const char *what)
{
    int rc = 0;
    size_t shown = 0;
    if (cfg->json)
        fputs("[\n", stdout);
    for (size_t i = 0; i < n; i++) {
        char *buf = NULL;
        size_t len = 0;
        int one = dump_listed(cfg, &procs[i], what, &buf, &len);
        if (!one) {
            if (shown++)
                fputs(cfg->json ? ",\n" : "\n", stdout);
            fwrite(buf, 1, len, stdout);
            fflush(stdout);
        }
        free(buf);
        rc |= one;
    }
    if (cfg->json)
        fputs("]\n", stdout);
    return rc;
}

/* Lists every process into ENTS (DUMP_SCAN_MAX entries; NULL: the allocation failed).
 * Returns how many, or -1 after a message. */
static int list_all(proc_entry_t *ents)
{
    if (!ents) {
        fprintf(stderr, "scry: out of memory\n");
        return -1;
    }
    int n = proc_list_all(ents, DUMP_SCAN_MAX);
    if (n < 0) {
        fprintf(stderr, "scry: cannot list /proc: %s\n", scry_strerror(n));
        return -1;
    }
    return n;
}

/* scry dump --container: every Python process of the container, in pid order; with --json
 * one array of dump documents. A process is listed with its start time, read before it is
 * looked at: its dump is printed only while its pid still names it. */
static int dump_container(const scry_config_t *cfg)
{
    proc_entry_t *ents = malloc(DUMP_SCAN_MAX * sizeof *ents);
    int rc = 1;
    int n = list_all(ents);
    if (n < 0)
        goto out;
    size_t k = 0; /* ENTS stays sorted by pid */
    for (int i = 0; i < n && k < DUMP_MAX_PROCS; i++)
        if (ents[i].pid != getpid() && ents[i].state != 'Z' && ents[i].state != 'X' &&
            in_container(ents[i].pid, cfg->container) && is_python(ents[i].pid))
            ents[k++] = ents[i]; /* k <= i: never ahead of the reading */
    if (k == 0) {
        fprintf(stderr, "scry: no Python process in container %s\n", cfg->container);
        goto out;
    }
    char what[300];
    snprintf(what, sizeof what, "container %s", cfg->container);
    rc = dump_list(cfg, ents, k, what);
out:
    free(ents);
    return rc;
}

/* scry dump --subprocesses: the process and each Python descendant, parents first; with
 * --json one array of dump documents (each printed only while its pid names the process
 * listed). */
static int dump_family(const scry_config_t *cfg)
{
    proc_entry_t *ents = malloc(DUMP_SCAN_MAX * sizeof *ents);
    pid_t *desc = malloc(DUMP_MAX_PROCS * sizeof *desc);
    proc_entry_t *procs = malloc(DUMP_MAX_PROCS * sizeof *procs);
    int rc = 1;
    int n = desc && procs ? list_all(ents) : list_all(NULL);
    if (n < 0)
        goto out;
    /* the root even when its name does not say Python (dump_one then says what it is),
     * unless it has Python descendants: a shell or a wrapper */
    size_t nd = proc_descendants(ents, (size_t)n, cfg->pid, desc, DUMP_MAX_PROCS - 1);
    size_t k = 0;
    if (is_python(cfg->pid) || nd == 0)
        procs[k++] = (proc_entry_t){.pid = cfg->pid}; /* start time below */
    for (size_t i = 0; i < nd; i++)
        if (is_python(desc[i]))
            procs[k++] = (proc_entry_t){.pid = desc[i]};
    if (k == 0) {
        fprintf(stderr, "scry: neither process %d nor any of its %zu descendants is Python\n",
                (int)cfg->pid, nd);
        goto out;
    }
    for (size_t i = 0; i < k; i++) {
        const proc_entry_t *e = proc_entry_find(ents, (size_t)n, procs[i].pid);
        procs[i].start_time = e ? e->start_time : 0; /* 0: gone, dump_one says so */
    }
    char what[64];
    snprintf(what, sizeof what, "the family of process %d", (int)cfg->pid);
    rc = dump_list(cfg, procs, k, what);
out:
    free(ents);
    free(desc);
    free(procs);
    return rc;
}

int cmd_dump(const scry_config_t *cfg)
{
    if (cfg->core)
        return cmd_dump_core(cfg);
    if (cfg->container)
        return dump_container(cfg);
    return cfg->subprocesses ? dump_family(cfg) : dump_one(cfg, cfg->pid, stdout);
}
