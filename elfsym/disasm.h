/* disasm.h - small x86-64 code analyses with capstone.
 *
 * Used to recover unexported globals from the exported functions that touch them, e.g.
 * interp_head from PyInterpreterState_Head in 3.6 (`mov rax, [rip+interp_head]; ret`) or
 * _PyRuntime in stripped binaries, and to check whether a thread sits right after a
 * `syscall` instruction.
 */
#ifndef ELFSYM_DISASM_H
#define ELFSYM_DISASM_H

#include <stddef.h>
#include <stdint.h>

#include "elfobj.h"
#include "rmem.h"

/* Longest function body decoded, and most instructions looked at. */
#define ELFSYM_DISASM_MAX_BYTES 4096u
#define ELFSYM_DISASM_MAX_INSNS 1024u

/* Kinds of references, as bits for the KINDS filter. */
enum elfsym_ref_kind {
    ELFSYM_REF_RIP = 1,  /* memory operand [rip+disp]: target = next insn + disp */
    ELFSYM_REF_ABS = 2,  /* memory operand [disp32] with no base or index (non-PIE code) */
    ELFSYM_REF_IMM = 4,  /* `mov reg, imm` of an address-sized constant (non-PIE code) */
    ELFSYM_REF_ALL = 7,  /* the data references above */
    ELFSYM_REF_JUMP = 8, /* a direct jmp/jcc: target = its immediate destination (not in ALL) */
};

typedef struct elfsym_ref {
    uint64_t insn_addr; /* address of the instruction */
    uint64_t target;    /* absolute address referenced */
    uint8_t kind;       /* enum elfsym_ref_kind */
    uint8_t is_lea;     /* the instruction is a lea (the address itself is the value) */
    uint8_t is_load;    /* memory operand read (mov reg, [..] / cmp / ...), not written */
    uint8_t size;       /* memory operand size in bytes (0 for lea and immediates) */
} elfsym_ref_t;

/* Decodes LEN bytes of x86-64 code that live at address ADDR and stores the first MAX
 * references of the kinds in KINDS into OUT, in instruction order. Decoding stops at the
 * first `ret`/`jmp` when STOP_AT_RET is nonzero, at an undecodable byte, or at the
 * ELFSYM_DISASM_MAX_* bounds. Immediates below 0x10000 are not taken as addresses.
 * Returns the number stored (0..MAX), or SCRY_E_NOSYS when capstone fails to start. */
int elfsym_disasm_refs(const uint8_t *code, size_t len, uint64_t addr, unsigned kinds,
                       int stop_at_ret, elfsym_ref_t *out, size_t max);

/* Reads the code of function FUNC from OBJ's file (its symbol's size, at most
 * ELFSYM_DISASM_MAX_BYTES; 256 bytes when the size is 0) and returns its references
 * like elfsym_disasm_refs (link-time addresses). Returns the count, SCRY_E_NOTFOUND when
 * the symbol is missing, or SCRY_E_IO. */
int elfsym_obj_func_refs(const elfsym_obj_t *obj, const char *func, unsigned kinds,
                         elfsym_ref_t *out, size_t max);

/* True (1) when the LEN bytes at BYTES, which end exactly at a thread's instruction
 * pointer, end with a system-call instruction (`syscall` 0f 05, `sysenter` 0f 34 or
 * `int 0x80` cd 80). The caller reads the bytes [pc-LEN, pc); LEN >= 2. Returns 0
 * otherwise (also for LEN < 2). */
int elfsym_insn_is_syscall(const uint8_t *bytes, size_t len);

/* Same check on a live target: reads the 2 bytes before PC through M. Returns 1, 0, or a
 * negative rmem code (SCRY_E_FAULT, SCRY_E_GONE...). */
int elfsym_remote_is_syscall(rmem_t *m, raddr_t pc);

#endif
