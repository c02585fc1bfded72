/* rmem.h - reading another process's memory.
 *
 * All reads of target memory go through an rmem_t, the one source of a target: a live
 * process (process_vm_readv), an in-memory image (captured regions, for unit tests of the
 * walkers), or a source behind a table of functions (rmem_source_ops_t: a core file,
 * core/core.h). A source other than a live process also says what a live process's /proc
 * would: its mappings (rmem_maps_text) and where the files it maps are opened
 * (rmem_file_path). Everything read is untrusted: callers bound every length and validate
 * every pointer they follow.
 */
#ifndef SCRY_RMEM_H
#define SCRY_RMEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A remote (target) address. Never dereferenced locally. */
typedef uint64_t raddr_t;

typedef struct rmem rmem_t;

/* One region of a batched read. */
typedef struct rmem_iov {
    raddr_t addr;
    void *buf;
    size_t len;
} rmem_iov_t;

/* Opens a reader on live process PID. Returns NULL only when out of memory; a missing or
 * forbidden process shows up as the error of the first read. Reads use process_vm_readv;
 * where a seccomp filter refuses it (EPERM) but the kernel's ptrace check allows opening
 * /proc/PID/mem, they go through that file instead (one pread per region). */
rmem_t *rmem_open_pid(pid_t pid);

/* Opens a reader over an in-memory image: no regions at first, add them with
 * rmem_image_add. Reads outside every region fail with SCRY_E_FAULT. Returns NULL on ENOMEM. */
rmem_t *rmem_open_image(void);

/* Adds a copy of LEN bytes from DATA at remote address ADDR to an image reader.
 * Returns 0, SCRY_E_INVAL for a live reader, or SCRY_E_NOMEM. */
int rmem_image_add(rmem_t *m, raddr_t addr, const void *data, size_t len);

/* A source of target memory other than a live process (a core file). CTX is the
 * implementation's; every function may be called at any time while the reader lives. */
typedef struct rmem_source_ops {
    /* Copies up to LEN bytes at ADDR into BUF, stopping at the first byte the source does
     * not hold. Returns how many were copied (0 when ADDR itself is not held). */
    size_t (*read)(void *ctx, raddr_t addr, void *buf, size_t len);
    /* The target's mappings as /proc/PID/maps text, in a new buffer *TEXT of *LEN bytes
     * (the caller frees it). Returns 0 or a negative code. */
    int (*maps)(void *ctx, char **text, size_t *len);
    /* Writes into BUF (SIZE bytes) where scry opens the file the target mapped as PATH,
     * checked to be the mapped one. Returns 0, SCRY_E_NOTFOUND (not available, or not the
     * mapped file: never read in its place) or SCRY_E_TRUNC. */
    int (*file)(void *ctx, const char *path, char *buf, size_t size);
    /* The target's main executable as it named it, into BUF. Returns 0 or SCRY_E_NOTFOUND. */
    int (*exe)(void *ctx, char *buf, size_t size);
    /* Frees CTX with the reader (NULL: the reader does not own it). */
    void (*free)(void *ctx);
} rmem_source_ops_t;

/* Opens a reader over a source (OPS, which must outlive it, and CTX). Returns NULL on
 * ENOMEM (then CTX is not freed). rmem_pid gives 0 for it. */
rmem_t *rmem_open_source(const rmem_source_ops_t *ops, void *ctx);

/* 1 when M reads a live process (rmem_open_pid), else 0. */
int rmem_is_live(const rmem_t *m);

/* The mappings of a source reader, as rmem_source_ops_t.maps. SCRY_E_INVAL for a live
 * reader (its mappings are /proc/PID/maps) or an image. */
int rmem_maps_text(rmem_t *m, char **text, size_t *len);

/* Where to open the file mapped as PATH, as rmem_source_ops_t.file. SCRY_E_INVAL for a
 * live reader or an image. */
int rmem_file_path(rmem_t *m, const char *path, char *buf, size_t size);

/* The main executable of a source reader, as rmem_source_ops_t.exe. SCRY_E_INVAL for a
 * live reader or an image. */
int rmem_exe_path(rmem_t *m, char *buf, size_t size);

/* Frees the reader. NULL is a no-op. */
void rmem_free(rmem_t *m);

/* Reads exactly LEN bytes at ADDR into BUF. Returns 0, SCRY_E_FAULT (unmapped or stale
 * address: recoverable), SCRY_E_GONE (target exited), SCRY_E_PERM (not allowed).
 * On error BUF's content is unspecified. */
int rmem_read(rmem_t *m, raddr_t addr, void *buf, size_t len);

/* Reads up to LEN bytes at ADDR into BUF, stopping at the first unreadable byte (the end
 * of a mapping). Returns how many bytes were read (0..LEN; 0 when ADDR itself is not
 * readable), or SCRY_E_GONE / SCRY_E_PERM / SCRY_E_INVAL. */
long rmem_read_partial(rmem_t *m, raddr_t addr, void *buf, size_t len);

/* Reads N regions, in as few system calls as possible (one process_vm_readv for up to
 * IOV_MAX regions). Returns the number of leading regions read completely (0..N), or a
 * negative code when not even the first could be read for a reason other than FAULT
 * (GONE, PERM). A region that faults ends the batch; the caller may retry the rest. */
int rmem_readv(rmem_t *m, const rmem_iov_t *iov, size_t n);

/* Reads a NUL-terminated string of at most MAX-1 bytes at ADDR into BUF (always
 * terminated). Returns its length, or a negative code. */
int rmem_read_cstr(rmem_t *m, raddr_t addr, char *buf, size_t max);

/* The one writer of target memory, next to the reader: writes exactly LEN bytes from BUF
 * at ADDR of a live reader's process (process_vm_writev; only writable mappings). Used
 * for the few words a sanctioned protocol asks a debugger to set (PEP 768's remote
 * execution request). Returns 0, SCRY_E_FAULT, SCRY_E_GONE, SCRY_E_PERM, or SCRY_E_INVAL
 * for an image reader or a short write. */
int rmem_write(rmem_t *m, raddr_t addr, const void *buf, size_t len);

/* Counts of system calls and bytes, for the summary and the benchmarks. */
typedef struct rmem_stats {
    uint64_t syscalls;
    uint64_t bytes;
    uint64_t faults;
} rmem_stats_t;

/* Returns the counters accumulated since the reader was opened. */
rmem_stats_t rmem_stats(const rmem_t *m);

/* Returns the PID of a live reader, or 0 for an image or another source. */
pid_t rmem_pid(const rmem_t *m);

/* Convenience: read a 64-bit pointer-sized value. Returns 0 or a negative code. */
static inline int rmem_read_u64(rmem_t *m, raddr_t addr, uint64_t *out)
{
    return rmem_read(m, addr, out, sizeof *out);
}

#endif
