/* merge.c - interleaving native and Python frames (see merge.h for the rules). */
#include "merge.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "scry_err.h"

static const char *const plumbing_prefixes[] = {
    "_PyFunction_Vectorcall",
    "PyObject_Call",
    "_PyObject_Call",
    "PyObject_Vectorcall",
    "_PyObject_Vectorcall",
    "_PyObject_MakeTpCall",
    "_PyObject_FastCall",
    "PyObject_FastCall",
    "_PyEval_Vector",
    "_PyEval_EvalCode",
    "PyEval_EvalCodeEx",
    "cfunction_call",
    "cfunction_vectorcall",
    "method_vectorcall",
    "vectorcall_method",
    "vectorcall_unbound",
    "slot_tp_call",
    "_PyCFunction_FastCall",
    "_PyMethodDef_Raw",
    "function_code_fastcall",
    "call_function",
    "do_call_core",
    "_PyVectorcall_Call",
    "PyVectorcall_Call",
    "_PyFunction_FastCall",
    "fast_function",
    "PyCFunction_Call",
    "_PyCFunction_",
    "method_call",
    "_PyObject_Call_Prepend",
    "PyEval_EvalFrameEx",
    "_PyEval_EvalFrame",
    "object_vacall",
};

int unwind_merge_is_plumbing(const char *symbol)
{
    if (!symbol)
        return 0;
    for (size_t i = 0; i < sizeof plumbing_prefixes / sizeof *plumbing_prefixes; i++) {
        size_t n = strlen(plumbing_prefixes[i]);
        if (strncmp(symbol, plumbing_prefixes[i], n) == 0)
            return 1;
    }
    return 0;
}

typedef struct merge_ctx {
    scry_frame_t *out;
    size_t max, n;
    int full;
} merge_ctx_t;

static void emit(merge_ctx_t *m, const scry_frame_t *f)
{
    if (m->n >= m->max) {
        m->full = 1;
        return;
    }
    m->out[m->n++] = *f;
}

static int native_frame(const unwind_frame_t *f, strtab_t *strings, scry_frame_t *out)
{
    /* An address with no symbol is written "??" (its library still names it): one frame
     * per library rather than per address, so flame graphs aggregate and the string
     * table does not grow with every distinct address over a long run. */
    const char *fn = strtab_intern(strings, f->symbol ? f->symbol : "??");
    const char *file = strtab_intern(strings, f->lib ? f->lib : "");
    if (!fn || !file)
        return SCRY_E_NOMEM;
    *out = (scry_frame_t){.function = fn, .file = file, .line = 0, .kind = SCRY_FRAME_NATIVE};
    return 0;
}

/* End (exclusive) of the Python frame group starting at PY index J. */
static size_t group_end(size_t j, size_t np, const uint8_t *entry, int py_minor)
{
    if (py_minor < 11 || !entry)
        return j + 1;
    while (j < np && !entry[j])
        j++;
    return j < np ? j + 1 : np;
}

int unwind_merge_ex(const unwind_frame_t *native, size_t nn, const scry_frame_t *py,
                    const uint8_t *py_entry, size_t np, int py_minor, strtab_t *strings,
                    const unwind_merge_opts_t *opts, scry_frame_t *out, size_t max, size_t *nout,
                    unwind_merge_stats_t *st)
{
    static const unwind_merge_opts_t defaults = UNWIND_MERGE_OPTS_DEFAULT;
    if (nout)
        *nout = 0;
    if ((!native && nn) || (!py && np) || !strings || !out || !max || !nout)
        return SCRY_E_INVAL;
    if (!opts)
        opts = &defaults;
    unwind_merge_stats_t local = {0};
    local.merges = 1;

    /* Which frames are eval loops: _PyEval_EvalFrameDefault when present, else (2.7)
     * PyEval_EvalFrameEx. */
    int eval_kind = UNWIND_EVAL_LEGACY;
    for (size_t i = 0; i < nn; i++)
        if (native[i].is_eval == UNWIND_EVAL_DEFAULT)
            eval_kind = UNWIND_EVAL_DEFAULT;
    size_t leaf_eval = SIZE_MAX, root_eval = SIZE_MAX, leaf_foreign = SIZE_MAX;
    for (size_t i = 0; i < nn; i++) {
        if (native[i].is_eval == eval_kind) {
            if (leaf_eval == SIZE_MAX)
                leaf_eval = i;
            root_eval = i;
        }
    }
    for (size_t i = 0; i < nn && i < leaf_eval; i++)
        if (!native[i].in_python) {
            leaf_foreign = i; /* leafmost frame outside CPython */
            break;
        }

    merge_ctx_t m = {.out = out, .max = max};
    size_t j = 0; /* next Python frame */
    int rc = 0;
    scry_frame_t marker = {.function = strtab_intern(strings, "<python?>"),
                           .file = strtab_intern(strings, ""),
                           .line = 0,
                           .kind = SCRY_FRAME_OTHER};
    if (!marker.function || !marker.file)
        return SCRY_E_NOMEM;

    for (size_t i = 0; i < nn && !m.full; i++) {
        const unwind_frame_t *f = &native[i];
        if (f->is_eval == eval_kind) {
            local.eval_frames++;
            if (j < np) {
                size_t end = group_end(j, np, py_entry, py_minor);
                for (; j < end; j++)
                    emit(&m, &py[j]);
                local.matched++;
            } else {
                local.extra_eval++;
                if (opts->mark_extra_eval)
                    emit(&m, &marker);
            }
            continue;
        }
        if (opts->filter_plumbing && f->in_python && root_eval != SIZE_MAX && i < root_eval) {
            int drop;
            if (i > leaf_eval)
                drop = 1; /* between two eval frames */
            else if (leaf_foreign != SIZE_MAX && leaf_foreign < i)
                drop = 1; /* the call from the eval loop into an extension */
            else
                drop = unwind_merge_is_plumbing(f->symbol);
            if (drop) {
                local.filtered++;
                continue;
            }
        }
        scry_frame_t nf;
        if ((rc = native_frame(f, strings, &nf)) != 0)
            return rc;
        emit(&m, &nf);
    }
    if (j < np && !m.full) {
        local.leftover_py += np - j;
        for (; j < np && !m.full; j++)
            emit(&m, &py[j]);
    } else if (j < np) {
        local.leftover_py += np - j;
    }
    if (local.extra_eval || local.leftover_py)
        local.mismatched = 1;
    if (m.full) {
        local.truncated = 1;
        rc = SCRY_E_TRUNC;
    }
    *nout = m.n;
    if (st) {
        st->merges += local.merges;
        st->eval_frames += local.eval_frames;
        st->matched += local.matched;
        st->extra_eval += local.extra_eval;
        st->leftover_py += local.leftover_py;
        st->mismatched += local.mismatched;
        st->filtered += local.filtered;
        st->truncated += local.truncated;
    }
    return rc;
}

int unwind_merge(const unwind_frame_t *native, size_t nn, const scry_frame_t *py,
                 const uint8_t *py_entry, size_t np, int py_minor, strtab_t *strings,
                 scry_frame_t *out, size_t max, size_t *nout, unwind_merge_stats_t *st)
{
    return unwind_merge_ex(native, nn, py, py_entry, np, py_minor, strings, NULL, out, max, nout,
                           st);
}
