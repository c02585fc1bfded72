/* maps.h - a process's memory mappings (/proc/PID/maps).
 *
 * A snapshot: parse once, query many times. Entries are sorted by start address and
 * never overlap (the kernel's order, checked). Paths are stored as the target sees them,
 * with the kernel's " (deleted)" suffix removed and flagged instead.
 */
#ifndef ELFSYM_MAPS_H
#define ELFSYM_MAPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rmem.h"

/* Bounds on untrusted input. */
#define ELFSYM_MAPS_MAX_LINES (1u << 20)
#define ELFSYM_MAPS_MAX_LINE  8192u

enum elfsym_perm {
    ELFSYM_PERM_R = 1,
    ELFSYM_PERM_W = 2,
    ELFSYM_PERM_X = 4,
    ELFSYM_PERM_P = 8, /* private (copy-on-write); shared when clear */
};

typedef struct elfsym_map {
    raddr_t start;      /* first byte */
    raddr_t end;        /* one past the last byte */
    uint64_t offset;    /* file offset mapped at start */
    uint64_t inode;     /* 0 for anonymous mappings */
    uint32_t dev_major; /* device of the file, as the kernel prints it */
    uint32_t dev_minor;
    uint8_t perms;    /* enum elfsym_perm bits */
    uint8_t deleted;  /* the file was deleted or replaced (" (deleted)" suffix) */
    const char *path; /* never NULL: "" anonymous, "[heap]", "/usr/lib/x.so"; owned by maps */
} elfsym_map_t;

typedef struct elfsym_maps elfsym_maps_t;

/* Reads /proc/PID/maps. Returns NULL on failure and, when ERR is not NULL, stores
 * SCRY_E_NOPROC (no such process), SCRY_E_PERM, SCRY_E_NOMEM, SCRY_E_TRUNC (more than
 * ELFSYM_MAPS_MAX_LINES lines: not returned, the snapshot would be misleading) or
 * SCRY_E_IO. The caller owns the result (elfsym_maps_free). */
elfsym_maps_t *elfsym_maps_new(pid_t pid, int *err);

/* The mappings of the target SRC reads: /proc/PID/maps for a live process
 * (elfsym_maps_new), else the text the source gives (rmem_maps_text: a core's NT_FILE
 * and segments), parsed. Returns NULL with *ERR as elfsym_maps_new or the source's code. */
elfsym_maps_t *elfsym_maps_of(rmem_t *src, int *err);

/* Parses LEN bytes of maps text (a captured /proc/PID/maps, for tests). Malformed lines
 * are skipped, overlapping or unsorted entries are dropped. Returns NULL with *ERR set
 * to SCRY_E_NOMEM or SCRY_E_TRUNC. The caller owns the result. */
elfsym_maps_t *elfsym_maps_parse(const char *text, size_t len, int *err);

/* Frees the snapshot and its paths. NULL is a no-op. */
void elfsym_maps_free(elfsym_maps_t *m);

/* Number of entries. */
size_t elfsym_maps_count(const elfsym_maps_t *m);

/* Entry I (0-based, sorted by start), or NULL when out of range. Owned by M. */
const elfsym_map_t *elfsym_maps_get(const elfsym_maps_t *m, size_t i);

/* The entry containing ADDR (binary search, O(log n)), or NULL. Owned by M. */
const elfsym_map_t *elfsym_maps_find(const elfsym_maps_t *m, raddr_t addr);

/* Index of the entry containing ADDR, or -1. */
long elfsym_maps_find_index(const elfsym_maps_t *m, raddr_t addr);

/* The PID the snapshot was read from (0 for parsed text). */
pid_t elfsym_maps_pid(const elfsym_maps_t *m);

/* True when the mapping is backed by a regular file (absolute path, nonzero inode). */
int elfsym_map_is_file(const elfsym_map_t *e);

#endif
