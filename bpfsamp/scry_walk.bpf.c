// SPDX-License-Identifier: GPL-2.0
/* scry_walk.bpf.c - the kernel half of `--sampler bpf`: at each tick of a target thread's
 * task-clock perf event, reads that thread's Python frame chain and emits one record of
 * (tid, flags, weight, time, IP, frames of (code object, instruction offset)) into a ring
 * buffer. Table-driven: every offset comes from the cfg map (bpfsamp_abi.h), filled from
 * pystate's layouts; the program knows no CPython version.
 *
 * Bounded for the verifier: at most BPFSAMP_MAX_DEPTH frames, four 8-byte reads each.
 * Shim frames (the owner says) are written too and skipped in user space.
 * A read that fails (a page the kernel cannot fault in here) ends the walk with
 * BPFSAMP_FAULT: user space reads that sample itself. Returning 0 keeps the perf record
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

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct bpfsamp_record);
} scratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 1 << 21);
} events SEC(".maps");

static __always_inline int read_u64(__u64 *out, __u64 addr, __s64 off)
{
    if (off < 0)
        return -1;
    return bpf_probe_read_user(out, sizeof *out, (const void *)(addr + (__u64)off));
}

SEC("perf_event")
int scry_walk(struct bpf_perf_event_data *ctx)
{
    __u32 zero = 0;
    const struct bpfsamp_cfg *c = bpf_map_lookup_elem(&cfg, &zero);
    struct bpfsamp_record *r = bpf_map_lookup_elem(&scratch, &zero);
    if (!c || !r)
        return 0;
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
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
    if (read_u64(&f, *ts, c->tstate_frame) != 0 ||
        (c->cframe_current_frame >= 0 && f && read_u64(&f, f, c->cframe_current_frame) != 0)) {
        r->flags |= BPFSAMP_FAULT;
        goto out;
    }
    /* One record slot per frame walked, shim frames too (user space skips them): the
     * slot index is the loop index, so the verifier follows one path per depth. */
    __u32 n = 0;
    for (; n < BPFSAMP_MAX_DEPTH && f; n++) {
        __u64 code = 0, prev = 0, instr = 0, owner = 0;
        if (read_u64(&code, f, c->iframe_code) || read_u64(&prev, f, c->iframe_previous) ||
            read_u64(&instr, f, c->iframe_instr) || read_u64(&owner, f, c->iframe_owner)) {
            r->flags |= BPFSAMP_FAULT;
            goto out;
        }
        f = prev;
        code &= c->code_mask;
        __u64 start = code + (__u64)c->code_adaptive;
        r->frames[n].code = code;
        r->frames[n].offset =
            instr >= start && instr - start < (1u << 26) ? (__u32)(instr - start) : 0xffffffffu;
        r->frames[n].owner = (__u32)(owner & 0xff);
    }
    if (f)
        r->flags |= BPFSAMP_TRUNCATED;
    r->nframes = (__u16)n;
out:;
    __u64 len = sizeof *r - sizeof r->frames + (__u64)r->nframes * sizeof r->frames[0];
    if (len > sizeof *r)
        len = sizeof *r;
    bpf_ringbuf_output(&events, r, len, 0);
    return 0;
}

char LICENSE[] SEC("license") = "GPL";
