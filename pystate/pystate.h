/* pystate.h - reading a live CPython's threads and frames from outside.
 *
 * pystate_target_open finds the interpreter in a process (elfsym/), detects its version,
 * locates the runtime root and picks the layout (pystate/layout.h). pystate_sample then
 * reads every thread's Python stack into a snapshot, through a handful of batched
 * process_vm_readv calls: code objects and strings are cached by address and validated.
 *
 * The target is never stopped here: a torn read (a frame changed under us) is read again;
 * one that stays torn gives a thread marked torn with the part that read consistently,
 * counted in the stats, never an error exit.
 */
#ifndef SCRY_PYSTATE_H
#define SCRY_PYSTATE_H

#include "layout.h"
#include "rmem.h"
#include "scry_proc.h"
#include "sample.h"
#include "strtab.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PYSTATE_MAX_DEPTH        2048 /* frames per thread */
#define PYSTATE_TORN_RETRIES     4    /* direct rereads of a stack that changed while read */
#define PYSTATE_TORN_RETRIES_MAX 4096 /* the most pystate_set_torn_retries accepts */
#define PYSTATE_MAX_THREADS      4096 /* threads per interpreter */
#define PYSTATE_MAX_INTERPS      64

typedef struct pystate_target pystate_target_t;

typedef struct pystate_info {
    pid_t pid;
    pid_t ns_pid; /* the pid the process knows itself by (its own PID namespace: a
                     container's); equal to pid when scry shares its namespace */
    int major, minor, micro;
    uint32_t version_hex;          /* PY_VERSION_HEX when known, else 0 */
    char version[32];              /* "3.11.7" (micro may be "?" when only the minor is known) */
    char interp_path[4096];        /* libpython or executable, as the target sees it */
    char exe_path[512];            /* /proc/PID/exe target */
    raddr_t runtime_addr;          /* _PyRuntime (3.7+) or interp_head's address (3.6) */
    char how_found[96];            /* e.g. "symbol _PyRuntime", ".PyRuntime section" */
    int layout_from_debug_offsets; /* 3.13+: offsets read from the target */
    int assumed_minor;             /* --assume-version: a newer version read with the block
                                      layout of 3.assumed_minor (version says so), else 0 */
    int post_mortem;               /* read from a core file (pystate_target_open_src): pid
                                      names the process the core was taken from, which is
                                      not running; nothing live may be asked of it */
} pystate_info_t;

typedef struct pystate_thread {
    raddr_t tstate;
    uint64_t pthread_id;
    int32_t tid;    /* OS thread id (scry's /proc and ptrace view); 0 when not found */
    int32_t ns_tid; /* the id the process itself stores (threading.get_native_id()): in a
                       container its own PID namespace's; else equal to tid */
    int32_t interp_id;
    uint8_t gil;          /* holds the GIL (last holder while the GIL is locked) */
    uint8_t gil_known;    /* the GIL's holder was read this sample (so !gil means released
                             or held by another thread) */
    uint8_t truncated;    /* the depth bound (PYSTATE_MAX_DEPTH) cut the stack */
    uint8_t torn;         /* the stack never read whole (the thread ran on while it was read,
                             every reread too): FRAMES holds the leaf part that read
                             consistently (maybe none), the frames below it are unknown */
    uint8_t skipped;      /* not read: the thread filter (pystate_set_thread_filter) left it
                             out; no frames, and the GIL and name are still known */
    uint8_t leaf_opclass; /* enum pystate_opclass of the leaf frame's instruction */
    uint32_t nframes;
    scry_frame_t *frames; /* leaf first; owned by the snapshot */
    uint8_t *entry;       /* per frame: 1 when it is the first Python frame of a C-level
                             call into the eval loop (for merging with native stacks) */
    raddr_t *frame_addrs; /* per frame: its PyFrameObject (<= 3.10) or _PyInterpreterFrame
                             (3.11+), for pystate_frame_locals; valid until the next sample */
    const char *name;     /* Python thread name (threading: "MainThread", name=...), interned
                             in the target's string table; NULL when unknown (no threading,
                             not a threading thread, not read yet). Refreshed at most once a
                             second, so a new thread may lack it for up to a second. */
} pystate_thread_t;

typedef struct pystate_snapshot pystate_snapshot_t;

/* Opens target PID. On failure returns a negative code and writes a sentence for a person
 * into ERRBUF (what the process is, which version, what permission is missing):
 * SCRY_E_NOPROC, SCRY_E_PERM, SCRY_E_NOTPY, SCRY_E_UNSUPPORTED, SCRY_E_NOMEM.
 * On success *OUT owns a reader on the process; free with pystate_target_free. */
int pystate_target_open(pid_t pid, strtab_t *strings, pystate_target_t **out, char *errbuf,
                        size_t errlen);

/* pystate_target_open for a Python newer than every known _Py_DebugOffsets layout: with
 * ASSUME_MINOR the newest known minor (--assume-version 3.15), such a target is read with
 * that layout when its block validates against it; info.assumed_minor and info.version
 * ("3.16.0 (as 3.15)") say so. ASSUME_MINOR 0 refuses such a target with a sentence that
 * names the version, says what is missing, and offers --assume-version when the block
 * validates. Any other ASSUME_MINOR: SCRY_E_INVAL. Ignored for known versions. */
int pystate_target_open_as(pid_t pid, strtab_t *strings, int assume_minor, pystate_target_t **out,
                           char *errbuf, size_t errlen);

/* Which ways of finding the runtime pystate_target_open_opts may use. The later ways are
 * fallbacks for interpreters without symbols; tests skip the earlier ways to prove the
 * fallbacks on real interpreters whose symbols are present. */
enum pystate_discovery {
    PYSTATE_DISCOVERY_ALL = 0,     /* symbols, then the .PyRuntime section, then disassembly */
    PYSTATE_DISCOVERY_SECTION = 1, /* skip the symbols */
    PYSTATE_DISCOVERY_DISASM = 2,  /* skip the symbols and the section */
};

typedef struct pystate_open_opts {
    int assume_minor;   /* as pystate_target_open_as; 0 = none */
    int discovery;      /* enum pystate_discovery */
    int function_lines; /* every Python frame (stacks and pystate_resolve_code) carries its
                           function's first line (co_firstlineno) instead of the line being
                           run: samples aggregate by function (--function) */
} pystate_open_opts_t;

/* pystate_target_open with options (OPTS NULL: the defaults, all zero). An unknown
 * OPTS->discovery gives SCRY_E_INVAL. Otherwise as pystate_target_open_as. */
int pystate_target_open_opts(pid_t pid, strtab_t *strings, const pystate_open_opts_t *opts,
                             pystate_target_t **out, char *errbuf, size_t errlen);

/* pystate_target_open_opts for the target SRC reads (common/rmem.h): a live process's
 * reader (rmem_open_pid) or another source's (a core file's, core/core.h), whose mappings
 * and files come from the source too. TIDMAP maps the thread ids the interpreter stores to
 * the ones scry shows (proc_tidmap_new for a live process, proc_tidmap_new_fixed for a
 * core); its pid is the process's. Takes SRC and TIDMAP, also on failure (freed then).
 * Returns as pystate_target_open_opts; SCRY_E_INVAL for a NULL SRC or TIDMAP. */
int pystate_target_open_src(rmem_t *src, proc_tidmap_t *tidmap, strtab_t *strings,
                            const pystate_open_opts_t *opts, pystate_target_t **out, char *errbuf,
                            size_t errlen);

/* Frees the target handle. NULL is a no-op. The process is not touched. */
void pystate_target_free(pystate_target_t *t);

/* Facts about the target; valid while T lives. */
const pystate_info_t *pystate_target_info(const pystate_target_t *t);

/* The reader used for the target (for statistics and for other readers). */
rmem_t *pystate_target_mem(pystate_target_t *t);

/* The string table the target interns into (the one given to pystate_target_open). */
strtab_t *pystate_target_strings(pystate_target_t *t);

/* The layout in use. */
const pystate_layout_t *pystate_target_layout(const pystate_target_t *t);

/* Creates an empty snapshot, reused across samples. NULL when out of memory. */
pystate_snapshot_t *pystate_snapshot_new(void);
void pystate_snapshot_free(pystate_snapshot_t *s);

/* Which threads pystate_sample reads the stacks of: FN(CTX, TID) with the thread's host
 * tid (pystate_thread_t.tid) returns nonzero to read it. Threads whose tid is not known are
 * always read. FN NULL (the default): every thread. The thread states themselves are read
 * either way (ids, GIL, names); only the frames of the others are not: with many threads,
 * most of them waiting, a sampler that knows which ones ran reads only those. */
typedef int (*pystate_thread_filter_fn)(void *ctx, int32_t tid);
void pystate_set_thread_filter(pystate_target_t *t, pystate_thread_filter_fn fn, void *ctx);

/* How many times pystate_sample rereads a stack that changed while it was read before it
 * hands on the part that read consistently (pystate_thread_t.torn). Each reread costs a
 * few system calls per frame: a sampler keeps the default (PYSTATE_TORN_RETRIES, N 0), a
 * one-shot dump of a thread that never stays put can afford hundreds. N is capped at
 * PYSTATE_TORN_RETRIES_MAX. */
void pystate_set_torn_retries(pystate_target_t *t, uint32_t n);

/* Reads every thread of every interpreter into SNAP (replacing what it held).
 * Returns 0 (threads may be truncated; see the counts), SCRY_E_GONE when the process
 * exited, SCRY_E_PERM, or SCRY_E_CORRUPT when even the thread list could not be read. */
int pystate_sample(pystate_target_t *t, pystate_snapshot_t *snap);

size_t pystate_snapshot_count(const pystate_snapshot_t *s);

/* 1 when the interpreter had begun its teardown (Py_Finalize) at that snapshot, else 0
 * (also when the version does not say). */
int pystate_snapshot_finalizing(const pystate_snapshot_t *s);
const pystate_thread_t *pystate_snapshot_thread(const pystate_snapshot_t *s, size_t i);

/* Where target T keeps its GIL's holder, as of snapshot S (whose first thread's interpreter
 * holds the GIL's address on 3.12+): *HOLDER_ADDR, the address of the word that holds the
 * holder's thread state; *LOCKED_ADDR, that of the GIL's int `locked` (0: none, the holder
 * word alone says, as 3.6's _PyThreadState_Current does). The thread whose state the holder
 * word names holds the GIL when `locked` is not 0. Returns 0, or SCRY_E_NOTFOUND when the
 * layout does not say (or the interpreter's GIL pointer could not be read). */
int pystate_gil_words(pystate_target_t *t, const pystate_snapshot_t *s, uint64_t *holder_addr,
                      uint64_t *locked_addr);

/* Counters since the target was opened. */
typedef struct pystate_stats {
    uint64_t samples;
    uint64_t threads_read;    /* thread stacks read */
    uint64_t threads_skipped; /* thread states whose stacks the filter left out */
    uint64_t truncated;       /* threads whose stack the depth bound cut */
    uint64_t code_misses;     /* code objects read (cache misses) */
    uint64_t code_hits;
    uint64_t torn;    /* inconsistent reads detected (each led to a retry) */
    uint64_t retries; /* stacks read again directly because the first read was torn */
    uint64_t dropped; /* thread stacks never read whole within the retries (handed on
                         partial, pystate_thread_t.torn) */
} pystate_stats_t;

pystate_stats_t pystate_target_stats(const pystate_target_t *t);

/* Resolves one (code object address, byte offset of the instruction) pair, as the memory
 * shim reports them, into a frame. Returns 0 or a negative code (the code object may be
 * gone). */
int pystate_resolve_code(pystate_target_t *t, raddr_t code, uint32_t offset, scry_frame_t *out);

/* The class (enum pystate_opclass) of the instruction at byte offset OFFSET of code object
 * CODE, found as a stack's leaf_opclass is (remembered per code object and offset);
 * PYSTATE_OP_UNKNOWN when it cannot be read. For a leaf read elsewhere (the bpf sampler's
 * kernel walk). */
uint8_t pystate_code_opclass(pystate_target_t *t, raddr_t code, uint32_t offset);

/* ---- remote execution offsets (PEP 768) --------------------------------------------- */

/* PEP 768's remote execution members (3.14+) of the interpreter's _Py_DebugOffsets block:
 * where a debugger asks the main thread to run a script at its next safe point
 * (memprof/remoteexec.c). */
typedef struct pystate_dbg_remote {
    int64_t runtime_interpreters_head; /* offsetof(_PyRuntimeState, interpreters.head) */
    int64_t interp_threads_main;       /* offsetof(PyInterpreterState, threads.main) */
    int64_t interp_remote_enabled;     /* offsetof(PyInterpreterState, config.remote_debug) */
    int64_t tstate_eval_breaker;       /* offsetof(PyThreadState, eval_breaker) (uintptr_t) */
    int64_t tstate_support;            /* offsetof(_PyThreadStateImpl, remote_debugger_support) */
    int64_t support_pending_call;      /* offsetof(_PyRemoteDebuggerSupport, ..._pending_call) */
    int64_t support_script_path;       /* offsetof(_PyRemoteDebuggerSupport, ..._script_path) */
    int64_t script_path_size;          /* the path buffer's bytes, its NUL included */
} pystate_dbg_remote_t;

/* Reads the _Py_DebugOffsets block at _PyRuntime address RUNTIME_ADDR through M (the whole
 * block validated; ASSUME_MINOR 0, or the minor version whose layout a block newer than
 * every known one is read as) and fills *OUT with the remote execution members, each
 * checked inside its struct (the path buffer in (0, 4096], the pending flag and the path
 * inside the thread state). Returns 0, a read or parse error, or SCRY_E_UNSUPPORTED when
 * the version's block lacks them (3.13). *OUT is untouched on failure. */
int pystate_debug_offsets_read_remote(rmem_t *m, raddr_t runtime_addr, int assume_minor,
                                      pystate_dbg_remote_t *out);

#endif
