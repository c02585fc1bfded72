/* fuzz_shim_ringconsumer.c - the daemon's ring consumer (memprof/ring_consumer.c) over a ring
 * whose every byte the target wrote: header, commit words, records. The ring is handed over
 * as in attach mode (ringc_adopt of a sealed memfd), then drained: any content gives a
 * usable ring or SCRY_E_CORRUPT, polls that end (bounded work) and events whose fields are
 * in the ranges ring_consumer.h promises; never a read outside the mapping, never a crash.
 *
 * Input: byte 0 flags, byte 1 record count and poll size, then the header image
 * (sizeof(struct scry_ring_header) bytes), then the records, repeated to fill the ring.
 *   flags bit 0: keep the header as given (else magic, version, sizes, nrecords made valid)
 *         bit 1: commit words of the records set to their lap-0 values (records committed)
 *         bit 2: head set past the records (claimed, as a producer would)
 *         bit 3: the file is one record shorter than the header says
 *         bit 4: between polls, the last 16 input bytes rewrite the commit word and head
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "ring_consumer.h"
#include "scry_err.h"

#define REC sizeof(struct scry_ring_record)

static int sealed_memfd(const uint8_t *img, size_t len)
{
    int fd = memfd_create("fuzz-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)len) != 0 || pwrite(fd, img, len, 0) != (ssize_t)len ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void check_event(const ringc_event_t *e)
{
    FUZZ_ASSERT(e->kind >= SCRY_RING_ALLOC && e->kind <= SCRY_RING_COPY);
    FUZZ_ASSERT(e->origin <= SCRY_RING_ORIGIN_NATIVE);
    FUZZ_ASSERT(e->nframes <= SCRY_RING_MAX_FRAMES);
    FUZZ_ASSERT(e->tid > 0 && e->time_ns != 0);
    FUZZ_ASSERT(e->weight != 0 && e->weight >= e->size);
    FUZZ_ASSERT(e->kind == SCRY_RING_COPY || e->addr != 0);
    for (uint32_t i = 0; i < e->nframes; i++)
        FUZZ_ASSERT(e->frames[i].code >= 4096 && e->frames[i].code < (1ull << 47) &&
                    (e->frames[i].code & 7) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t flags = 0, shape = 0;
    fuzz_take(&data, &size, &flags, 1);
    fuzz_take(&data, &size, &shape, 1);
    struct scry_ring_header h;
    fuzz_take(&data, &size, &h, sizeof h);
    uint64_t nrec = (uint64_t)SCRY_RING_MIN_RECORDS << (shape & 3); /* 4..32 */
    if (!(flags & 1)) {
        h.magic = SCRY_RING_MAGIC;
        h.version = SCRY_RING_VERSION;
        h.header_size = SCRY_RING_HEADER_SIZE;
        h.record_size = (uint32_t)REC;
        h.nrecords = nrec;
        h.file_size = SCRY_RING_HEADER_SIZE + nrec * REC;
    }
    size_t len = SCRY_RING_HEADER_SIZE + (size_t)nrec * REC - ((flags & 8) ? REC : 0);
    uint8_t *img = calloc(1, len);
    if (!img)
        return 0;
    memcpy(img, &h, sizeof h);
    size_t body = len - SCRY_RING_HEADER_SIZE;
    for (size_t off = 0; size && off < body; off += size)
        memcpy(img + SCRY_RING_HEADER_SIZE + off, data, body - off < size ? body - off : size);
    uint64_t whole = body / REC;
    for (uint64_t i = 0; i < whole; i++) {
        struct scry_ring_record *r = (void *)(img + SCRY_RING_HEADER_SIZE + i * REC);
        if (flags & 2) {
            r->seq = i + 1;
            r->pos = i;
        }
    }
    if (flags & 4) {
        struct scry_ring_header *hh = (void *)img;
        hh->head = whole;
    }
    int fd = sealed_memfd(img, len);
    free(img);
    if (fd < 0)
        return 0;
    int err = 0;
    ringc_t *r = ringc_adopt(fd, &err); /* consumes fd */
    FUZZ_ASSERT((r != NULL) == (err == 0));
    if (!r) {
        FUZZ_ASSERT(err == SCRY_E_CORRUPT || err == SCRY_E_IO || err == SCRY_E_NOMEM);
        return 0;
    }
    size_t maplen = 0;
    uint8_t *map = ringc_mapping(r, &maplen);
    FUZZ_ASSERT(map && maplen == len);
    size_t max = 1 + (shape >> 2); /* 1..64 */
    ringc_event_t *ev = calloc(max, sizeof *ev);
    if (!ev) {
        ringc_free(r);
        return 0;
    }
    uint64_t got = 0;
    for (int poll = 0; poll < 8; poll++) {
        size_t n = 12345;
        int rc = ringc_poll(r, ev, max, &n);
        FUZZ_ASSERT(rc == 0 || rc == SCRY_E_CORRUPT);
        FUZZ_ASSERT(n <= max);
        if (rc)
            FUZZ_ASSERT(n == 0);
        for (size_t i = 0; i < n; i++)
            check_event(&ev[i]);
        got += n;
        if ((flags & 16) && size >= 16) { /* the producer side moves under us */
            uint64_t w[2];
            memcpy(w, data + size - 16, 16);
            struct scry_ring_header *hh = (void *)map;
            uint64_t slot = (w[0] >> 32) % whole;
            struct scry_ring_record *rec = (void *)(map + SCRY_RING_HEADER_SIZE + slot * REC);
            __atomic_store_n(&rec->seq, w[0] & 0xffffffffu, __ATOMIC_RELEASE);
            __atomic_store_n(&hh->head, w[1], __ATOMIC_RELAXED);
        }
    }
    ringc_stats_t st;
    FUZZ_ASSERT(ringc_stats(r, &st) == 0);
    FUZZ_ASSERT(st.consumed == got);
    FUZZ_ASSERT(st.nrecords == nrec || (flags & 1));
    free(ev);
    ringc_free(r);
    return 0;
}
