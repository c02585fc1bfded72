/* asyncio.h - a live CPython's asyncio tasks, read from outside (3.14 and newer).
 *
 * CPython 3.14 keeps every pending asyncio.Task (the C implementation and its subclasses)
 * on a circular list per thread state (tasks created by that thread) and one per
 * interpreter (tasks of threads that have exited). The _asyncio module exports where these
 * lists and a task's fields are: the _AsyncioDebug block (_Py_AsyncioDebug from 3.15), in
 * its own ELF section ".AsyncioDebug" of the object that holds the module (the
 * _asyncio*.so extension in Debian's 3.14, the interpreter itself in 3.15). With the
 * interpreter's _Py_DebugOffsets (generators, sets, frames, list nodes) that is enough to
 * read each task's name, state, loop, coroutine chain (the coroutines it is suspended in,
 * through each one's 'yield from' target on its frame's stack), the future it waits on and
 * the tasks that await it (the await graph that `python -m asyncio pstree` prints).
 *
 * Layout facts beyond the block, from _asynciomodule.c's FutureObj_HEAD and TaskObj (3.14
 * and 3.15), each checked against the block before use:
 *   task_loop       = sizeof(PyObject)              (the first field after the header)
 *   task_state      = task_awaited_by + 8           (an int; task_is_task follows at +12)
 *   task_fut_waiter = task_coro - 8                 (the future the task waits on)
 *   task_name       = task_coro + 8, task_node after it
 * Frame states of a generator (gi_frame_state) per minor version: pycore_frame.h.
 *
 * Older versions keep no such lists (a task is only reachable through the event loop's
 * Python objects): pystate_async_read refuses them with SCRY_E_UNSUPPORTED.
 * Everything read is untrusted: every list, chain and set is bounded, every task is checked
 * (its is_task flag), and a torn read drops a task or shortens a chain, never crashes.
 */
#ifndef SCRY_PYSTATE_ASYNCIO_H
#define SCRY_PYSTATE_ASYNCIO_H

#include "pystate.h"

#include <stddef.h>
#include <stdint.h>

#define PYSTATE_ASYNC_DEBUG_SIZE   104   /* bytes of the _AsyncioDebug block (3.14, 3.15) */
#define PYSTATE_ASYNC_MAX_TASKS    65536 /* tasks read in all */
#define PYSTATE_ASYNC_MAX_DEPTH    256   /* coroutines per task chain */
#define PYSTATE_ASYNC_MAX_AWAITERS 1024  /* set slots of one awaited_by set scanned */
#define PYSTATE_ASYNC_TASK_READ    4096  /* largest TaskObj accepted */

/* The asyncio members of _Py_DebugOffsets (pystate's private debug_offsets.h): only the
 * internal pystate__ functions below take them. */
typedef struct pystate_dbg_async pystate_dbg_async_t;

/* The _AsyncioDebug block, validated, with the derived fields. */
typedef struct pystate_async_offsets {
    int64_t task_size, task_name, task_awaited_by, task_is_task, task_awaited_by_is_set;
    int64_t task_coro, task_node;
    int64_t task_loop, task_state, task_fut_waiter; /* derived (above) */
    int64_t interp_size, interp_tasks_head;
    int64_t tstate_size, tstate_running_loop, tstate_running_task, tstate_tasks_head;
} pystate_async_offsets_t;

/* Parses and validates LEN bytes at BUF as an _AsyncioDebug block for an interpreter of
 * layout L: sizes in (0, PYSTATE_ASYNC_TASK_READ] for the task and in (0, 1 MiB] for the
 * others, the interpreter size equal to L's, every field inside its struct and aligned,
 * the thread fields after PyThreadState, and the TaskObj relations the derived fields need.
 * Returns 0 and fills *OUT, SCRY_E_INVAL (NULL arguments, LEN too short), or SCRY_E_CORRUPT
 * with a reason in WHY (may be NULL). *OUT is untouched on failure. Borrows BUF. */
int pystate_async_offsets_parse(const void *buf, size_t len, const pystate_layout_t *L,
                                pystate_async_offsets_t *out, char *why, size_t whylen);

enum pystate_task_state {
    PYSTATE_TASK_PENDING = 0,   /* suspended, waiting */
    PYSTATE_TASK_RUNNING = 1,   /* its thread's running task */
    PYSTATE_TASK_CANCELLED = 2, /* done (still listed for an instant) */
    PYSTATE_TASK_FINISHED = 3,
};

typedef struct pystate_async_task {
    raddr_t addr;
    raddr_t loop;
    const char *name;  /* interned; "Task-N" for an automatic name */
    int state;         /* enum pystate_task_state */
    int32_t tid;       /* the thread whose list holds it (0: the interpreter's list) */
    uint8_t truncated; /* the chain was cut (depth bound or a torn read) */
    uint32_t nframes;
    scry_frame_t *frames;    /* the coroutine chain, innermost first; owned */
    raddr_t awaits;          /* the future it waits on (task_fut_waiter), 0 none */
    const char *awaits_type; /* its type name, interned; NULL when none */
    uint32_t nawaited_by;
    raddr_t *awaited_by; /* addresses of the listed tasks that await it; owned */
} pystate_async_task_t;

typedef struct pystate_async_loop {
    raddr_t addr;
    const char *type; /* interned type name ("_UnixSelectorEventLoop") */
    int32_t tid;      /* the thread running it (its running loop), 0 when none */
} pystate_async_loop_t;

typedef struct pystate_async_snapshot {
    size_t ntasks;
    pystate_async_task_t *tasks; /* sorted by loop, then address */
    size_t nloops;
    pystate_async_loop_t *loops; /* sorted by address */
    uint64_t dropped;            /* tasks seen but not read consistently */
    int loaded;                  /* the _asyncio module's block was found */
    char source[320];            /* where the block was found ("FILE section .AsyncioDebug") */
} pystate_async_snapshot_t;

/* Reads every listed task of T's interpreters. Returns 0 with *OUT a new snapshot (free with
 * pystate_async_snapshot_free); a process that has not loaded _asyncio gets an empty
 * snapshot with loaded = 0. On failure returns a negative code and writes a sentence for a
 * person into ERRBUF: SCRY_E_UNSUPPORTED (a version before 3.14, or a block that does not
 * validate), SCRY_E_GONE, SCRY_E_PERM, SCRY_E_NOMEM. */
int pystate_async_read(pystate_target_t *t, pystate_async_snapshot_t **out, char *errbuf,
                       size_t errlen);

/* The walk behind pystate_async_read, for a known block: reads the lists of every
 * interpreter from T's runtime with offsets O and generator/set/list offsets G into a new
 * *OUT. Returns 0, SCRY_E_GONE, SCRY_E_PERM or SCRY_E_NOMEM (a fault only drops tasks). */
int pystate__async_walk(pystate_target_t *t, const pystate_async_offsets_t *o,
                        const pystate_dbg_async_t *g, pystate_async_snapshot_t **out);

/* 0 when T's version has the asyncio debug offsets (3.14+, layout from _Py_DebugOffsets),
 * else SCRY_E_UNSUPPORTED with a sentence naming the version in ERRBUF. */
int pystate_async_check(const pystate_target_t *t, char *errbuf, size_t errlen);

/* Task labels for samples (record --async): the name of a thread's running task and of the
 * tasks awaiting it. Keeps the block once found (looked for again at most once a second
 * until the target loads _asyncio) and a cache of task names validated on every use. */
typedef struct pystate_async_labels pystate_async_labels_t;

#define PYSTATE_ASYNC_LABEL_DEPTH 8 /* tasks per label chain */

/* A labeller for T (valid while T lives). NULL when out of memory. On a version that
 * pystate_async_check refuses it gives no labels. */
pystate_async_labels_t *pystate_async_labels_new(pystate_target_t *t);
void pystate_async_labels_free(pystate_async_labels_t *l);

/* Fills OUT (MAX entries at most, PYSTATE_ASYNC_LABEL_DEPTH at most) with "task NAME" labels
 * (interned in T's strings) of the thread state TSTATE: its running task first, then the
 * task awaiting it, and so on (through single awaiters; a set of awaiters ends the chain).
 * NOW_NS is CLOCK_MONOTONIC time (paces the search for the block). Returns the count: 0
 * when the thread runs no task or anything read does not validate (never an error). */
size_t pystate_async_labels_get(pystate_async_labels_t *l, raddr_t tstate, uint64_t now_ns,
                                const char **out, size_t max);

/* For tests and fuzzing: makes L use O and G as if it had found them in the target. */
void pystate__async_labels_use(pystate_async_labels_t *l, const pystate_async_offsets_t *o,
                               const pystate_dbg_async_t *g);

/* Frees S and everything it owns. NULL is a no-op. */
void pystate_async_snapshot_free(pystate_async_snapshot_t *s);

/* "pending", "running", "cancelled", "finished". */
const char *pystate_task_state_name(int state);

#endif
