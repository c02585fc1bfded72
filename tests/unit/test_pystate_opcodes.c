/* test_pystate_opcodes.c - the generated opcode tables against known opcode numbers of each
 * version (CPython's Include/opcode.h), and the instruction finder on adaptive bytecode
 * captured from live 3.11, 3.12 and 3.13 processes, where a calling frame's prev_instr points
 * into the caches of its CALL (3.11/3.12). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opcodes.h"
#include "scry_err.h"
#include "check.h"

typedef struct known {
    int major, minor;
    int opcode;
    const char *name;
    int klass;
    int caches; /* -2: do not check */
} known_t;

#define C PYSTATE_OP_CALL
#define M PYSTATE_OP_MAYCALL
#define O PYSTATE_OP_OTHER
#define U PYSTATE_OP_UNKNOWN

static const known_t knowns[] = {
    {3, 6, 131, "CALL_FUNCTION", C, 0},
    {3, 6, 141, "CALL_FUNCTION_KW", C, 0},
    {3, 6, 142, "CALL_FUNCTION_EX", C, 0},
    {3, 6, 25, "BINARY_SUBSCR", M, 0},
    {3, 6, 124, "LOAD_FAST", O, 0},
    {3, 6, 144, "EXTENDED_ARG", O, 0},
    {3, 6, 115, "POP_JUMP_IF_TRUE", M, 0},
    {3, 7, 161, "CALL_METHOD", C, 0},
    {3, 7, 160, "LOAD_METHOD", M, 0},
    {3, 8, 161, "CALL_METHOD", C, 0},
    {3, 8, 83, "RETURN_VALUE", O, 0},
    {3, 9, 118, "CONTAINS_OP", M, 0},
    {3, 9, 117, "IS_OP", O, 0},
    {3, 10, 131, "CALL_FUNCTION", C, 0},
    {3, 10, 152, "MATCH_CLASS", M, 0},
    {3, 11, 0, "CACHE", O, 0},
    {3, 11, 166, "PRECALL", C, 1},
    {3, 11, 171, "CALL", C, 4},
    {3, 11, 78, "PRECALL_NO_KW_LEN", C, 1},
    {3, 11, 122, "BINARY_OP", M, 1},
    {3, 11, 116, "LOAD_GLOBAL", O, 5},
    {3, 11, 106, "LOAD_ATTR", M, 4},
    {3, 11, 124, "LOAD_FAST", O, 0},
    {3, 12, 171, "CALL", C, 3},
    {3, 12, 40, "CALL_NO_KW_BUILTIN_O", C, 3},
    {3, 12, 241, "INSTRUMENTED_CALL", C, 3},
    {3, 12, 254, "INSTRUMENTED_LINE", U, -1},
    {3, 12, 173, "CALL_INTRINSIC_1", M, 0},
    {3, 12, 116, "LOAD_GLOBAL", O, 4},
    {3, 12, 106, "LOAD_ATTR", M, 9},
    {3, 12, 25, "BINARY_SUBSCR", M, 1},
    {3, 13, 53, "CALL", C, 3},
    {3, 13, 57, "CALL_KW", C, 0},
    {3, 13, 168, "CALL_BUILTIN_O", C, 3},
    {3, 13, 244, "INSTRUMENTED_CALL", C, 3},
    {3, 13, 254, "INSTRUMENTED_LINE", U, -1},
    {3, 13, 70, "ENTER_EXECUTOR", U, 1},
    {3, 13, 55, "CALL_INTRINSIC_1", M, 0},
    {3, 13, 40, "TO_BOOL", M, 3},
    {3, 13, 100, "POP_JUMP_IF_TRUE", O, 1},
    {3, 13, 85, "LOAD_FAST", O, 0},
    {3, 14, 52, "CALL", C, 3},
    {3, 14, 55, "CALL_KW", C, 3},
    {3, 14, 250, "INSTRUMENTED_CALL", C, 3},
    {3, 14, 84, "LOAD_FAST", O, 0},
    {3, 15, 50, "CALL", C, 3},
    {3, 15, 53, "CALL_KW", C, 3},
    {3, 15, 249, "INSTRUMENTED_CALL", C, 3},
    {3, 15, 83, "LOAD_FAST", O, 0},
    {3, 13, 5, "BINARY_SUBSCR", M, 1},
};

static void test_known(void)
{
    for (size_t i = 0; i < sizeof knowns / sizeof knowns[0]; i++) {
        const known_t *k = &knowns[i];
        pystate_opcode_info_t info;
        int rc = pystate_opcode_info(k->major, k->minor, (uint8_t)k->opcode, &info);
        CHECK(rc == 0, "%d.%d %s: rc %d", k->major, k->minor, k->name, rc);
        if (rc != 0) {
            continue;
        }
        CHECK(strcmp(info.name, k->name) == 0, "%d.%d %d: name %s, want %s", k->major, k->minor,
              k->opcode, info.name, k->name);
        CHECK(info.klass == k->klass, "%d.%d %s: class %d, want %d", k->major, k->minor, k->name,
              info.klass, k->klass);
        CHECK(k->caches == -2 || info.caches == k->caches, "%d.%d %s: caches %d, want %d", k->major,
              k->minor, k->name, info.caches, k->caches);
        CHECK(pystate_opcode_class(k->major, k->minor, (uint8_t)k->opcode) == k->klass,
              "%d.%d %s: class()", k->major, k->minor, k->name);
    }
}

static void test_versions(void)
{
    for (int minor = 6; minor <= 15; minor++) {
        int ea = pystate_opcode_extended_arg(3, minor);
        int want_ea = minor == 15 ? 67 : minor == 14 ? 69 : minor == 13 ? 71 : 144;
        CHECK(ea == want_ea, "3.%d EXTENDED_ARG %d", minor, ea);
        int cache = pystate_opcode_cache(3, minor);
        CHECK(cache == (minor >= 11 ? 0 : SCRY_E_NOTFOUND), "3.%d CACHE %d", minor, cache);
        /* Every defined opcode: a valid class, sane caches, a base that is defined. */
        int defined = 0, calls = 0;
        for (int op = 0; op < 256; op++) {
            pystate_opcode_info_t info;
            if (pystate_opcode_info(3, minor, (uint8_t)op, &info) != 0) {
                CHECK(pystate_opcode_class(3, minor, (uint8_t)op) == PYSTATE_OP_UNKNOWN, "undef");
                continue;
            }
            defined++;
            calls += info.klass == PYSTATE_OP_CALL;
            CHECK(info.klass >= PYSTATE_OP_OTHER && info.klass <= PYSTATE_OP_UNKNOWN, "class");
            CHECK(info.caches >= -1 && info.caches <= 10, "3.%d %s caches %d", minor, info.name,
                  info.caches);
            CHECK(minor >= 11 || info.caches == 0, "3.%d %s caches %d", minor, info.name,
                  info.caches);
            if (info.base >= 0) {
                pystate_opcode_info_t b;
                CHECK(pystate_opcode_info(3, minor, (uint8_t)info.base, &b) == 0 &&
                          b.caches == info.caches,
                      "3.%d %s base %d", minor, info.name, info.base);
            }
            /* Every name starting with CALL_ or PRECALL_ is a call, except the intrinsics. */
            if ((strncmp(info.name, "CALL", 4) == 0 || strncmp(info.name, "PRECALL", 7) == 0 ||
                 strncmp(info.name, "INSTRUMENTED_CALL", 17) == 0) &&
                strncmp(info.name, "CALL_INTRINSIC", 14) != 0 &&
                strcmp(info.name, "CALL_FINALLY") != 0) {
                CHECK(info.klass == PYSTATE_OP_CALL, "3.%d %s not CALL", minor, info.name);
            }
        }
        CHECK(defined > 100, "3.%d: %d opcodes", minor, defined);
        CHECK(calls >= 3, "3.%d: %d call opcodes", minor, calls);
    }
    pystate_opcode_info_t info;
    CHECK(pystate_opcode_info(3, 5, 131, &info) == SCRY_E_UNSUPPORTED, "3.5");
    CHECK(pystate_opcode_info(2, 7, 131, &info) == SCRY_E_UNSUPPORTED, "2.7");
    CHECK(pystate_opcode_class(3, 16, 1) == PYSTATE_OP_UNKNOWN, "3.16");
    CHECK(pystate_opcode_info(3, 6, 161, &info) == SCRY_E_NOTFOUND, "CALL_METHOD in 3.6");
    CHECK(pystate_opcode_info(3, 6, 131, NULL) == SCRY_E_INVAL, "NULL");
    CHECK(pystate_opcode_extended_arg(3, 99) == SCRY_E_UNSUPPORTED, "3.99");
}

/* A warmed-up function, captured live:
 *   def parent():
 *       a = callee()            # callee returns sys._getframe(1).f_lasti
 *       b = C()[0]              # C.__getitem__ returns it too
 *       c = len([callee()])
 *       return a, b
 * with the f_lasti values seen from the callees and the instructions dis puts there. */
typedef struct adaptive {
    int major, minor;
    const char *hex;
    uint32_t lasti[2], owner[2];
} adaptive_t;

static const adaptive_t adaptive[] = {
    {3,
     11,
     "9600370135000b004d00000000008f003500170035006700000000007d00370335000c004d00000000004000b601"
     "1600b6010000000000006401130035006001000068007d013005350021004d0000004700370135000b004d0000"
     "0000008f0035001700350067000000000067014e01350016010000000000000000a1022e007c0166025300",
     {26, 66},
     {18, 58}},
    {3,
     12,
     "9700700140030b003000000017004003180300007d00700340030c0030000000ab004601000000006401140040"
     "037d016f054003210030002800700140030b0030000000170040031803000067012a014003000000009a025800"
     "7c0166025300",
     {18, 44},
     {12, 42}},
    {3,
     13,
     "cf00cc014003300000000b00b1004003e50200006e00cc034003300000000c00b00040030000000053019e0040"
     "036e01cb05400330002a002100cc014003300000000b00b1004003e50200002f01aa014003000000006e025801"
     "34022400",
     {12, 42},
     {12, 42}},
};

static size_t unhex(const char *hex, uint8_t *out, size_t max)
{
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n && i < max; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
    return n < max ? n : max;
}

static void test_find_instruction(void)
{
    uint8_t code[256];
    for (size_t i = 0; i < sizeof adaptive / sizeof adaptive[0]; i++) {
        const adaptive_t *a = &adaptive[i];
        size_t len = unhex(a->hex, code, sizeof code);
        for (int k = 0; k < 2; k++) {
            uint32_t at = 0;
            uint8_t op = 0;
            int rc = pystate_opcode_find_instruction(a->major, a->minor, code, len, a->lasti[k],
                                                     &at, &op);
            CHECK(rc == 0 && at == a->owner[k], "%d.%d lasti %u: rc %d at %u, want %u", a->major,
                  a->minor, a->lasti[k], rc, at, a->owner[k]);
            int want = k == 0 ? PYSTATE_OP_CALL : PYSTATE_OP_MAYCALL; /* CALL, BINARY_SUBSCR */
            CHECK(pystate_opcode_class(a->major, a->minor, op) == want, "%d.%d lasti %u class",
                  a->major, a->minor, a->lasti[k]);
        }
        /* The walk covers the code exactly: the last instruction is RETURN_VALUE. */
        uint32_t at = 0;
        uint8_t op = 0;
        CHECK(pystate_opcode_find_instruction(a->major, a->minor, code, len, (uint32_t)len - 1, &at,
                                              &op) == 0 &&
                  at == len - 2,
              "%d.%d last", a->major, a->minor);
        CHECK(pystate_opcode_find_instruction(a->major, a->minor, code, len, (uint32_t)len, &at,
                                              &op) == SCRY_E_NOTFOUND,
              "%d.%d past the end", a->major, a->minor);
        /* Truncated code never reads past LEN. */
        for (size_t n = 0; n < len; n++) {
            uint8_t *t = malloc(n ? n : 1);
            memcpy(t, code, n);
            int rc = pystate_opcode_find_instruction(a->major, a->minor, t, n, (uint32_t)len / 2,
                                                     &at, &op);
            CHECK(rc == 0 || rc == SCRY_E_NOTFOUND, "truncated rc %d", rc);
            free(t);
        }
    }
    /* 3.12 under sys.monitoring LINE events: RESUME, INSTRUMENTED_LINE(STORE_FAST...),
     * whose length the opcode alone cannot tell. */
    size_t len = unhex("9700fe017d00fe005300", code, sizeof code);
    uint32_t at = 9;
    uint8_t op = 0;
    CHECK(pystate_opcode_find_instruction(3, 12, code, len, 0, &at, &op) == 0 && at == 0 &&
              op == 0x97,
          "3.12 RESUME");
    CHECK(pystate_opcode_find_instruction(3, 12, code, len, 4, &at, &op) == SCRY_E_NOTFOUND,
          "3.12 INSTRUMENTED_LINE");
    CHECK(pystate_opcode_find_instruction(3, 12, NULL, 4, 0, &at, &op) == SCRY_E_INVAL, "NULL");
    CHECK(pystate_opcode_find_instruction(3, 4, code, len, 0, &at, &op) == SCRY_E_UNSUPPORTED,
          "3.4");
}

/* The opcode of NAME in 3.MINOR, or -1. */
static int opcode_named(int minor, const char *name)
{
    pystate_opcode_info_t info;
    for (int op = 0; op < 256; op++)
        if (pystate_opcode_info(3, minor, (uint8_t)op, &info) == 0 && strcmp(info.name, name) == 0)
            return op;
    return -1;
}

/* Which instructions may push a Python frame from the eval loop itself (a careful reader's
 * caller check): the families of the calls, generators, __getitem__ and properties do, a
 * compare, a branch or a load never do; what hides the real opcode may. */
static void test_pushes_frame(void)
{
    static const struct {
        int from, to; /* minor versions */
        const char *name;
        int pushes;
    } cases[] = {
        {11, 15, "CALL_PY_EXACT_ARGS", 1},
        {11, 13, "BINARY_SUBSCR_GETITEM", 1},
        {14, 15, "BINARY_OP_SUBSCR_GETITEM", 1},
        {12, 15, "LOAD_ATTR_PROPERTY", 1},
        {12, 15, "LOAD_ATTR_GETATTRIBUTE_OVERRIDDEN", 1},
        {12, 15, "FOR_ITER_GEN", 1},
        {12, 15, "SEND_GEN", 1},
        {12, 15, "INSTRUMENTED_FOR_ITER", 1},
        {12, 15, "INSTRUMENTED_CALL", 1},
        {12, 15, "INSTRUMENTED_LINE", 1},
        {13, 15, "ENTER_EXECUTOR", 1},
        {12, 15, "COMPARE_OP_INT", 0},
        {12, 15, "POP_JUMP_IF_FALSE", 0},
        {11, 13, "BINARY_OP_ADD_INT", 0},
        {14, 15, "BINARY_OP_ADD_INT", 1}, /* its family took BINARY_SUBSCR_GETITEM in */
        {11, 15, "LOAD_FAST", 0},
        {11, 15, "LOAD_GLOBAL", 0},
        {11, 13, "RETURN_VALUE", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int minor = cases[i].from; minor <= cases[i].to; minor++) {
            int op = opcode_named(minor, cases[i].name);
            CHECK(op >= 0, "3.%d has no %s", minor, cases[i].name);
            if (op >= 0)
                CHECK(pystate_opcode_pushes_frame(3, minor, (uint8_t)op) == cases[i].pushes,
                      "3.%d %s pushes a frame: not %d", minor, cases[i].name, cases[i].pushes);
        }
    }
    CHECK(pystate_opcode_pushes_frame(3, 16, 1) == 1, "3.16: unknown, so it may");
}

int main(void)
{
    test_known();
    test_versions();
    test_find_instruction();
    test_pushes_frame();
    return check_summary("test_pystate_opcodes");
}
