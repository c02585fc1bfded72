/* push.c - the push: spool on disk, one sending thread, libcurl; the protocol is a backend
 * (push_backend.h). */
#include "push.h"
#include "log.h"
#include "push_backend.h"
#include "scry_err.h"
#include "scry_time.h"
#include "store.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PUSH_MAX_ENTRIES 100000
#define PUSH_QUERY_MAX   4096
#define PUSH_SECRET_MAX  4096
#define PUSH_PROFILE_MAX (256u << 20) /* a spooled window larger than this is dropped */

/* The backends, by serve_push_opts_t.backend; the first is the default. */
static const serve_push_backend_t *const push_backends[] = {&serve_push_pyroscope};

struct serve_push {
    const serve_push_backend_t *backend;
    char *url, *user, *password_file, *token_file, *tenant, *spool_dir;
    int spool_fd; /* the spool directory, checked and held (serve_dir_open) */
    double timeout_s, backoff_max_s;
    uint64_t spool_max_bytes;
    uint64_t next_seq;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
    uint64_t wake; /* bumped by enqueue */
    serve_push_stats_t stats;
};

typedef struct spool_ent {
    uint64_t seq;
    uint64_t bytes;
} spool_ent_t;

static int cmp_seq(const void *a, const void *b)
{
    const spool_ent_t *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Lists the complete spool entries (a SEQ.query with its SEQ.pb.gz) in order. Incomplete
 * leftovers older than a minute are removed. Returns the count (<= PUSH_MAX_ENTRIES) or a
 * negative code; *OUT is malloc'ed. */
static int spool_list(int dfd, spool_ent_t **out, uint64_t *max_seq)
{
    *out = NULL;
    DIR *d = serve_dir_stream(dup(dfd));
    if (!d)
        return SCRY_E_IO;
    spool_ent_t *list = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    char path[64];
    time_t now = time(NULL);
    while ((de = readdir(d)) != NULL) {
        char *end;
        if (!isdigit((unsigned char)de->d_name[0])) {
            if (strncmp(de->d_name, ".tmp-", 5) == 0) {
                struct stat st;
                if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    st.st_mtime < now - 60)
                    unlinkat(dfd, de->d_name, 0);
            }
            continue;
        }
        uint64_t seq = strtoull(de->d_name, &end, 10);
        if (max_seq && seq > *max_seq)
            *max_seq = seq;
        if (strcmp(end, ".query") != 0)
            continue;
        struct stat qs, ps;
        snprintf(path, sizeof path, "%llu.pb.gz", (unsigned long long)seq);
        if (fstatat(dfd, path, &ps, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(ps.st_mode))
            continue;
        snprintf(path, sizeof path, "%llu.query", (unsigned long long)seq);
        if (fstatat(dfd, path, &qs, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(qs.st_mode))
            continue;
        if (n >= PUSH_MAX_ENTRIES)
            break;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 32;
            spool_ent_t *nl = realloc(list, nc * sizeof *nl);
            if (!nl) {
                free(list);
                closedir(d);
                return SCRY_E_NOMEM;
            }
            list = nl, cap = nc;
        }
        list[n].seq = seq;
        list[n].bytes = (uint64_t)qs.st_size + (uint64_t)ps.st_size;
        n++;
    }
    closedir(d);
    if (n > 1)
        qsort(list, n, sizeof *list, cmp_seq);
    *out = list;
    return (int)n;
}

static void spool_remove(int dfd, uint64_t seq)
{
    char name[64];
    snprintf(name, sizeof name, "%llu.query", (unsigned long long)seq);
    unlinkat(dfd, name, 0);
    snprintf(name, sizeof name, "%llu.pb.gz", (unsigned long long)seq);
    unlinkat(dfd, name, 0);
}

/* The contents of regular file NAME in directory DFD (no symbolic link followed), at most
 * MAX bytes (malloc'ed, NUL-terminated; *LEN its length), or NULL. */
static char *spool_read(int dfd, const char *name, size_t max, size_t *len)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    char *buf = NULL;
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max ||
        !(buf = malloc((size_t)st.st_size + 1)))
        goto out;
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    *len = got;
out:
    close(fd);
    return buf;
}

/* Reads a whole small file (at most MAX-1 bytes) into BUF, trailing newlines removed.
 * Returns the length or -1. */
static ssize_t read_file(const char *path, char *buf, size_t max)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, max - 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad)
        return -1;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    return (ssize_t)n;
}

static void update_spool_stats(serve_push_t *p)
{
    spool_ent_t *list;
    int n = spool_list(p->spool_fd, &list, NULL);
    uint64_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += list[i].bytes;
    free(list);
    pthread_mutex_lock(&p->lock);
    p->stats.spooled = n > 0 ? (uint64_t)n : 0;
    p->stats.spool_bytes = bytes;
    pthread_mutex_unlock(&p->lock);
}

static size_t discard_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    (void)ptr, (void)ud;
    return size * nmemb;
}

static int progress_cb(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    serve_push_t *p = ud;
    pthread_mutex_lock(&p->lock);
    int stop = p->stop;
    pthread_mutex_unlock(&p->lock);
    return stop; /* non-zero aborts the transfer */
}

/* Sets the transfer's options on C, reset: those of every backend. */
static void request_reset(serve_push_t *p, CURL *c)
{
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(p->timeout_s * 1000));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(p->timeout_s * 1000));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_body);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress_cb);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, p);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "scry/0.1.0");
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
}

/* Adds the credentials to R: basic auth (the password file read now), a bearer token (its
 * file read now), the tenant in the backend's header. Returns 0, or -1 after a message when a
 * file cannot be read (the entry is retried). */
static int request_auth(serve_push_t *p, serve_push_request_t *r)
{
    char secret[PUSH_SECRET_MAX];
    if (p->user) {
        if (read_file(p->password_file, secret, sizeof secret) < 0) {
            serve_log("push: cannot read the password file %s: %s", p->password_file,
                      strerror(errno));
            return -1;
        }
        curl_easy_setopt(r->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(r->curl, CURLOPT_USERNAME, p->user);
        curl_easy_setopt(r->curl, CURLOPT_PASSWORD, secret);
        memset(secret, 0, sizeof secret);
    }
    if (p->token_file) {
        char hdr[PUSH_SECRET_MAX + 32];
        if (read_file(p->token_file, secret, sizeof secret) <= 0 || strpbrk(secret, "\r\n")) {
            serve_log("push: cannot read a token from %s", p->token_file);
            memset(secret, 0, sizeof secret);
            return -1;
        }
        snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", secret);
        r->headers = curl_slist_append(r->headers, hdr);
        memset(secret, 0, sizeof secret);
        memset(hdr, 0, sizeof hdr);
    }
    if (p->tenant) {
        char hdr[512];
        snprintf(hdr, sizeof hdr, "%s: %s", p->backend->tenant_header, p->tenant);
        r->headers = curl_slist_append(r->headers, hdr);
    }
    return 0;
}

/* Sends spool entry SEQ through the backend. Returns the HTTP status, or -1 for a transport
 * error (or a credential file that cannot be read), or 0 when the entry is unreadable (to be
 * dropped). */
static long post_entry(serve_push_t *p, CURL *c, uint64_t seq)
{
    char name[64];
    long status = -1;
    serve_push_request_t r = {.curl = c};
    size_t qlen = 0, plen = 0;
    snprintf(name, sizeof name, "%llu.query", (unsigned long long)seq);
    char *query = spool_read(p->spool_fd, name, PUSH_QUERY_MAX, &qlen), *prof = NULL;
    while (qlen > 0 && (query[qlen - 1] == '\n' || query[qlen - 1] == '\r'))
        query[--qlen] = '\0';
    if (!query || qlen == 0) {
        free(query);
        return 0;
    }
    snprintf(name, sizeof name, "%llu.pb.gz", (unsigned long long)seq);
    request_reset(p, c);
    if (!(prof = spool_read(p->spool_fd, name, PUSH_PROFILE_MAX, &plen)) ||
        p->backend->prepare(&r, p->url, query, prof, plen) != 0) {
        status = 0;
        goto out;
    }
    if (request_auth(p, &r) != 0)
        goto out;
    r.headers = curl_slist_append(r.headers, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, r.headers);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else
        status = -1;
out:
    free(query);
    free(prof);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(c, CURLOPT_MIMEPOST, NULL);
    curl_mime_free(r.mime);
    curl_slist_free_all(r.headers);
    return status;
}

static void *push_thread(void *arg)
{
    serve_push_t *p = arg;
    CURL *c = curl_easy_init();
    double backoff = 0;
    int down = 0;
    if (!c) {
        serve_log("push: cannot initialise libcurl; windows stay in the spool");
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&p->lock);
        if (p->stop) {
            pthread_mutex_unlock(&p->lock);
            break;
        }
        pthread_mutex_unlock(&p->lock);
        spool_ent_t *list = NULL;
        int n = spool_list(p->spool_fd, &list, NULL);
        uint64_t seq = n > 0 ? list[0].seq : 0;
        free(list);
        double wait_s = 1.0;
        if (n > 0) {
            long status = post_entry(p, c, seq);
            pthread_mutex_lock(&p->lock);
            p->stats.attempts++;
            p->stats.last_status = (int)status;
            pthread_mutex_unlock(&p->lock);
            enum serve_push_verdict v = status == 0  ? SERVE_PUSH_REJECT
                                        : status < 0 ? SERVE_PUSH_RETRY
                                                     : p->backend->classify(status);
            if (v == SERVE_PUSH_DONE) {
                /* counted before the spool empties: serve_push_drain's caller reads them */
                pthread_mutex_lock(&p->lock);
                p->stats.pushed++;
                pthread_mutex_unlock(&p->lock);
                spool_remove(p->spool_fd, seq);
                if (down)
                    serve_log("push: %s reachable again; sending the spool", p->url);
                down = 0;
                backoff = 0;
                wait_s = 0;
            } else if (v == SERVE_PUSH_REJECT) {
                serve_log("push: window %llu rejected (%s %ld); dropped", (unsigned long long)seq,
                          status ? "HTTP" : "unreadable", status);
                pthread_mutex_lock(&p->lock);
                p->stats.rejected++;
                pthread_mutex_unlock(&p->lock);
                spool_remove(p->spool_fd, seq);
                wait_s = 0;
            } else {
                backoff = backoff == 0 ? 0.5 : backoff * 2;
                if (backoff > p->backoff_max_s)
                    backoff = p->backoff_max_s;
                if (!down) {
                    char why[32];
                    if (status < 0)
                        snprintf(why, sizeof why, "no answer");
                    else
                        snprintf(why, sizeof why, "HTTP %ld", status);
                    serve_log("push: %s failed (%s); keeping windows in the spool, retrying "
                              "with backoff",
                              p->url, why);
                }
                down = 1;
                pthread_mutex_lock(&p->lock);
                p->stats.failures++;
                pthread_mutex_unlock(&p->lock);
                wait_s = backoff;
            }
            update_spool_stats(p);
        }
        if (wait_s > 0) {
            pthread_mutex_lock(&p->lock);
            uint64_t wake = p->wake;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(wait_s * 1e9);
            ts.tv_sec += (time_t)(ns / 1000000000u);
            ts.tv_nsec = (long)(ns % 1000000000u);
            /* new work wakes an idle thread at once; a failing server keeps its backoff */
            while (!p->stop && (down || p->wake == wake))
                if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT)
                    break;
            pthread_mutex_unlock(&p->lock);
        }
    }
    curl_easy_cleanup(c);
    return NULL;
}

static char *dup_or_null(const char *s)
{
    return s && s[0] ? strdup(s) : NULL;
}

serve_push_t *serve_push_new(const serve_push_opts_t *o, char *msg, size_t msglen)
{
    if (serve_curl_load(msg, msglen) != 0)
        return NULL;
    const serve_push_backend_t *backend = NULL;
    for (size_t i = 0; i < sizeof push_backends / sizeof push_backends[0] && !backend; i++)
        if (!o->backend || strcmp(o->backend, push_backends[i]->name) == 0)
            backend = push_backends[i];
    if (!backend) {
        snprintf(msg, msglen, "push: no backend named %s", o->backend);
        return NULL;
    }
    serve_push_t *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    p->backend = backend;
    p->url = dup_or_null(o->url);
    p->user = dup_or_null(o->user);
    p->password_file = dup_or_null(o->password_file);
    p->token_file = dup_or_null(o->token_file);
    p->tenant = dup_or_null(o->tenant);
    p->spool_dir = dup_or_null(o->spool_dir);
    p->spool_fd = -1;
    p->timeout_s = o->timeout_s > 0 ? o->timeout_s : 10;
    p->backoff_max_s = o->backoff_max_s > 0 ? o->backoff_max_s : 10;
    p->spool_max_bytes = o->spool_max_bytes;
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (!p->url || !p->spool_dir) {
        snprintf(msg, msglen, "push: a URL and a spool directory are needed");
        goto fail;
    }
    if (p->tenant && strpbrk(p->tenant, "\r\n")) {
        snprintf(msg, msglen, "push: the tenant id has a line break");
        goto fail;
    }
    if ((p->spool_fd = serve_dir_open(p->spool_dir, 0700, (gid_t)-1, msg, msglen)) < 0)
        goto fail;
    spool_ent_t *list;
    uint64_t max_seq = 0;
    int n = spool_list(p->spool_fd, &list, &max_seq);
    if (n < 0) {
        snprintf(msg, msglen, "%s: cannot list the spool", p->spool_dir);
        goto fail;
    }
    free(list);
    p->next_seq = max_seq + 1;
    if (n > 0)
        serve_log("push: %d windows left in the spool by an earlier run; sending them first", n);
    update_spool_stats(p);
    if (pthread_create(&p->thread, NULL, push_thread, p) != 0) {
        snprintf(msg, msglen, "push: cannot start the sending thread");
        goto fail;
    }
    p->thread_started = 1;
    return p;
fail:
    serve_push_free(p);
    return NULL;
}

void serve_push_free(serve_push_t *p)
{
    if (!p)
        return;
    if (p->thread_started) {
        pthread_mutex_lock(&p->lock);
        p->stop = 1;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
        pthread_join(p->thread, NULL);
    }
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    if (p->spool_fd >= 0)
        close(p->spool_fd);
    free(p->url);
    free(p->user);
    free(p->password_file);
    free(p->token_file);
    free(p->tenant);
    free(p->spool_dir);
    free(p);
}

/* Drops the oldest entries until the spool (plus INCOMING bytes) fits the limit. */
static void enforce_limit(serve_push_t *p, uint64_t incoming)
{
    if (p->spool_max_bytes == 0)
        return;
    spool_ent_t *list;
    int n = spool_list(p->spool_fd, &list, NULL);
    if (n < 0)
        return;
    uint64_t total = incoming;
    for (int i = 0; i < n; i++)
        total += list[i].bytes;
    uint64_t dropped = 0;
    for (int i = 0; i < n && total > p->spool_max_bytes; i++) {
        spool_remove(p->spool_fd, list[i].seq);
        total -= list[i].bytes;
        dropped++;
    }
    free(list);
    if (dropped) {
        pthread_mutex_lock(&p->lock);
        p->stats.dropped += dropped;
        uint64_t all = p->stats.dropped;
        pthread_mutex_unlock(&p->lock);
        serve_log("push: spool over its limit of %llu bytes: dropped the %llu oldest windows "
                  "(%llu dropped in all)",
                  (unsigned long long)p->spool_max_bytes, (unsigned long long)dropped,
                  (unsigned long long)all);
    }
}

int serve_push_enqueue(serve_push_t *p, const char *service, const serve_push_label_t *labels,
                       size_t n_labels, int64_t from, int64_t until, double rate_hz,
                       const void *pprof, size_t len)
{
    char query[PUSH_QUERY_MAX], file[64];
    serve_push_window_t w = {service, labels, n_labels, from, until, rate_hz};
    int q = p->backend->encode(&w, query, sizeof query);
    if (q < 0)
        return q;
    enforce_limit(p, len + (uint64_t)q);
    pthread_mutex_lock(&p->lock);
    uint64_t seq = p->next_seq++;
    pthread_mutex_unlock(&p->lock);
    snprintf(file, sizeof file, "%llu.pb.gz", (unsigned long long)seq);
    if (serve_write_at(p->spool_fd, file, pprof, len, 0600, (gid_t)-1) != 0)
        return SCRY_E_IO;
    snprintf(file, sizeof file, "%llu.query", (unsigned long long)seq);
    if (serve_write_at(p->spool_fd, file, query, (size_t)q, 0600, (gid_t)-1) != 0) {
        spool_remove(p->spool_fd, seq);
        return SCRY_E_IO;
    }
    update_spool_stats(p);
    pthread_mutex_lock(&p->lock);
    p->wake++;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

int serve_push_drain(serve_push_t *p, double timeout_s)
{
    uint64_t t0 = scry_now_ns();
    for (;;) {
        spool_ent_t *list;
        int n = spool_list(p->spool_fd, &list, NULL);
        free(list);
        if (n <= 0) {
            /* the push thread updates the counts after it removes a window: the caller may
             * read them before it did (spooled 1 with the spool empty, CI) */
            update_spool_stats(p);
            return 0;
        }
        if ((double)(scry_now_ns() - t0) * 1e-9 >= timeout_s)
            return SCRY_E_TIMEOUT;
        struct timespec nap = {0, 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
}

void serve_push_stats(serve_push_t *p, serve_push_stats_t *out)
{
    pthread_mutex_lock(&p->lock);
    *out = p->stats;
    pthread_mutex_unlock(&p->lock);
}
