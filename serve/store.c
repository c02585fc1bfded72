/* store.c - atomic window files with retention and an index. */
#include "store.h"
#include "scry_err.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STORE_MAX_WINDOWS  200000 /* listed per prune; beyond it the oldest go first */
#define STORE_MAX_SERVICES 4096
#define STORE_META_MAX     (1 << 20)

struct serve_store {
    char *dir;
    double max_age_s;
    uint64_t max_bytes;
    serve_store_stats_t stats;
};

int serve_mkdirs(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return SCRY_E_IO;
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return SCRY_E_IO;
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : SCRY_E_IO;
}

int serve_write_atomic(const char *path, const void *data, size_t len)
{
    char tmp[4200];
    const char *slash = strrchr(path, '/');
    int dlen = slash ? (int)(slash - path) : 0;
    if (snprintf(tmp, sizeof tmp, "%.*s%s.tmp-%s-XXXXXX", dlen, path, slash ? "/" : "",
                 slash ? slash + 1 : path) >= (int)sizeof tmp)
        return SCRY_E_IO;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return SCRY_E_IO;
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto fail;
        p += n;
        left -= (size_t)n;
    }
    if (fchmod(fd, 0644) != 0 || fdatasync(fd) != 0)
        goto fail;
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto fail;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return SCRY_E_IO;
}

serve_store_t *serve_store_new(const char *dir, double max_age_s, uint64_t max_bytes, char *msg,
                               size_t msglen)
{
    if (serve_mkdirs(dir) != 0) {
        snprintf(msg, msglen, "%s: cannot create the directory: %s", dir, strerror(errno));
        return NULL;
    }
    serve_store_t *s = calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(dir))) {
        free(s);
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    s->max_age_s = max_age_s;
    s->max_bytes = max_bytes;
    return s;
}

void serve_store_free(serve_store_t *s)
{
    if (!s)
        return;
    free(s->dir);
    free(s);
}

void serve_store_set_limits(serve_store_t *s, double max_age_s, uint64_t max_bytes)
{
    s->max_age_s = max_age_s;
    s->max_bytes = max_bytes;
}

const serve_store_stats_t *serve_store_stats(const serve_store_t *s)
{
    return &s->stats;
}

static int name_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max || s[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
            return 0;
    return 1;
}

static const char *const known_ext[] = {".collapsed", ".svg", ".pb.gz", ".json"};

/* Splits a window file name into its stem length and its extension; returns 0 when the
 * name is not a window file. */
static size_t window_stem(const char *name, const char **ext)
{
    if (!isdigit((unsigned char)name[0]))
        return 0;
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof known_ext / sizeof known_ext[0]; i++) {
        size_t e = strlen(known_ext[i]);
        if (n > e && strcmp(name + n - e, known_ext[i]) == 0) {
            *ext = known_ext[i] + 1;
            return n - e;
        }
    }
    return 0;
}

int serve_store_put(serve_store_t *s, const serve_window_t *w, int64_t now)
{
    char dir[4096], stem[4200], path[4300];
    int err = 0;
    size_t written = 0;
    json_object *meta = NULL, *files = NULL;
    if (!name_ok(w->service, 64) || (w->container && !name_ok(w->container, 64)) ||
        w->until < w->from)
        return SCRY_E_INVAL;
    for (size_t i = 0; i < w->n_files; i++) {
        int known = 0;
        for (size_t k = 0; k < 3; k++)
            known |= strcmp(w->files[i].ext, known_ext[k] + 1) == 0;
        if (!known)
            return SCRY_E_INVAL;
    }
    snprintf(dir, sizeof dir, "%s/%s", s->dir, w->service);
    if (serve_mkdirs(dir) != 0) {
        s->stats.write_errors++;
        return SCRY_E_IO;
    }
    if (w->container)
        snprintf(stem, sizeof stem, "%s/%lld-%lld.%.12s", dir, (long long)w->from,
                 (long long)w->until, w->container);
    else
        snprintf(stem, sizeof stem, "%s/%lld-%lld", dir, (long long)w->from, (long long)w->until);
    meta = w->labels ? json_object_get(w->labels) : json_object_new_object();
    files = json_object_new_object();
    if (!meta || !files) {
        err = SCRY_E_NOMEM;
        goto fail;
    }
    for (; written < w->n_files; written++) {
        const serve_store_file_t *f = &w->files[written];
        snprintf(path, sizeof path, "%s.%s", stem, f->ext);
        if (serve_write_atomic(path, f->data, f->len) != 0) {
            err = SCRY_E_IO;
            goto fail;
        }
        json_object_object_add(files, f->ext, json_object_new_string(path + strlen(s->dir) + 1));
    }
    json_object_object_add(meta, "service", json_object_new_string(w->service));
    if (w->container)
        json_object_object_add(meta, "container", json_object_new_string(w->container));
    json_object_object_add(meta, "from", json_object_new_int64(w->from));
    json_object_object_add(meta, "until", json_object_new_int64(w->until));
    json_object_object_add(meta, "files", files);
    files = NULL;
    const char *text = json_object_to_json_string_ext(meta, JSON_C_TO_STRING_PLAIN);
    snprintf(path, sizeof path, "%s.json", stem);
    if (serve_write_atomic(path, text, strlen(text)) != 0) {
        err = SCRY_E_IO;
        goto fail;
    }
    json_object_put(meta);
    s->stats.windows_written++;
    return serve_store_prune(s, now);
fail:
    for (size_t i = 0; i < written; i++) {
        snprintf(path, sizeof path, "%s.%s", stem, w->files[i].ext);
        unlink(path);
    }
    json_object_put(files);
    json_object_put(meta);
    s->stats.write_errors++;
    return err;
}

typedef struct window_ent {
    char service[65];
    char stem[160];
    int64_t until;
    uint64_t bytes;
    int complete; /* has its .json */
} window_ent_t;

static int cmp_until(const void *a, const void *b)
{
    const window_ent_t *x = a, *y = b;
    if (x->until != y->until)
        return x->until < y->until ? -1 : 1;
    int c = strcmp(x->service, y->service);
    return c ? c : strcmp(x->stem, y->stem);
}

typedef struct file_ent {
    char stem[160];
    uint64_t bytes;
    int is_json;
} file_ent_t;

static int cmp_stem(const void *a, const void *b)
{
    return strcmp(((const file_ent_t *)a)->stem, ((const file_ent_t *)b)->stem);
}

/* Adds the windows of one service directory to the window list (files grouped by stem). */
static int scan_service(serve_store_t *s, const char *service, window_ent_t **list, size_t *n,
                        size_t *cap, int64_t now)
{
    char dir[4200], path[4500];
    file_ent_t *files = NULL;
    size_t nf = 0, fcap = 0;
    int err = 0;
    snprintf(dir, sizeof dir, "%s/%s", s->dir, service);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && nf < STORE_MAX_WINDOWS * 4) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (strncmp(de->d_name, ".tmp-", 5) == 0 || strstr(de->d_name, ".tmp-")) {
            /* left by a crash mid-write (a live write is younger than a minute) */
            if (stat(path, &st) == 0 && st.st_mtime < now - 60)
                unlink(path);
            continue;
        }
        const char *ext = NULL;
        size_t stem = window_stem(de->d_name, &ext);
        if (stem == 0 || stem >= sizeof files->stem || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (nf == fcap) {
            size_t nc = fcap ? fcap * 2 : 64;
            file_ent_t *nl = realloc(files, nc * sizeof *nl);
            if (!nl) {
                err = SCRY_E_NOMEM;
                goto out;
            }
            files = nl, fcap = nc;
        }
        memcpy(files[nf].stem, de->d_name, stem);
        files[nf].stem[stem] = '\0';
        files[nf].bytes = (uint64_t)st.st_size;
        files[nf].is_json = strcmp(ext, "json") == 0;
        nf++;
    }
    if (nf > 1)
        qsort(files, nf, sizeof *files, cmp_stem);
    for (size_t i = 0; i < nf; i++) {
        if (i == 0 || strcmp(files[i].stem, files[i - 1].stem) != 0) {
            if (*n >= STORE_MAX_WINDOWS)
                break;
            if (*n == *cap) {
                size_t nc = *cap ? *cap * 2 : 64;
                window_ent_t *nl = realloc(*list, nc * sizeof *nl);
                if (!nl) {
                    err = SCRY_E_NOMEM;
                    goto out;
                }
                *list = nl, *cap = nc;
            }
            window_ent_t *w = &(*list)[(*n)++];
            memset(w, 0, sizeof *w);
            snprintf(w->service, sizeof w->service, "%.64s", service);
            snprintf(w->stem, sizeof w->stem, "%s", files[i].stem);
            char *dash = strchr(w->stem, '-');
            w->until = dash ? strtoll(dash + 1, NULL, 10) : 0;
        }
        window_ent_t *w = &(*list)[*n - 1];
        w->bytes += files[i].bytes;
        w->complete |= files[i].is_json;
    }
out:
    closedir(d);
    free(files);
    return err;
}

static void delete_window(serve_store_t *s, const window_ent_t *w)
{
    char path[4500];
    for (size_t k = 0; k < sizeof known_ext / sizeof known_ext[0]; k++) {
        snprintf(path, sizeof path, "%s/%s/%s%s", s->dir, w->service, w->stem, known_ext[k]);
        unlink(path);
    }
    s->stats.windows_pruned++;
    s->stats.bytes_pruned += w->bytes;
}

static json_object *read_meta(serve_store_t *s, const window_ent_t *w)
{
    char path[4500];
    snprintf(path, sizeof path, "%s/%s/%s.json", s->dir, w->service, w->stem);
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size > STORE_META_MAX)
        return NULL;
    json_object *o = json_object_from_file(path);
    if (o && !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

int serve_store_prune(serve_store_t *s, int64_t now)
{
    window_ent_t *list = NULL;
    size_t n = 0, cap = 0, services = 0;
    int err = 0;
    DIR *d = opendir(s->dir);
    if (!d)
        return SCRY_E_IO;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && services < STORE_MAX_SERVICES) {
        if (!name_ok(de->d_name, 64) || strcmp(de->d_name, "spool") == 0)
            continue;
        if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
            continue;
        services++;
        if ((err = scan_service(s, de->d_name, &list, &n, &cap, now)) != 0)
            break;
    }
    closedir(d);
    if (err)
        goto out;
    if (n > 1)
        qsort(list, n, sizeof *list, cmp_until);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += list[i].bytes;
    size_t first = 0;
    while (first < n && ((s->max_age_s > 0 && (double)(now - list[first].until) > s->max_age_s) ||
                         (s->max_bytes > 0 && total > s->max_bytes))) {
        total -= list[first].bytes;
        delete_window(s, &list[first]);
        first++;
    }
    s->stats.bytes_kept = total;
    s->stats.windows_kept = n - first;

    json_object *idx = json_object_new_object(), *arr = json_object_new_array();
    if (!idx || !arr) {
        json_object_put(idx);
        json_object_put(arr);
        err = SCRY_E_NOMEM;
        goto out;
    }
    json_object_object_add(idx, "version", json_object_new_int(1));
    json_object_object_add(idx, "generated", json_object_new_int64(now));
    json_object_object_add(idx, "windows", arr);
    for (size_t i = first; i < n; i++) {
        if (!list[i].complete)
            continue;
        json_object *m = read_meta(s, &list[i]);
        if (!m)
            continue;
        json_object_object_add(m, "bytes", json_object_new_int64((int64_t)list[i].bytes));
        json_object_array_add(arr, m);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/index.json", s->dir);
    const char *text = json_object_to_json_string_ext(idx, JSON_C_TO_STRING_PLAIN);
    err = serve_write_atomic(path, text, strlen(text));
    json_object_put(idx);
out:
    free(list);
    return err;
}
