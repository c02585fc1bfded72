/* store.c - atomic window files with retention and an index. */
#include "store.h"
#include "scry_err.h"
#include "scry_grow.h"

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
    int dfd; /* the out-dir, checked and held (serve_dir_open) */
    gid_t gid;
    double max_age_s;
    uint64_t max_bytes;
    serve_store_stats_t stats;
};

/* A directory scry serve may keep files in: owned by its user (root) and
 * writable by nobody else. WORLD_STICKY allows a world-writable directory with the sticky
 * bit (/tmp: nobody else can rename or delete scry serve's entries there). */
static int dir_trusted(const struct stat *st, int world_sticky)
{
    if (!S_ISDIR(st->st_mode) || st->st_uid != geteuid())
        return 0;
    if (!(st->st_mode & (S_IWGRP | S_IWOTH)))
        return 1;
    return world_sticky && (st->st_mode & S_ISVTX);
}

/* Opens component NAME of directory DFD (no symbolic link followed), creating it with
 * MODE when missing (*CREATED set). Returns a descriptor or -1 (errno). */
static int open_component(int dfd, const char *name, mode_t mode, int *created)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 || errno != ENOENT)
        return fd;
    if (mkdirat(dfd, name, mode) == 0)
        *created = 1;
    else if (errno != EEXIST)
        return -1;
    return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Replaces REST (the path still to walk, starting at P inside it) by TARGET + "/" + P.
 * Returns 0 or -1 (too long). */
static int splice_link(char *rest, size_t restlen, const char *p, const char *target)
{
    char tmp[4096];
    int n = snprintf(tmp, sizeof tmp, "%s/%s", target, p);
    if (n < 0 || (size_t)n >= sizeof tmp || (size_t)n >= restlen)
        return -1;
    memcpy(rest, tmp, (size_t)n + 1);
    return 0;
}

DIR *serve_dir_stream(int fd)
{
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    rewinddir(d); /* a dup'ed descriptor shares its offset with the original */
    return d;
}

int serve_dir_open(const char *path, mode_t mode, gid_t gid, char *msg, size_t msglen)
{
    char rest[4096], comp[256], target[4096], last[256] = "/";
    int links = 0;
    if (path[0] != '/' || snprintf(rest, sizeof rest, "%s", path) >= (int)sizeof rest) {
        snprintf(msg, msglen, "%s: not an absolute path, or too long", path);
        return -1;
    }
    int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const char *p = rest;
    while (fd >= 0) {
        while (*p == '/')
            p++;
        size_t cl = strcspn(p, "/");
        struct stat st;
        /* every directory walked through is checked, the last one strictly */
        if (fstat(fd, &st) != 0 || !dir_trusted(&st, cl > 0)) {
            snprintf(msg, msglen,
                     "%s: refused: %s is not safe for the daemon's files (it must belong to "
                     "the daemon's user and be writable by nobody else%s)",
                     path, last, cl ? ", or be sticky like /tmp" : "");
            break;
        }
        if (cl == 0)
            return fd;
        if (cl >= sizeof comp) {
            snprintf(msg, msglen, "%s: a component is too long", path);
            break;
        }
        memcpy(comp, p, cl);
        comp[cl] = '\0';
        p += cl;
        while (*p == '/')
            p++;
        int final = *p == '\0';
        if (strcmp(comp, ".") == 0)
            continue;
        if (strcmp(comp, "..") == 0) {
            snprintf(msg, msglen, "%s: refused: '..' in the path", path);
            break;
        }
        if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
            /* a link is followed only when scry serve's user made it, in a directory
             * nobody else may write (checked above) */
            ssize_t tl = -1;
            if (st.st_uid == geteuid() && ++links <= 40)
                tl = readlinkat(fd, comp, target, sizeof target - 1);
            if (tl <= 0) {
                snprintf(msg, msglen, "%s: refused: %s is a symbolic link of another user", path,
                         comp);
                break;
            }
            target[tl] = '\0';
            if (splice_link(rest, sizeof rest, p, target) != 0) {
                snprintf(msg, msglen, "%s: the path is too long once %s is followed", path, comp);
                break;
            }
            p = rest;
            if (rest[0] == '/') {
                close(fd);
                fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                snprintf(last, sizeof last, "/");
            }
            continue;
        }
        int created = 0;
        int sub = open_component(fd, comp, final ? mode : 0755, &created);
        if (sub < 0) {
            snprintf(msg, msglen, "%s: cannot open or create %s: %s", path, comp,
                     errno == ELOOP || errno == ENOTDIR ? "not a directory" : strerror(errno));
            break;
        }
        if (created && final && gid != (gid_t)-1 &&
            (fchown(sub, (uid_t)-1, gid) != 0 || fchmod(sub, mode) != 0)) {
            snprintf(msg, msglen, "%s: cannot set its group: %s", path, strerror(errno));
            close(sub);
            break;
        }
        close(fd);
        fd = sub;
        snprintf(last, sizeof last, "%s", comp);
    }
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Opens (creating it) subdirectory NAME of DFD for window files: no symbolic link, owned by
 * scry serve's user, its mode and group set to MODE and GID. Returns a descriptor or -1. */
static int open_subdir(int dfd, const char *name, mode_t mode, gid_t gid)
{
    int created = 0;
    int fd = open_component(dfd, name, mode, &created);
    struct stat st;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() ||
        (gid != (gid_t)-1 && st.st_gid != gid && fchown(fd, (uid_t)-1, gid) != 0) ||
        ((st.st_mode & 07777) != mode && fchmod(fd, mode) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

int serve_write_at(int dfd, const char *name, const void *data, size_t len, mode_t mode, gid_t gid)
{
    char tmp[300];
    unsigned char r[8];
    if (getentropy(r, sizeof r) != 0 ||
        snprintf(tmp, sizeof tmp, ".tmp-%.200s-%02x%02x%02x%02x%02x%02x%02x%02x", name, r[0], r[1],
                 r[2], r[3], r[4], r[5], r[6], r[7]) >= (int)sizeof tmp)
        return SCRY_E_IO;
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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
    if ((gid != (gid_t)-1 && fchown(fd, (uid_t)-1, gid) != 0) || fchmod(fd, mode) != 0 ||
        fdatasync(fd) != 0)
        goto fail;
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (renameat(dfd, tmp, dfd, name) != 0)
        goto fail;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    unlinkat(dfd, tmp, 0);
    return SCRY_E_IO;
}

mode_t serve_file_mode(gid_t gid)
{
    return gid == (gid_t)-1 ? 0600 : 0640;
}

mode_t serve_dir_mode(gid_t gid)
{
    return gid == (gid_t)-1 ? 0700 : 0750;
}

serve_store_t *serve_store_new(const char *dir, double max_age_s, uint64_t max_bytes, gid_t gid,
                               char *msg, size_t msglen)
{
    int dfd = serve_dir_open(dir, serve_dir_mode(gid), gid, msg, msglen);
    if (dfd < 0)
        return NULL;
    serve_store_t *s = calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(dir))) {
        free(s);
        close(dfd);
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    s->dfd = dfd;
    s->gid = gid;
    s->max_age_s = max_age_s;
    s->max_bytes = max_bytes;
    return s;
}

void serve_store_free(serve_store_t *s)
{
    if (!s)
        return;
    close(s->dfd);
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
    char stem[200], name[300], rel[400];
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
    int sfd = open_subdir(s->dfd, w->service, serve_dir_mode(s->gid), s->gid);
    if (sfd < 0) {
        s->stats.write_errors++;
        return SCRY_E_IO;
    }
    if (w->container)
        snprintf(stem, sizeof stem, "%lld-%lld.%.12s", (long long)w->from, (long long)w->until,
                 w->container);
    else
        snprintf(stem, sizeof stem, "%lld-%lld", (long long)w->from, (long long)w->until);
    meta = w->labels ? json_object_get(w->labels) : json_object_new_object();
    files = json_object_new_object();
    if (!meta || !files) {
        err = SCRY_E_NOMEM;
        goto fail;
    }
    for (; written < w->n_files; written++) {
        const serve_store_file_t *f = &w->files[written];
        snprintf(name, sizeof name, "%s.%s", stem, f->ext);
        if (serve_write_at(sfd, name, f->data, f->len, serve_file_mode(s->gid), s->gid) != 0) {
            err = SCRY_E_IO;
            goto fail;
        }
        snprintf(rel, sizeof rel, "%s/%s", w->service, name);
        json_object_object_add(files, f->ext, json_object_new_string(rel));
    }
    json_object_object_add(meta, "service", json_object_new_string(w->service));
    if (w->container)
        json_object_object_add(meta, "container", json_object_new_string(w->container));
    json_object_object_add(meta, "from", json_object_new_int64(w->from));
    json_object_object_add(meta, "until", json_object_new_int64(w->until));
    json_object_object_add(meta, "files", files);
    files = NULL;
    const char *text = json_object_to_json_string_ext(meta, JSON_C_TO_STRING_PLAIN);
    snprintf(name, sizeof name, "%s.json", stem);
    if (serve_write_at(sfd, name, text, strlen(text), serve_file_mode(s->gid), s->gid) != 0) {
        err = SCRY_E_IO;
        goto fail;
    }
    json_object_put(meta);
    close(sfd);
    s->stats.windows_written++;
    return serve_store_prune(s, now);
fail:
    for (size_t i = 0; i < written; i++) {
        snprintf(name, sizeof name, "%s.%s", stem, w->files[i].ext);
        unlinkat(sfd, name, 0);
    }
    close(sfd);
    json_object_put(files);
    json_object_put(meta);
    s->stats.write_errors++;
    return err;
}

/* The directory of SERVICE in the store (no symbolic link followed), or -1. */
static int service_fd(serve_store_t *s, const char *service)
{
    return openat(s->dfd, service, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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
    file_ent_t *files = NULL;
    size_t nf = 0, fcap = 0;
    int err = 0;
    DIR *d = serve_dir_stream(service_fd(s, service));
    if (!d)
        return 0;
    int fd = dirfd(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL && nf < STORE_MAX_WINDOWS * 4) {
        struct stat st;
        if (strncmp(de->d_name, ".tmp-", 5) == 0 || strstr(de->d_name, ".tmp-")) {
            /* left by a crash mid-write (a live write is younger than a minute) */
            if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_mtime < now - 60)
                unlinkat(fd, de->d_name, 0);
            continue;
        }
        const char *ext = NULL;
        size_t stem = window_stem(de->d_name, &ext);
        if (stem == 0 || stem >= sizeof files->stem ||
            fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        file_ent_t *nl = scry_grow(files, &fcap, sizeof *nl, nf + 1, 64, SIZE_MAX);
        if (!nl) {
            err = SCRY_E_NOMEM;
            goto out;
        }
        files = nl;
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
            window_ent_t *nl = scry_grow(*list, cap, sizeof *nl, *n + 1, 64, SIZE_MAX);
            if (!nl) {
                err = SCRY_E_NOMEM;
                goto out;
            }
            *list = nl;
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
    char name[300];
    int fd = service_fd(s, w->service);
    for (size_t k = 0; fd >= 0 && k < sizeof known_ext / sizeof known_ext[0]; k++) {
        snprintf(name, sizeof name, "%s%s", w->stem, known_ext[k]);
        unlinkat(fd, name, 0);
    }
    if (fd >= 0)
        close(fd);
    s->stats.windows_pruned++;
    s->stats.bytes_pruned += w->bytes;
}

static json_object *read_meta(serve_store_t *s, const window_ent_t *w)
{
    char name[300];
    snprintf(name, sizeof name, "%s.json", w->stem);
    int dfd = service_fd(s, w->service);
    int fd = dfd >= 0 ? openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
    struct stat st;
    json_object *o = NULL;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= STORE_META_MAX)
        o = json_object_from_fd(fd);
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
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
    DIR *d = serve_dir_stream(dup(s->dfd));
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
    const char *text = json_object_to_json_string_ext(idx, JSON_C_TO_STRING_PLAIN);
    err = serve_write_at(s->dfd, "index.json", text, strlen(text), serve_file_mode(s->gid), s->gid);
    json_object_put(idx);
out:
    free(list);
    return err;
}
