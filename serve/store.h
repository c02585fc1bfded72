/* store.h - the window files of scry serve in --out-dir.
 *
 * Each window of a service is a set of files sharing one stem,
 * OUT_DIR/SERVICE/FROM-UNTIL[.CONTAINER12].EXT (FROM, UNTIL: Unix seconds), each written
 * atomically (a temporary file in the same directory, then rename). The window's JSON
 * description (EXT "json") is written last: a window without it is incomplete and is not
 * listed. After each window the store deletes what is older than the age limit, then the
 * oldest windows until the total is under the size limit, and rewrites
 * OUT_DIR/index.json (atomically) listing every window.
 */
#ifndef SCRY_SERVE_STORE_H
#define SCRY_SERVE_STORE_H

#include <json-c/json.h>

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct serve_store serve_store_t;

typedef struct serve_store_file {
    const char *ext; /* "collapsed", "svg", "pb.gz" */
    const void *data;
    size_t len;
} serve_store_file_t;

typedef struct serve_window {
    const char *service;   /* [A-Za-z0-9._-], 1-64 bytes */
    const char *container; /* 64-hex id or NULL */
    int64_t from, until;   /* Unix seconds */
    json_object *labels;   /* more fields for the description (borrowed; may be NULL) */
    const serve_store_file_t *files;
    size_t n_files;
} serve_window_t;

typedef struct serve_store_stats {
    uint64_t windows_written;
    uint64_t windows_pruned;
    uint64_t bytes_pruned;
    uint64_t write_errors;
    uint64_t bytes_kept; /* after the last prune */
    uint64_t windows_kept;
} serve_store_stats_t;

/* Opens the directory DIR (see serve_dir_open: refused unless it and every directory
 * above it belong to scry serve's user and are writable by nobody else), creating it with
 * mode 0700, or 0750 and group GID when GID is not (gid_t)-1 (the `out-group` readers).
 * Window files are then mode 0600 (0640 with GID, group GID), service directories 0700
 * (0750). MAX_AGE_S and MAX_BYTES are the retention limits (0: none). Returns NULL with a
 * message in MSG. */
serve_store_t *serve_store_new(const char *dir, double max_age_s, uint64_t max_bytes, gid_t gid,
                               char *msg, size_t msglen);

/* Frees S (files stay). NULL is a no-op. */
void serve_store_free(serve_store_t *s);

/* Changes the retention limits (on reload). */
void serve_store_set_limits(serve_store_t *s, double max_age_s, uint64_t max_bytes);

/* Writes window W (its files, then its description), then prunes and rewrites the index.
 * NOW is the current Unix time (seconds) used for the age limit. Returns 0, SCRY_E_INVAL
 * for a bad service name or extension, SCRY_E_IO when a file could not be written (the
 * window's partial files are removed), SCRY_E_NOMEM. */
int serve_store_put(serve_store_t *s, const serve_window_t *w, int64_t now);

/* Prunes and rewrites the index without writing a window. Returns 0 or SCRY_E_IO. */
int serve_store_prune(serve_store_t *s, int64_t now);

const serve_store_stats_t *serve_store_stats(const serve_store_t *s);

/* Opens directory PATH (absolute) for scry serve's own files and returns an O_RDONLY
 * O_DIRECTORY descriptor (the caller closes it), or -1 with why in MSG. Walks PATH from /,
 * each component opened from its parent's descriptor with O_NOFOLLOW; every directory on
 * the way must belong to scry serve's user (root) and be writable by nobody else (one
 * above the last may instead be world-writable with the sticky bit, as /tmp); a symbolic
 * link is followed (at most 40) only when scry serve's user owns it, and its target is
 * walked by the same rules. '..' is refused. A missing last component is created with MODE
 * (and group GID unless (gid_t)-1), missing ones above it with 0755. */
int serve_dir_open(const char *path, mode_t mode, gid_t gid, char *msg, size_t msglen);

/* Returns a directory stream over descriptor FD (which it takes: closed by closedir, or
 * at once on failure), rewound to the first entry, or NULL (FD < 0 included). */
DIR *serve_dir_stream(int fd);

/* Writes LEN bytes of DATA to NAME (no '/') in directory DFD atomically: a new temporary
 * file with a random name (O_EXCL | O_NOFOLLOW), mode MODE and group GID (unless
 * (gid_t)-1), fdatasync, renameat. Returns 0 or SCRY_E_IO (nothing is left behind). */
int serve_write_at(int dfd, const char *name, const void *data, size_t len, mode_t mode, gid_t gid);

/* The mode of scry serve's files and directories: 0600 and 0700, or with a reader group
 * (GID not (gid_t)-1) 0640 and 0750. */
mode_t serve_file_mode(gid_t gid);
mode_t serve_dir_mode(gid_t gid);

#endif
