/* ring_consumer.c - creates, feeds and drains the shim ring (see ring_consumer.h). */
#include "ring_consumer.h"

#include "scry_err.h"
#include "layout.h"
#include "scry_time.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RINGC_MAX_FILE   ((uint64_t)1 << 30)
#define RINGC_MAX_SIZE   ((uint64_t)1 << 47) /* no block or copy is bigger */
#define RINGC_MAX_WEIGHT ((uint64_t)1 << 56)
#define RINGC_REC_FLAGS                                                                            \
    (SCRY_RING_REC_TRUNCATED | SCRY_RING_REC_UNTRACKED | SCRY_RING_REC_NOGIL |                     \
     SCRY_RING_REC_REALLOC)

struct ringc {
    char *path;
    void *mem;
    size_t len;
    struct scry_ring_header *hdr;
    struct scry_ring_record *recs;
    uint64_t nrecords; /* private copies: never re-read from the shared header */
    uint64_t tail;
    uint64_t stall_ns;
    uint64_t stall_pos; /* position we are waiting on, and since when */
    uint64_t stall_since;
    int created;
    int adopted; /* made by the target's shim (ringc_adopt): disabled when freed */
    int unlinked;
    int fd; /* a memfd ring's descriptor (for a launched child to inherit), else -1 */
    ringc_stats_t st;
};

static void set_err(int *err, int e)
{
    if (err)
        *err = e;
}

uint64_t ringc_records_for(uint64_t bytes)
{
    if (bytes == 0)
        bytes = SCRY_RING_DEFAULT_BYTES;
    if (bytes > RINGC_MAX_FILE)
        bytes = RINGC_MAX_FILE;
    uint64_t n = SCRY_RING_MIN_RECORDS;
    while (n < SCRY_RING_MAX_RECORDS &&
           SCRY_RING_HEADER_SIZE + 2 * n * sizeof(struct scry_ring_record) <= bytes)
        n *= 2;
    return n;
}

int ringc_layout_from_pystate(const struct pystate_layout *pl, struct scry_ring_layout *out)
{
    if (!pl || !out)
        return SCRY_E_INVAL;
    memset(out, 0xff, sizeof *out);
    out->reserved = 0;
    out->py_major = pl->major;
    out->py_minor = pl->minor;
    out->frame_style = pl->frame_style;
    out->tstate_frame = pl->tstate_frame;
    out->cframe_current_frame = pl->cframe_current_frame;
    out->frame_back = pl->frame_back;
    out->frame_code = pl->frame_code;
    out->frame_lasti = pl->frame_lasti;
    out->iframe_code = pl->iframe_code;
    out->iframe_previous = pl->iframe_previous;
    out->iframe_instr = pl->iframe_instr;
    out->iframe_owner = pl->iframe_owner;
    out->iframe_is_entry = pl->iframe_is_entry;
    out->code_adaptive = pl->code_adaptive;
    return 0;
}

/* A handle with nothing mapped yet (no descriptor, the default stall); NULL without
 * memory. */
static ringc_t *ring_alloc(void)
{
    ringc_t *r = calloc(1, sizeof *r);
    if (r) {
        r->fd = -1;
        r->stall_ns = 1000000000ull;
    }
    return r;
}

/* Ends the opening of R: closes FD (when >= 0) and stores E in *ERR. Returns R when E is 0;
 * else frees R (which may be NULL or half made) and returns NULL. */
static ringc_t *opened(ringc_t *r, int fd, int e, int *err)
{
    if (fd >= 0)
        close(fd);
    set_err(err, e);
    if (e) {
        ringc_free(r);
        return NULL;
    }
    return r;
}

ringc_t *ringc_create(const ringc_params_t *p, int *err)
{
    ringc_t *r = NULL;
    int fd = -1, e = SCRY_E_INVAL;
    if (!p || (p->path && !*p->path))
        goto fail;
    e = SCRY_E_NOMEM;
    r = ring_alloc();
    if (!r || (p->path && !(r->path = strdup(p->path))))
        goto fail;
    r->nrecords = ringc_records_for(p->ring_bytes);
    r->len = SCRY_RING_HEADER_SIZE + r->nrecords * sizeof(struct scry_ring_record);
    if (p->stall_ns)
        r->stall_ns = p->stall_ns;
    if (p->path)
        fd = open(p->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    else
        fd = memfd_create("scry-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        e = (errno == EACCES || errno == EPERM) ? SCRY_E_PERM : SCRY_E_IO;
        goto fail;
    }
    r->created = 1;
    r->unlinked = !p->path;
    e = SCRY_E_IO;
    if (ftruncate(fd, (off_t)r->len) != 0)
        goto fail;
    /* A memfd is sealed to its size: the target that maps it cannot shrink it under our
     * mapping (SIGBUS in scry). */
    if (!p->path && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        goto fail;
    if (p->path && p->uid >= 0 && fchown(fd, (uid_t)p->uid, (gid_t)p->gid) != 0) {
        e = SCRY_E_PERM;
        goto fail;
    }
    r->mem = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r->mem == MAP_FAILED) {
        r->mem = NULL;
        goto fail;
    }
    if (p->path)
        close(fd);
    else
        r->fd = fd;
    fd = -1;
    r->hdr = r->mem;
    r->recs = (struct scry_ring_record *)((char *)r->mem + SCRY_RING_HEADER_SIZE);
    scry_ring_init(r->mem, r->len, r->nrecords, p->alloc_mean, p->copy_mean, p->target_pid,
                   &p->layout, scry_now_ns(), p->enabled);
    r->st.nrecords = r->nrecords;
    return opened(r, -1, 0, err);
fail:
    return opened(r, fd, e, err);
}

/* Maps FD (not consumed) read-write into R and validates the header. Returns 0 or a code. */
static int map_existing(ringc_t *r, int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < SCRY_RING_HEADER_SIZE ||
        (uint64_t)sb.st_size > RINGC_MAX_FILE)
        return SCRY_E_CORRUPT;
    r->len = (size_t)sb.st_size;
    r->mem = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r->mem == MAP_FAILED) {
        r->mem = NULL;
        return SCRY_E_IO;
    }
    r->hdr = r->mem;
    struct scry_ring_header *h = r->hdr;
    uint64_t n = h->nrecords;
    if (h->magic != SCRY_RING_MAGIC || h->version != SCRY_RING_VERSION ||
        h->header_size != SCRY_RING_HEADER_SIZE ||
        h->record_size != sizeof(struct scry_ring_record) || n < SCRY_RING_MIN_RECORDS ||
        n > SCRY_RING_MAX_RECORDS || (n & (n - 1)) != 0 ||
        SCRY_RING_HEADER_SIZE + n * sizeof(struct scry_ring_record) > r->len)
        return SCRY_E_CORRUPT;
    r->nrecords = n;
    r->recs = (struct scry_ring_record *)((char *)r->mem + SCRY_RING_HEADER_SIZE);
    /* Resume where the consumer left off, if that looks sane; else at the oldest slot. */
    r->tail = h->consumer_tail;
    r->st.nrecords = n;
    return 0;
}

ringc_t *ringc_open(const char *path, int *err)
{
    if (!path)
        return opened(NULL, -1, SCRY_E_INVAL, err);
    ringc_t *r = ring_alloc();
    if (!r || !(r->path = strdup(path)))
        return opened(r, -1, SCRY_E_NOMEM, err);
    int e, fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        e = errno == ENOENT ? SCRY_E_NOTFOUND : SCRY_E_IO;
    else
        e = map_existing(r, fd);
    return opened(r, fd, e, err);
}

ringc_t *ringc_adopt(int fd, int *err)
{
    if (fd < 0)
        return opened(NULL, -1, SCRY_E_INVAL, err);
    /* Made by the target: it must be a memfd sealed to its size, or the target could shrink
     * it under our mapping (SIGBUS here). */
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) != (F_SEAL_SHRINK | F_SEAL_SEAL))
        return opened(NULL, fd, SCRY_E_CORRUPT, err);
    ringc_t *r = ring_alloc();
    if (!r)
        return opened(NULL, fd, SCRY_E_NOMEM, err);
    r->adopted = 1;
    int e = map_existing(r, fd);
    r->tail = 0; /* a new ring: nothing consumed yet */
    return opened(r, fd, e, err);
}

void ringc_free(ringc_t *r)
{
    if (!r)
        return;
    if (r->mem) {
        if (r->created || r->adopted)
            __atomic_store_n(&r->hdr->enabled, 0, __ATOMIC_RELEASE);
        munmap(r->mem, r->len);
    }
    if (r->created && !r->unlinked && r->path)
        unlink(r->path);
    if (r->fd >= 0)
        close(r->fd);
    free(r->path);
    free(r);
}

static int plausible_code(uint64_t p)
{
    return p >= 4096 && p < ((uint64_t)1 << 47) && (p & 7) == 0;
}

/* Validates the private copy C of the record for position POS into EV. Returns 0 or -1. */
static int validate(ringc_t *r, const struct scry_ring_record *c, uint64_t pos, ringc_event_t *ev)
{
    if (c->pos != pos || c->kind < SCRY_RING_ALLOC || c->kind > SCRY_RING_COPY ||
        c->origin > SCRY_RING_ORIGIN_NATIVE || c->nframes > SCRY_RING_MAX_FRAMES ||
        (c->flags & ~RINGC_REC_FLAGS) != 0 || c->tid <= 0 || c->time_ns == 0 ||
        c->size > RINGC_MAX_SIZE || c->weight == 0 || c->weight > RINGC_MAX_WEIGHT ||
        c->weight < c->size || (c->kind != SCRY_RING_COPY && c->addr == 0))
        return -1;
    ev->kind = c->kind;
    ev->origin = c->origin;
    ev->flags = c->flags;
    ev->size = c->size;
    ev->weight = c->weight;
    ev->addr = c->addr;
    ev->time_ns = c->time_ns;
    ev->tid = c->tid;
    uint32_t n = 0;
    for (; n < c->nframes; n++) {
        if (!plausible_code(c->code[n]))
            break;
        ev->frames[n].code = c->code[n];
        ev->frames[n].instr_offset = c->instr[n];
    }
    if (n < c->nframes) {
        ev->flags |= SCRY_RING_REC_TRUNCATED;
        r->st.frames_trimmed++;
    }
    ev->nframes = n;
    return 0;
}

int ringc_poll(ringc_t *r, ringc_event_t *out, size_t max, size_t *n)
{
    if (!r || !n || (!out && max))
        return SCRY_E_INVAL;
    *n = 0;
    struct scry_ring_header *h = r->hdr;
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != SCRY_RING_MAGIC ||
        __atomic_load_n(&h->version, __ATOMIC_RELAXED) != SCRY_RING_VERSION)
        return SCRY_E_CORRUPT;
    uint64_t mask = r->nrecords - 1, budget = max + r->nrecords;
    struct scry_ring_record copy;
    while (*n < max && budget-- > 0) {
        struct scry_ring_record *rec = &r->recs[r->tail & mask];
        uint64_t seq = __atomic_load_n(&rec->seq, __ATOMIC_ACQUIRE);
        if (seq == r->tail + 1) { /* committed */
            memcpy(&copy, rec, sizeof copy);
            __atomic_store_n(&rec->seq, r->tail + r->nrecords, __ATOMIC_RELEASE);
            if (validate(r, &copy, r->tail, &out[*n]) == 0) {
                ++*n;
                r->st.consumed++;
            } else {
                r->st.bad_records++;
            }
            r->tail++;
            r->stall_since = 0;
            continue;
        }
        uint64_t head = __atomic_load_n(&h->head, __ATOMIC_RELAXED);
        int claimed = (int64_t)(head - r->tail) > 0;
        if (seq == r->tail) {
            if (!claimed)
                break; /* empty */
            /* claimed but not committed yet: a producer is writing, or died writing */
            uint64_t t = scry_now_ns();
            if (r->stall_since == 0 || r->stall_pos != r->tail) {
                r->stall_pos = r->tail;
                r->stall_since = t;
                break;
            }
            if (t - r->stall_since < r->stall_ns)
                break;
            uint64_t expect = r->tail;
            if (__atomic_compare_exchange_n(&rec->seq, &expect, r->tail + r->nrecords, 0,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                r->st.stalled++;
                r->tail++;
                r->stall_since = 0;
            }
            continue; /* if the CAS failed, the producer committed just now: re-read */
        }
        /* impossible commit word: a hostile or corrupted ring */
        r->st.bad_seq++;
        if (claimed) {
            __atomic_store_n(&rec->seq, r->tail + r->nrecords, __ATOMIC_RELEASE);
            r->tail++;
        } else {
            __atomic_store_n(&rec->seq, r->tail, __ATOMIC_RELEASE); /* free for producers */
            break;
        }
    }
    __atomic_store_n(&h->consumer_tail, r->tail, __ATOMIC_RELAXED);
    return 0;
}

int ringc_heartbeat(ringc_t *r)
{
    if (!r)
        return SCRY_E_INVAL;
    __atomic_store_n(&r->hdr->consumer_tail, r->tail, __ATOMIC_RELAXED);
    __atomic_store_n(&r->hdr->heartbeat_ns, scry_now_ns(), __ATOMIC_RELEASE);
    return 0;
}

int ringc_set_enabled(ringc_t *r, int enabled)
{
    if (!r)
        return SCRY_E_INVAL;
    __atomic_store_n(&r->hdr->enabled, enabled ? 1u : 0u, __ATOMIC_RELEASE);
    return 0;
}

int ringc_set_layout(ringc_t *r, const struct scry_ring_layout *layout)
{
    if (!r || !layout)
        return SCRY_E_INVAL;
    if (__atomic_load_n(&r->hdr->enabled, __ATOMIC_ACQUIRE))
        return SCRY_E_AGAIN;
    r->hdr->layout = *layout;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    return 0;
}

int ringc_set_means(ringc_t *r, uint64_t alloc_mean, uint64_t copy_mean)
{
    if (!r)
        return SCRY_E_INVAL;
    __atomic_store_n(&r->hdr->alloc_mean, alloc_mean, __ATOMIC_RELAXED);
    __atomic_store_n(&r->hdr->copy_mean, copy_mean, __ATOMIC_RELAXED);
    return 0;
}

int ringc_fd(const ringc_t *r)
{
    return r ? r->fd : -1;
}

int ringc_set_target_pid(ringc_t *r, int32_t pid)
{
    if (!r || !r->created || pid < 0)
        return SCRY_E_INVAL;
    if (__atomic_load_n(&r->hdr->enabled, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&r->hdr->owner_pid, __ATOMIC_ACQUIRE) != 0)
        return SCRY_E_AGAIN;
    __atomic_store_n(&r->hdr->target_pid, pid, __ATOMIC_RELEASE);
    return 0;
}

int ringc_unlink(ringc_t *r)
{
    if (!r || !r->path)
        return SCRY_E_INVAL;
    if (r->unlinked)
        return 0;
    if (unlink(r->path) != 0 && errno != ENOENT)
        return SCRY_E_IO;
    r->unlinked = 1;
    return 0;
}

int ringc_stats(const ringc_t *r, ringc_stats_t *s)
{
    if (!r || !s)
        return SCRY_E_INVAL;
    *s = r->st;
    const struct scry_ring_header *h = r->hdr;
    for (int k = 0; k < SCRY_RING_NKINDS; k++) {
        s->sampled_events[k] = __atomic_load_n(&h->sampled_events[k], __ATOMIC_RELAXED);
        s->sampled_weight[k] = __atomic_load_n(&h->sampled_weight[k], __ATOMIC_RELAXED);
        s->dropped_events[k] = __atomic_load_n(&h->dropped_events[k], __ATOMIC_RELAXED);
        s->dropped_weight[k] = __atomic_load_n(&h->dropped_weight[k], __ATOMIC_RELAXED);
    }
    s->untracked = __atomic_load_n(&h->untracked, __ATOMIC_RELAXED);
    s->attach_count = __atomic_load_n(&h->attach_count, __ATOMIC_RELAXED);
    s->owner_pid = __atomic_load_n(&h->owner_pid, __ATOMIC_RELAXED);
    s->shim_state = __atomic_load_n(&h->shim_state, __ATOMIC_RELAXED);
    return 0;
}

const char *ringc_path(const ringc_t *r)
{
    return r ? r->path : NULL;
}

void *ringc_mapping(ringc_t *r, size_t *len)
{
    if (!r)
        return NULL;
    if (len)
        *len = r->len;
    return r->mem;
}
