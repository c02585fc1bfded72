/* core.h - a core file as a source of target memory (post-mortem reading).
 *
 * A core_t maps an ELF core (gdb's gcore, the kernel's, systemd-coredump's, compressed or
 * not) and validates it: every program header, note and offset is bounded by the file, as
 * hostile as a target's memory. It gives what a live process's /proc and ptrace would: the
 * threads and their registers (NT_PRSTATUS), the fatal signal (NT_SIGINFO), the mappings
 * (NT_FILE and the PT_LOAD segments) and a reader (rmem_t, common/rmem.h) over the memory:
 * the bytes the core holds, else the bytes of the file mapped there (named in NT_FILE,
 * opened under the sysroot). A file is used only when its GNU build-id is the one the core
 * holds for that mapping (in the dumped first page of the object); a file that differs is
 * refused by name (core_file_problem), never read in its place.
 *
 * Only x86-64 little-endian cores are read (scry's only architecture).
 */
#ifndef SCRY_CORE_H
#define SCRY_CORE_H

#include "rmem.h"

#include <stddef.h>
#include <stdint.h>

#define CORE_MAX_SEGMENTS (1u << 20)  /* PT_LOAD segments */
#define CORE_MAX_THREADS  65536       /* NT_PRSTATUS notes */
#define CORE_MAX_FILES    65536       /* NT_FILE entries */
#define CORE_MAX_NOTES    (64u << 20) /* bytes of one PT_NOTE segment */

typedef struct core core_t;

typedef struct core_opts {
    const char *sysroot; /* files named in the core are opened under this directory (a
                            container's root, another machine's files); NULL: "/" */
    const char *exe;     /* the executable when the core names none (no NT_FILE note) */
} core_opts_t;

/* x86-64 user registers, in the kernel's user_regs_struct order (pr_reg). */
typedef struct core_regs {
    uint64_t r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs,
        flags, sp, ss, fs_base, gs_base, ds, es, fs, gs;
} core_regs_t;

typedef struct core_thread {
    int32_t tid;
    int32_t signo;    /* pr_cursig: the signal being delivered to it, 0 none */
    int in_syscall;   /* its PC is just after a syscall instruction: it waits in the kernel */
    core_regs_t regs; /* as the kernel saved them */
} core_thread_t;

typedef struct core_siginfo {
    int32_t signo; /* 0: the core holds no signal (a gcore of a running process) */
    int32_t code;  /* si_code (SEGV_MAPERR, SI_USER...) */
    int32_t err;
    uint64_t addr; /* si_addr: the faulting address of SIGSEGV, SIGBUS, SIGILL, SIGFPE */
    int32_t tid;   /* the thread it was delivered to (the thread whose notes hold it) */
} core_siginfo_t;

/* Opens the core at PATH (a .zst, .lz4 or .xz core is decompressed into anonymous memory
 * first). On failure returns NULL, stores a negative code in *ERR when ERR is not NULL
 * (SCRY_E_NOTFOUND, SCRY_E_PERM, SCRY_E_IO, SCRY_E_ELF not an x86-64 core, SCRY_E_CORRUPT,
 * SCRY_E_NOSYS for a compression scry was built without, SCRY_E_NOMEM) and writes a
 * sentence into ERRBUF. OPTS may be NULL. The caller frees the result (core_free). */
core_t *core_open(const char *path, const core_opts_t *opts, int *err, char *errbuf, size_t errlen);

/* core_open over LEN bytes at DATA (not copied: they must outlive the core), for tests and
 * the fuzzer. Files named in the core are opened as core_open would. */
core_t *core_open_mem(const void *data, size_t len, const core_opts_t *opts, int *err, char *errbuf,
                      size_t errlen);

/* Frees the core, its mappings and files. Readers made by core_reader must be freed first.
 * NULL is a no-op. */
void core_free(core_t *c);

/* A new reader over C's memory (rmem_source_ops_t: memory, mappings, files). It borrows C,
 * which must outlive it. NULL when out of memory. */
rmem_t *core_reader(core_t *c);

/* The process id the core was taken from (NT_PRPSINFO, else the first thread's), 0 unknown;
 * its command name (pr_fname) and arguments (pr_psargs), "" unknown. Valid while C lives. */
int32_t core_pid(const core_t *c);
const char *core_comm(const core_t *c);
const char *core_args(const core_t *c);

/* The threads (NT_PRSTATUS), in the core's order: the thread that took the fatal signal
 * first in a kernel core. */
size_t core_nthreads(const core_t *c);
const core_thread_t *core_thread(const core_t *c, size_t i);

/* The fatal signal (NT_SIGINFO of the thread that received one, else pr_cursig), with
 * signo 0 when the core holds none. Never NULL. */
const core_siginfo_t *core_siginfo(const core_t *c);

/* The main executable as the core names it ("" unknown). */
const char *core_exe(const core_t *c);

/* When the file the core maps as PATH cannot be used, a sentence saying why (missing under
 * the sysroot, another build-id than the core's); NULL when it is usable or unknown. Valid
 * while C lives. */
const char *core_file_problem(core_t *c, const char *path);

/* The build-id check of each file happens when it is first used; this runs it for every
 * file of the core now and returns how many were refused. */
size_t core_check_files(core_t *c);

/* The sentences of the refused files, one per line, or "" (valid while C lives). */
const char *core_problems(const core_t *c);

#endif
