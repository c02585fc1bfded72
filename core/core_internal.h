/* core_internal.h - the state core.c (parsing) and core_mem.c (memory, files, maps)
 * share; not part of core.h. */
#ifndef SCRY_CORE_INTERNAL_H
#define SCRY_CORE_INTERNAL_H

#include "core.h"

#include <elf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

#ifndef NT_SIGINFO
#define NT_SIGINFO 0x53494749
#endif
#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif

#define PRSTATUS_SIZE   336 /* x86-64 struct elf_prstatus */
#define PRSTATUS_CURSIG 12
#define PRSTATUS_PID    32
#define PRSTATUS_REG    112
#define PRPSINFO_SIZE   136
#define PRPSINFO_PID    24
#define PRPSINFO_FNAME  40
#define PRPSINFO_PSARGS 56
#define SIGINFO_MIN     24
#define CORE_PATH_MAX   4096
#define CORE_PROBLEMS   8192                /* bytes of refusal sentences kept */
#define CORE_FILE_MAX   ((uint64_t)1 << 40) /* bytes of one mapped file */

typedef struct core_seg {
    uint64_t vaddr, memsz, filesz, offset;
    uint32_t flags; /* PF_R/W/X */
} core_seg_t;

enum file_state { FILE_UNTRIED = 0, FILE_OK, FILE_REFUSED };

typedef struct core_file {
    const char *path; /* as the target named it, in the core's NT_FILE strings (copied) */
    char *open_path;  /* under the sysroot */
    int state;        /* enum file_state */
    int given;        /* --exe: a path of scry's machine, opened as it is */
    const uint8_t *map;
    size_t len;
    char *problem; /* why it was refused */
} core_file_t;

typedef struct core_fmap {
    uint64_t start, end, offset; /* offset in bytes */
    uint32_t file;               /* index into files */
} core_fmap_t;

struct core {
    const uint8_t *data; /* the core's bytes */
    size_t len;
    void *owned; /* munmap'd at free when not NULL */
    size_t owned_len;
    Elf *elf;
    core_seg_t *segs; /* sorted by vaddr, not overlapping */
    size_t nsegs;
    core_fmap_t *fmaps; /* sorted by start, not overlapping */
    size_t nfmaps;
    core_file_t *files;
    size_t nfiles;
    core_thread_t *threads;
    size_t nthreads, threads_cap;
    core_siginfo_t sig;
    uint64_t at_entry; /* AT_ENTRY of NT_AUXV, 0 unknown */
    uint64_t at_phdr;  /* AT_PHDR: where the executable's program headers are mapped */
    int32_t pid;
    char comm[17];
    char args[81];
    char exe[CORE_PATH_MAX];
    char sysroot[CORE_PATH_MAX];
    int rootfd; /* --sysroot opened (O_PATH), else -1 */
    char problems[CORE_PROBLEMS];
};

/* Index of the PT_LOAD segment / NT_FILE mapping holding ADDR, or -1. */
long core__fmap_index(const core_t *c, uint64_t addr);

/* Up to LEN bytes at ADDR into BUF, across segments and mapped files: those the core holds
 * (DUMPED), or also those of the files it maps. Returns how many were copied. */
size_t core__read_span(core_t *c, uint64_t addr, void *buf, size_t len, int dumped);

/* Opens, maps and checks file I (its build-id against the core's) on first use. Returns 0
 * when usable, else SCRY_E_NOTFOUND (the reason in its problem). */
int core__file_use(core_t *c, uint32_t i);

#endif
