/* pyversion.h - the CPython version of a file, from its name or its read-only data.
 *
 * (pystate/ also reads Py_Version from memory for 3.11+; this is the file-based way, which
 * works for every version and needs no running process.)
 */
#ifndef ELFSYM_PYVERSION_H
#define ELFSYM_PYVERSION_H

#include <stddef.h>

#include "elfobj.h"

typedef struct elfsym_pyversion {
    int major, minor, micro;
    char level; /* 'a', 'b', 'c' (release candidate) or 'f' (final) */
    int serial; /* 0 for final releases */
} elfsym_pyversion_t;

/* Parses a CPython version string at S (at most LEN bytes, need not be terminated):
 * "3.11.2", "3.13.0rc1+", or Py_GetVersion's "3.11.2 (main, Mar 13 2023, ...)". The
 * version must end at LEN, a NUL, a space or a '+'. Returns 0 or SCRY_E_NOTFOUND. */
int elfsym_pyversion_parse(const char *s, size_t len, elfsym_pyversion_t *out);

/* Parses the major.minor version out of a file name or path: libpython3.6m.so.1.0 -> 3.6,
 * libpython3.11.so -> 3.11, python3.12 -> 3.12, python2.7d -> 2.7. Returns 0 or
 * SCRY_E_NOTFOUND (e.g. libpython3.so, python3). */
int elfsym_pyversion_from_name(const char *path, int *major, int *minor);

/* True when the base name of PATH is a versioned libpython shared library. */
int elfsym_is_libpython_name(const char *path);

/* Finds the version of the CPython in OBJ from its file: first the exported Py_Version
 * constant (3.11+), then the strings that
 * Py_GetVersion refers to (the PY_VERSION literal, found by disassembly), then a scan of
 * .rodata (64 MiB at most) for a NUL-terminated version string. Returns 0 with OUT,
 * SCRY_E_NOTFOUND, or SCRY_E_IO. */
int elfsym_obj_pyversion(const elfsym_obj_t *obj, elfsym_pyversion_t *out);

#endif
