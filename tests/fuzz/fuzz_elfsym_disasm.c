/* fuzz_elfsym_disasm.c - the capstone reference search (RIP-relative, absolute, immediate
 * address operands) and the syscall-instruction check. Input: address, flags, code. */
#include "disasm.h"
#include "fuzz.h"
#include "scry_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t addr;
    uint8_t flags;
    fuzz_take(&data, &size, &addr, 8);
    fuzz_take(&data, &size, &flags, 1);
    uint8_t *code = fuzz_copy(data, size);
    if (!code)
        return 0;
    elfsym_ref_t refs[16];
    size_t max = (size_t)(flags >> 4) + 1; /* 1..16 */
    int n = elfsym_disasm_refs(code, size, addr, flags & ELFSYM_REF_ALL, flags & 8, refs, max);
    FUZZ_ASSERT(n == SCRY_E_NOSYS || (n >= 0 && (size_t)n <= max));
    for (int i = 0; i < n; i++) {
        FUZZ_ASSERT(refs[i].insn_addr - addr < size || size == 0);
        FUZZ_ASSERT(refs[i].kind & (flags & ELFSYM_REF_ALL));
    }
    int s = elfsym_insn_is_syscall(code, size);
    FUZZ_ASSERT(s == 0 || s == 1);
    free(code);
    return 0;
}
