/* unwind_internal.h - what the unwind sources share; not part of the public API. */
#ifndef UNWIND_INTERNAL_H
#define UNWIND_INTERNAL_H

#include <libunwind.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "maps.h"
#include "rmem.h"
#include "strtab.h"
#include "unwind.h"

#define UNWIND_PAGE          4096u
#define UNWIND_STACK_FIRST   (64u << 10) /* first copy of the stack, from sp up */
#define UNWIND_STACK_MAX     (8u << 20)  /* never copy more than this per sample */
#define UNWIND_CACHE_SLOTS   8192u       /* page cache slots (power of two) */
#define UNWIND_CACHE_PROBE   8u          /* linear probe length */
#define UNWIND_CACHE_PAGES   4096u       /* pages held at most (16 MiB) */
#define UNWIND_MAX_OBJS      4096u       /* executable mappings remembered */
#define UNWIND_SYM_SLOTS     16384u      /* per-IP symbol cache (power of two) */
#define UNWIND_RS_CACHE_SIZE 4096        /* libunwind register-state cache entries */

/* One page of target memory. gen == 0: read-only file-backed page, valid across samples;
 * otherwise valid only during sample number gen. */
typedef struct unwind_page {
    uint64_t addr; /* page address; 0 = empty slot */
    uint64_t gen;
    uint8_t *data;
} unwind_page_t;

/* Unnamed parts of the eval loop remembered per object (a PGO/LTO build splits it). */
#define UNWIND_EVAL_PARTS 8

/* The unwind table of one executable mapping. */
typedef struct unwind_obj {
    uint64_t start, end;   /* the r-x mapping */
    uint64_t bias;         /* load bias (runtime - link-time address) */
    const char *lib;       /* base name, interned */
    const char *path;      /* full path, interned */
    const char *open_path; /* where scry opens the file (elfsym_map_open_path: through
                              /proc/PID/root, or map_files for another mount namespace),
                              interned; NULL for the vDSO */
    uint8_t in_python;     /* libpython* or the python executable */
    uint8_t state;         /* 0 not loaded, 1 table ready, 2 no usable .eh_frame_hdr */
    uint8_t no_file;       /* a file mapping whose file scry could not open as the mapped one
                              (replaced, deleted without map_files): no tables from any file */
    uint8_t elf_tried;     /* elfsym_obj_open was attempted */
    uint8_t eval_tried;    /* eval_parts computed (see symbolize.c) */
    uint8_t neval_parts;
    struct {
        uint64_t start, end;         /* runtime addresses */
    } eval_parts[UNWIND_EVAL_PARTS]; /* unnamed parts of _PyEval_EvalFrameDefault */
    struct elfsym_obj *elf;          /* symbols (elfsym), NULL when the file could not be loaded */
    unw_dyn_info_t di; /* UNW_INFO_FORMAT_REMOTE_TABLE over the target's .eh_frame_hdr */
} unwind_obj_t;

#define UNWIND_SYM_RANGES 8

typedef struct unwind_sym {
    uint64_t ip; /* 0 = empty */
    const char *symbol;
    const char *lib;
    uint64_t offset;
    uint8_t is_eval;
    uint8_t in_python;
} unwind_sym_t;

struct unwind {
    pid_t pid;
    pid_t tid; /* thread of the current sample */
    unw_addr_space_t as;
    unw_addr_space_t stock_as; /* lazily, for unwind_set_stock_accessors */
    void *upt;                 /* _UPT_create(pid): fallback table search, proc names */
    void *stock_upt;           /* _UPT_create(stock_tid) in stock mode */
    pid_t stock_tid;
    int stock;
    rmem_t *mem;
    strtab_t *strings;
    const char *exe_base; /* base name of /proc/PID/exe, interned */

    /* per sample */
    uint64_t gen;
    struct user_regs_struct regs;
    uint8_t *stack;           /* copy of [stack_lo, stack_lo + stack_len) */
    size_t stack_cap;         /* allocated bytes */
    uint64_t stack_lo;        /* == sp & ~7 */
    size_t stack_len;         /* bytes copied */
    int stack_end;            /* the copy reached the end of the mapping */
    const uint8_t *stack_ext; /* unwind_copied: the caller's copy (read instead of stack) */
    int frozen;               /* unwind_copied: never read the live stack or other
                                 volatile memory */
    int short_read;           /* unwind_copied: a read fell above the copy */

    /* pages */
    unwind_page_t *slots;
    size_t npages;

    /* objects */
    elfsym_maps_t *maps;
    uint64_t maps_gen; /* sample in which maps were last read */
    unwind_obj_t *objs;
    size_t nobjs;

    /* symbols */
    unwind_sym_t *syms;
    /* the last functions found, by address range: an IP not seen before inside one of them
     * (the eval loop's, mostly) needs no symbol table search */
    struct unwind_sym_range {
        uint64_t lo, hi; /* [lo, hi) in the target; hi = 0: empty */
        unwind_sym_t sym;
    } ranges[UNWIND_SYM_RANGES];
    unsigned ranges_next;

    unwind_stats_t st;
};

/* The unwind_t of the sample under way in this thread (for accessors called with
 * libunwind's _UPT argument instead of ours). */
extern _Thread_local struct unwind *unwind__current;

/* Memory (memcache.c). */
int unwind__mem_init(struct unwind *u);
void unwind__mem_fini(struct unwind *u);
void unwind__mem_flush(struct unwind *u);
/* Copies the stack from SP up (UNWIND_STACK_FIRST bytes or up to the end of the mapping).
 * Returns 0 or a negative code. */
int unwind__stack_snapshot(struct unwind *u, uint64_t sp);
/* Reads 8 bytes at ADDR: stack copy, then page cache. Returns 0 or SCRY_E_FAULT. */
int unwind__read_word(struct unwind *u, uint64_t addr, uint64_t *out);

/* Objects and tables (objects.c). */
void unwind__objs_fini(struct unwind *u);
/* The executable mapping containing IP (loads maps on demand, at most once per sample).
 * Returns NULL when IP is in no executable mapping. */
unwind_obj_t *unwind__obj_find(struct unwind *u, uint64_t ip);
/* The accessor find_proc_info: our table search, else _UPT_find_proc_info. */
int unwind__find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                           int need_unwind_info, void *arg);

/* Symbols (symbolize.c): the one place to switch to elfsym's symboliser. Fills OUT for
 * IP (a return address is looked up at IP-1 when IS_RETURN). Always succeeds: unknown
 * parts are NULL. */
void unwind__symbolize(struct unwind *u, uint64_t ip, int is_return, unwind_sym_t *out);
void unwind__syms_fini(struct unwind *u);

/* Classifies a symbol name as an eval loop (enum unwind_eval). */
int unwind__eval_kind(const char *symbol);

/* libunwind's x86-64 table search, exported by libunwind but not declared in its headers
 * (libunwind-ptrace uses it the same way). */
int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
                                       unw_proc_info_t *pi, int need_unwind_info, void *arg);

#endif
