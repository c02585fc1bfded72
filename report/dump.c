/* dump.c - the text and JSON of 'scry dump' (report.h: report_dump_write). */
#include <stdio.h>

#include "report.h"
#include "scry_err.h"

static const char *str(const char *s)
{
    return s ? s : "";
}

static const char *state_word(const report_dump_thread_t *t)
{
    if (t->gil_wait)
        return "waiting for the GIL";
    return t->running ? "running" : "idle";
}

static const char *kind_word(int kind)
{
    return kind == 1 ? "cell" : kind == 2 ? "free" : "local";
}

/* --locals: one line a variable under its frame. */
static void write_text_locals(const report_dump_locals_t *l, FILE *out)
{
    if (!l->read)
        return;
    for (uint32_t j = 0; j < l->n; j++) {
        const report_dump_local_t *v = &l->vars[j];
        fprintf(out, "        %s%s = %s", v->is_arg ? "arg " : "", str(v->name), str(v->repr));
        if (v->kind)
            fprintf(out, "  [%s]", kind_word(v->kind));
        fputc('\n', out);
    }
}

/* The core file and the fatal signal it records, under the process line. */
static void write_text_core(const report_dump_core_t *c, FILE *out)
{
    fprintf(out, "Core file %s: ", str(c->file));
    if (!c->signo) {
        fprintf(out, "no fatal signal (taken of a running process)\n");
        return;
    }
    fprintf(out, "killed by %s", str(c->signal));
    if (c->reason && c->reason[0])
        fprintf(out, " (%s)", c->reason);
    if (c->has_addr)
        fprintf(out, " at address 0x%llx", (unsigned long long)c->addr);
    fprintf(out, " in thread %d", (int)c->tid);
    if (c->where)
        fprintf(out, ", in %s", c->where);
    fputc('\n', out);
}

static void write_text(const report_dump_t *d, FILE *out)
{
    char nsbuf[48] = "";
    if (d->ns_pid)
        snprintf(nsbuf, sizeof nsbuf, " [pid %d in its namespace]", (int)d->ns_pid);
    fprintf(out, "Process %d%s: %s\nPython v%s (%s; runtime found by %s)\n", (int)d->pid, nsbuf,
            str(d->process), str(d->version), str(d->interp_path), str(d->how_found));
    if (d->core)
        write_text_core(d->core, out);
    if (d->container)
        fprintf(out, "Container %s%s%s (cgroup %s)\n", str(d->container->runtime),
                d->container->runtime && d->container->runtime[0] ? " " : "", str(d->container->id),
                str(d->container->cgroup));
    for (size_t i = 0; i < d->nthreads; i++) {
        const report_dump_thread_t *t = &d->threads[i];
        nsbuf[0] = 0;
        if (t->ns_tid)
            snprintf(nsbuf, sizeof nsbuf, " [tid %d in its namespace]", (int)t->ns_tid);
        fprintf(out, "\nThread %d%s (%s%s): \"%s\"%s%s%s%s\n", (int)t->tid, nsbuf, state_word(t),
                t->gil ? "+gil" : "", str(t->name),
                t->truncated ? " [truncated]"
                : t->partial ? " [partial: the stack changed while it was read]"
                             : "",
                t->crashed ? " [crashed: " : "", t->crashed && d->core ? str(d->core->signal) : "",
                t->crashed ? "]" : "");
        for (uint32_t k = 0; k < t->nframes; k++) {
            const scry_frame_t *f = &t->frames[k];
            if (f->kind == SCRY_FRAME_NATIVE)
                fprintf(out, "    %s (%s)\n", str(f->function), str(f->file));
            else if (f->kind == SCRY_FRAME_PYTHON)
                fprintf(out, "    %s (%s:%d)\n", str(f->function), str(f->file), (int)f->line);
            else
                fprintf(out, "    %s\n", str(f->function));
            if (t->locals)
                write_text_locals(&t->locals[k], out);
        }
    }
}

static const char *boolean(int b)
{
    return b ? "true" : "false";
}

static void write_json_locals(const report_dump_locals_t *l, FILE *out)
{
    fprintf(out, ", \"locals\": [");
    for (uint32_t j = 0; j < l->n; j++) {
        const report_dump_local_t *v = &l->vars[j];
        fprintf(out, "%s{\"name\": ", j ? ", " : "");
        report_json_fputs(out, v->name);
        fprintf(out, ", \"arg\": %s, \"kind\": \"%s\", \"type\": ", boolean(v->is_arg),
                kind_word(v->kind));
        report_json_fputs(out, v->unbound ? "" : v->type);
        if (v->len >= 0 && !v->unbound)
            fprintf(out, ", \"len\": %lld", (long long)v->len);
        fprintf(out, ", \"unbound\": %s, \"repr\": ", boolean(v->unbound));
        report_json_fputs(out, v->repr);
        fputc('}', out);
    }
    fputc(']', out);
}

static void write_json_core(const report_dump_core_t *c, FILE *out)
{
    fprintf(out, "\"source\": \"core\", \"core\": {\"file\": ");
    report_json_fputs(out, c->file);
    fprintf(out, ", \"signo\": %d, \"signal\": ", (int)c->signo);
    report_json_fputs(out, c->signo ? c->signal : "");
    fprintf(out, ", \"reason\": ");
    report_json_fputs(out, c->signo ? c->reason : "");
    if (c->has_addr)
        fprintf(out, ", \"address\": \"0x%llx\"", (unsigned long long)c->addr);
    fprintf(out, ", \"tid\": %d", c->signo ? (int)c->tid : 0);
    if (c->signo && c->where) {
        fprintf(out, ", \"function\": ");
        report_json_fputs(out, c->where);
    }
    fprintf(out, "}, ");
}

static void write_json(const report_dump_t *d, FILE *out)
{
    fprintf(out, "{\"pid\": %d, ", (int)d->pid);
    if (d->core)
        write_json_core(d->core, out);
    if (d->ns_pid)
        fprintf(out, "\"ns_pid\": %d, ", (int)d->ns_pid);
    if (d->container) {
        fprintf(out, "\"container\": {\"id\": ");
        report_json_fputs(out, d->container->id);
        fprintf(out, ", \"runtime\": ");
        report_json_fputs(out, d->container->runtime);
        fprintf(out, ", \"cgroup\": ");
        report_json_fputs(out, d->container->cgroup);
        fprintf(out, "}, ");
    }
    fprintf(out, "\"python_version\": ");
    report_json_fputs(out, d->version);
    fprintf(out, ", \"threads\": [");
    for (size_t i = 0; i < d->nthreads; i++) {
        const report_dump_thread_t *t = &d->threads[i];
        fprintf(out, "%s\n  {\"tid\": %d, ", i ? "," : "", (int)t->tid);
        if (t->ns_tid)
            fprintf(out, "\"ns_tid\": %d, ", (int)t->ns_tid);
        fprintf(out, "\"name\": ");
        report_json_fputs(out, t->name);
        if (d->core)
            fprintf(out, ", \"crashed\": %s", boolean(t->crashed));
        fprintf(out,
                ", \"gil\": %s, \"gil_wait\": %s, \"state\": \"%s\", \"truncated\": %s, "
                "\"partial\": %s, \"frames\": [",
                boolean(t->gil), boolean(t->gil_wait), t->running ? "running" : "idle",
                boolean(t->truncated), boolean(t->partial));
        for (uint32_t k = 0; k < t->nframes; k++) {
            const scry_frame_t *f = &t->frames[k];
            fprintf(out, "%s{\"function\": ", k ? ", " : "");
            report_json_fputs(out, f->function);
            fprintf(out, ", \"file\": ");
            report_json_fputs(out, f->file);
            fprintf(out, ", \"line\": %d, \"kind\": \"%s\"", (int)f->line,
                    f->kind == SCRY_FRAME_NATIVE   ? "native"
                    : f->kind == SCRY_FRAME_PYTHON ? "python"
                                                   : "other");
            if (t->locals && t->locals[k].read)
                write_json_locals(&t->locals[k], out);
            fputc('}', out);
        }
        fprintf(out, "]}");
    }
    fprintf(out, "\n]}\n");
}

int report_dump_write(const report_dump_t *d, enum report_dump_format fmt, FILE *out)
{
    if (!d || !out || (d->nthreads && !d->threads))
        return SCRY_E_INVAL;
    if (fmt == REPORT_DUMP_TEXT)
        write_text(d, out);
    else if (fmt == REPORT_DUMP_JSON)
        write_json(d, out);
    else
        return SCRY_E_INVAL;
    return fflush(out) != 0 || ferror(out) ? SCRY_E_IO : 0;
}
