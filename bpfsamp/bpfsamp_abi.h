/* bpfsamp_abi.h - what the BPF program (scry_walk.bpf.c) and user space (bpfsamp.c) share:
 * the layout map's entry and the ring buffer's record. Fixed-width types only: the same
 * bytes are read by both sides.
 */
#ifndef SCRY_BPFSAMP_ABI_H
#define SCRY_BPFSAMP_ABI_H

#include <linux/types.h>

#define BPFSAMP_MAX_DEPTH     128  /* frames walked per sample (the verifier's loop bound) */
#define BPFSAMP_MAX_THREADS   8192 /* entries of the tid -> thread state map */
#define BPFSAMP_FRAME_HDR_MAX 128  /* bytes of a frame read at once (a power of two) */

/* Where the interpreter keeps what the program walks, in bytes (from pystate's layout
 * tables or the target's _Py_DebugOffsets; -1: no such field). */
struct bpfsamp_cfg {
    __s64 tstate_frame;         /* tstate -> cframe (3.11/3.12) or current frame (3.13+) */
    __s64 cframe_current_frame; /* cframe -> current frame (3.11/3.12), else -1 */
    __s64 iframe_code;          /* frame -> code object (f_code / f_executable) */
    __s64 iframe_previous;      /* frame -> its caller's frame (f_back / previous) */
    __s64 iframe_instr;         /* frame -> prev_instr / instr_ptr, or int f_lasti */
    __s64 iframe_owner;         /* frame -> owner (char); 0 where frames have none */
    __s64 code_adaptive;        /* code object -> first code unit (3.11+) */
    __u64 code_mask;            /* bits of f_executable that are the pointer (tags off) */
    __u32 owner_cstack;         /* owner value of shim frames (user space skips them),
                                   BPFSAMP_NO_OWNER: none */
    __u32 frame_hdr_len;        /* bytes read per frame: up to its last field walked
                                   (1..BPFSAMP_FRAME_HDR_MAX; the pointer fields 8-aligned) */
    __u32 instr_kind;           /* enum bpfsamp_instr: what iframe_instr holds */
    __u32 pad;
    __u64 pidns_dev, pidns_ino; /* scry's PID namespace (/proc/self/ns/pid): the map's tids
                                   are the ones scry sees; 0: the kernel's own ids */
    /* --native (bpfsamp_native_record): */
    __s64 iframe_is_entry; /* frame -> is_entry (bool, 3.11: the frame a C call entered the
                              eval loop with; BPFSAMP_OWNER_ENTRY), else -1 */
    __u32 native;          /* 1: copy each user-mode sample's registers and stack top */
    __u32 pad2;
    __u64 gil_holder_addr; /* the word holding the GIL holder's thread state
                              (pystate_gil_words), 0: unknown (no BPFSAMP_GIL_KNOWN) */
    __u64 gil_locked_addr; /* the GIL's int `locked`, 0: none (the holder word says) */
};

#define BPFSAMP_NO_OWNER 0x100u /* no owner byte equals it */
/* Or'ed into a frame's owner on 3.11 (bpfsamp_cfg.iframe_is_entry): its is_entry is set. */
#define BPFSAMP_OWNER_ENTRY 0x200u

/* The frame families: where a frame says which instruction it runs. */
enum bpfsamp_instr {
    BPFSAMP_INSTR_POINTER = 0,     /* 3.11+: a pointer into the code object's code units */
    BPFSAMP_INSTR_LASTI = 1,       /* 3.6-3.9: int f_lasti, a byte offset (-1: not started) */
    BPFSAMP_INSTR_LASTI_UNITS = 2, /* 3.10: int f_lasti, in 2-byte code units */
};

enum bpfsamp_flag {
    BPFSAMP_KERNEL = 1,     /* the thread was in the kernel (a system call, a fault) */
    BPFSAMP_NO_TSTATE = 2,  /* no thread state known for the thread: not walked */
    BPFSAMP_FAULT = 4,      /* a read failed (page not present): frames not trusted */
    BPFSAMP_TRUNCATED = 8,  /* the depth bound cut the stack */
    BPFSAMP_GIL_KNOWN = 16, /* the GIL's holder was read at the sample, */
    BPFSAMP_GIL = 32,       /* and it was the sampled thread */

    BPFSAMP_NATIVE = 0x400, /* a bpfsamp_native_record: registers and stack top follow */
};

struct bpfsamp_frame {
    __u64 code;   /* code object address */
    __u32 offset; /* byte offset of the instruction from the first code unit, or
                     0xffffffff when the frame has not started */
    __u32 owner;  /* the frame's owner byte (shim frames: bpfsamp_cfg.owner_cstack) */
};

/* One sample: the header, then NFRAMES frames (leaf first); the record is only as long as
 * its frames. */
struct bpfsamp_record {
    __u32 tid;
    __u16 flags; /* enum bpfsamp_flag */
    __u16 nframes;
    __u64 weight_ns; /* the event's period: CPU time the sample stands for */
    __u64 time_ns;   /* CLOCK_MONOTONIC */
    __u64 ip;        /* instruction pointer at the sample (user or kernel) */
    struct bpfsamp_frame frames[BPFSAMP_MAX_DEPTH];
};

/* --native: the user registers and a copy of the user stack, taken by the program with each
 * sample (in the kernel: the registers the task entered it with, from Linux 5.15's
 * bpf_task_pt_regs; before, those samples carry none). */
/* Pages copied from the page of sp upward: the perf back end's 32 KiB (PERF_STACK_BYTES),
 * page-aligned. */
#define BPFSAMP_STACK_PAGES 8
#define BPFSAMP_STACK_BYTES (BPFSAMP_STACK_PAGES * 4096)

struct bpfsamp_native {
    __u64 regs[17];   /* ax, bx, cx, dx, si, di, bp, sp, ip, r8-r15 (unwind_regs_t's order) */
    __u64 stack_addr; /* user address of stack[0]: sp's page */
    __u32 stack_len;  /* bytes copied: whole pages up to the first one not readable then */
    __u32 pad;
    __u8 stack[BPFSAMP_STACK_BYTES];
};

/* A record with BPFSAMP_NATIVE: the whole record (every frame slot, so the native part has
 * a fixed place), then the native part up to stack[stack_len]. */
struct bpfsamp_native_record {
    struct bpfsamp_record r;
    struct bpfsamp_native n;
};

#endif
