/* maps.c - parsing /proc/PID/maps. */
#include "maps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scry_err.h"
#include "scry_grow.h"

/* Largest maps file we are willing to read (1<<20 lines of ~250 bytes). */
#define MAPS_MAX_BYTES ((size_t)256 << 20)

struct elfsym_maps {
    elfsym_map_t *v;
    size_t n;
    size_t cap;
    char *pool; /* every path, NUL-terminated, back to back */
    size_t pool_len;
    size_t pool_cap;
    pid_t pid;
};

static const char deleted_suffix[] = " (deleted)";

static int pool_add(elfsym_maps_t *m, const char *s, size_t len, size_t *off)
{
    /* Consecutive mappings of one file share its path. */
    if (m->n > 0 && m->pool_len > 0) {
        size_t prev = (size_t)(uintptr_t)m->v[m->n - 1].path;
        if (strlen(m->pool + prev) == len && memcmp(m->pool + prev, s, len) == 0) {
            *off = prev;
            return 0;
        }
    }
    return scry_pool_put(&m->pool, &m->pool_len, &m->pool_cap, 4096, s, len, off);
}

/* Parses a hex number at *P (advancing it). Returns 0 or -1 when there is no digit. */
static int parse_hex(const char **p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    int digits = 0;
    while (*p < end && digits < 17) {
        char c = **p;
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            break;
        v = (v << 4) | (uint64_t)d;
        digits++;
        (*p)++;
    }
    if (digits == 0 || digits > 16)
        return -1;
    *out = v;
    return 0;
}

static int parse_dec(const char **p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    int digits = 0;
    while (*p < end && **p >= '0' && **p <= '9' && digits < 20) {
        v = v * 10 + (uint64_t)(**p - '0');
        digits++;
        (*p)++;
    }
    if (digits == 0)
        return -1;
    *out = v;
    return 0;
}

static int expect(const char **p, const char *end, char c)
{
    if (*p >= end || **p != c)
        return -1;
    (*p)++;
    return 0;
}

static void skip_spaces(const char **p, const char *end)
{
    while (*p < end && (**p == ' ' || **p == '\t'))
        (*p)++;
}

/* Parses one line [s, end) into E (path as an offset in the pool). Returns 0, 1 for a
 * malformed line to skip, or a negative code. */
static int parse_line(elfsym_maps_t *m, const char *s, const char *end, elfsym_map_t *e)
{
    const char *p = s;
    uint64_t start, stop, off, maj, min, ino;
    memset(e, 0, sizeof *e);
    if (parse_hex(&p, end, &start) || expect(&p, end, '-') || parse_hex(&p, end, &stop))
        return 1;
    skip_spaces(&p, end);
    if (end - p < 4)
        return 1;
    if (p[0] == 'r')
        e->perms |= ELFSYM_PERM_R;
    if (p[1] == 'w')
        e->perms |= ELFSYM_PERM_W;
    if (p[2] == 'x')
        e->perms |= ELFSYM_PERM_X;
    if (p[3] == 'p')
        e->perms |= ELFSYM_PERM_P;
    p += 4;
    skip_spaces(&p, end);
    if (parse_hex(&p, end, &off))
        return 1;
    skip_spaces(&p, end);
    if (parse_hex(&p, end, &maj) || expect(&p, end, ':') || parse_hex(&p, end, &min))
        return 1;
    skip_spaces(&p, end);
    if (parse_dec(&p, end, &ino))
        return 1;
    if (stop <= start)
        return 1;
    /* The path is the rest of the line after the padding; it may contain spaces. */
    skip_spaces(&p, end);
    size_t plen = (size_t)(end - p);
    size_t slen = sizeof deleted_suffix - 1;
    if (plen > slen && memcmp(end - slen, deleted_suffix, slen) == 0) {
        e->deleted = 1;
        plen -= slen;
    }
    e->start = start;
    e->end = stop;
    e->offset = off;
    e->dev_major = (uint32_t)maj;
    e->dev_minor = (uint32_t)min;
    e->inode = ino;
    size_t poff;
    int rc = pool_add(m, p, plen, &poff);
    if (rc)
        return rc;
    e->path = (const char *)(uintptr_t)poff;
    return 0;
}

static int push(elfsym_maps_t *m, const elfsym_map_t *e)
{
    elfsym_map_t *v = scry_grow(m->v, &m->cap, sizeof *v, m->n + 1, 64, SIZE_MAX);
    if (!v)
        return SCRY_E_NOMEM;
    m->v = v;
    m->v[m->n++] = *e;
    return 0;
}

elfsym_maps_t *elfsym_maps_parse(const char *text, size_t len, int *err)
{
    int rc = 0;
    size_t lines = 0;
    elfsym_maps_t *m = calloc(1, sizeof *m);
    if (!m) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (++lines > ELFSYM_MAPS_MAX_LINES) {
            rc = SCRY_E_TRUNC;
            goto out;
        }
        if ((size_t)(le - p) <= ELFSYM_MAPS_MAX_LINE && le > p) {
            elfsym_map_t e;
            rc = parse_line(m, p, le, &e);
            if (rc < 0)
                goto out;
            /* Keep the order strict: drop entries that overlap or go backwards (torn). */
            if (rc == 0 && (m->n == 0 || e.start >= m->v[m->n - 1].end)) {
                rc = push(m, &e);
                if (rc)
                    goto out;
            }
            rc = 0;
        }
        p = nl ? nl + 1 : end;
    }
    /* Turn pool offsets into pointers now that the pool no longer moves. */
    for (size_t i = 0; i < m->n; i++)
        m->v[i].path = m->pool ? m->pool + (uintptr_t)m->v[i].path : "";
out:
    if (rc) {
        elfsym_maps_free(m);
        m = NULL;
    }
    if (err)
        *err = rc;
    return m;
}

static int open_err(int e)
{
    if (e == ENOENT || e == ESRCH || e == ENOTDIR)
        return SCRY_E_NOPROC;
    if (e == EACCES || e == EPERM)
        return SCRY_E_PERM;
    if (e == ENOMEM)
        return SCRY_E_NOMEM;
    return SCRY_E_IO;
}

elfsym_maps_t *elfsym_maps_new(pid_t pid, int *err)
{
    char path[64];
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0, fd = -1;
    elfsym_maps_t *m = NULL;

    if (pid <= 0) {
        rc = SCRY_E_NOPROC;
        goto out;
    }
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = open_err(errno);
        goto out;
    }
    for (;;) {
        if (len + 65536 > cap) {
            size_t ncap = cap ? cap * 2 : 65536 * 2;
            if (ncap > MAPS_MAX_BYTES + 65536) {
                rc = SCRY_E_TRUNC;
                goto out;
            }
            char *nb = realloc(buf, ncap);
            if (!nb) {
                rc = SCRY_E_NOMEM;
                goto out;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = open_err(errno);
            goto out;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    m = elfsym_maps_parse(buf ? buf : "", len, &rc);
    if (m)
        m->pid = pid;
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    if (err)
        *err = rc;
    return m;
}

elfsym_maps_t *elfsym_maps_of(rmem_t *src, int *err)
{
    if (rmem_is_live(src))
        return elfsym_maps_new(rmem_pid(src), err);
    char *text = NULL;
    size_t len = 0;
    int rc = rmem_maps_text(src, &text, &len);
    elfsym_maps_t *m = rc ? NULL : elfsym_maps_parse(text, len, &rc);
    free(text);
    if (err)
        *err = rc;
    return m;
}

void elfsym_maps_free(elfsym_maps_t *m)
{
    if (!m)
        return;
    free(m->v);
    free(m->pool);
    free(m);
}

size_t elfsym_maps_count(const elfsym_maps_t *m)
{
    return m ? m->n : 0;
}

const elfsym_map_t *elfsym_maps_get(const elfsym_maps_t *m, size_t i)
{
    return (m && i < m->n) ? &m->v[i] : NULL;
}

long elfsym_maps_find_index(const elfsym_maps_t *m, raddr_t addr)
{
    if (!m || m->n == 0)
        return -1;
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->v[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const elfsym_map_t *e = &m->v[lo - 1];
    return addr < e->end ? (long)(lo - 1) : -1;
}

const elfsym_map_t *elfsym_maps_find(const elfsym_maps_t *m, raddr_t addr)
{
    long i = elfsym_maps_find_index(m, addr);
    return i < 0 ? NULL : &m->v[i];
}

pid_t elfsym_maps_pid(const elfsym_maps_t *m)
{
    return m ? m->pid : 0;
}

int elfsym_map_is_file(const elfsym_map_t *e)
{
    return e && e->inode != 0 && e->path[0] == '/';
}
