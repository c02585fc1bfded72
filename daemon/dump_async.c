/* dump_async.c - 'scry dump --async': every event loop's asyncio tasks, the coroutine
 * chain each is suspended in and the await graph (pystate/asyncio.h reads them; 3.14+).
 * Text: per loop, a tree of tasks (a task under each task that awaits it). JSON: one
 * document (docs/output-formats.md, "scry dump --async --json"). */
#include "commands.h"
#include "sampler.h"

#include "asyncio.h"
#include "procinfo.h"
#include "recording.h"
#include "report.h"
#include "scry_err.h"

#include <stdio.h>
#include <string.h>

#define TREE_MAX_DEPTH 64 /* nesting printed; deeper awaiters are listed flat */

static const char *str(const char *s)
{
    return s ? s : "";
}

static const pystate_async_task_t *find_task(const pystate_async_snapshot_t *s, raddr_t addr)
{
    for (size_t i = 0; i < s->ntasks; i++)
        if (s->tasks[i].addr == addr)
            return &s->tasks[i];
    return NULL;
}

static void print_task(const pystate_async_snapshot_t *s, const pystate_async_task_t *k, int depth,
                       FILE *out)
{
    const pystate_async_task_t *w = k->awaits ? find_task(s, k->awaits) : NULL;
    fprintf(out, "%*s(T) %s [%s", 2 + 4 * depth, "", str(k->name),
            pystate_task_state_name(k->state));
    if (w)
        fprintf(out, ", awaits task %s", str(w->name));
    else if (k->awaits_type)
        fprintf(out, ", awaits %s", k->awaits_type);
    fprintf(out, "]%s\n", k->truncated ? " [truncated]" : "");
    for (uint32_t i = 0; i < k->nframes; i++)
        fprintf(out, "%*s%s (%s:%d)\n", 6 + 4 * depth, "", str(k->frames[i].function),
                str(k->frames[i].file), (int)k->frames[i].line);
}

static int awaited_by(const pystate_async_task_t *child, raddr_t parent)
{
    for (uint32_t i = 0; i < child->nawaited_by; i++)
        if (child->awaited_by[i] == parent)
            return 1;
    return 0;
}

/* Prints K and, under it, every task of the same loop it awaits (the tasks whose
 * awaited_by names it), each once. */
static void print_tree(const pystate_async_snapshot_t *s, size_t from, size_t to, size_t ki,
                       int depth, uint8_t *shown, FILE *out)
{
    shown[ki] = 1;
    print_task(s, &s->tasks[ki], depth, out);
    if (depth >= TREE_MAX_DEPTH)
        return;
    for (size_t j = from; j < to; j++)
        if (!shown[j] && awaited_by(&s->tasks[j], s->tasks[ki].addr))
            print_tree(s, from, to, j, depth + 1, shown, out);
}

static void write_text(const pystate_info_t *info, const char *what,
                       const pystate_async_snapshot_t *s, FILE *out, uint8_t *shown)
{
    fprintf(out, "Process %d: %s\nPython v%s (%s)\n", (int)info->pid, what, info->version,
            info->interp_path);
    if (!s->loaded) {
        fprintf(out, "\nNo asyncio: the process has not loaded the _asyncio module.\n");
        return;
    }
    fprintf(out, "asyncio offsets from %s\n", s->source);
    if (!s->nloops)
        fprintf(out, "\nNo event loop has pending tasks.\n");
    size_t i = 0;
    for (size_t l = 0; l < s->nloops; l++) {
        const pystate_async_loop_t *lp = &s->loops[l];
        size_t from = i;
        while (i < s->ntasks && s->tasks[i].loop == lp->addr)
            i++;
        fprintf(out, "\nEvent loop 0x%llx (%s)", (unsigned long long)lp->addr,
                lp->type ? lp->type : "?");
        if (lp->tid)
            fprintf(out, ", running in thread %d", (int)lp->tid);
        else
            fprintf(out, ", not running");
        fprintf(out, ": %zu task%s\n", i - from, i - from == 1 ? "" : "s");
        /* roots first (awaited by no task), then whatever a cycle left out */
        for (size_t k = from; k < i; k++)
            if (!shown[k] && s->tasks[k].nawaited_by == 0)
                print_tree(s, from, i, k, 0, shown, out);
        for (size_t k = from; k < i; k++)
            if (!shown[k])
                print_tree(s, from, i, k, 0, shown, out);
    }
    if (s->dropped)
        fprintf(out, "\n(%llu task%s changed while read and left out)\n",
                (unsigned long long)s->dropped, s->dropped == 1 ? "" : "s");
}

static void write_json(const pystate_info_t *info, const pystate_async_snapshot_t *s, FILE *out)
{
    fprintf(out, "{\"pid\": %d, \"python_version\": ", (int)info->pid);
    report_json_fputs(out, info->version);
    fprintf(out, ", \"asyncio\": %s, \"source\": ", s->loaded ? "true" : "false");
    report_json_fputs(out, s->source);
    fprintf(out, ", \"dropped\": %llu, \"loops\": [", (unsigned long long)s->dropped);
    size_t i = 0;
    for (size_t l = 0; l < s->nloops; l++) {
        const pystate_async_loop_t *lp = &s->loops[l];
        fprintf(out, "%s\n  {\"address\": \"0x%llx\", \"type\": ", l ? "," : "",
                (unsigned long long)lp->addr);
        report_json_fputs(out, lp->type);
        fprintf(out, ", \"thread\": %d, \"tasks\": [", (int)lp->tid);
        size_t from = i;
        for (; i < s->ntasks && s->tasks[i].loop == lp->addr; i++) {
            const pystate_async_task_t *k = &s->tasks[i];
            fprintf(out, "%s\n    {\"address\": \"0x%llx\", \"name\": ", i > from ? "," : "",
                    (unsigned long long)k->addr);
            report_json_fputs(out, k->name);
            fprintf(out, ", \"state\": \"%s\", \"thread\": %d, \"truncated\": %s, ",
                    pystate_task_state_name(k->state), (int)k->tid,
                    k->truncated ? "true" : "false");
            const pystate_async_task_t *w = k->awaits ? find_task(s, k->awaits) : NULL;
            if (k->awaits) {
                fprintf(out, "\"awaits\": {\"address\": \"0x%llx\", \"type\": ",
                        (unsigned long long)k->awaits);
                report_json_fputs(out, k->awaits_type);
                fprintf(out, ", \"task\": ");
                if (w)
                    report_json_fputs(out, w->name);
                else
                    fprintf(out, "null");
                fprintf(out, "}, ");
            } else {
                fprintf(out, "\"awaits\": null, ");
            }
            fprintf(out, "\"awaited_by\": [");
            for (uint32_t j = 0; j < k->nawaited_by; j++)
                fprintf(out, "%s\"0x%llx\"", j ? ", " : "", (unsigned long long)k->awaited_by[j]);
            fprintf(out, "], \"stack\": [");
            for (uint32_t j = 0; j < k->nframes; j++) {
                fprintf(out, "%s{\"function\": ", j ? ", " : "");
                report_json_fputs(out, k->frames[j].function);
                fprintf(out, ", \"file\": ");
                report_json_fputs(out, k->frames[j].file);
                fprintf(out, ", \"line\": %d}", (int)k->frames[j].line);
            }
            fprintf(out, "]}");
        }
        fprintf(out, "%s]}", i > from ? "\n  " : "");
    }
    fprintf(out, "\n]}\n");
}

int dump_async_target(pystate_target_t *t, const char *what, int json, FILE *out)
{
    pystate_async_snapshot_t *s = NULL;
    uint8_t *shown = NULL;
    char msg[600];
    int rc = 1;
    int err = pystate_async_read(t, &s, msg, sizeof msg);
    if (err) {
        fprintf(stderr, "scry: %s\n", msg);
        goto out;
    }
    if (!(shown = calloc(s->ntasks ? s->ntasks : 1, 1))) {
        fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    const pystate_info_t *info = pystate_target_info(t);
    if (json)
        write_json(info, s, out);
    else
        write_text(info, what, s, out, shown);
    if (fflush(out) != 0 || ferror(out)) {
        fprintf(stderr, "scry: could not write the dump: %s\n", scry_strerror(SCRY_E_IO));
        goto out;
    }
    rc = 0;
out:
    free(shown);
    pystate_async_snapshot_free(s);
    return rc;
}

int cmd_dump_async(const scry_config_t *cfg, FILE *out)
{
    strtab_t *strings = NULL;
    pystate_target_t *t = NULL;
    int rc = 1;
    if (recording_dump_open(cfg->pid, &cfg->open_opts, &strings, &t) != 0)
        goto out;
    char what[600];
    proc_describe(pystate_target_info(t)->pid, what, sizeof what);
    rc = dump_async_target(t, what, cfg->json, out);
out:
    pystate_target_free(t);
    strtab_free(strings);
    return rc;
}
