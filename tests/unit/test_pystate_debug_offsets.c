/* test_pystate_debug_offsets.c - the _Py_DebugOffsets reader on the real bytes of a 3.13.0
 * process (tests/data/debug_offsets_3_13_0.bin, captured by
 * tests/data/debug_offsets_capture.py): the parsed layout must equal the table generated
 * from the 3.13 headers; corrupted copies must be rejected with nothing filled. 3.14 is
 * checked on a block rearranged from the 3.13 capture into the 3.14.0 member order (with
 * synthetic values for the members 3.13 lacks): that tests the mapping, not the values. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug_offsets.h"
#include "layout.h"
#include "rmem.h"
#include "scry_err.h"

static int failures;
static long checks;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define LAYOUT_I64_FIELDS(X)                                                                       \
    X(runtime_size)                                                                                \
    X(runtime_interpreters_head)                                                                   \
    X(runtime_interpreters_main)                                                                   \
    X(runtime_tstate_current)                                                                      \
    X(runtime_gil)                                                                                 \
    X(gil_locked)                                                                                  \
    X(gil_last_holder)                                                                             \
    X(interp_size)                                                                                 \
    X(interp_next)                                                                                 \
    X(interp_tstate_head)                                                                          \
    X(interp_id)                                                                                   \
    X(interp_gil_ptr)                                                                              \
    X(interp_modules)                                                                              \
    X(tstate_size)                                                                                 \
    X(tstate_prev)                                                                                 \
    X(tstate_next)                                                                                 \
    X(tstate_interp)                                                                               \
    X(tstate_frame)                                                                                \
    X(cframe_current_frame)                                                                        \
    X(tstate_thread_id)                                                                            \
    X(tstate_native_thread_id)                                                                     \
    X(tstate_datastack_chunk)                                                                      \
    X(chunk_previous)                                                                              \
    X(chunk_size)                                                                                  \
    X(chunk_top)                                                                                   \
    X(chunk_data)                                                                                  \
    X(frame_back)                                                                                  \
    X(frame_code)                                                                                  \
    X(frame_lasti)                                                                                 \
    X(frame_lineno)                                                                                \
    X(iframe_code)                                                                                 \
    X(iframe_previous)                                                                             \
    X(iframe_instr)                                                                                \
    X(iframe_owner)                                                                                \
    X(iframe_is_entry)                                                                             \
    X(iframe_localsplus)                                                                           \
    X(code_size)                                                                                   \
    X(code_filename)                                                                               \
    X(code_name)                                                                                   \
    X(code_qualname)                                                                               \
    X(code_firstlineno)                                                                            \
    X(code_linetable)                                                                              \
    X(code_code)                                                                                   \
    X(code_adaptive)                                                                               \
    X(code_size_field)                                                                             \
    X(object_type)                                                                                 \
    X(var_size)                                                                                    \
    X(type_name)                                                                                   \
    X(bytes_sval)                                                                                  \
    X(unicode_length)                                                                              \
    X(unicode_state)                                                                               \
    X(unicode_ascii_size)                                                                          \
    X(unicode_compact_size)                                                                        \
    X(unicode_data_any)

/* Word indices (uint64_t after the 8-byte cookie counts as word 1) in the 3.13 block. */
enum {
    W_VERSION = 1,
    W_FREE_THREADED = 2,
    W_RT_SIZE = 3,
    W_INTERP_SIZE = 6,
    W_INTERP_THREADS_HEAD = 9,
    W_TSTATE_SIZE = 19,
    W_TSTATE_CURRENT_FRAME = 23,
    W_IFRAME_PREVIOUS = 29,
    W_CODE_SIZE = 34,
    W_UNICODE_SIZE = 67,
    W_313_WORDS = 73,
};

static void compare(const pystate_layout_t *a, const pystate_layout_t *b, const char *what)
{
    CHECK(a->major == b->major && a->minor == b->minor, "%s: version", what);
    CHECK(a->unicode_style == b->unicode_style, "%s: unicode_style", what);
    CHECK(a->frame_style == b->frame_style, "%s: frame_style", what);
    CHECK(a->linetable_style == b->linetable_style, "%s: linetable_style", what);
#define CMP(f)                                                                                     \
    CHECK(a->f == b->f, "%s: " #f " parsed %lld, generated %lld", what, (long long)a->f,           \
          (long long)b->f);
    LAYOUT_I64_FIELDS(CMP)
#undef CMP
}

static size_t load(const char *name, unsigned char *buf, size_t max)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SCRY_TEST_DATA, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    size_t n = fread(buf, 1, max, f);
    fclose(f);
    return n;
}

static uint64_t word(const unsigned char *b, int i)
{
    uint64_t v;
    memcpy(&v, b + 8 * i, 8);
    return v;
}

static void set_word(unsigned char *b, int i, uint64_t v)
{
    memcpy(b + 8 * i, &v, 8);
}

/* Parses a mutated copy of BLOCK (LEN bytes): word I set to V; expects error EXPECT and an
 * untouched output. */
static void expect_reject(const unsigned char *block, size_t len, int i, uint64_t v, int expect,
                          const char *what)
{
    unsigned char copy[PYSTATE_DEBUG_OFFSETS_MAX_SIZE];
    pystate_layout_t out, canary;
    uint32_t hex = 0xdeadbeef;

    memcpy(copy, block, len);
    set_word(copy, i, v);
    memset(&out, 0xab, sizeof out);
    memcpy(&canary, &out, sizeof out);
    int rc = pystate_debug_offsets_parse(copy, len, &out, &hex);
    CHECK(rc == expect, "%s: got %s, expected %s", what, scry_err_name(rc), scry_err_name(expect));
    CHECK(memcmp(&out, &canary, sizeof out) == 0, "%s: output was written", what);
    CHECK(hex == 0xdeadbeef, "%s: version was written", what);
}

/* Rearranges the 3.13 block into the 3.14.0 member order; members 3.13 lacks get plausible
 * synthetic values. */
static void make_314(const unsigned char *b13, unsigned char *b14)
{
    int o = 0, i = 0;
#define COPY(n)                                                                                    \
    do {                                                                                           \
        memcpy(b14 + 8 * o, b13 + 8 * i, 8 * (n));                                                 \
        o += (n);                                                                                  \
        i += (n);                                                                                  \
    } while (0)
#define PUT(v)                                                                                     \
    do {                                                                                           \
        set_word(b14, o, (v));                                                                     \
        o++;                                                                                       \
    } while (0)
    COPY(3);                                   /* cookie, version, free_threaded */
    COPY(3);                                   /* runtime_state */
    COPY(4);                                   /* interp: size, id, next, threads_head */
    PUT(word(b13, W_INTERP_THREADS_HEAD) + 8); /* threads_main */
    COPY(9);                                   /* gc .. gil_runtime_state_holder */
    PUT(0x100);                                /* code_object_generation */
    PUT(0);                                    /* tlbc_generation */
    COPY(9);                                   /* thread_state */
    COPY(6);                                   /* interpreter_frame */
    PUT(0x40);                                 /* stackpointer */
    PUT(0);                                    /* tlbc_index */
    COPY(10);                                  /* code_object */
    PUT(0);                                    /* co_tlbc */
    COPY(2 + 4 + 3 + 3);                       /* pyobject, type, tuple, list */
    PUT(200);                                  /* set_object: size, used, table, mask */
    PUT(24);
    PUT(40);
    PUT(32);
    COPY(3 + 2 + 3 + 3 + 4 + 2); /* dict, float, long, bytes, unicode, gc */
    PUT(0x60);                   /* gen_object: size, gi_name, gi_iframe, gi_frame_state */
    PUT(0x20);
    PUT(0x50);
    PUT(0x43);
    PUT(0); /* llist_node: next, prev */
    PUT(8);
    PUT(0xa8); /* debugger_support */
    PUT(0xb0);
    PUT(0x1000);
    PUT(0);
    PUT(4);
    PUT(512);
#undef COPY
#undef PUT
    CHECK(i == W_313_WORDS && o * 8 == PYSTATE_DEBUG_OFFSETS_MAX_SIZE, "3.14 block built: %d, %d",
          i, o);
}

int main(void)
{
    unsigned char block[PYSTATE_DEBUG_OFFSETS_MAX_SIZE + 64];
    size_t len = load("debug_offsets_3_13_0.bin", block, sizeof block);
    const pystate_layout_t *gen = pystate_layout_for(3, 13);
    pystate_layout_t out;
    uint32_t hex = 0;
    int rc;

    CHECK(len == 584, "capture has %zu bytes", len);
    CHECK(gen != NULL, "no generated 3.13 layout");
    if (len != 584 || !gen)
        return 1;
    CHECK(pystate_debug_offsets_size(0x030d00f0) == 584, "3.13 size");
    CHECK(pystate_debug_offsets_size(0x030e00f0) == 760, "3.14 size");
    CHECK(pystate_debug_offsets_size(0x030c00f0) == 0, "3.12 size");

    /* The real bytes parse and agree with the generated table on every field. */
    rc = pystate_debug_offsets_parse(block, len, &out, &hex);
    CHECK(rc == 0, "parse: %s", scry_err_name(rc));
    CHECK(hex == 0x030d00f0, "version 0x%08x", hex);
    if (rc == 0)
        compare(&out, gen, "3.13.0 capture");

    /* Through an image reader at the address _PyRuntime had. */
    rmem_t *m = rmem_open_image();
    CHECK(m && rmem_image_add(m, 0x7f7f167294c0, block, len) == 0, "image");
    memset(&out, 0, sizeof out);
    rc = pystate_debug_offsets_read(m, 0x7f7f167294c0, &out, NULL);
    CHECK(rc == 0, "read: %s", scry_err_name(rc));
    if (rc == 0)
        compare(&out, gen, "3.13.0 via rmem");
    rc = pystate_debug_offsets_read(m, 0x1000, &out, NULL);
    CHECK(rc == SCRY_E_FAULT, "unmapped read: %s", scry_err_name(rc));
    rmem_t *shortm = rmem_open_image();
    CHECK(shortm && rmem_image_add(shortm, 0x5000, block, 300) == 0, "short image");
    rc = pystate_debug_offsets_read(shortm, 0x5000, &out, NULL);
    CHECK(rc == SCRY_E_FAULT, "block cut by the end of the mapping: %s", scry_err_name(rc));
    rmem_free(shortm);
    rmem_free(m);

    /* Corrupted copies. */
    uint64_t cookie;
    memcpy(&cookie, "xdebugpz", 8);
    expect_reject(block, len, 0, cookie, SCRY_E_CORRUPT, "bad cookie");
    expect_reject(block, len, W_VERSION, 0x030f00f0, SCRY_E_UNSUPPORTED, "3.15");
    expect_reject(block, len, W_VERSION, 0x030d00b1, SCRY_E_UNSUPPORTED, "3.13.0b1");
    expect_reject(block, len, W_VERSION, 0x030c01f0, SCRY_E_CORRUPT, "3.12 behind a cookie");
    expect_reject(block, len, W_VERSION, 0x020d00f0, SCRY_E_CORRUPT, "2.13");
    expect_reject(block, len, W_VERSION, 0x1030d00f0ull, SCRY_E_CORRUPT, "high bits");
    expect_reject(block, len, W_VERSION, 0x030d0070, SCRY_E_CORRUPT, "release level 7");
    expect_reject(block, len, W_FREE_THREADED, 1, SCRY_E_UNSUPPORTED, "free-threaded");
    expect_reject(block, len, W_FREE_THREADED, 7, SCRY_E_CORRUPT, "free_threaded 7");
    expect_reject(block, len, W_TSTATE_CURRENT_FRAME, word(block, W_TSTATE_SIZE), SCRY_E_CORRUPT,
                  "offset at struct size");
    expect_reject(block, len, W_TSTATE_CURRENT_FRAME, word(block, W_TSTATE_SIZE) + 4096,
                  SCRY_E_CORRUPT, "offset past struct size");
    expect_reject(block, len, W_TSTATE_CURRENT_FRAME, word(block, W_TSTATE_CURRENT_FRAME) + 1,
                  SCRY_E_CORRUPT, "misaligned pointer");
    expect_reject(block, len, W_INTERP_SIZE, (1u << 20) + 8, SCRY_E_CORRUPT, "size > 1 MiB");
    expect_reject(block, len, W_RT_SIZE, UINT64_MAX, SCRY_E_CORRUPT, "size 2^64-1");
    expect_reject(block, len, W_CODE_SIZE, 0, SCRY_E_CORRUPT, "zero size");
    expect_reject(block, len, W_IFRAME_PREVIOUS, UINT64_MAX - 3, SCRY_E_CORRUPT, "wrapping offset");
    expect_reject(block, len, W_UNICODE_SIZE, word(block, W_UNICODE_SIZE) + 8, SCRY_E_CORRUPT,
                  "unexpected PyUnicodeObject size");
    /* Every single word set to an absurd value is rejected or, for words the reader does not
     * check (gil enabled flag, values it cannot bound), still yields sane output. */
    int rejected = 0;
    for (int i = 1; i < W_313_WORDS; i++) {
        unsigned char copy[PYSTATE_DEBUG_OFFSETS_MAX_SIZE];
        memcpy(copy, block, len);
        set_word(copy, i, 0xffffffff00000001ull);
        if (pystate_debug_offsets_parse(copy, len, &out, NULL) != 0)
            rejected++;
    }
    CHECK(rejected == W_313_WORDS - 1, "%d of %d absurd words rejected", rejected, W_313_WORDS - 1);
    rc = pystate_debug_offsets_parse(block, len - 1, &out, NULL);
    CHECK(rc == SCRY_E_INVAL, "short buffer: %s", scry_err_name(rc));
    rc = pystate_debug_offsets_parse(NULL, len, &out, NULL);
    CHECK(rc == SCRY_E_INVAL, "NULL buffer: %s", scry_err_name(rc));
    rc = pystate_debug_offsets_parse(block, len, NULL, NULL);
    CHECK(rc == SCRY_E_INVAL, "NULL out: %s", scry_err_name(rc));

    /* 3.14 member order. */
    unsigned char b14[PYSTATE_DEBUG_OFFSETS_MAX_SIZE];
    make_314(block, b14);
    set_word(b14, W_VERSION, 0x030e00f0);
    rc = pystate_debug_offsets_parse(b14, sizeof b14, &out, &hex);
    CHECK(rc == 0, "3.14 parse: %s", scry_err_name(rc));
    if (rc == 0) {
        pystate_layout_t want = *gen;
        want.minor = 14;
        compare(&out, &want, "3.14 rearranged");
        CHECK(hex == 0x030e00f0, "3.14 version 0x%08x", hex);
    }
    rc = pystate_debug_offsets_parse(b14, 584, &out, NULL);
    CHECK(rc == SCRY_E_INVAL, "3.14 block cut at the 3.13 size: %s", scry_err_name(rc));
    expect_reject(b14, sizeof b14, 87, 12, SCRY_E_CORRUPT, "3.14 llist_node.next past node");
    expect_reject(b14, sizeof b14, 94, (1u << 20) + 1, SCRY_E_CORRUPT, "3.14 script path size");
    expect_reject(b14, sizeof b14, 10, word(b14, 6) + 8, SCRY_E_CORRUPT,
                  "3.14 threads_main past PyInterpreterState");
    m = rmem_open_image();
    CHECK(m && rmem_image_add(m, 0x10000, b14, sizeof b14) == 0, "3.14 image");
    rc = pystate_debug_offsets_read(m, 0x10000, &out, NULL);
    CHECK(rc == 0 && out.minor == 14, "3.14 read: %s", scry_err_name(rc));
    rmem_free(m);

    printf("test_pystate_debug_offsets: %ld checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
