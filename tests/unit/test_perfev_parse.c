/* test_perfev_parse.c - sample records are validated: every size is checked against the
 * record and the attributes, a hostile record is rejected, never read past. */
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfev.h"
#include "scry_err.h"
#include "check.h"

static size_t put64(uint8_t *b, size_t at, uint64_t v)
{
    memcpy(b + at, &v, 8);
    return at + 8;
}

/* Builds a sample record with STACK bytes of stack (DYN valid), ABI as given. */
static size_t build(uint8_t *b, int with_regs, uint64_t abi, uint64_t stack, uint64_t dyn)
{
    size_t at = sizeof(struct perf_event_header);
    at = put64(b, at, 0x401000);                /* ip */
    at = put64(b, at, (uint64_t)77 << 32 | 42); /* pid 42, tid 77 */
    at = put64(b, at, 123456789);               /* time */
    at = put64(b, at, 1);                       /* cpu 1 */
    at = put64(b, at, 1000000);                 /* period */
    if (with_regs) {
        at = put64(b, at, abi);
        if (abi != PERF_SAMPLE_REGS_ABI_NONE)
            for (int i = 0; i < PERFEV_NREGS; i++)
                at = put64(b, at, 0x1000 + (uint64_t)i);
        at = put64(b, at, stack);
        if (stack) {
            memset(b + at, 0xab, stack);
            at += stack;
            at = put64(b, at, dyn);
        }
    }
    struct perf_event_header h = {
        .type = PERF_RECORD_SAMPLE, .misc = PERF_RECORD_MISC_USER, .size = (uint16_t)at};
    memcpy(b, &h, sizeof h);
    return at;
}

int main(void)
{
    static uint8_t b[70000];
    perfev_sample_t s;

    size_t n = build(b, 0, 0, 0, 0);
    CHECK(perfev_parse_sample(b, n, 0, &s) == 0);
    CHECK(s.pid == 42 && s.tid == 77 && s.cpu == 1 && s.ip == 0x401000);
    CHECK(s.time_ns == 123456789 && s.period_ns == 1000000 && !s.kernel && !s.has_regs);
    CHECK(!s.stack && s.stack_len == 0);
    /* Too short, header size disagreeing, trailing bytes. */
    CHECK(perfev_parse_sample(b, n - 8, 0, &s) == SCRY_E_CORRUPT);
    CHECK(perfev_parse_sample(b, 8, 0, &s) == SCRY_E_CORRUPT);
    CHECK(perfev_parse_sample(b, n, 64, &s) == SCRY_E_CORRUPT); /* no regs where asked */
    CHECK(perfev_parse_sample(NULL, n, 0, &s) == SCRY_E_CORRUPT);

    /* Kernel mode. */
    ((struct perf_event_header *)b)->misc = PERF_RECORD_MISC_KERNEL;
    CHECK(perfev_parse_sample(b, n, 0, &s) == 0 && s.kernel);

    /* Registers and stack. */
    n = build(b, 1, PERF_SAMPLE_REGS_ABI_64, 4096, 1000);
    CHECK(perfev_parse_sample(b, n, 4096, &s) == 0);
    CHECK(s.has_regs && s.regs[PERFEV_REG_IP] == 0x1000 + PERFEV_REG_IP);
    CHECK(s.regs[PERFEV_REG_R15] == 0x1000 + PERFEV_REG_R15);
    CHECK(s.stack && s.stack_len == 1000 && s.stack[0] == 0xab);
    /* A stack larger than asked for, or a dyn_size larger than the copy. */
    CHECK(perfev_parse_sample(b, n, 2048, &s) == SCRY_E_CORRUPT);
    n = build(b, 1, PERF_SAMPLE_REGS_ABI_64, 4096, 4097);
    CHECK(perfev_parse_sample(b, n, 4096, &s) == SCRY_E_CORRUPT);
    /* A stack size that runs past the record. */
    n = build(b, 1, PERF_SAMPLE_REGS_ABI_64, 4096, 10);
    uint64_t huge = 60000;
    size_t size_at = sizeof(struct perf_event_header) + 40 + 8 + 8 * PERFEV_NREGS;
    memcpy(b + size_at, &huge, 8);
    CHECK(perfev_parse_sample(b, n, PERFEV_STACK_MAX, &s) == SCRY_E_CORRUPT);
    /* ABI none (no user context): no registers, then the stack size word. */
    n = build(b, 1, PERF_SAMPLE_REGS_ABI_NONE, 0, 0);
    CHECK(perfev_parse_sample(b, n, 4096, &s) == 0 && !s.has_regs && !s.stack);
    /* An unknown ABI. */
    n = build(b, 1, 7, 0, 0);
    CHECK(perfev_parse_sample(b, n, 4096, &s) == SCRY_E_CORRUPT);
    /* dyn_size 0: no stack. */
    n = build(b, 1, PERF_SAMPLE_REGS_ABI_64, 64, 0);
    CHECK(perfev_parse_sample(b, n, 64, &s) == 0 && s.has_regs && !s.stack);

    /* Every truncation of a valid record is rejected (the header says the full size). */
    n = build(b, 1, PERF_SAMPLE_REGS_ABI_64, 256, 100);
    for (size_t cut = 0; cut < n; cut++)
        CHECK(perfev_parse_sample(b, cut, 256, &s) == SCRY_E_CORRUPT);
    /* Random garbage never crashes (run under ASan in CI). */
    srand(1);
    for (int i = 0; i < 20000; i++) {
        size_t len = (size_t)(rand() % 600);
        for (size_t k = 0; k < len; k++)
            b[k] = (uint8_t)rand();
        if (len >= 8 && (rand() & 1)) {
            struct perf_event_header h = {PERF_RECORD_SAMPLE, 0, (uint16_t)len};
            memcpy(b, &h, sizeof h);
        }
        (void)perfev_parse_sample(b, len, (uint32_t)(rand() % 2) * 256, &s);
    }

    return check_summary("test_perfev_parse");
}
