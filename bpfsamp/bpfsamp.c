/* bpfsamp.c - loading scry_walk.bpf.c and draining its ring (bpfsamp.h). */
#include "bpfsamp.h"

#include "scry_err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The offsets of one frame family: PyFrameObject chains (3.6-3.10) or _PyInterpreterFrame
 * chains (3.11+). */
static void family_cfg(const pystate_layout_t *L, struct bpfsamp_cfg *c)
{
    int objects = L->frame_style == PYSTATE_FRAMES_OBJECTS;
    *c = (struct bpfsamp_cfg){
        .tstate_frame = L->tstate_frame,
        /* 3.11/3.12 reach the frame through the cframe */
        .cframe_current_frame =
            L->frame_style == PYSTATE_FRAMES_311 || L->frame_style == PYSTATE_FRAMES_312
                ? L->cframe_current_frame
                : -1,
        .iframe_code = objects ? L->frame_code : L->iframe_code,
        .iframe_previous = objects ? L->frame_back : L->iframe_previous,
        .iframe_instr = objects ? L->frame_lasti : L->iframe_instr,
        .iframe_owner = objects ? 0 : L->iframe_owner,
        .code_adaptive = objects ? 0 : L->code_adaptive,
        .code_mask = ~(uint64_t)7, /* objects are 8-aligned: 3.14's tag bits off */
        /* FRAME_OWNED_BY_CSTACK: shim frames, 3.12+ (3.11 marks entries with is_entry) */
        .owner_cstack = L->frame_style >= PYSTATE_FRAMES_312 ? 3u : BPFSAMP_NO_OWNER,
        .instr_kind = !objects         ? BPFSAMP_INSTR_POINTER
                      : L->minor == 10 ? BPFSAMP_INSTR_LASTI_UNITS
                                       : BPFSAMP_INSTR_LASTI,
        .iframe_is_entry = objects ? -1 : L->iframe_is_entry,
    };
}

int bpfsamp_cfg_for(const pystate_layout_t *L, struct bpfsamp_cfg *out, char *why, size_t whylen)
{
    if (!L || L->major != 3) {
        snprintf(why, whylen, "the bpf sampler walks the frames of Python 3 only");
        return SCRY_E_UNSUPPORTED;
    }
    struct bpfsamp_cfg c;
    family_cfg(L, &c);
    /* The program copies each frame's header once and takes the fields from the copy:
     * pointers 8-aligned, f_lasti 4-aligned, all within BPFSAMP_FRAME_HDR_MAX bytes. */
    int lasti = c.instr_kind != BPFSAMP_INSTR_POINTER;
    int64_t f[5] = {c.iframe_code, c.iframe_previous, c.iframe_instr, c.iframe_owner,
                    c.iframe_is_entry >= 0 ? c.iframe_is_entry : 0};
    int64_t size[5] = {8, 8, lasti ? 4 : 8, 1, 1};
    int64_t end = 0;
    for (int i = 0; i < 5; i++) {
        if (f[i] < 0 || f[i] % size[i] || f[i] + size[i] > BPFSAMP_FRAME_HDR_MAX) {
            snprintf(why, whylen,
                     "the frame layout of Python %d.%d does not fit the bpf sampler's frame "
                     "copy",
                     L->major, L->minor);
            return SCRY_E_UNSUPPORTED;
        }
        if (f[i] + size[i] > end)
            end = f[i] + size[i];
    }
    if (c.tstate_frame < 0 || c.code_adaptive < 0 ||
        (L->frame_style >= PYSTATE_FRAMES_311 && L->frame_style <= PYSTATE_FRAMES_312 &&
         c.cframe_current_frame < 0)) {
        snprintf(why, whylen, "the layout of Python %d.%d lacks a frame offset", L->major,
                 L->minor);
        return SCRY_E_UNSUPPORTED;
    }
    c.frame_hdr_len = (uint32_t)end;
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0) { /* else the kernel's ids (no namespaces) */
        c.pidns_dev = (uint64_t)st.st_dev;
        c.pidns_ino = (uint64_t)st.st_ino;
    }
    *out = c;
    return 0;
}

const struct bpfsamp_native *bpfsamp_record_native(const struct bpfsamp_record *r)
{
    if (!r || !(r->flags & BPFSAMP_NATIVE))
        return NULL;
    return &((const struct bpfsamp_native_record *)(const void *)r)->n;
}

#ifndef SCRY_HAVE_BPF

struct bpfsamp {
    int unused;
};

int bpfsamp_open(const struct bpfsamp_cfg *cfg, bpfsamp_t **out, char *why, size_t whylen)
{
    (void)cfg;
    *out = NULL;
    snprintf(why, whylen,
             "this scry was built without the bpf sampler (clang, bpftool or "
             "libbpf-dev were missing at build time)");
    return SCRY_E_NOSYS;
}

void bpfsamp_free(bpfsamp_t *b)
{
    free(b);
}

int bpfsamp_prog_fd(const bpfsamp_t *b)
{
    (void)b;
    return -1;
}

int bpfsamp_set_threads(bpfsamp_t *b, const pid_t *tids, const uint64_t *tstates, size_t n)
{
    return SCRY_E_NOSYS;
}

int bpfsamp_set_cfg(bpfsamp_t *b, const struct bpfsamp_cfg *cfg)
{
    return SCRY_E_NOSYS;
}

int bpfsamp_put_threads(bpfsamp_t *b, const pid_t *tids, const uint64_t *tstates, size_t n)
{
    return SCRY_E_NOSYS;
}

void bpfsamp_drop_threads(bpfsamp_t *b, const pid_t *tids, size_t n) {}

int bpfsamp_read(bpfsamp_t *b, bpfsamp_record_fn cb, void *ctx)
{
    return SCRY_E_NOSYS;
}

void bpfsamp_counts(const bpfsamp_t *b, uint64_t *records, uint64_t *bad, uint64_t *lost)
{
    if (records)
        *records = 0;
    if (bad)
        *bad = 0;
    if (lost)
        *lost = 0;
}

int bpfsamp_kernel_time(const bpfsamp_t *b, uint64_t *runs, uint64_t *ns)
{
    return SCRY_E_NOSYS;
}

#else

#include "scry_walk.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

struct bpfsamp {
    struct scry_walk *skel;
    struct ring_buffer *ring;
    bpfsamp_record_fn cb; /* during bpfsamp_read */
    void *cb_ctx;
    uint64_t records, bad;
    int stats_fd; /* bpf_enable_stats: the kernel times the program while it is open */
    uint32_t keys[BPFSAMP_MAX_THREADS]; /* bpfsamp_set_threads: the map's tids to drop */
    pid_t sorted[BPFSAMP_MAX_THREADS];  /* and the tids to keep, sorted */
};

/* libbpf's messages (the verifier's log among them) are not for scry's users. */
static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    (void)level;
    (void)fmt;
    (void)ap;
    return 0;
}

/* 1 when a BPFSAMP_NATIVE record of LEN bytes holds its native part to stack_len. */
static int native_fits(const void *data, size_t len)
{
    const struct bpfsamp_native_record *nr = data;
    size_t head = offsetof(struct bpfsamp_native_record, n.stack);
    return len >= head && nr->n.stack_len <= BPFSAMP_STACK_BYTES && len >= head + nr->n.stack_len;
}

static int on_ring(void *ctx, void *data, size_t len)
{
    bpfsamp_t *b = ctx;
    const struct bpfsamp_record *r = data;
    size_t head = offsetof(struct bpfsamp_record, frames);
    if (len < head || r->nframes > BPFSAMP_MAX_DEPTH ||
        len < head + (size_t)r->nframes * sizeof r->frames[0]) {
        b->bad++;
        return 0;
    }
    if ((r->flags & BPFSAMP_NATIVE) && !native_fits(data, len)) {
        b->bad++;
        return 0;
    }
    b->records++;
    b->cb(r, b->cb_ctx);
    return 0;
}

/* The reason for a refused load, from errno. */
static int load_error(int e, char *why, size_t whylen)
{
    if (e == EPERM || e == EACCES) {
        snprintf(why, whylen,
                 "loading a BPF program needs root, or CAP_BPF and CAP_PERFMON "
                 "(%s)",
                 strerror(e));
        return SCRY_E_PERM;
    }
    if (e == EINVAL || e == ENOSYS || e == EOPNOTSUPP) {
        snprintf(why, whylen,
                 "the kernel refused the BPF program (%s; it needs Linux 5.8+ "
                 "with BPF ring buffers and perf-event programs)",
                 strerror(e));
        return SCRY_E_NOSYS;
    }
    snprintf(why, whylen, "the kernel refused the BPF program (%s)", strerror(e));
    return e == ENOMEM ? SCRY_E_NOMEM : SCRY_E_IO;
}

/* --native (CFG->native), before the program is loaded: a ring of BPFSAMP_NATIVE_RING
 * bytes, and whether the kernel gives a kernel-mode sample's user registers. Returns 0, or
 * -1 with errno. */
static int size_native(struct scry_walk *skel, const struct bpfsamp_cfg *cfg)
{
    if (!cfg || !cfg->native)
        return 0;
    /* samples in the kernel: their user registers (else they carry no stack copy) */
    skel->rodata->have_task_regs =
        libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, NULL) > 0;
    return bpf_map__set_max_entries(skel->maps.events, BPFSAMP_NATIVE_RING) != 0 ? -1 : 0;
}

int bpfsamp_open(const struct bpfsamp_cfg *cfg, bpfsamp_t **out, char *why, size_t whylen)
{
    *out = NULL;
    libbpf_set_print(quiet);
    bpfsamp_t *b = calloc(1, sizeof *b);
    if (!b)
        return SCRY_E_NOMEM;
    b->stats_fd = -1;
    int err;
    b->skel = scry_walk__open();
    if (!b->skel || size_native(b->skel, cfg) != 0 || scry_walk__load(b->skel) != 0) {
        err = load_error(errno, why, whylen);
        goto fail;
    }
    if (bpfsamp_set_cfg(b, cfg) != 0) {
        err = load_error(errno, why, whylen);
        goto fail;
    }
    b->ring = ring_buffer__new(bpf_map__fd(b->skel->maps.events), on_ring, b, NULL);
    if (!b->ring) {
        err = load_error(errno, why, whylen);
        goto fail;
    }
    /* Two clock reads per run of every BPF program on the host while held: the program's
     * own CPU per sample for the summary (bpfsamp_kernel_time). Optional. */
    b->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
    *out = b;
    return 0;
fail:
    bpfsamp_free(b);
    return err;
}

void bpfsamp_free(bpfsamp_t *b)
{
    if (!b)
        return;
    if (b->stats_fd >= 0)
        close(b->stats_fd);
    ring_buffer__free(b->ring);
    scry_walk__destroy(b->skel);
    free(b);
}

int bpfsamp_set_cfg(bpfsamp_t *b, const struct bpfsamp_cfg *cfg)
{
    uint32_t zero = 0;
    if (!b || !cfg)
        return SCRY_E_INVAL;
    if (bpf_map__update_elem(b->skel->maps.cfg, &zero, sizeof zero, cfg, sizeof *cfg, BPF_ANY))
        return scry_err_from_errno(errno);
    return 0;
}

int bpfsamp_prog_fd(const bpfsamp_t *b)
{
    return b ? bpf_program__fd(b->skel->progs.scry_walk) : -1;
}

static int cmp_tid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

int bpfsamp_set_threads(bpfsamp_t *b, const pid_t *tids, const uint64_t *tstates, size_t n)
{
    if (!b || n > BPFSAMP_MAX_THREADS)
        return SCRY_E_INVAL;
    struct bpf_map *m = b->skel->maps.threads;
    /* Drop the threads that are gone: keys are collected first (deleting while walking
     * the keys would restart the walk). Bounded by the map's size. */
    if (n)
        memcpy(b->sorted, tids, n * sizeof *tids);
    qsort(b->sorted, n, sizeof *b->sorted, cmp_tid);
    size_t ngone = 0;
    uint32_t key, next;
    int more = bpf_map__get_next_key(m, NULL, &next, sizeof next) == 0;
    for (size_t guard = 0; more && guard < BPFSAMP_MAX_THREADS; guard++) {
        key = next;
        pid_t t = (pid_t)key;
        if (!n || !bsearch(&t, b->sorted, n, sizeof t, cmp_tid))
            b->keys[ngone++] = key;
        more = bpf_map__get_next_key(m, &key, &next, sizeof next) == 0;
    }
    for (size_t i = 0; i < ngone; i++)
        bpf_map__delete_elem(m, &b->keys[i], sizeof b->keys[i], 0);
    return bpfsamp_put_threads(b, tids, tstates, n);
}

int bpfsamp_put_threads(bpfsamp_t *b, const pid_t *tids, const uint64_t *tstates, size_t n)
{
    if (!b || n > BPFSAMP_MAX_THREADS)
        return SCRY_E_INVAL;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = (uint32_t)tids[i];
        uint64_t v = tstates[i];
        if (bpf_map__update_elem(b->skel->maps.threads, &k, sizeof k, &v, sizeof v, BPF_ANY))
            return scry_err_from_errno(errno);
    }
    return 0;
}

void bpfsamp_drop_threads(bpfsamp_t *b, const pid_t *tids, size_t n)
{
    for (size_t i = 0; b && i < n; i++) {
        uint32_t k = (uint32_t)tids[i];
        bpf_map__delete_elem(b->skel->maps.threads, &k, sizeof k, 0);
    }
}

int bpfsamp_read(bpfsamp_t *b, bpfsamp_record_fn cb, void *ctx)
{
    if (!b || !cb)
        return SCRY_E_INVAL;
    b->cb = cb;
    b->cb_ctx = ctx;
    uint64_t before = b->records;
    int rc = ring_buffer__consume(b->ring);
    b->cb = NULL;
    if (rc < 0)
        return scry_err_from_errno(-rc);
    return (int)(b->records - before);
}

void bpfsamp_counts(const bpfsamp_t *b, uint64_t *records, uint64_t *bad, uint64_t *lost)
{
    if (records)
        *records = b ? b->records : 0;
    if (bad)
        *bad = b ? b->bad : 0;
    if (!lost)
        return;
    *lost = 0;
    uint64_t per[BPFSAMP_MAX_CPUS];
    int ncpu = libbpf_num_possible_cpus();
    uint32_t zero = 0;
    if (b && ncpu > 0 && ncpu <= BPFSAMP_MAX_CPUS &&
        bpf_map__lookup_elem(b->skel->maps.lost, &zero, sizeof zero, per,
                             (size_t)ncpu * sizeof per[0], 0) == 0)
        for (int i = 0; i < ncpu; i++)
            *lost += per[i];
}

int bpfsamp_kernel_time(const bpfsamp_t *b, uint64_t *runs, uint64_t *ns)
{
    struct bpf_prog_info info;
    uint32_t len = sizeof info;
    memset(&info, 0, sizeof info);
    if (!b || b->stats_fd < 0 || bpf_obj_get_info_by_fd(bpfsamp_prog_fd(b), &info, &len) != 0)
        return SCRY_E_NOSYS;
    *runs = info.run_cnt;
    *ns = info.run_time_ns;
    return 0;
}

#endif
