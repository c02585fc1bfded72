/* ring.c - reading a perf ring buffer and parsing its records.
 *
 * The protocol (linux/perf_event.h, struct perf_event_mmap_page): the kernel advances
 * data_head after writing records; we load it with acquire semantics so the record bytes
 * it covers are visible, read the records from our tail up to it, and store the new
 * data_tail with release semantics so the kernel does not overwrite bytes we are still
 * reading. Offsets only grow; the position in the ring is offset & (size - 1). A record
 * may wrap around the end of the ring: it is copied out whole before it is parsed.
 */
#include <linux/perf_event.h>
#include <string.h>

#include "perfev_internal.h"
#include "scry_err.h"

/* Sample record layout for perfev's sample_type (linux/perf_event.h, PERF_RECORD_SAMPLE):
 *   u64 ip; u32 pid, tid; u64 time; u32 cpu, res; u64 period;
 *   [u64 abi; u64 regs[PERFEV_NREGS] when abi != 0]
 *   [u64 size; u8 data[size]; u64 dyn_size when size != 0]
 */
#define FIXED_BYTES (sizeof(struct perf_event_header) + 8 + 8 + 8 + 8 + 8)

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

int perfev_parse_sample(const void *rec, size_t len, uint32_t stack_bytes, perfev_sample_t *out)
{
    const uint8_t *r = rec;
    if (!rec || !out || len < FIXED_BYTES || len > PERFEV_RECORD_MAX)
        return SCRY_E_CORRUPT;
    struct perf_event_header h;
    memcpy(&h, r, sizeof h);
    if (h.size != len)
        return SCRY_E_CORRUPT;
    memset(out, 0, sizeof *out);
    size_t at = sizeof h;
    out->ip = get64(r + at);
    at += 8;
    out->pid = (pid_t)get32(r + at);
    out->tid = (pid_t)get32(r + at + 4);
    at += 8;
    out->time_ns = get64(r + at);
    at += 8;
    out->cpu = get32(r + at);
    at += 8;
    out->period_ns = get64(r + at);
    at += 8;
    uint16_t mode = h.misc & PERF_RECORD_MISC_CPUMODE_MASK;
    out->kernel = mode == PERF_RECORD_MISC_KERNEL || mode == PERF_RECORD_MISC_GUEST_KERNEL;
    if (stack_bytes == 0)
        return at == len ? 0 : SCRY_E_CORRUPT;

    /* Registers: an ABI word, then the registers when the ABI is not NONE (a kernel
     * thread, or a task with no user context). */
    if (len - at < 8)
        return SCRY_E_CORRUPT;
    uint64_t abi = get64(r + at);
    at += 8;
    if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
        if (abi != PERF_SAMPLE_REGS_ABI_64 || len - at < 8u * PERFEV_NREGS)
            return SCRY_E_CORRUPT;
        for (size_t i = 0; i < PERFEV_NREGS; i++)
            out->regs[i] = get64(r + at + 8 * i);
        at += 8u * PERFEV_NREGS;
        out->has_regs = 1;
    }
    /* Stack: size (what was asked for, or less when the record would not fit), the bytes,
     * then dyn_size (how many of them are valid) - the last only when size != 0. */
    if (len - at < 8)
        return SCRY_E_CORRUPT;
    uint64_t size = get64(r + at);
    at += 8;
    if (size == 0)
        return at == len ? 0 : SCRY_E_CORRUPT;
    if (size > stack_bytes || size > len - at || len - at - size != 8)
        return SCRY_E_CORRUPT;
    uint64_t dyn = get64(r + at + size);
    if (dyn > size)
        return SCRY_E_CORRUPT;
    out->stack = dyn ? r + at : NULL;
    out->stack_len = (size_t)dyn;
    return 0;
}

/* Copies LEN bytes at ring offset OFF (any value) into DST, across the end if needed. */
static void ring_copy(const perfev_thread_t *t, uint64_t off, void *dst, size_t len)
{
    uint64_t pos = off & (t->size - 1);
    size_t first = t->size - pos < len ? (size_t)(t->size - pos) : len;
    memcpy(dst, t->data + pos, first);
    if (first < len)
        memcpy((uint8_t *)dst + first, t->data, len - first);
}

int perfev__drain(struct perfev *p, perfev_thread_t *t, perfev_sample_fn cb, void *ctx)
{
    struct perf_event_mmap_page *pc = (struct perf_event_mmap_page *)t->base;
    uint64_t head = __atomic_load_n(&pc->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = pc->data_tail; /* only we write it */
    int delivered = 0;
    if (head - tail > t->size) {
        /* Cannot happen in non-overwrite mode unless the page is corrupt: skip it all. */
        p->st.bad++;
        tail = head;
    }
    while (tail < head) {
        struct perf_event_header h;
        if (head - tail < sizeof h) {
            p->st.bad++;
            tail = head;
            break;
        }
        ring_copy(t, tail, &h, sizeof h);
        if (h.size < sizeof h || h.size > head - tail || (h.size & 7) != 0) {
            p->st.bad++; /* the rest of the ring cannot be framed: drop it */
            tail = head;
            break;
        }
        const uint8_t *rec;
        uint64_t pos = tail & (t->size - 1);
        if (pos + h.size <= t->size) {
            rec = t->data + pos;
        } else {
            ring_copy(t, tail, p->wrap, h.size);
            rec = p->wrap;
        }
        if (h.type == PERF_RECORD_SAMPLE) {
            perfev_sample_t s;
            /* a thread's ring holds that thread's records; a CPU's (cpu_wide: key CPU + 1)
             * that CPU's */
            if (perfev_parse_sample(rec, h.size, p->opts.stack_bytes, &s) == 0 &&
                (p->opts.cpu_wide ? s.cpu + 1 == (uint32_t)t->tid : s.tid == t->tid)) {
                p->st.samples++;
                delivered++;
                if (p->rate_changed)
                    s.period_ns = s.time_ns < p->changed_ns ? p->old_period_ns : p->period_ns;
                if (cb)
                    cb(&s, ctx);
            } else {
                p->st.bad++;
            }
        } else if (h.type == PERF_RECORD_LOST && h.size >= sizeof h + 16) {
            uint64_t lost;
            memcpy(&lost, rec + sizeof h + 8, 8); /* u64 id; u64 lost */
            p->st.lost += lost;
        } else if (h.type == PERF_RECORD_SWITCH) {
            /* a thread's own switches (opts.switches): on 4.17 and later a switch out while
             * runnable says so; sample_id_all: u32 pid, tid; u64 time; u32 cpu, res */
            if (!p->opts.cpu_wide && h.size >= sizeof h + 16) {
                uint64_t at;
                memcpy(&at, rec + sizeof h + 8, 8);
                if (h.misc & PERF_RECORD_MISC_SWITCH_OUT) {
                    t->preempted = (h.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) ? 1 : 0;
                    t->switch_ns = at;
                } else {
                    t->in_ns = at;
                }
            }
        } else if (h.type == PERF_RECORD_THROTTLE) {
            p->st.throttled++;
        } else {
            p->st.other++;
        }
        p->st.bytes += h.size;
        tail += h.size;
    }
    __atomic_store_n(&pc->data_tail, tail, __ATOMIC_RELEASE);
    return delivered;
}
