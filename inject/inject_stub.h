/* inject_stub.h - the self-restoring trampoline run by the hijacked thread (internal).
 *
 * The stub is position-independent x86-64 code, copied into a "code cave" of the target (the
 * unused tail of an executable segment's last page). The tracer points the thread at it with
 * RBX = a inject__stub_data_t block (also in the cave, read-only for the thread) and RSP below
 * the original stack's red zone. The stub then:
 *   1. saves the FPU/SSE/AVX state with XSAVE64 (or FXSAVE64) on the thread's stack,
 *   2. resets the x87 stack (FNINIT) and DF (CLD) as the ABI requires, loads up to six
 *      integer arguments and calls FUNC,
 *   3. keeps the result in R13 and executes getpid(): the tracer, resuming with
 *      PTRACE_SYSCALL, recognises this syscall-entry stop by its address (the "marker"),
 *      reads R13 and restores the thread itself;
 *   4. if nobody is tracing any more (scry died), carries on: gives the thread its own
 *      signal mask back (rt_sigprocmask; the tracer blocks every signal during the call),
 *      XRSTOR the vector state,
 *      reload every general register and RFLAGS from the data block and jump back to the
 *      original RIP with the original RSP ("ret 128" trick), so the program resumes exactly
 *      where it was interrupted.
 */
#ifndef INJECT_STUB_H
#define INJECT_STUB_H

#include <stddef.h>
#include <stdint.h>

/* Offsets are hard-coded in the assembly (inject_stub.c); checked by static asserts there. */
typedef struct inject__stub_data {
    uint64_t func;       /* 0: function to call */
    uint64_t args[6];    /* 8: rdi rsi rdx rcx r8 r9 */
    uint64_t xsave_size; /* 56: bytes reserved for the FP save area (multiple of 64) */
    uint64_t use_xsave;  /* 64: 1 = XSAVE64/XRSTOR64 with all components, 0 = FXSAVE64 */
    uint64_t rsp;        /* 72: original stack pointer */
    uint64_t rip;        /* 80: where to resume (syscall restart already applied) */
    uint64_t rflags;     /* 88 */
    uint64_t rax;        /* 96 */
    uint64_t rbx;        /* 104 */
    uint64_t rcx;        /* 112 */
    uint64_t rdx;        /* 120 */
    uint64_t rsi;        /* 128 */
    uint64_t rdi;        /* 136 */
    uint64_t rbp;        /* 144 */
    uint64_t r8;         /* 152 */
    uint64_t r9;         /* 160 */
    uint64_t r10;        /* 168 */
    uint64_t r11;        /* 176 */
    uint64_t r12;        /* 184 */
    uint64_t r13;        /* 192 */
    uint64_t r14;        /* 200 */
    uint64_t r15;        /* 208 */
    uint64_t sigmask;    /* 216: the thread's own blocked-signal mask (kernel sigset) */
    uint64_t sigmask_ok; /* 224: 1 = restore SIGMASK before resuming (the tracer blocked
                          * every signal for the call: they stay pending, none is lost) */
} inject__stub_data_t;

/* How far below the original RSP the stub may write: the red zone (128 bytes) plus the
 * 24-byte return frame it builds at RSP-152 .. RSP-128. The tracer starts the stub with
 * RSP = (orig_rsp - INJECT__STUB_ENTRY_GAP) & ~15. */
#define INJECT__STUB_ENTRY_GAP 256

/* The marker system call executed after FUNC returns. */
#define INJECT__STUB_MARKER_NR 39 /* getpid */

/* The code bytes, and the offset of the instruction after the marker syscall (the RIP seen
 * at its syscall-entry stop). */
const uint8_t *inject__stub_code(size_t *len);
size_t inject__stub_marker_offset(void);

/* Size of the XSAVE area for the features the OS enabled (CPUID 0xD), rounded up to 64, and
 * whether XSAVE is usable at all (else FXSAVE64 and 512 bytes). */
void inject__stub_fpu_area(uint64_t *size, int *use_xsave);

#endif
