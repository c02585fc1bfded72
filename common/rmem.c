#include "rmem.h"

#include "scry_err.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

#define RMEM_IMAGE_MAX_REGIONS 65536

typedef struct rmem_region {
    raddr_t addr;
    size_t len;
    unsigned char *data;
} rmem_region_t;

struct rmem {
    pid_t pid;                       /* 0 for an image or a source */
    const rmem_source_ops_t *source; /* a source's functions, else NULL */
    void *source_ctx;
    /* /proc/PID/mem, opened where process_vm_readv is refused but the kernel grants ptrace
     * access (a seccomp profile: Docker's allows process_vm_readv only with
     * CAP_SYS_PTRACE); -1 not tried, -2 refused too */
    int memfd;
    rmem_region_t *regions;
    size_t nregions;
    rmem_stats_t stats;
};

rmem_t *rmem_open_pid(pid_t pid)
{
    rmem_t *m = calloc(1, sizeof *m);
    if (m) {
        m->pid = pid;
        m->memfd = -1;
    }
    return m;
}

rmem_t *rmem_open_image(void)
{
    return calloc(1, sizeof(rmem_t));
}

rmem_t *rmem_open_source(const rmem_source_ops_t *ops, void *ctx)
{
    if (!ops || !ops->read)
        return NULL;
    rmem_t *m = calloc(1, sizeof *m);
    if (m) {
        m->source = ops;
        m->source_ctx = ctx;
    }
    return m;
}

int rmem_is_live(const rmem_t *m)
{
    return m && m->pid != 0;
}

int rmem_maps_text(rmem_t *m, char **text, size_t *len)
{
    if (!m || !m->source || !m->source->maps || !text || !len)
        return SCRY_E_INVAL;
    return m->source->maps(m->source_ctx, text, len);
}

int rmem_file_path(rmem_t *m, const char *path, char *buf, size_t size)
{
    if (!m || !m->source || !m->source->file || !path || !buf || !size)
        return SCRY_E_INVAL;
    return m->source->file(m->source_ctx, path, buf, size);
}

int rmem_exe_path(rmem_t *m, char *buf, size_t size)
{
    if (!m || !m->source || !m->source->exe || !buf || !size)
        return SCRY_E_INVAL;
    return m->source->exe(m->source_ctx, buf, size);
}

int rmem_image_add(rmem_t *m, raddr_t addr, const void *data, size_t len)
{
    if (!m || m->pid != 0 || m->source || (!data && len))
        return SCRY_E_INVAL;
    if (m->nregions >= RMEM_IMAGE_MAX_REGIONS)
        return SCRY_E_NOMEM;
    rmem_region_t *r = realloc(m->regions, (m->nregions + 1) * sizeof *r);
    if (!r)
        return SCRY_E_NOMEM;
    m->regions = r;
    unsigned char *copy = malloc(len ? len : 1);
    if (!copy)
        return SCRY_E_NOMEM;
    if (len)
        memcpy(copy, data, len);
    m->regions[m->nregions++] = (rmem_region_t){.addr = addr, .len = len, .data = copy};
    return 0;
}

void rmem_free(rmem_t *m)
{
    if (!m)
        return;
    if (m->pid && m->memfd >= 0) /* only live readers have one (images: calloc's 0) */
        close(m->memfd);
    for (size_t i = 0; i < m->nregions; i++)
        free(m->regions[i].data);
    free(m->regions);
    if (m->source && m->source->free)
        m->source->free(m->source_ctx);
    free(m);
}

/* A source's read: LEN bytes or a fault. */
static int source_read(rmem_t *m, raddr_t addr, void *buf, size_t len)
{
    size_t got = m->source->read(m->source_ctx, addr, buf, len);
    m->stats.syscalls++;
    m->stats.bytes += got;
    if (got == len)
        return 0;
    m->stats.faults++;
    return SCRY_E_FAULT;
}

static int image_read(rmem_t *m, raddr_t addr, void *buf, size_t len)
{
    if (m->source)
        return source_read(m, addr, buf, len);
    for (size_t i = 0; i < m->nregions; i++) {
        const rmem_region_t *r = &m->regions[i];
        if (addr >= r->addr && addr - r->addr <= r->len && len <= r->len - (addr - r->addr)) {
            memcpy(buf, r->data + (addr - r->addr), len);
            return 0;
        }
    }
    m->stats.faults++;
    return SCRY_E_FAULT;
}

int rmem_read(rmem_t *m, raddr_t addr, void *buf, size_t len)
{
    rmem_iov_t one = {.addr = addr, .buf = buf, .len = len};
    int n = rmem_readv(m, &one, 1);
    if (n < 0)
        return n;
    return n == 1 ? 0 : SCRY_E_FAULT;
}

/* Whether reads go through /proc/PID/mem: after process_vm_readv failed with ERR, opens it
 * when ERR is SCRY_E_PERM (refused by a seccomp filter rather than by the kernel's ptrace
 * check, which the open repeats: a reader the kernel refuses stays refused). Returns 1 when
 * the fallback is open, else 0. */
static int memfd_usable(rmem_t *m, int err)
{
    if (m->memfd >= 0)
        return 1;
    if (err != SCRY_E_PERM || m->memfd == -2)
        return 0;
    char path[48];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)m->pid);
    m->memfd = open(path, O_RDONLY | O_CLOEXEC);
    if (m->memfd < 0) {
        m->memfd = -2;
        return 0;
    }
    return 1;
}

/* pread of LEN bytes at ADDR from /proc/PID/mem. Returns the bytes read (short at the first
 * unreadable page), or SCRY_E_GONE when the process has no memory left to read (exited;
 * after an exec the file is reopened once, as the new program's). */
static long memfd_read(rmem_t *m, raddr_t addr, void *buf, size_t len)
{
    size_t got = 0;
    for (int reopened = 0; got < len;) {
        m->stats.syscalls++;
        ssize_t n = pread(m->memfd, (char *)buf + got, len - got, (off_t)(addr + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;    /* EIO: an unmapped page */
        if (n == 0) { /* the file's address space is gone: exit or exec */
            if (got || reopened)
                break;
            close(m->memfd);
            m->memfd = -1;
            if (!memfd_usable(m, SCRY_E_PERM))
                return SCRY_E_GONE;
            reopened = 1;
            continue;
        }
        got += (size_t)n;
    }
    m->stats.bytes += got;
    return (long)got;
}

/* One process_vm_readv over at most IOV_MAX regions; returns regions completed or error. */
static int live_readv_chunk(rmem_t *m, const rmem_iov_t *iov, size_t n)
{
    struct iovec local[IOV_MAX > 1024 ? 1024 : IOV_MAX];
    struct iovec remote[IOV_MAX > 1024 ? 1024 : IOV_MAX];
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        local[i].iov_base = iov[i].buf;
        local[i].iov_len = iov[i].len;
        remote[i].iov_base = (void *)(uintptr_t)iov[i].addr;
        remote[i].iov_len = iov[i].len;
        total += iov[i].len;
    }
    ssize_t got = -1;
    if (m->memfd < 0) {
        m->stats.syscalls++;
        got = process_vm_readv(m->pid, local, n, remote, n, 0);
    }
    if (got < 0) {
        int err = m->memfd >= 0 ? 0 : scry_err_from_errno(errno);
        if (memfd_usable(m, err)) {
            for (size_t i = 0; i < n; i++) {
                long r = memfd_read(m, iov[i].addr, iov[i].buf, iov[i].len);
                if (r < 0)
                    return i ? (int)i : (int)r;
                if ((size_t)r < iov[i].len) {
                    m->stats.faults++;
                    return (int)i;
                }
            }
            return (int)n;
        }
        if (err == SCRY_E_FAULT)
            m->stats.faults++;
        return err;
    }
    m->stats.bytes += (uint64_t)got;
    if ((size_t)got == total)
        return (int)n;
    /* Partial: count the regions that arrived whole. */
    size_t done = 0, acc = 0;
    while (done < n && acc + iov[done].len <= (size_t)got) {
        acc += iov[done].len;
        done++;
    }
    m->stats.faults++;
    return (int)done;
}

int rmem_readv(rmem_t *m, const rmem_iov_t *iov, size_t n)
{
    if (!m || (!iov && n))
        return SCRY_E_INVAL;
    if (m->pid == 0) {
        for (size_t i = 0; i < n; i++) {
            if (image_read(m, iov[i].addr, iov[i].buf, iov[i].len) != 0)
                return (int)i;
        }
        return (int)n;
    }
    size_t done = 0;
    const size_t chunk = 1024;
    while (done < n) {
        size_t k = n - done < chunk ? n - done : chunk;
        /* Zero-length regions are fine for process_vm_readv. */
        int got = live_readv_chunk(m, iov + done, k);
        if (got < 0) {
            if (got == SCRY_E_FAULT)
                return (int)done;
            return done ? (int)done : got;
        }
        done += (size_t)got;
        if ((size_t)got < k)
            break;
    }
    return (int)done;
}

long rmem_read_partial(rmem_t *m, raddr_t addr, void *buf, size_t len)
{
    if (!m || (!buf && len))
        return SCRY_E_INVAL;
    if (len == 0)
        return 0;
    if (m->source) {
        size_t got = m->source->read(m->source_ctx, addr, buf, len);
        m->stats.syscalls++;
        m->stats.bytes += got;
        if (got < len)
            m->stats.faults++;
        return (long)got;
    }
    if (m->pid == 0) {
        for (size_t i = 0; i < m->nregions; i++) {
            const rmem_region_t *r = &m->regions[i];
            if (addr >= r->addr && addr - r->addr < r->len) {
                size_t room = r->len - (size_t)(addr - r->addr);
                size_t n = len < room ? len : room;
                memcpy(buf, r->data + (addr - r->addr), n);
                return (long)n;
            }
        }
        m->stats.faults++;
        return 0;
    }
    struct iovec local = {.iov_base = buf, .iov_len = len};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
    ssize_t got = -1;
    if (m->memfd < 0) {
        m->stats.syscalls++;
        got = process_vm_readv(m->pid, &local, 1, &remote, 1, 0);
    }
    if (got < 0) {
        int err = m->memfd >= 0 ? 0 : scry_err_from_errno(errno);
        if (memfd_usable(m, err)) {
            long r = memfd_read(m, addr, buf, len);
            if (r >= 0 && (size_t)r < len)
                m->stats.faults++;
            return r;
        }
        if (err != SCRY_E_FAULT)
            return err;
        m->stats.faults++;
        return 0;
    }
    m->stats.bytes += (uint64_t)got;
    if ((size_t)got < len)
        m->stats.faults++;
    return (long)got;
}

int rmem_read_cstr(rmem_t *m, raddr_t addr, char *buf, size_t max)
{
    if (!buf || max == 0)
        return SCRY_E_INVAL;
    size_t have = 0;
    /* Read in pieces that do not cross a 4 KiB page, so a string near the end of a
     * mapping is still readable. */
    while (have + 1 < max) {
        raddr_t a = addr + have;
        size_t room = 4096 - (size_t)(a & 4095);
        if (room > max - 1 - have)
            room = max - 1 - have;
        int err = rmem_read(m, a, buf + have, room);
        if (err)
            return err;
        void *nul = memchr(buf + have, 0, room);
        if (nul)
            return (int)((char *)nul - buf);
        have += room;
    }
    buf[max - 1] = 0;
    return (int)(max - 1);
}

rmem_stats_t rmem_stats(const rmem_t *m)
{
    return m->stats;
}

int rmem_write(rmem_t *m, raddr_t addr, const void *buf, size_t len)
{
    if (!m || !m->pid || (!buf && len))
        return SCRY_E_INVAL;
    struct iovec local = {(void *)(uintptr_t)buf, len};
    struct iovec remote = {(void *)(uintptr_t)addr, len};
    m->stats.syscalls++;
    ssize_t put = process_vm_writev(m->pid, &local, 1, &remote, 1, 0);
    if (put < 0)
        return scry_err_from_errno(errno);
    return (size_t)put == len ? 0 : SCRY_E_INVAL;
}

pid_t rmem_pid(const rmem_t *m)
{
    return m->pid;
}
