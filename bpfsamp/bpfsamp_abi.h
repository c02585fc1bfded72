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
    __u64 gil_holder_addr;      /* the word holding the GIL holder's thread state
                                   (pystate_gil_words), 0: unknown (no BPFSAMP_GIL_KNOWN) */
    __u64 gil_locked_addr;      /* the GIL's int `locked`, 0: none (the holder word says) */
};

#define BPFSAMP_NO_OWNER 0x100u /* no owner byte equals it */

/* The frame families: where a frame says which instruction it runs. */
enum bpfsamp_instr {
    BPFSAMP_INSTR_POINTER = 0,     /* 3.11+: a pointer into the code object's code units */
    BPFSAMP_INSTR_LASTI = 1,       /* 3.6-3.9: int f_lasti, a byte offset (-1: not started) */
    BPFSAMP_INSTR_LASTI_UNITS = 2, /* 3.10: int f_lasti, in 2-byte code units */
};

enum bpfsamp_flag {
    BPFSAMP_KERNEL = 1,    /* the thread was in the kernel (a system call, a fault) */
    BPFSAMP_NO_TSTATE = 2, /* no thread state known for the thread: not walked */
    BPFSAMP_FAULT = 4,     /* a read failed (page not present): frames not trusted */
    BPFSAMP_TRUNCATED = 8, /* the depth bound cut the stack */
    BPFSAMP_GIL_KNOWN = 16, /* the GIL's holder was read at the sample, */
    BPFSAMP_GIL = 32,       /* and it was the sampled thread */
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

#endif
