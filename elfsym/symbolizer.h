/* symbolizer.h - native address -> (symbol, library) for one process.
 *
 * A symbolizer holds a maps snapshot and, per mapped file, the shared ELF object
 * (elfobj.h cache) and its load bias, computed on first use. A lookup is a binary search
 * in the maps plus a binary search in the object's symbols: O(log n) once loaded.
 * Not thread-safe: one symbolizer per sampling thread, or a lock around it.
 */
#ifndef ELFSYM_SYMBOLIZER_H
#define ELFSYM_SYMBOLIZER_H

#include <stdint.h>
#include <sys/types.h>

#include "maps.h"

typedef struct elfsym_symbolizer elfsym_symbolizer_t;

typedef struct elfsym_loc {
    const char *symbol;  /* "sha256_block_data_order"; NULL when unknown */
    const char *lib;     /* base name: "libcrypto.so.3", "[vdso]", "" when anonymous */
    const char *path;    /* full path as the target sees it ("" when anonymous) */
    uint64_t sym_offset; /* ADDR - symbol start (0 when symbol is NULL) */
    uint64_t lib_offset; /* ADDR - bias: the link-time address (ADDR - map start when no ELF) */
    raddr_t sym_start;   /* runtime address of the symbol start (0 when unknown) */
} elfsym_loc_t;

/* Creates a symbolizer for process PID and reads its maps. Returns NULL on failure with
 * *ERR (may be NULL) set to SCRY_E_NOPROC, SCRY_E_PERM or SCRY_E_NOMEM. Free with
 * elfsym_symbolizer_free. */
elfsym_symbolizer_t *elfsym_symbolizer_new(pid_t pid, int *err);

/* Frees the symbolizer and drops its object references. Strings returned by lookups
 * become invalid. NULL is a no-op. */
void elfsym_symbolizer_free(elfsym_symbolizer_t *s);

/* Reads the maps again (after dlopen/dlclose). Objects and biases of files still mapped
 * at the same place are kept; strings returned before stay valid until free. Returns 0 or
 * the error of elfsym_maps_new (then the old maps stay in use). */
int elfsym_symbolizer_refresh(elfsym_symbolizer_t *s);

/* Symbolizes runtime address ADDR. Returns 0 when a symbol was found; SCRY_E_NOTFOUND
 * when only the library (or nothing: lib "") is known. OUT is always filled; its strings
 * live until elfsym_symbolizer_free. When ADDR is in no mapping, the maps are re-read at
 * most once every 100 ms (dlopen), then the lookup is retried: this replaces the maps
 * snapshot that elfsym_symbolizer_maps returned. */
int elfsym_symbolize(elfsym_symbolizer_t *s, raddr_t addr, elfsym_loc_t *out);

/* The current maps snapshot (owned by S; replaced by refresh). */
const elfsym_maps_t *elfsym_symbolizer_maps(const elfsym_symbolizer_t *s);

/* Lookups done, objects loaded (cache misses of this symbolizer), and refreshes. */
typedef struct elfsym_symbolizer_stats {
    uint64_t lookups;
    uint64_t hits;
    uint64_t modules_loaded;
    uint64_t refreshes;
} elfsym_symbolizer_stats_t;

elfsym_symbolizer_stats_t elfsym_symbolizer_stats(const elfsym_symbolizer_t *s);

#endif
