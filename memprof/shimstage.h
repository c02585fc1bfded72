/* shimstage.h - makes libscry-shim.so loadable by a target whose root (chroot, mount
 * namespace: a container) does not show scry's own copy: a private copy inside the
 * target's root, removed as soon as the target has loaded it, and by a janitor process if
 * scry dies before that (docs/memory.md "Targets in another root").
 */
#ifndef SCRY_SHIMSTAGE_H
#define SCRY_SHIMSTAGE_H

#include <stddef.h>
#include <sys/types.h>

typedef struct shimstage shimstage_t;

/* Makes HOST_PATH (scry's shim, a path in scry's root) visible to process PID. When PID's
 * root shows the very same file (device and inode) at HOST_PATH, nothing is copied.
 * Otherwise the file is copied into a new directory ".scry-shim-<128 random bits>"
 * (mode 0711, owned by scry's user) in the first of the target's /tmp, /var/tmp, /dev/shm
 * that is a real directory (no symbolic link on the way, resolved inside the target's
 * root) on a file system that allows execution and that the target's own user may write
 * to; a janitor process (own session) removes it if scry dies before shimstage_free. Every
 * later create and unlink is one name relative to a descriptor on that directory or on
 * scry's directory in it, never a path through a name the target could swap. Returns NULL and
 * writes why into MSG (*ERR gets a SCRY_E_* code) when no such place exists or the copy fails. */
shimstage_t *shimstage_new(pid_t pid, const char *host_path, int *err, char *msg, size_t len);

/* As shimstage_new, always a private copy: a new directory in PID's root (as above, with
 * its janitor) holding NAME (no '/', at most 40 bytes) made of DLEN bytes of DATA, mode
 * 0644 (PEP 768's script, memprof/remoteexec.c). Returns NULL and writes why into MSG
 * (*ERR gets a SCRY_E_* code). */
shimstage_t *shimstage_new_data(pid_t pid, const char *name, const void *data, size_t dlen,
                                int *err, char *msg, size_t len);

/* The path the target opens (HOST_PATH itself when nothing was copied). Valid while S
 * lives. */
const char *shimstage_path(const shimstage_t *s);

/* 1 when the shim was copied into the target's root, 0 when the target sees scry's. */
int shimstage_copied(const shimstage_t *s);

/* Removes the copy and its directory (the target keeps its mapping), ends the janitor and
 * frees S. NULL is a no-op. */
void shimstage_free(shimstage_t *s);

#endif
