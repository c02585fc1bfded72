/* test_shim_ring.c - the ring protocol end to end: the shim's producer (shim_ring.c)
 * against the daemon's consumer (memprof/ring_consumer.c), and the consumer against
 * hostile rings: random bytes, wrong magic, absurd counts, torn records, wraparound,
 * full ring, many producers. */
#include "ring_consumer.h"
#include "scry_err.h"
#include "shim_internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static char path[128];

static ringc_t *make(uint64_t bytes, uint64_t stall_ns)
{
    static int n;
    snprintf(path, sizeof path, "/dev/shm/scry-unit-%d-%d", (int)getpid(), n++);
    ringc_params_t p = {0};
    p.path = path;
    p.ring_bytes = bytes;
    p.alloc_mean = 1000;
    p.copy_mean = 2000;
    p.uid = -1;
    p.enabled = 1;
    p.stall_ns = stall_ns;
    memset(&p.layout, 0xff, sizeof p.layout);
    int err = 1;
    ringc_t *r = ringc_create(&p, &err);
    CHECK(r && err == 0);
    return r;
}

static void view_of(ringc_t *r, shim_ring_view_t *v)
{
    size_t len;
    void *mem = ringc_mapping(r, &len);
    CHECK(shim__ring_view(mem, len, v) == 0);
}

/* Fills the claimed record R at POS like the shim does: KIND at ADDR, 10 bytes weighing
 * 100, thread 7, native, NFRAMES frames (code 0x100000 + 16 i, instruction 2 i). */
static void fill(struct scry_ring_record *r, uint64_t pos, uint64_t addr, uint8_t kind,
                 unsigned nframes)
{
    memset(&r->pos, 0, sizeof *r - offsetof(struct scry_ring_record, pos)); /* not seq */
    r->pos = pos;
    r->addr = addr;
    r->size = 10;
    r->weight = 100;
    r->time_ns = 1;
    r->tid = 7;
    r->kind = kind;
    r->origin = SCRY_RING_ORIGIN_NATIVE;
    r->nframes = (uint8_t)nframes;
    for (unsigned i = 0; i < nframes; i++) {
        r->code[i] = 0x100000 + 16 * i;
        r->instr[i] = (int32_t)i * 2;
    }
}

/* Produces one event like the shim does; returns 0 or -1 (dropped). */
static int produce(const shim_ring_view_t *v, uint64_t addr, uint8_t kind, unsigned nframes)
{
    uint64_t pos;
    struct scry_ring_record *r = shim__ring_claim(v, &pos);
    if (!r) {
        shim__ring_count(v, kind, 100, 1);
        return -1;
    }
    fill(r, pos, addr, kind, nframes);
    int lost = shim__ring_commit(r, pos);
    shim__ring_count(v, kind, 100, lost);
    return lost;
}

static size_t drain(ringc_t *r, ringc_event_t *ev, size_t max)
{
    size_t n = 0;
    CHECK(ringc_poll(r, ev, max, &n) == 0);
    return n;
}

static void test_roundtrip(void)
{
    ringc_t *r = make(0, 0);
    shim_ring_view_t v;
    view_of(r, &v);
    CHECK_INT(v.nrecords, ==, 16384);
    CHECK(produce(&v, 0x1000, SCRY_RING_ALLOC, 32) == 0);
    CHECK(produce(&v, 0x2000, SCRY_RING_COPY, 0) == 0);
    ringc_event_t ev[4];
    size_t n = drain(r, ev, 4);
    CHECK_INT(n, ==, 2);
    CHECK(ev[0].kind == SCRY_RING_ALLOC && ev[0].addr == 0x1000 && ev[0].nframes == 32);
    CHECK(ev[0].frames[31].code == 0x100000 + 16 * 31 && ev[0].frames[31].instr_offset == 62);
    CHECK(ev[0].weight == 100 && ev[0].size == 10 && ev[0].tid == 7);
    CHECK(ev[1].kind == SCRY_RING_COPY && ev[1].nframes == 0);
    CHECK(drain(r, ev, 4) == 0);
    ringc_stats_t st;
    CHECK(ringc_stats(r, &st) == 0);
    CHECK(st.consumed == 2 && st.sampled_events[SCRY_RING_ALLOC] == 1 &&
          st.sampled_weight[SCRY_RING_COPY] == 100 && st.bad_records == 0);
    /* controls */
    struct scry_ring_header *h = ringc_mapping(r, NULL);
    CHECK_INT(h->enabled, ==, 1);
    CHECK(ringc_set_enabled(r, 0) == 0 && h->enabled == 0);
    CHECK(ringc_set_means(r, 5, 6) == 0 && h->alloc_mean == 5 && h->copy_mean == 6);
    uint64_t hb = h->heartbeat_ns;
    usleep(1000);
    CHECK(ringc_heartbeat(r) == 0 && h->heartbeat_ns > hb);
    CHECK(access(path, F_OK) == 0);
    CHECK(ringc_unlink(r) == 0 && access(path, F_OK) != 0);
    CHECK(ringc_unlink(r) == 0);
    ringc_free(r);
    ringc_free(NULL);
}

static void test_wraparound_and_full(void)
{
    ringc_t *r = make(4096 + 8 * 448, 0); /* 8 records */
    shim_ring_view_t v;
    view_of(r, &v);
    CHECK_INT(v.nrecords, ==, 8);
    ringc_event_t ev[16];
    uint64_t next = 1;
    for (int round = 0; round < 5000; round++) {
        int k = 1 + round % 8;
        for (int i = 0; i < k; i++)
            CHECK(produce(&v, 16 * (next + (uint64_t)i), SCRY_RING_ALLOC, round % 33) == 0);
        size_t n = drain(r, ev, 16);
        CHECK(n == (size_t)k);
        for (size_t i = 0; i < n; i++)
            CHECK(ev[i].addr == 16 * next++);
    }
    /* full: exactly nrecords fit, the next is dropped, draining frees them again */
    for (int i = 0; i < 8; i++)
        CHECK(produce(&v, 0x10 * (uint64_t)(i + 1), SCRY_RING_FREE, 1) == 0);
    CHECK(produce(&v, 0x999990, SCRY_RING_FREE, 1) == -1);
    CHECK(drain(r, ev, 3) == 3);
    CHECK(drain(r, ev, 16) == 5);
    CHECK(produce(&v, 0x10, SCRY_RING_FREE, 1) == 0);
    CHECK(drain(r, ev, 16) == 1);
    ringc_stats_t st;
    ringc_stats(r, &st);
    CHECK(st.dropped_events[SCRY_RING_FREE] == 1 && st.bad_records == 0 && st.bad_seq == 0);
    ringc_free(r);
    CHECK(access(path, F_OK) != 0); /* free unlinks what it created */
}

static void test_torn(void)
{
    ringc_t *r = make(4096 + 16 * 448, 20 * 1000 * 1000); /* stall after 20 ms */
    shim_ring_view_t v;
    view_of(r, &v);
    ringc_event_t ev[16];
    uint64_t pos;
    struct scry_ring_record *torn = shim__ring_claim(&v, &pos);
    CHECK(torn != NULL);
    torn->pos = pos;
    torn->kind = SCRY_RING_ALLOC; /* ...and the producer stops here */
    CHECK(produce(&v, 0x5000, SCRY_RING_ALLOC, 2) == 0);
    CHECK(drain(r, ev, 16) == 0); /* blocked behind the torn record */
    CHECK(drain(r, ev, 16) == 0);
    usleep(30 * 1000);
    size_t n = drain(r, ev, 16);
    CHECK(n == 1 && ev[0].addr == 0x5000);
    CHECK(shim__ring_commit(torn, pos) == -1); /* the late producer loses its event */
    ringc_stats_t st;
    ringc_stats(r, &st);
    CHECK_INT(st.stalled, ==, 1);
    /* the skipped record is usable again on the next lap */
    for (int i = 0; i < 40; i++) {
        CHECK(produce(&v, 0x6000, SCRY_RING_COPY, 0) == 0);
        CHECK(drain(r, ev, 16) == 1);
    }
    ringc_free(r);
}

/* Claims a record of V and fills it valid (fill: at 0x1000, KIND, NFRAMES frames). NULL
 * when the ring is full. */
static struct scry_ring_record *claim_valid(shim_ring_view_t *v, uint64_t *pos, uint8_t kind,
                                            unsigned nframes)
{
    struct scry_ring_record *x = shim__ring_claim(v, pos);
    if (x)
        fill(x, *pos, 0x1000, kind, nframes);
    return x;
}

static void test_hostile_records(void)
{
    ringc_t *r = make(4096 + 64 * 448, 1000 * 1000);
    shim_ring_view_t v;
    view_of(r, &v);
    ringc_event_t ev[64];
    uint64_t pos;
    for (int bad = 0; bad < 9; bad++) {
        struct scry_ring_record *x = claim_valid(&v, &pos, SCRY_RING_ALLOC, 1);
        CHECK(x != NULL);
        switch (bad) {
        case 0:
            x->kind = 0;
            break;
        case 1:
            x->kind = 77;
            break;
        case 2:
            x->nframes = 200;
            break;
        case 3:
            x->pos = pos + 1;
            break;
        case 4:
            x->weight = 5;
            break; /* weight < size */
        case 5:
            x->tid = -1;
            break;
        case 6:
            x->origin = 9;
            break;
        case 7:
            x->size = ~0ull;
            x->weight = ~0ull;
            break;
        case 8:
            x->flags = 0x80;
            break;
        }
        CHECK(shim__ring_commit(x, pos) == 0);
    }
    /* a valid record whose third frame is garbage: kept, stack cut */
    struct scry_ring_record *x = claim_valid(&v, &pos, SCRY_RING_FREE, 5);
    x->code[2] = 0x4003; /* misaligned */
    CHECK(shim__ring_commit(x, pos) == 0);
    size_t n = drain(r, ev, 64);
    CHECK(n == 1 && ev[0].nframes == 2 && (ev[0].flags & SCRY_RING_REC_TRUNCATED));
    ringc_stats_t st;
    ringc_stats(r, &st);
    CHECK(st.bad_records == 9 && st.frames_trimmed == 1);
    ringc_free(r);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    return shim__rand64(&rng);
}

static void test_random_bytes(void)
{
    ringc_t *r = make(4096 + 256 * 448, 1000);
    size_t len;
    unsigned char *mem = ringc_mapping(r, &len);
    ringc_event_t ev[64];
    for (int round = 0; round < 200; round++) {
        /* scribble over the records area (and sometimes head) */
        for (size_t i = 4096; i < len; i += 8) {
            uint64_t x = rnd();
            if (round % 3 == 0)
                x %= 600; /* small numbers: plausible seq words */
            memcpy(mem + i, &x, 8);
        }
        struct scry_ring_header *h = (void *)mem;
        h->head = round % 2 ? rnd() : rnd() % 600;
        for (int i = 0; i < 20; i++) {
            size_t n = 0;
            CHECK(ringc_poll(r, ev, 64, &n) == 0);
            for (size_t k = 0; k < n; k++)
                CHECK(ev[k].kind >= 1 && ev[k].kind <= 3 && ev[k].nframes <= 32 &&
                      ev[k].weight >= ev[k].size);
        }
    }
    /* a producer can still use the ring after the consumer repaired it */
    struct scry_ring_header *h = (void *)mem;
    memset(mem + 4096, 0, len - 4096);
    ringc_stats_t st;
    ringc_stats(r, &st);
    CHECK(st.bad_seq > 0);
    /* wrong magic: unusable */
    h->magic ^= 1;
    size_t n = 5;
    CHECK(ringc_poll(r, ev, 64, &n) == SCRY_E_CORRUPT && n == 0);
    h->magic ^= 1;
    h->version = 99;
    CHECK(ringc_poll(r, ev, 64, &n) == SCRY_E_CORRUPT);
    CHECK(ringc_poll(NULL, ev, 64, &n) == SCRY_E_INVAL);
    CHECK(ringc_poll(r, NULL, 64, &n) == SCRY_E_INVAL);
    ringc_free(r);
}

static void write_file(const char *p, const void *data, size_t len)
{
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
    }
}

static void test_open_hostile(void)
{
    char p[128];
    snprintf(p, sizeof p, "/dev/shm/scry-unit-open-%d", (int)getpid());
    int err = 0;
    CHECK(ringc_open(p, &err) == NULL && err == SCRY_E_NOTFOUND);
    size_t len = 4096 + 16 * 448;
    unsigned char *buf = calloc(1, len);
    for (int round = 0; round < 100; round++) {
        for (size_t i = 0; i < len; i++)
            buf[i] = (unsigned char)rnd();
        write_file(p, buf, len);
        CHECK(ringc_open(p, &err) == NULL && err == SCRY_E_CORRUPT);
    }
    write_file(p, buf, 100); /* shorter than a header */
    CHECK(ringc_open(p, &err) == NULL && err == SCRY_E_CORRUPT);
    /* a valid header, then one field at a time made absurd */
    struct scry_ring_header h;
    for (int bad = 0; bad < 7; bad++) {
        memset(buf, 0, len);
        memset(&h, 0, sizeof h);
        h.magic = SCRY_RING_MAGIC;
        h.version = SCRY_RING_VERSION;
        h.header_size = SCRY_RING_HEADER_SIZE;
        h.record_size = sizeof(struct scry_ring_record);
        h.nrecords = 16;
        h.file_size = len;
        switch (bad) {
        case 1:
            h.magic = 0x1234;
            break;
        case 2:
            h.version = 2;
            break;
        case 3:
            h.nrecords = 1ull << 40;
            break;
        case 4:
            h.nrecords = 12;
            break;
        case 5:
            h.nrecords = 32;
            break; /* bigger than the file */
        case 6:
            h.record_size = 64;
            break;
        }
        memcpy(buf, &h, sizeof h);
        write_file(p, buf, len);
        ringc_t *r = ringc_open(p, &err);
        if (bad == 0) {
            CHECK(r != NULL && err == 0);
            shim_ring_view_t v;
            view_of(r, &v);
            /* seq words are all 0: only slot 0 is free; the consumer repairs the rest */
            ringc_event_t ev[4];
            for (int i = 0; i < 50; i++) {
                CHECK(produce(&v, 0x1000, SCRY_RING_ALLOC, 0) == 0 || 1);
                size_t n;
                CHECK(ringc_poll(r, ev, 4, &n) == 0);
            }
        } else {
            CHECK(r == NULL && err == SCRY_E_CORRUPT);
            /* the shim refuses the same header */
            shim_ring_view_t v;
            CHECK(shim__ring_view(buf, len, &v) != 0);
        }
        ringc_free(r);
        CHECK(access(p, F_OK) == 0); /* open never unlinks */
    }
    unlink(p);
    free(buf);
}

typedef struct prod_arg {
    shim_ring_view_t *v;
    int id;
    uint64_t produced, dropped;
} prod_arg_t;

#define PER_PRODUCER 100000

static void *producer(void *a)
{
    prod_arg_t *p = a;
    for (uint64_t i = 0; i < PER_PRODUCER; i++) {
        uint64_t addr = ((uint64_t)(p->id + 1) << 40) | (i << 4);
        if (produce(p->v, addr, SCRY_RING_ALLOC, (unsigned)(i % 4)) == 0)
            p->produced++;
        else
            p->dropped++;
        if (i % 64 == 63)
            usleep(20); /* let the consumer keep up most of the time */
    }
    return NULL;
}

static void test_many_producers(void)
{
    ringc_t *r = make(4096 + 1024 * 448, 0);
    shim_ring_view_t v;
    view_of(r, &v);
    enum { NP = 4 };
    pthread_t th[NP];
    prod_arg_t args[NP];
    for (int i = 0; i < NP; i++) {
        args[i] = (prod_arg_t){&v, i, 0, 0};
        pthread_create(&th[i], NULL, producer, &args[i]);
    }
    ringc_event_t *ev = calloc(512, sizeof *ev);
    uint64_t got = 0, last[NP] = {0}, order_ok = 1;
    int done = 0;
    for (int spins = 0; spins < 100000000; spins++) {
        size_t n = 0;
        ringc_poll(r, ev, 512, &n);
        for (size_t i = 0; i < n; i++) {
            int id = (int)(ev[i].addr >> 40) - 1;
            uint64_t seq = (ev[i].addr & ((1ull << 40) - 1)) >> 4;
            if (id < 0 || id >= NP) {
                order_ok = 0;
                continue;
            }
            if (last[id] && seq + 1 <= last[id])
                order_ok = 0; /* one producer's events arrive in order */
            last[id] = seq + 1;
        }
        got += n;
        if (done && n == 0)
            break; /* every producer joined and the ring drained */
        if (n == 0 && !done) {
            int alive = 0;
            for (int i = 0; i < NP; i++)
                alive += args[i].produced + args[i].dropped < PER_PRODUCER;
            if (!alive) {
                for (int i = 0; i < NP; i++)
                    pthread_join(th[i], NULL);
                done = 1;
            }
        }
    }
    uint64_t produced = 0, dropped = 0;
    for (int i = 0; i < NP; i++) {
        produced += args[i].produced;
        dropped += args[i].dropped;
    }
    ringc_stats_t st;
    ringc_stats(r, &st);
    printf("many producers: produced %llu dropped %llu consumed %llu\n",
           (unsigned long long)produced, (unsigned long long)dropped, (unsigned long long)got);
    CHECK(order_ok);
    CHECK(got == produced);
    CHECK(produced + dropped == (uint64_t)NP * PER_PRODUCER);
    CHECK(st.dropped_events[SCRY_RING_ALLOC] == dropped);
    CHECK(st.bad_records == 0 && st.bad_seq == 0 && st.stalled == 0);
    free(ev);
    ringc_free(r);
}

static void test_create_errors(void)
{
    int err = 0;
    CHECK(ringc_create(NULL, &err) == NULL && err == SCRY_E_INVAL);
    ringc_params_t p = {0};
    p.uid = -1;
    p.path = "/nonexistent-dir/ring";
    CHECK(ringc_create(&p, &err) == NULL && err == SCRY_E_IO);
    ringc_t *r = make(1, 0); /* tiny: the minimum record count */
    shim_ring_view_t v;
    view_of(r, &v);
    CHECK_INT(v.nrecords, ==, SCRY_RING_MIN_RECORDS);
    p.path = path; /* exists: O_EXCL */
    CHECK(ringc_create(&p, &err) == NULL && err == SCRY_E_IO);
    ringc_free(r);
}

/* A ring made by the target's shim (sealed memfd, scry_ring_init) is adopted; an unsealed
 * memfd or a regular file is refused (the target could shrink it under our mapping). */
static void test_adopt(void)
{
    uint64_t n = 64, len = SCRY_RING_HEADER_SIZE + n * sizeof(struct scry_ring_record);
    struct scry_ring_layout L;
    memset(&L, 0xff, sizeof L);
    for (int sealed = 0; sealed < 2; sealed++) {
        int fd = memfd_create("scry-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        CHECK(fd >= 0 && ftruncate(fd, (off_t)len) == 0);
        void *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        CHECK(mem != MAP_FAILED);
        CHECK(scry_ring_init(mem, len, n, 1000, 2000, (int32_t)getpid(), &L, 1, 0) == 0);
        CHECK(scry_ring_init(mem, len, n + 1, 1000, 2000, 0, &L, 1, 0) == -1);
        CHECK(scry_ring_init(mem, len - 1, n, 1000, 2000, 0, &L, 1, 0) == -1);
        if (sealed)
            CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0);
        int err = 0;
        ringc_t *r = ringc_adopt(dup(fd), &err);
        if (sealed) {
            CHECK(r != NULL && err == 0);
            ringc_stats_t st;
            CHECK(r && ringc_stats(r, &st) == 0 && st.nrecords == n);
            ringc_set_enabled(r, 1);
            ringc_free(r); /* disables it: the shim lets go */
            CHECK(__atomic_load_n(&((struct scry_ring_header *)mem)->enabled, __ATOMIC_ACQUIRE) ==
                  0);
        } else {
            CHECK(r == NULL && err == SCRY_E_CORRUPT);
        }
        munmap(mem, len);
        close(fd);
    }
    snprintf(path, sizeof path, "/dev/shm/scry-unit-adopt-%d", (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    unlink(path);
    int err = 0;
    CHECK(ringc_adopt(fd, &err) == NULL && err == SCRY_E_CORRUPT);
    CHECK(ringc_adopt(-1, &err) == NULL && err == SCRY_E_INVAL);
}

/* Launch mode's ring: a memfd (no path), sealed, target_pid settable until claimed; the
 * shim side maps it from the inherited descriptor ("fd:N") exactly as from a file. */
static void test_memfd_ring(void)
{
    ringc_params_t p = {0};
    p.uid = p.gid = -1;
    p.alloc_mean = 1000;
    p.copy_mean = 2000;
    memset(&p.layout, 0xff, sizeof p.layout);
    int err = -1;
    ringc_t *r = ringc_create(&p, &err);
    CHECK(r != NULL && err == 0);
    int fd = ringc_fd(r);
    CHECK(fd >= 0);
    CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    int seals = fcntl(fd, F_GET_SEALS);
    CHECK(seals >= 0 && (seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
                            (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
    CHECK(ftruncate(fd, 4096) != 0);        /* the target cannot shrink it under our mapping */
    CHECK(ringc_unlink(r) == SCRY_E_INVAL); /* nothing to unlink */
    CHECK_INT(ringc_set_target_pid(r, 1234), ==, 0);
    shim_ring_view_t v;
    view_of(r, &v);
    CHECK_INT(v.hdr->target_pid, ==, 1234);
    v.hdr->owner_pid = 1234; /* claimed: too late to change */
    CHECK_INT(ringc_set_target_pid(r, 99), ==, SCRY_E_AGAIN);
    CHECK_INT(ringc_set_target_pid(NULL, 1), ==, SCRY_E_INVAL);
    CHECK(ringc_fd(NULL) == -1);
    ringc_free(r);
}

int main(void)
{
    test_adopt();
    test_roundtrip();
    test_wraparound_and_full();
    test_torn();
    test_hostile_records();
    test_random_bytes();
    test_open_hostile();
    test_many_producers();
    test_create_errors();
    test_memfd_ring();
    return check_summary("test_shim_ring");
}
