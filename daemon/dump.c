/* dump.c - 'scry dump': every thread's Python stack, now. */
#include "commands.h"

#include "tasks.h"
#include "procinfo.h"
#include "report.h"
#include "scry_err.h"

#include <stdio.h>
#include <string.h>

static const char *state_word(char state)
{
    switch (state) {
    case 'R':
        return "running";
    case 0:
        return "unknown";
    default:
        return "idle";
    }
}

static void dump_text(const pystate_info_t *info, const pystate_snapshot_t *snap,
                      const char *states, char names[][64])
{
    char what[600];
    procinfo_describe(info->pid, what, sizeof what);
    printf("Process %d: %s\nPython v%s (%s; runtime found by %s)\n", (int)info->pid, what,
           info->version, info->interp_path, info->how_found);
    for (size_t i = 0; i < pystate_snapshot_count(snap); i++) {
        const pystate_thread_t *th = pystate_snapshot_thread(snap, i);
        printf("\nThread %d (%s%s): \"%s\"%s\n", (int)th->tid, state_word(states[i]),
               th->gil ? "+gil" : "", names[i], th->truncated ? " [truncated]" : "");
        for (uint32_t k = 0; k < th->nframes; k++) {
            const scry_frame_t *f = &th->frames[k];
            printf("    %s (%s:%d)\n", f->function, f->file, (int)f->line);
        }
    }
}

static void dump_json(const pystate_info_t *info, const pystate_snapshot_t *snap,
                      const char *states, char names[][64])
{
    printf("{\"pid\": %d, \"python_version\": ", (int)info->pid);
    report_json_fputs(stdout, info->version);
    printf(", \"threads\": [");
    for (size_t i = 0; i < pystate_snapshot_count(snap); i++) {
        const pystate_thread_t *th = pystate_snapshot_thread(snap, i);
        printf("%s\n  {\"tid\": %d, \"name\": ", i ? "," : "", (int)th->tid);
        report_json_fputs(stdout, names[i]);
        printf(", \"gil\": %s, \"state\": \"%s\", \"truncated\": %s, \"frames\": [",
               th->gil ? "true" : "false", state_word(states[i]),
               th->truncated ? "true" : "false");
        for (uint32_t k = 0; k < th->nframes; k++) {
            const scry_frame_t *f = &th->frames[k];
            printf("%s{\"function\": ", k ? ", " : "");
            report_json_fputs(stdout, f->function);
            printf(", \"file\": ");
            report_json_fputs(stdout, f->file);
            printf(", \"line\": %d}", (int)f->line);
        }
        printf("]}");
    }
    printf("\n]}\n");
}

int cmd_dump(const scry_config_t *cfg)
{
    strtab_t *strings = strtab_new();
    pystate_snapshot_t *snap = pystate_snapshot_new();
    procinfo_threads_t *pt = procinfo_threads_new(cfg->pid);
    pystate_target_t *t = NULL;
    char (*names)[64] = NULL;
    char *states = NULL;
    int rc = 1;
    if (!strings || !snap || !pt) {
        fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    if (cmd_open_target(cfg->pid, strings, &t) != 0)
        goto out;
    int err;
    if (cfg->blocking) {
        tasks_t *tasks = tasks_new(cfg->pid);
        if (!tasks)
            goto out;
        tasks_refresh(tasks);
        tasks_stop_all(tasks);
        err = pystate_sample(t, snap);
        tasks_resume_all(tasks);
        tasks_free(tasks);
    } else {
        err = pystate_sample(t, snap);
    }
    if (err) {
        fprintf(stderr, "scry: could not read the threads of process %d: %s\n", (int)cfg->pid,
                scry_strerror(err));
        goto out;
    }
    size_t n = pystate_snapshot_count(snap);
    names = calloc(n ? n : 1, sizeof *names);
    states = calloc(n ? n : 1, 1);
    if (!names || !states)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const pystate_thread_t *th = pystate_snapshot_thread(snap, i);
        states[i] = procinfo_thread_state(pt, th->tid, NULL);
        procinfo_thread_name(cfg->pid, th->tid, names[i], sizeof names[i]);
    }
    if (cfg->json)
        dump_json(pystate_target_info(t), snap, states, names);
    else
        dump_text(pystate_target_info(t), snap, states, names);
    rc = 0;
out:
    free(names);
    free(states);
    pystate_target_free(t);
    pystate_snapshot_free(snap);
    procinfo_threads_free(pt);
    strtab_free(strings);
    return rc;
}
