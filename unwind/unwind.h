/* unwind.h - native stacks of the threads of a live process.
 *
 * An unwind_t belongs to one target process. unwind_copied unwinds a copy of a thread's
 * registers and stack top taken by the kernel (perf events), with nothing stopped;
 * unwind_thread unwinds one thread that the CALLER has stopped (proc/scry_proc.h: proc_stop_thread)
 * with libunwind's DWARF unwinder, but through scry's own memory accessors: one process_vm_readv
 * copy of the thread's stack per sample and a page cache for the read-only parts of objects
 * (.eh_frame_hdr, .eh_frame, text), kept across samples. Registers come from one PTRACE_GETREGS per
 * sample. Unwind tables are found per object from the file's PT_GNU_EH_FRAME (cached per object);
 * libunwind's per-IP register-state cache is global to the unwind_t.
 *
 * ptrace is per thread: the thread that stopped the target thread must be the one that
 * calls unwind_thread. An unwind_t is not thread-safe.
 */
#ifndef SCRY_UNWIND_H
#define SCRY_UNWIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rmem.h"

#define UNWIND_MAX_DEPTH 256 /* default and upper bound of frames per thread */

typedef struct unwind unwind_t;

/* The symbol given to an unnamed part of a split eval loop (a PGO/LTO build without
 * .symtab, e.g. Debian's python3.14/3.15): found from the exported
 * _PyEval_EvalFrameDefault's jumps and the unwind table (unwind/symbolize.c). */
#define UNWIND_EVAL_PART_NAME "_PyEval_EvalFrameDefault.part"

/* Values of unwind_frame_t.is_eval. */
enum unwind_eval {
    UNWIND_EVAL_NO = 0,
    UNWIND_EVAL_DEFAULT = 1, /* _PyEval_EvalFrameDefault (3.6+): one call per Python frame
                                up to 3.10, per group of inlined frames from 3.11 */
    UNWIND_EVAL_LEGACY = 2,  /* PyEval_EvalFrameEx: the eval loop of 2.7; on 3.6-3.10 a
                                wrapper above _PyEval_EvalFrameDefault (the merge counts it
                                only when no UNWIND_EVAL_DEFAULT frame is present) */
};

typedef struct unwind_frame {
    uint64_t ip;        /* program counter (return address for non-leaf frames) */
    uint64_t sp;        /* stack pointer (CFA of the callee) */
    const char *symbol; /* function name, interned in the unwind_t; NULL when unknown */
    const char *lib;    /* base name of the object ("libc.so.6"), interned; NULL if none */
    uint64_t offset;    /* ip - symbol start when symbol is set, else ip - object load bias */
    uint8_t is_eval;    /* enum unwind_eval */
    uint8_t in_python;  /* in libpython or in the python executable (CPython-internal) */
} unwind_frame_t;

/* Creates an unwinder for process PID (no ptrace here: nothing is stopped or attached).
 * Returns NULL when out of memory or when libunwind cannot create an address space. */
unwind_t *unwind_new(pid_t pid);

/* Creates an unwinder over the target SRC reads (common/rmem.h; taken, also on failure): a
 * live process's reader as unwind_new, or a core's (core/core.h), whose threads are unwound
 * with unwind_copied from the registers and stack the core holds; unwind_thread is for live
 * processes only. Returns NULL when out of memory. */
unwind_t *unwind_new_src(rmem_t *src);

/* Frees U and its caches. NULL is a no-op. */
void unwind_free(unwind_t *u);

/* Unwinds thread TID of U's process, which the calling thread has stopped (ptrace-seized
 * and in a ptrace-stop). Writes at most MAX (bounded by UNWIND_MAX_DEPTH) frames, leaf
 * first, into FRAMES and their number into *N. Strings in FRAMES live as long as U.
 * Returns 0 (a stack ended by a loop, an unreadable frame or the depth bound is still 0,
 * with the frames read so far; see unwind_stats), SCRY_E_GONE (thread gone),
 * SCRY_E_PERM, SCRY_E_INVAL (TID not stopped by this thread, or bad arguments: *N is 0),
 * SCRY_E_NOMEM. */
int unwind_thread(unwind_t *u, pid_t tid, unwind_frame_t *frames, size_t max, size_t *n);

/* A thread's user registers as copied by the kernel with a sample (x86-64). */
typedef struct unwind_regs {
    uint64_t ax, bx, cx, dx, si, di, bp, sp, ip, r8, r9, r10, r11, r12, r13, r14, r15;
} unwind_regs_t;

/* Unwinds a thread from a copy taken earlier (a perf sample's PERF_SAMPLE_REGS_USER and
 * PERF_SAMPLE_STACK_USER): REGS, and STACK[0..LEN) = the thread's user stack from
 * REGS->sp upward. Nothing is stopped and the stack is never read live: a frame whose
 * caller lies above the copy ends the stack (counted in unwind_stats.copy_short). Unwind
 * tables and code come from the same per-object caches as unwind_thread (read-only file
 * pages of the target, read once); any other page is refused. Writes at most MAX frames,
 * leaf first, into FRAMES and their number into *N; strings live as long as U. TID only
 * names the thread in the statistics. Returns 0 (also for a stack cut short, with the
 * frames read so far), SCRY_E_INVAL (NULL arguments: *N is 0) or SCRY_E_NOMEM. */
int unwind_copied(unwind_t *u, pid_t tid, const unwind_regs_t *regs, const void *stack, size_t len,
                  unwind_frame_t *frames, size_t max, size_t *n);

/* Describes the code at IP (the leaf of a sample: not a return address) into *OUT:
 * symbol, library, eval-loop and in-CPython flags from the same caches as the unwinder.
 * Returns 0; an IP in no mapping gives a frame with NULL symbol and lib. SCRY_E_INVAL for
 * NULL arguments. */
int unwind_describe_ip(unwind_t *u, uint64_t ip, unwind_frame_t *out);

/* 1 when IP lies in CPython's own code (what unwind_describe_ip's in_python says), else 0:
 * the object is found, the function is not named. For classifying each perf record. */
int unwind_ip_in_python(unwind_t *u, uint64_t ip);

/* Forgets everything cached about the target's objects and libunwind's per-IP cache:
 * call it when the target loaded or unloaded code (dlopen/dlclose). Returns 0. */
int unwind_flush(unwind_t *u);

/* Counters since unwind_new. */
typedef struct unwind_stats {
    uint64_t samples;        /* unwind_thread calls that read registers */
    uint64_t frames;         /* frames produced */
    uint64_t truncated;      /* stacks cut by the depth bound */
    uint64_t loops;          /* stacks cut because sp did not grow */
    uint64_t step_errors;    /* stacks ended by an unwinder error before the root */
    uint64_t stack_reads;    /* process_vm_readv calls for stacks */
    uint64_t page_hits;      /* other reads served by the page cache */
    uint64_t page_misses;    /* pages read from the target */
    uint64_t page_faults;    /* reads that failed */
    uint64_t tables;         /* objects whose unwind table was loaded */
    uint64_t table_fallback; /* lookups that used libunwind's own per-ELF search */
    uint64_t sym_hits;       /* symbolisations served by the per-IP cache */
    uint64_t sym_misses;
    uint64_t copies;     /* unwind_copied calls */
    uint64_t copy_short; /* copied stacks that ended because the copy was too short */
    uint64_t eval_parts; /* unnamed parts of a split eval loop found (symbolize.c) */
} unwind_stats_t;

/* Returns the counters (all zero for NULL). */
unwind_stats_t unwind_stats(const unwind_t *u);

/* Test and benchmark hook: when STOCK is nonzero, later unwind_thread calls use
 * libunwind's stock _UPT_accessors (word-at-a-time PTRACE_PEEKDATA) instead of scry's,
 * keeping everything else the same. Returns 0 or SCRY_E_NOMEM. */
int unwind_set_stock_accessors(unwind_t *u, int stock);

#endif
