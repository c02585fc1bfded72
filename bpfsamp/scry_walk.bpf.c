// SPDX-License-Identifier: GPL-2.0
/* scry_walk.bpf.c - the kernel half of `--sampler bpf`: at each tick of a target thread's
 * task-clock perf event, reads that thread's Python frame chain and emits one record of
 * (tid, flags, weight, time, IP, frames of (code object, instruction offset)) into a ring
 * buffer. Table-driven: every offset comes from the cfg map (bpfsamp_abi.h), filled from
 * pystate's layouts; the program knows no CPython version.
 *
 * Bounded for the verifier: at most BPFSAMP_MAX_DEPTH frames, one read of a frame's
 * header (at most BPFSAMP_FRAME_HDR_MAX bytes) each.
 * Shim frames (the owner says) are written too and skipped in user space.
 * A read that fails (a page the kernel cannot fault in here) ends the walk with
 * BPFSAMP_FAULT: user space reads that sample itself. With --native (cfg.native) each
 * record also carries the user registers and up to 32 KiB of the
 * user stack (emit_native), unwound in user space. Returning 0 keeps the perf record
 * out of the event's own ring (only this program's record is written).
 * CO-RE-free: it reads only the perf context (UAPI bpf_perf_event_data) and user memory.
 */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>

#include "bpfsamp_abi.h"

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct bpfsamp_cfg);
} cfg SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, BPFSAMP_MAX_THREADS);
    __type(key, __u32);   /* tid (the host's) */
    __type(value, __u64); /* its PyThreadState address */
} threads SEC(".maps");

struct scratch {
    struct bpfsamp_record r;
    __u8 hdr[BPFSAMP_FRAME_HDR_MAX]; /* the frame being walked: its first frame_hdr_len bytes */
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct scratch);
} scratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 1 << 21);
} events SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64); /* records the ring had no room for */
} lost SEC(".maps");

/* The 8-byte field at OFF of the frame header H (user space checked OFF: 8-aligned, within). */
static __always_inline __u64 field(const __u8 *h, __s64 off)
{
    return *(const __u64 *)(h + ((__u32)off & (BPFSAMP_FRAME_HDR_MAX - 8)));
}

static __always_inline int read_u64(__u64 *out, __u64 addr, __s64 off)
{
    if (off < 0)
        return -1;
    return bpf_probe_read_user(out, sizeof *out, (const void *)(addr + (__u64)off));
}

/* Set by user space before the load: the kernel has bpf_task_pt_regs (5.15+), so a sample
 * taken in the kernel gets the task's user registers too. Read-only data: where it is 0
 * the verifier drops the branch that calls it, so older kernels load the program. */
const volatile __u32 have_task_regs = 0;

/* The unwinder's registers (unwind_regs_t's order) from G. */
static __always_inline void copy_regs(__u64 *o, const struct pt_regs *g)
{
    o[0] = g->rax;
    o[1] = g->rbx;
    o[2] = g->rcx;
    o[3] = g->rdx;
    o[4] = g->rsi;
    o[5] = g->rdi;
    o[6] = g->rbp;
    o[7] = g->rsp;
    o[8] = g->rip;
    o[9] = g->r8;
    o[10] = g->r9;
    o[11] = g->r10;
    o[12] = g->r11;
    o[13] = g->r12;
    o[14] = g->r13;
    o[15] = g->r14;
    o[16] = g->r15;
}

/* The user registers of a sample taken in the kernel (those the task entered it with) into
 * O. Returns 0, or -1 where the kernel cannot say (before 5.15). */
static __always_inline int kernel_sample_regs(__u64 *o)
{
    struct pt_regs u;
    if (!have_task_regs)
        return -1;
    struct task_struct *task = bpf_get_current_task_btf();
    if (bpf_probe_read_kernel(&u, sizeof u, (const void *)bpf_task_pt_regs(task)) != 0)
        return -1;
    copy_regs(o, &u);
    return 0;
}

/* 3.11: BPFSAMP_OWNER_ENTRY when frame header H has is_entry set, else 0. */
static __always_inline __u32 entry_bit(const __u8 *h, const struct bpfsamp_cfg *c)
{
    if (c->iframe_is_entry < 0)
        return 0;
    return h[(__u32)c->iframe_is_entry & (BPFSAMP_FRAME_HDR_MAX - 1)] ? BPFSAMP_OWNER_ENTRY : 0;
}

/* --native: writes R (LEN bytes) with the user registers and up to BPFSAMP_STACK_PAGES pages
 * of the user stack from sp's page (whole pages, up to the first not readable now: the
 * program cannot fault one in) as one bpfsamp_native_record, whole-size in the ring (its
 * size must be known to reserve it) however much was copied. Returns 0, or -1 when it
 * could not (no room in the ring for it, or a sample in the kernel before Linux 5.15: R is
 * then written alone). */
static __always_inline int emit_native(struct bpf_perf_event_data *ctx,
                                       const struct bpfsamp_record *r, __u64 len)
{
    if (len > sizeof *r)
        return -1;
    /* written in place: the stack is copied once, into the ring */
    struct bpfsamp_native_record *nr = bpf_ringbuf_reserve(&events, sizeof *nr, 0);
    if (!nr)
        return -1;
    struct bpfsamp_native *n = &nr->n;
    if (!(r->flags & BPFSAMP_KERNEL))
        copy_regs(n->regs, &ctx->regs);
    else if (kernel_sample_regs(n->regs) != 0)
        goto discard;
    if (bpf_probe_read_kernel(&nr->r, len, r) != 0)
        goto discard;
    nr->r.flags |= BPFSAMP_NATIVE;
    __u64 base = n->regs[7] & ~4095ull; /* sp */
    n->stack_addr = base;
    __u32 i = 0;
    for (; i < BPFSAMP_STACK_PAGES; i++)
        if (bpf_probe_read_user(n->stack + i * 4096, 4096, (const void *)(base + i * 4096ull)) != 0)
            break;
    n->stack_len = i * 4096;
    bpf_ringbuf_submit(nr, 0);
    return 0;
discard:
    bpf_ringbuf_discard(nr, 0);
    return -1;
}

/* Whether the thread whose state is TSTATE holds the GIL at this instant: BPFSAMP_GIL_KNOWN
 * (and BPFSAMP_GIL when it does) when the cfg says where the holder is and it was read. */
static __always_inline __u16 gil_flags(const struct bpfsamp_cfg *c, __u64 tstate)
{
    __u64 holder = 0;
    __s32 locked = 1;
    if (!c->gil_holder_addr ||
        bpf_probe_read_user(&holder, sizeof holder, (const void *)c->gil_holder_addr) != 0 ||
        (c->gil_locked_addr &&
         bpf_probe_read_user(&locked, sizeof locked, (const void *)c->gil_locked_addr) != 0))
        return 0;
    return BPFSAMP_GIL_KNOWN | (locked && holder && holder == tstate ? BPFSAMP_GIL : 0);
}

SEC("perf_event")
int scry_walk(struct bpf_perf_event_data *ctx)
{
    __u32 zero = 0;
    const struct bpfsamp_cfg *c = bpf_map_lookup_elem(&cfg, &zero);
    struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
    if (!c || !sc)
        return 0;
    struct bpfsamp_record *r = &sc->r;
    __u32 hl = c->frame_hdr_len;
    /* the thread's id as scry sees it (scry may run in a PID namespace of its own) */
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct bpf_pidns_info ns = {0};
    if (c->pidns_ino &&
        bpf_get_ns_current_pid_tgid(c->pidns_dev, c->pidns_ino, &ns, sizeof ns) == 0)
        tid = ns.pid;
    r->tid = tid;
    r->flags = (ctx->regs.cs & 3) == 0 ? BPFSAMP_KERNEL : 0;
    r->nframes = 0;
    r->weight_ns = ctx->sample_period;
    r->time_ns = bpf_ktime_get_ns();
    r->ip = ctx->regs.rip; /* x86-64 UAPI names */
    __u64 *ts = bpf_map_lookup_elem(&threads, &tid);
    __u64 f = 0;
    if (!ts) {
        r->flags |= BPFSAMP_NO_TSTATE;
        goto out;
    }
    r->flags |= gil_flags(c, *ts);
    if (read_u64(&f, *ts, c->tstate_frame) != 0 ||
        (c->cframe_current_frame >= 0 && f && read_u64(&f, f, c->cframe_current_frame) != 0)) {
        r->flags |= BPFSAMP_FAULT;
        goto out;
    }
    /* One record slot per frame walked, shim frames too (user space skips them): the
     * slot index is the loop index, so the verifier follows one path per depth. */
    __u32 n = 0;
    for (; n < BPFSAMP_MAX_DEPTH && f; n++) {
        /* one read per frame: its header, the fields taken from the copy */
        if (hl == 0 || hl > BPFSAMP_FRAME_HDR_MAX ||
            bpf_probe_read_user(sc->hdr, hl, (const void *)f) != 0) {
            r->flags |= BPFSAMP_FAULT;
            goto out;
        }
        __u64 code = field(sc->hdr, c->iframe_code) & c->code_mask;
        __u8 owner = sc->hdr[(__u32)c->iframe_owner & (BPFSAMP_FRAME_HDR_MAX - 1)];
        f = field(sc->hdr, c->iframe_previous);
        r->frames[n].code = code;
        if (c->instr_kind == BPFSAMP_INSTR_POINTER) {
            __u64 instr = field(sc->hdr, c->iframe_instr);
            __u64 start = code + (__u64)c->code_adaptive;
            r->frames[n].offset =
                instr >= start && instr - start < (1u << 26) ? (__u32)(instr - start) : 0xffffffffu;
        } else {
            __s32 lasti =
                *(const __s32 *)(sc->hdr + ((__u32)c->iframe_instr & (BPFSAMP_FRAME_HDR_MAX - 4)));
            __u32 u = lasti < 0 ? 0 : (__u32)lasti;
            r->frames[n].offset = c->instr_kind == BPFSAMP_INSTR_LASTI_UNITS ? u * 2 : u;
        }
        r->frames[n].owner = owner | entry_bit(sc->hdr, c);
    }
    if (f)
        r->flags |= BPFSAMP_TRUNCATED;
    r->nframes = (__u16)n;
out:;
    __u64 len = sizeof *r - sizeof r->frames + (__u64)r->nframes * sizeof r->frames[0];
    if (len > sizeof *r)
        len = sizeof *r;
    int nat = c->native ? emit_native(ctx, r, len) : -1;
    if (nat != 0 && bpf_ringbuf_output(&events, r, len, 0) != 0) {
        __u64 *l = bpf_map_lookup_elem(&lost, &zero);
        if (l)
            (*l)++;
    }
    return 0;
}

char LICENSE[] SEC("license") = "GPL";
