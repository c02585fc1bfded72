/* elfsym_internal.h - what the elfsym sources share; not part of the public API. */
#ifndef ELFSYM_INTERNAL_H
#define ELFSYM_INTERNAL_H

#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "elfobj.h"

#define ELFSYM_MAX_ALIASES   8
#define ELFSYM_BUILD_ID_MAX  64
#define ELFSYM_FUNC_SPAN_MAX 65536u /* a size-0 function covers at most this much */

/* One way to reach the file: a path and the identity it had when opened. */
typedef struct elfsym_alias {
    char *path;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} elfsym_alias_t;

/* One symbol table, sorted by (value, raw name). */
typedef struct elfsym_symtab {
    elfsym_sym_t *syms;
    uint64_t *values; /* syms[i].value, packed for the binary search */
    uint64_t *span;   /* bytes each symbol covers for address lookup (0: none) */
    uint64_t *maxend; /* max(value + span) over symbols 0..i: ends the backward walk */
    size_t nsyms;
    char *names; /* every symbol name */
    uint32_t *hash;
    size_t hash_cap; /* power of two; slots hold index+1, 0 is empty */
} elfsym_symtab_t;

struct elfsym_obj {
    /* identity */
    elfsym_alias_t alias[ELFSYM_MAX_ALIASES];
    size_t nalias;
    uint8_t build_id[ELFSYM_BUILD_ID_MAX];
    size_t build_id_len;
    char build_id_hex[2 * ELFSYM_BUILD_ID_MAX + 1];
    char *debuglink;
    uint32_t debuglink_crc;
    char *debug_path;
    int type;
    int elf_class;

    /* Symbols. Opening a file reads only .dynsym (a few thousand exported names: what
     * finding an interpreter needs) into DYN; the full table (.symtab, .dynsym and the
     * separate debug file) is read on the first address lookup, symbol listing, or name
     * not in .dynsym (elfsym__obj_full), and published once in FULL. FULL is DYN itself
     * when everything was read at open (no .dynsym, the vDSO) or the file cannot be read
     * again. Both stay until the object is destroyed, so lookups need no lock. */
    elfsym_symtab_t dyn;
    elfsym_symtab_t *_Atomic full;
    pthread_mutex_t full_lock;

    elfsym_section_t *secs;
    size_t nsecs;
    char *secnames;

    elfsym_segment_t segs[ELFSYM_MAX_SEGMENTS];
    size_t nsegs;

    /* cache bookkeeping (under the cache lock) */
    int refs;
    struct elfsym_obj *next;
};

/* Makes sure libelf is initialised (elf_version). Thread-safe. */
void elfsym__elf_init(void);

/* Stat identity of an open file into ALIAS (path not set). */
void elfsym__alias_from_stat(elfsym_alias_t *a, const struct stat *st);

/* Maps an errno from open() of a file to a scry code (NOTFOUND, PERM, NOMEM, IO). */
int elfsym__file_err(int errnum);

/* Reads the build-id note of ELF into OBJ (build_id, build_id_hex). Returns 0 when found,
 * SCRY_E_NOTFOUND when absent. */
int elfsym__read_build_id(Elf *elf, uint8_t *id, size_t *len);

/* Loads everything but identity into OBJ from ELF (opened from PATH, used to search for the
 * debug file; FILE_SIZE bytes long). A file whose headers, sections or segments reach past
 * its end (truncated) gives SCRY_E_ELF. LAZY: read only .dynsym when the file has one
 * (the rest on demand, elfsym__obj_full); 0 reads every table now. Returns 0 or a negative code; OBJ is then
 * partially filled and must be released with elfsym__obj_destroy. */
int elfsym__obj_load(elfsym_obj_t *obj, Elf *elf, const char *path, uint64_t file_size,
                     int lazy);

/* OBJ's full symbol table, read now from the file of OBJ's first alias when not read yet
 * (only when that file still has the identity it had at open; else the .dynsym table).
 * Thread-safe; never NULL. */
const elfsym_symtab_t *elfsym__obj_full(const elfsym_obj_t *obj);

/* Frees the arrays of T (not T itself). */
void elfsym__symtab_free(elfsym_symtab_t *t);

/* Frees OBJ and everything it owns, ignoring references. NULL is a no-op. */
void elfsym__obj_destroy(elfsym_obj_t *obj);

/* Opens the file behind OBJ again (for reading bytes), trying each alias and checking
 * that the identity is unchanged. Returns an fd (caller closes) or a negative code. */
int elfsym__obj_reopen(const elfsym_obj_t *obj);

/* Reads exactly LEN bytes at file offset OFF. Returns 0 or SCRY_E_IO. */
int elfsym__pread_full(int fd, void *buf, size_t len, uint64_t off);

/* Searches the separate debug file for an object opened from PATH with the given build-id
 * and debuglink (either may be absent). Returns a malloc'd path or NULL. */
char *elfsym__find_debug_file(const char *path, const uint8_t *build_id, size_t build_id_len,
                              const char *debuglink, uint32_t debuglink_crc);

/* CRC-32 (the one .gnu_debuglink uses) of the file at FD, or -1 on read error. */
int64_t elfsym__file_crc32(int fd);

/* Returns the demangled form of NAME (malloc'd) or NULL when it is not a C++ name or
 * no demangler is available. */
char *elfsym__demangle(const char *name);

#endif
