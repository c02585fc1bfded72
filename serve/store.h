/* store.h - the daemon's window files in --out-dir.
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

#include <stddef.h>
#include <stdint.h>

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

/* Opens (creating it, mode 0755) the directory DIR. MAX_AGE_S and MAX_BYTES are the
 * retention limits (0: none). Returns NULL with a message in MSG. */
serve_store_t *serve_store_new(const char *dir, double max_age_s, uint64_t max_bytes, char *msg,
                               size_t msglen);

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

/* Writes LEN bytes of DATA to PATH atomically: a temporary file next to it (mode 0644),
 * fdatasync, rename. Returns 0 or SCRY_E_IO (nothing is left behind). Used for the index,
 * and by the push spool. */
int serve_write_atomic(const char *path, const void *data, size_t len);

/* Creates DIR and its parents (mode 0755). Returns 0 or SCRY_E_IO. */
int serve_mkdirs(const char *dir);

#endif
