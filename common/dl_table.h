/* dl_table.h - a library loaded on first use: dlopen by soname, then a table of functions.
 *
 * scry links only what every command needs; libraries that one feature uses (libcurl for
 * the Pyroscope push, libcapstone for disassembly) are loaded when that feature first runs,
 * so that every other command starts without their loading and relocation cost. */
#ifndef SCRY_DL_TABLE_H
#define SCRY_DL_TABLE_H

#include <stddef.h>

/* One function to resolve: its NAME, and where to store its address (a function pointer
 * of the right type, written as raw bytes as POSIX allows for dlsym's result). */
typedef struct scry_dl_fn {
    const char *name;
    void *slot;
} scry_dl_fn_t;

/* dlopen()s the first of SONAMES[0..NSONAMES) that loads (RTLD_NOW | RTLD_LOCAL) and
 * resolves every FNS[i].name into *FNS[i].slot. Returns 0, or -1 with a sentence in MSG
 * (may be NULL): the library was not found, or names the first missing function (the
 * library then stays loaded, unused). Not thread-safe by itself: call it under
 * pthread_once. */
int scry_dl_load(const char *const *sonames, size_t nsonames, const scry_dl_fn_t *fns, size_t nfns,
                 char *msg, size_t msglen);

#endif
