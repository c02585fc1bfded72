/* shim_ring.c - the producer side of the ring (see common/scry_ring.h for the protocol). */
#include "shim_internal.h"

#define CLAIM_TRIES 16

int shim__ring_view(void *mem, uint64_t len, shim_ring_view_t *view)
{
    struct scry_ring_header *h = mem;
    if (!mem || len < SCRY_RING_HEADER_SIZE)
        return -1;
    uint64_t n = __atomic_load_n(&h->nrecords, __ATOMIC_RELAXED);
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != SCRY_RING_MAGIC ||
        h->version != SCRY_RING_VERSION || h->header_size != SCRY_RING_HEADER_SIZE ||
        h->record_size != sizeof(struct scry_ring_record))
        return -1;
    if (n < SCRY_RING_MIN_RECORDS || n > SCRY_RING_MAX_RECORDS || (n & (n - 1)) != 0)
        return -1;
    uint64_t need = SCRY_RING_HEADER_SIZE + n * sizeof(struct scry_ring_record);
    if (need > len || h->file_size != need)
        return -1;
    view->hdr = h;
    view->recs = (struct scry_ring_record *)((char *)mem + SCRY_RING_HEADER_SIZE);
    view->nrecords = n;
    view->map_len = len;
    return 0;
}

struct scry_ring_record *shim__ring_claim(const shim_ring_view_t *v, uint64_t *pos)
{
    uint64_t mask = v->nrecords - 1;
    uint64_t p = __atomic_load_n(&v->hdr->head, __ATOMIC_RELAXED);
    for (int tries = 0; tries < CLAIM_TRIES; tries++) {
        struct scry_ring_record *r = &v->recs[p & mask];
        uint64_t seq = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
        int64_t dif = (int64_t)(seq - p);
        if (dif == 0) {
            if (__atomic_compare_exchange_n(&v->hdr->head, &p, p + 1, 1, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED)) {
                *pos = p;
                return r;
            }
            /* p now holds the new head: retry */
        } else if (dif < 0) {
            return NULL; /* full: the consumer has not freed this record yet */
        } else {
            p = __atomic_load_n(&v->hdr->head, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

int shim__ring_commit(struct scry_ring_record *rec, uint64_t pos)
{
    uint64_t expect = pos;
    return __atomic_compare_exchange_n(&rec->seq, &expect, pos + 1, 0, __ATOMIC_RELEASE,
                                       __ATOMIC_RELAXED)
               ? 0
               : -1;
}

void shim__ring_count(const shim_ring_view_t *v, unsigned kind, uint64_t weight, int dropped)
{
    struct scry_ring_header *h = v->hdr;
    if (kind >= SCRY_RING_NKINDS)
        kind = 0;
    __atomic_fetch_add(&h->sampled_events[kind], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&h->sampled_weight[kind], weight, __ATOMIC_RELAXED);
    if (dropped) {
        __atomic_fetch_add(&h->dropped_events[kind], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&h->dropped_weight[kind], weight, __ATOMIC_RELAXED);
    }
}
