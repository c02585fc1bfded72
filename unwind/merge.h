/* merge.h - one stack from a native stack and a Python stack.
 *
 * Walking the native stack leaf to root, each frame of CPython's eval loop
 * (_PyEval_EvalFrameDefault; PyEval_EvalFrameEx on 2.7) is replaced by the Python frames
 * it was running, leaf first:
 *   - up to 3.10, one eval-loop call per Python frame;
 *   - from 3.11, one eval-loop call runs a group of Python frames (inlined calls); a group
 *     ends (rootward) at the frame marked as an entry frame in PY_ENTRY (3.11: is_entry;
 *     3.12+: the frame called from a shim / FRAME_OWNED_BY_CSTACK frame).
 * Mismatches are expected (a torn read, a truncated native stack, an eval loop that has
 * not pushed its frame yet): Python frames left over when the eval frames run out go to
 * the root end; eval frames left over when the Python frames run out become a
 * "<python?>" frame (SCRY_FRAME_OTHER) or are dropped (opts). Both are counted.
 *
 * The plumbing filter (on by default) drops CPython-internal native frames (in libpython
 * or the python executable) that only carry calls:
 *   - every CPython-internal frame between two eval-loop frames (_PyFunction_Vectorcall,
 *     PyObject_Call, method_vectorcall, builtins calling back into Python...);
 *   - leafward of the leafmost eval frame: every CPython-internal frame rootward of a
 *     non-CPython frame (the calls into an extension: cfunction_call, _PyObject_MakeTpCall);
 *     in the purely CPython leaf tail only frames whose names are call plumbing
 *     (unwind_merge_is_plumbing), so that e.g. list_sort or take_gil stay visible.
 * Frames rootward of the rootmost eval frame (main, Py_RunMain, PyRun_*) and all frames
 * outside CPython (numpy, libcrypto, libc) are always kept.
 */
#ifndef SCRY_UNWIND_MERGE_H
#define SCRY_UNWIND_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "sample.h"
#include "strtab.h"
#include "unwind.h"

/* Counters, ADDED to by every merge (zero them once, keep them across samples). */
typedef struct unwind_merge_stats {
    uint64_t merges;      /* calls */
    uint64_t eval_frames; /* eval-loop frames seen */
    uint64_t matched;     /* eval frames replaced by their Python frames */
    uint64_t extra_eval;  /* eval frames with no Python frames left (marker or dropped) */
    uint64_t leftover_py; /* Python frames placed at the root end (no eval frame left) */
    uint64_t mismatched;  /* merges where either of the two above happened */
    uint64_t filtered;    /* native frames dropped by the plumbing filter */
    uint64_t truncated;   /* merges cut by MAX */
} unwind_merge_stats_t;

typedef struct unwind_merge_opts {
    int filter_plumbing; /* default 1 */
    int mark_extra_eval; /* default 1: "<python?>" for an unmatched eval frame; 0: drop it */
} unwind_merge_opts_t;

#define UNWIND_MERGE_OPTS_DEFAULT                                                                  \
    {                                                                                              \
        1, 1                                                                                       \
    }

/* Merges NATIVE[0..NN) (leaf first, from unwind_thread) with PY[0..NP) (leaf first, from
 * pystate) into OUT[0..MAX), leaf first; *NOUT gets the count. PY_ENTRY (may be NULL)
 * holds one entry flag per Python frame, used from PY_MINOR 11 on (NULL: every frame is
 * its own group, exact up to 3.10). Native frames become SCRY_FRAME_NATIVE frames with
 * function = symbol (or "0x<ip>") and file = library base name (or ""), line 0, interned
 * in STRINGS. ST may be NULL. Returns 0, SCRY_E_TRUNC (OUT is full: the MAX leafmost
 * frames are valid) or SCRY_E_INVAL (NULL arrays with nonzero counts, NULL STRINGS or
 * OUT, MAX 0), SCRY_E_NOMEM (interning failed). Never reads the target. */
int unwind_merge(const unwind_frame_t *native, size_t nn, const scry_frame_t *py,
                 const uint8_t *py_entry, size_t np, int py_minor, strtab_t *strings,
                 scry_frame_t *out, size_t max, size_t *nout, unwind_merge_stats_t *st);

/* Same with explicit options (OPTS NULL = defaults). */
int unwind_merge_ex(const unwind_frame_t *native, size_t nn, const scry_frame_t *py,
                    const uint8_t *py_entry, size_t np, int py_minor, strtab_t *strings,
                    const unwind_merge_opts_t *opts, scry_frame_t *out, size_t max, size_t *nout,
                    unwind_merge_stats_t *st);

/* True when SYMBOL names a CPython call-plumbing function (vectorcall, PyObject_Call,
 * _PyEval_Vector, cfunction_call, method_vectorcall, slot_tp_call...). */
int unwind_merge_is_plumbing(const char *symbol);

#endif
