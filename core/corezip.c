/* corezip.c - mapping a core file, decompressing it first when it is compressed. */
#include "corezip.h"

#include "scry_err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef CORE_HAVE_ZSTD
#include <zstd.h>
#endif
#ifdef CORE_HAVE_LZ4
#include <lz4frame.h>
#endif
#ifdef CORE_HAVE_LZMA
#include <lzma.h>
#endif

#define CHUNK ((size_t)1 << 20)

enum zip_kind { ZIP_NONE, ZIP_ZSTD, ZIP_LZ4, ZIP_XZ };

static const char *const zip_names[] = {"plain", "zstd", "lz4", "xz"};

static int kind_of(const uint8_t *m, size_t n)
{
    static const uint8_t zstd[4] = {0x28, 0xb5, 0x2f, 0xfd};
    static const uint8_t lz4[4] = {0x04, 0x22, 0x4d, 0x18};
    static const uint8_t xz[6] = {0xfd, '7', 'z', 'X', 'Z', 0x00};
    if (n >= 4 && !memcmp(m, zstd, 4))
        return ZIP_ZSTD;
    if (n >= 4 && !memcmp(m, lz4, 4))
        return ZIP_LZ4;
    if (n >= 6 && !memcmp(m, xz, 6))
        return ZIP_XZ;
    return ZIP_NONE;
}

/* Where decompressed bytes go: a memfd written in order. */
typedef struct sink {
    int fd;
    size_t len;
    size_t max;   /* bytes accepted */
    uint8_t *out; /* CHUNK bytes the decoders decompress into */
} sink_t;

/* What a decompressed core may take: COREZIP_MAX_BYTES, and half the memory (a memfd lives
 * in memory; a zstd bomb must not push the machine into swap). */
static size_t sink_max(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t half = pages > 0 && page > 0 ? (size_t)pages / 2 * (size_t)page : COREZIP_MAX_BYTES;
    return half < COREZIP_MAX_BYTES ? half : COREZIP_MAX_BYTES;
}

static int sink_put(sink_t *s, const void *buf, size_t n)
{
    if (n > s->max - s->len)
        return SCRY_E_TOOBIG;
    const char *p = buf;
    while (n) {
        ssize_t w = write(s->fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return errno == ENOSPC || errno == ENOMEM ? SCRY_E_NOMEM : SCRY_E_IO;
        p += w;
        n -= (size_t)w;
        s->len += (size_t)w;
    }
    return 0;
}

#ifdef CORE_HAVE_ZSTD
static int unzstd(const uint8_t *in, size_t n, sink_t *s)
{
    ZSTD_DStream *z = ZSTD_createDStream();
    uint8_t *out = s->out;
    int rc = SCRY_E_NOMEM;
    if (!z)
        goto out;
    ZSTD_initDStream(z);
    ZSTD_inBuffer ib = {in, n, 0};
    size_t last = 1;
    rc = 0;
    while (!rc && (ib.pos < ib.size || last != 0)) {
        ZSTD_outBuffer ob = {out, CHUNK, 0};
        size_t before = ib.pos;
        last = ZSTD_decompressStream(z, &ob, &ib);
        if (ZSTD_isError(last)) {
            rc = SCRY_E_CORRUPT;
            break;
        }
        rc = sink_put(s, out, ob.pos);
        if (!rc && ob.pos == 0 && ib.pos == before)
            rc = last ? SCRY_E_CORRUPT : 0; /* truncated stream, or done */
        if (last == 0 && ib.pos == ib.size)
            break;
    }
out:
    ZSTD_freeDStream(z);
    return rc;
}
#endif

#ifdef CORE_HAVE_LZ4
static int unlz4(const uint8_t *in, size_t n, sink_t *s)
{
    LZ4F_dctx *d = NULL;
    uint8_t *out = s->out;
    int rc = SCRY_E_NOMEM;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)))
        goto out;
    size_t pos = 0, hint = 1;
    rc = 0;
    while (!rc && pos < n && hint != 0) {
        size_t olen = CHUNK, ilen = n - pos;
        hint = LZ4F_decompress(d, out, &olen, in + pos, &ilen, NULL);
        if (LZ4F_isError(hint)) {
            rc = SCRY_E_CORRUPT;
            break;
        }
        pos += ilen;
        rc = sink_put(s, out, olen);
        if (!rc && ilen == 0 && olen == 0)
            rc = SCRY_E_CORRUPT;
    }
    if (!rc && hint != 0)
        rc = SCRY_E_CORRUPT; /* the frame ended early */
out:
    LZ4F_freeDecompressionContext(d);
    return rc;
}
#endif

#ifdef CORE_HAVE_LZMA
static int unxz(const uint8_t *in, size_t n, sink_t *s)
{
    lzma_stream z = LZMA_STREAM_INIT;
    uint8_t *out = s->out;
    int rc = SCRY_E_NOMEM;
    if (lzma_stream_decoder(&z, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
        goto out;
    z.next_in = in;
    z.avail_in = n;
    rc = 0;
    for (;;) {
        z.next_out = out;
        z.avail_out = CHUNK;
        lzma_ret r = lzma_code(&z, LZMA_FINISH);
        if ((rc = sink_put(s, out, CHUNK - z.avail_out)) != 0)
            break;
        if (r == LZMA_STREAM_END)
            break;
        if (r != LZMA_OK) {
            rc = r == LZMA_MEM_ERROR ? SCRY_E_NOMEM : SCRY_E_CORRUPT;
            break;
        }
    }
out:
    lzma_end(&z);
    return rc;
}
#endif

static int unzip(int kind, const uint8_t *in, size_t n, sink_t *s)
{
    switch (kind) {
#ifdef CORE_HAVE_ZSTD
    case ZIP_ZSTD:
        return unzstd(in, n, s);
#endif
#ifdef CORE_HAVE_LZ4
    case ZIP_LZ4:
        return unlz4(in, n, s);
#endif
#ifdef CORE_HAVE_LZMA
    case ZIP_XZ:
        return unxz(in, n, s);
#endif
    default:
        (void)in;
        (void)n;
        (void)s;
        return SCRY_E_NOSYS;
    }
}

/* Decompresses the N bytes at IN of KIND into a new memfd, mapped into *MAP. */
static int map_unzipped(int kind, const uint8_t *in, size_t n, void **map, size_t *len, char *why,
                        size_t whylen)
{
    sink_t s = {.fd = memfd_create("scry-core", MFD_CLOEXEC), .max = sink_max()};
    if (s.fd < 0) {
        snprintf(why, whylen, "cannot create memory for the decompressed core: %s",
                 strerror(errno));
        return SCRY_E_NOMEM;
    }
    s.out = malloc(CHUNK);
    int rc = s.out ? unzip(kind, in, n, &s) : SCRY_E_NOMEM;
    free(s.out);
    if (!rc && s.len == 0)
        rc = SCRY_E_CORRUPT;
    if (!rc) {
        void *m = mmap(NULL, s.len, PROT_READ, MAP_PRIVATE, s.fd, 0);
        if (m == MAP_FAILED)
            rc = SCRY_E_NOMEM;
        else {
            *map = m;
            *len = s.len;
        }
    }
    close(s.fd);
    if (rc == SCRY_E_NOSYS)
        snprintf(why, whylen, "it is %s-compressed and scry was built without %s", zip_names[kind],
                 kind == ZIP_ZSTD  ? "libzstd"
                 : kind == ZIP_LZ4 ? "liblz4"
                                   : "liblzma");
    else if (rc == SCRY_E_TOOBIG)
        snprintf(why, whylen,
                 "decompressed it is larger than %zu MiB (half this machine's memory): "
                 "decompress it to a file first",
                 s.max >> 20);
    else if (rc == SCRY_E_CORRUPT)
        snprintf(why, whylen, "its %s stream does not decode (truncated or damaged)",
                 zip_names[kind]);
    else if (rc)
        snprintf(why, whylen, "cannot decompress it (%s): %s", zip_names[kind], scry_strerror(rc));
    return rc;
}

int corezip_map(const char *path, void **map, size_t *len, char *why, size_t whylen)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        snprintf(why, whylen, "cannot open %s: %s", path, strerror(e));
        return e == ENOENT ? SCRY_E_NOTFOUND : e == EACCES || e == EPERM ? SCRY_E_PERM : SCRY_E_IO;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        close(fd);
        snprintf(why, whylen, "%s is not a regular, non-empty file", path);
        return SCRY_E_NOTFILE;
    }
    size_t n = (size_t)st.st_size;
    void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(why, whylen, "cannot map %s: %s", path, strerror(errno));
        return SCRY_E_NOMEM;
    }
    int kind = kind_of(m, n);
    if (kind == ZIP_NONE) {
        *map = m;
        *len = n;
        return 0;
    }
    int rc = map_unzipped(kind, m, n, map, len, why, whylen);
    munmap(m, n);
    return rc;
}
