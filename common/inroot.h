/* inroot.h - opening a file named by a target inside the target's root, never outside it.
 *
 * A target (a container, a chroot) names files as its own root sees them, and its root may
 * hold symbolic links it planted, absolute ones included. Opened through /proc/PID/root/NAME
 * with open(2), such a link resolves in scry's root (the host's): root's scry would open a
 * host file of the target's choosing. Every file of a target is opened here instead: with
 * openat2(2) relative to a descriptor on the target's root, RESOLVE_IN_ROOT (absolute links
 * and ".." stay inside that root) and RESOLVE_NO_MAGICLINKS (no /proc/self/fd/N jumps).
 */
#ifndef SCRY_INROOT_H
#define SCRY_INROOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* openat2(DIRFD, PATH, FLAGS | O_CLOEXEC) resolved with RESOLVE | RESOLVE_NO_MAGICLINKS
 * (RESOLVE: RESOLVE_IN_ROOT to resolve inside DIRFD as the root, or RESOLVE_BENEATH, plus
 * any other RESOLVE_* flag). Leading slashes of PATH are skipped (PATH is relative to DIRFD
 * either way). Async-signal-safe. Returns the descriptor, or -1 with errno (ENOSYS: the
 * kernel has no openat2, Linux < 5.6). */
int inroot_openat(int dirfd, const char *path, int flags, uint64_t resolve);

/* Length of the "/proc/N/root" prefix of PATH (N decimal digits, followed by '/'), or 0
 * when PATH does not start with one. */
size_t inroot_proc_root_len(const char *path);

/* Opens PATH, a path by which scry names a target's file: "/proc/N/root/REST" opens REST
 * resolved inside process N's root (inroot_openat with RESOLVE_IN_ROOT on a descriptor of
 * /proc/N/root); any other path (/proc/N/map_files/..., a file of scry's own root) is
 * opened as open(2) does. FLAGS gets O_CLOEXEC. Returns the descriptor or -1 with errno. */
int inroot_open_path(const char *path, int flags);

/* fstat(2) of PATH opened as inroot_open_path does (O_PATH: no permission needed on the file
 * itself, a FIFO is not opened). Returns 0, or -1 with errno. */
int inroot_stat_path(const char *path, struct stat *st);

#endif
