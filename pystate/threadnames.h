/* threadnames.h - Python-level thread names ("MainThread", "Thread-3 (worker)", names given
 * with threading.Thread(name=...)), read from outside the target.
 *
 * The walk: interp->modules (sys.modules) -> 'threading' -> the module's __dict__ ->
 * '_active' (a dict of ident int -> Thread) -> each Thread's '_name' attribute, found where
 * the version keeps instance attributes (tp_dictoffset up to 3.10; the managed dict or
 * values pointers before the object in 3.11/3.12; inline values after the object in 3.13+;
 * shared keys in the type's ht_cached_keys). Dict entries are walked linearly, never
 * hashed; keys are compared by reading the str objects. Every length is bounded and every
 * object's type is checked (dict, str, int and module by tp_name), so a torn read gives a
 * shorter map, never a crash. Reads are batched (one process_vm_readv per phase).
 *
 * Not part of the public API: pystate_sample (sample.c) keeps a map per target, refreshed
 * at most once a second, and fills pystate_thread_t.name from it.
 */
#ifndef SCRY_PYSTATE_THREADNAMES_H
#define SCRY_PYSTATE_THREADNAMES_H

#include "pystate.h"

#include <stddef.h>
#include <stdint.h>

#define PYSTATE_NAMES_MAX      4096  /* names kept per map (as PYSTATE_MAX_THREADS) */
#define PYSTATE_NAMES_DICT_MAX 65536 /* entries of one dict walked at most */
#define PYSTATE_NAMES_TYPES    16    /* distinct Thread classes handled per refresh */

typedef struct pystate_thread_name {
    uint64_t ident;   /* threading.get_ident(): the pthread_t (pystate_thread_t.pthread_id) */
    const char *name; /* UTF-8, interned in the target's string table */
} pystate_thread_name_t;

/* The result: sorted by ident once pystate__thread_names returns. Zero-initialise it. */
typedef struct pystate_name_map {
    size_t count;
    pystate_thread_name_t items[PYSTATE_NAMES_MAX];
} pystate_name_map_t;

/* Per-target state (struct pystate_target.names, zero-initialised, owns no memory): the
 * addresses of the static types once checked by name, where the wanted keys were last
 * found, and the map sample.c keeps with the time of its last refresh. */
typedef struct pystate_names {
    raddr_t type_dict, type_str, type_int, type_module; /* 0 until checked by tp_name */
    int64_t module_dictoffset; /* the module type's tp_dictoffset (md_dict); 0 until read */
    uint32_t hint_modules;     /* entry index of 'threading' in sys.modules */
    uint32_t hint_module_dict; /* entry index of '_active' in threading's __dict__ */
    uint64_t refreshed_ns;     /* CLOCK_MONOTONIC time of the last refresh (sample.c) */
    uint8_t refreshed;         /* the map has been refreshed at least once */
    pystate_name_map_t map;    /* sample.c's map */
} pystate_names_t;

/* Appends to OUT the (ident, name) pair of every thread in threading._active of the
 * interpreter at INTERP (a PyInterpreterState address), then sorts OUT by ident. Names are
 * interned in t->strings (valid while that table lives); t->names' type addresses and hints
 * are updated. OUT is the caller's (it may be &t->names.map).
 * Returns 0 (some threads may be missing after a torn read; OUT stops at
 * PYSTATE_NAMES_MAX), SCRY_E_NOTFOUND when the interpreter has not imported threading (or
 * is shutting down), SCRY_E_CORRUPT when the chain cannot be read consistently,
 * SCRY_E_GONE/SCRY_E_PERM from the reader, SCRY_E_NOMEM, SCRY_E_INVAL for NULL arguments
 * or a layout without the needed fields. OUT keeps (sorted) what was appended before an
 * error. */
int pystate__thread_names(pystate_target_t *t, raddr_t interp, pystate_name_map_t *out);

/* The name of IDENT in MAP (sorted, as pystate__thread_names leaves it), or NULL. */
const char *pystate__name_map_find(const pystate_name_map_t *map, uint64_t ident);

#endif
