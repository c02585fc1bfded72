/* fuzz_unwind_copied.c - native unwinding of a copied stack (perf samples): registers and a
 * stack image that the target controls, unwound against this process's own objects
 * (libunwind with scry's accessors and caches). Input: ip selector, bp offset, flags, then
 * the stack words; a word with its top bit set becomes an address inside this program's
 * code, so the unwinder meets real unwind tables with hostile contents around them. */
#include "fuzz.h"
#include "scry_err.h"
#include "unwind.h"

#include <unistd.h>

static unwind_t *u;
static uint64_t text_lo, text_hi;

static void init(void)
{
    u = unwind_new(getpid());
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512], exe[256];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (!u || !f || n <= 0)
        abort();
    exe[n] = 0;
    unsigned long lo, hi;
    char perms[8];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && perms[2] == 'x' &&
            strstr(line, exe)) {
            text_lo = lo;
            text_hi = hi;
            break;
        }
    fclose(f);
    if (!text_hi)
        abort();
}

static uint64_t code_addr(uint64_t w)
{
    return text_lo + (w & 0xffffffffu) % (text_hi - text_lo);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!u)
        init();
    uint32_t ipsel, bpoff;
    uint8_t flags;
    fuzz_take(&data, &size, &ipsel, 4);
    fuzz_take(&data, &size, &bpoff, 4);
    fuzz_take(&data, &size, &flags, 1);
    size_t len = size & ~(size_t)7;
    uint64_t *stack = malloc(len ? len : 8);
    if (!stack)
        return 0;
    memcpy(stack, data, len);
    for (size_t i = 0; i < len / 8; i++)
        if (stack[i] >> 63)
            stack[i] = code_addr(stack[i]);
    unwind_regs_t regs = {0};
    regs.sp = 0x7ffd00000000ull + ((uint64_t)(flags & 7) << 3);
    regs.ip = code_addr(ipsel);
    regs.bp = regs.sp + (len ? bpoff % (len + 64) : bpoff);
    unwind_frame_t frames[64];
    size_t n = 99;
    int rc = unwind_copied(u, 1, &regs, stack, len, frames, flags & 0x80 ? 64 : 8, &n);
    FUZZ_ASSERT(rc == 0 || rc == SCRY_E_NOMEM);
    FUZZ_ASSERT(n <= (flags & 0x80 ? 64u : 8u));
    free(stack);
    return 0;
}
