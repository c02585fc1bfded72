/* inject_stub.c - the trampoline's machine code (see inject_stub.h).
 *
 * The code is assembled into .rodata of scry itself (it is never executed here) and copied
 * byte for byte into the target. It only addresses memory through RBX (the data block),
 * R12 (the FP save area on the stack) and RSP, so it runs at any address.
 */
#include "inject_stub.h"

#include <cpuid.h>
#include <stddef.h>

_Static_assert(offsetof(inject__stub_data_t, args) == 8, "stub layout");
_Static_assert(offsetof(inject__stub_data_t, xsave_size) == 56, "stub layout");
_Static_assert(offsetof(inject__stub_data_t, use_xsave) == 64, "stub layout");
_Static_assert(offsetof(inject__stub_data_t, rsp) == 72, "stub layout");
_Static_assert(offsetof(inject__stub_data_t, rip) == 80, "stub layout");
_Static_assert(offsetof(inject__stub_data_t, rflags) == 88, "stub layout");
_Static_assert(offsetof(inject__stub_data_t, rax) == 96, "stub layout");
_Static_assert(offsetof(inject__stub_data_t, rbx) == 104, "stub layout");
_Static_assert(offsetof(inject__stub_data_t, r15) == 208, "stub layout");
_Static_assert(offsetof(inject__stub_data_t, sigmask) == 216, "stub layout");
_Static_assert(offsetof(inject__stub_data_t, sigmask_ok) == 224, "stub layout");

__asm__(".pushsection .rodata.scry_inject_stub,\"a\",@progbits\n"
        ".balign 16\n"
        ".globl inject__stub_begin\n"
        ".hidden inject__stub_begin\n"
        "inject__stub_begin:\n"
        ".intel_syntax noprefix\n"
        /* FP save area: below the entry RSP, 64-byte aligned, kept in R12 (callee-saved). */
        "  sub rsp, qword ptr [rbx+56]\n"
        "  and rsp, -64\n"
        "  mov r12, rsp\n"
        "  cmp qword ptr [rbx+64], 0\n"
        "  je 1f\n"
        /* XRSTOR faults unless the XSAVE header's reserved bytes (512+8..575) are zero. */
        "  xor eax, eax\n"
        "  mov qword ptr [r12+512], rax\n"
        "  mov qword ptr [r12+520], rax\n"
        "  mov qword ptr [r12+528], rax\n"
        "  mov qword ptr [r12+536], rax\n"
        "  mov qword ptr [r12+544], rax\n"
        "  mov qword ptr [r12+552], rax\n"
        "  mov qword ptr [r12+560], rax\n"
        "  mov qword ptr [r12+568], rax\n"
        "  mov eax, -1\n"
        "  mov edx, -1\n"
        "  xsave64 [r12]\n"
        "  jmp 2f\n"
        "1:\n"
        "  fxsave64 [r12]\n"
        "2:\n"
        "  fninit\n"
        "  cld\n"
        "  mov rdi, qword ptr [rbx+8]\n"
        "  mov rsi, qword ptr [rbx+16]\n"
        "  mov rdx, qword ptr [rbx+24]\n"
        "  mov rcx, qword ptr [rbx+32]\n"
        "  mov r8, qword ptr [rbx+40]\n"
        "  mov r9, qword ptr [rbx+48]\n"
        "  xor eax, eax\n" /* no vector arguments (variadic convention) */
        "  call qword ptr [rbx]\n"
        "  mov r13, rax\n"
        "  mov eax, 39\n" /* INJECT__STUB_MARKER_NR: getpid */
        "  syscall\n"
        ".globl inject__stub_marker\n"
        ".hidden inject__stub_marker\n"
        "inject__stub_marker:\n"
        /* Only reached when no tracer took over: restore everything ourselves, the signal
         * mask first: rt_sigprocmask(SIG_SETMASK, &sigmask, NULL, 8). */
        "  cmp qword ptr [rbx+224], 0\n"
        "  je 5f\n"
        "  mov edi, 2\n"
        "  lea rsi, [rbx+216]\n"
        "  xor edx, edx\n"
        "  mov r10d, 8\n"
        "  mov eax, 14\n"
        "  syscall\n"
        "5:\n"
        "  cmp qword ptr [rbx+64], 0\n"
        "  je 3f\n"
        "  mov eax, -1\n"
        "  mov edx, -1\n"
        "  xrstor64 [r12]\n"
        "  jmp 4f\n"
        "3:\n"
        "  fxrstor64 [r12]\n"
        "4:\n"
        /* Return frame at orig_rsp-152: rflags, rbx, rip; then 'ret 128' lands on orig_rsp. */
        "  mov rax, qword ptr [rbx+72]\n"
        "  lea rsp, [rax-152]\n"
        "  mov rcx, qword ptr [rbx+88]\n"
        "  mov qword ptr [rsp], rcx\n"
        "  mov rcx, qword ptr [rbx+104]\n"
        "  mov qword ptr [rsp+8], rcx\n"
        "  mov rcx, qword ptr [rbx+80]\n"
        "  mov qword ptr [rsp+16], rcx\n"
        "  mov rax, qword ptr [rbx+96]\n"
        "  mov rcx, qword ptr [rbx+112]\n"
        "  mov rdx, qword ptr [rbx+120]\n"
        "  mov rsi, qword ptr [rbx+128]\n"
        "  mov rdi, qword ptr [rbx+136]\n"
        "  mov rbp, qword ptr [rbx+144]\n"
        "  mov r8, qword ptr [rbx+152]\n"
        "  mov r9, qword ptr [rbx+160]\n"
        "  mov r10, qword ptr [rbx+168]\n"
        "  mov r11, qword ptr [rbx+176]\n"
        "  mov r12, qword ptr [rbx+184]\n"
        "  mov r13, qword ptr [rbx+192]\n"
        "  mov r14, qword ptr [rbx+200]\n"
        "  mov r15, qword ptr [rbx+208]\n"
        "  popfq\n"
        "  pop rbx\n"
        "  ret 128\n"
        ".att_syntax prefix\n"
        ".globl inject__stub_end\n"
        ".hidden inject__stub_end\n"
        "inject__stub_end:\n"
        ".popsection\n");

extern const uint8_t inject__stub_begin[], inject__stub_marker[], inject__stub_end[];

const uint8_t *inject__stub_code(size_t *len)
{
    *len = (size_t)(inject__stub_end - inject__stub_begin);
    return inject__stub_begin;
}

size_t inject__stub_marker_offset(void)
{
    return (size_t)(inject__stub_marker - inject__stub_begin);
}

void inject__stub_fpu_area(uint64_t *size, int *use_xsave)
{
    unsigned a, b, c, d;
    *size = 512;
    *use_xsave = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    if (!(c & (1u << 27))) /* OSXSAVE: the kernel enabled XSAVE */
        return;
    if (__get_cpuid_max(0, NULL) < 0xd)
        return;
    __cpuid_count(0xd, 0, a, b, c, d);
    if (b < 576 || b > 65536)
        return;
    *size = ((uint64_t)b + 63) & ~(uint64_t)63;
    *use_xsave = 1;
}
