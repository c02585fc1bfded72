/* corezip.h - a core file's bytes in memory: mapped as it is, or decompressed (zstd, lz4,
 * xz: what systemd-coredump stores) into anonymous memory, streaming. */
#ifndef SCRY_COREZIP_H
#define SCRY_COREZIP_H

#include <stddef.h>

#define COREZIP_MAX_BYTES                                                                          \
    ((size_t)1 << 38) /* decompressed bytes accepted (256 GiB), and                                \
                         never more than half the machine's memory */

/* Maps the file at PATH read-only, or when it starts with the magic of zstd, lz4 (frame)
 * or xz, its decompressed bytes (in a memfd, mapped). On success *MAP and *LEN describe a
 * private mapping the caller munmaps. Returns 0, or a negative code with a sentence in WHY:
 * SCRY_E_NOTFOUND, SCRY_E_PERM, SCRY_E_IO, SCRY_E_NOTFILE, SCRY_E_CORRUPT (a compressed
 * stream that does not decode), SCRY_E_TOOBIG (more than COREZIP_MAX_BYTES or half the memory:
 * decompress it to a file), SCRY_E_NOSYS (scry was built without that library), SCRY_E_NOMEM. */
int corezip_map(const char *path, void **map, size_t *len, char *why, size_t whylen);

#endif
