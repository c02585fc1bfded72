/* test_pystate_debug_offsets.c - the _Py_DebugOffsets reader on the real bytes of every
 * supported version (tests/data/debug_offsets_*.bin, captured from live 3.13.0, 3.14.10,
 * 3.15.2 and the Py_DEBUG builds 3.14.10d, 3.15.2d by tests/data/debug_offsets_capture.py):
 * the parsed layout of a release build must equal the table generated from that version's
 * headers (pystate/layouts_gen.c), a debug build's must agree with its release build on
 * every object and frame offset; corrupted copies (wrong cookie, offsets past their struct,
 * sizes over 1 MiB, each word absurd) must be rejected with nothing filled; a 3.16 (the
 * 3.15 capture with its version patched) is refused unless read with --assume-version 3.15,
 * and then only while it validates. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug_layouts_gen.h"
#include "debug_offsets.h"
#include "layout.h"
#include "rmem.h"
#include "scry_err.h"
#include "check.h"

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

/* Word I of B; I is an index from the generated tables (-1: absent, yields 0). */
static uint64_t word(const unsigned char *b, int i)
{
    uint64_t v = 0;
    if (i < 0 || i >= PYSTATE_DEBUG_OFFSETS_MAX_SIZE / 8)
        return 0;
    memcpy(&v, b + 8 * i, 8);
    return v;
}

static void set_word(unsigned char *b, int i, uint64_t v)
{
    if (i < 0 || i >= PYSTATE_DEBUG_OFFSETS_MAX_SIZE / 8)
        return;
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

    CHECK(i >= 0 && len <= sizeof copy, "%s: no such word", what);
    if (i < 0 || len > sizeof copy)
        return;
    memcpy(copy, block, len);
    set_word(copy, i, v);
    memset(&out, 0xab, sizeof out);
    memcpy(&canary, &out, sizeof out);
    int rc = pystate_debug_offsets_parse(copy, len, &out, &hex);
    CHECK(rc == expect, "%s: got %s, expected %s", what, scry_err_name(rc), scry_err_name(expect));
    CHECK(memcmp(&out, &canary, sizeof out) == 0, "%s: output was written", what);
    CHECK(hex == 0xdeadbeef, "%s: version was written", what);
}

/* The word index of member F in the block of 3.MINOR (-1 when absent). */
static int W(int minor, int f)
{
    for (size_t i = 0; i < PYSTATE_DBG_NLAYOUTS; i++)
        if (pystate_dbg_layouts[i].minor == minor)
            return pystate_dbg_layouts[i].word[f];
    return -1;
}

static size_t words_of(int minor)
{
    for (size_t i = 0; i < PYSTATE_DBG_NLAYOUTS; i++)
        if (pystate_dbg_layouts[i].minor == minor)
            return pystate_dbg_layouts[i].words;
    return 0;
}

/* Corruptions every capture must survive. */
static void corrupt_all(const unsigned char *block, size_t len, int minor, const char *name)
{
    char what[128];
    pystate_layout_t out;
    uint64_t cookie;
    int wts = W(minor, DBGF_THREAD_STATE_SIZE), wcf = W(minor, DBGF_THREAD_STATE_CURRENT_FRAME);

    memcpy(&cookie, "xdebugpz", 8);
#define WHAT(s) (snprintf(what, sizeof what, "%s: %s", name, s), what)
    expect_reject(block, len, 0, cookie, SCRY_E_CORRUPT, WHAT("bad cookie"));
    expect_reject(block, len, 0, 0, SCRY_E_CORRUPT, WHAT("zero cookie"));
    expect_reject(block, len, 1, 0x030c01f0, SCRY_E_CORRUPT, WHAT("3.12 behind a cookie"));
    expect_reject(block, len, 1, 0x020d00f0, SCRY_E_CORRUPT, WHAT("2.13"));
    expect_reject(block, len, 1, 0x1030d00f0ull, SCRY_E_CORRUPT, WHAT("high bits"));
    expect_reject(block, len, 1, 0x030d0070, SCRY_E_CORRUPT, WHAT("release level 7"));
    expect_reject(block, len, 1, ((uint64_t)0x0300 | (uint64_t)minor) << 16 | 0xb1,
                  SCRY_E_UNSUPPORTED, WHAT("beta of a known minor"));
    expect_reject(block, len, 2, 1, SCRY_E_UNSUPPORTED, WHAT("free-threaded"));
    expect_reject(block, len, 2, 7, SCRY_E_CORRUPT, WHAT("free_threaded 7"));
    expect_reject(block, len, wcf, word(block, wts), SCRY_E_CORRUPT, WHAT("offset at struct size"));
    expect_reject(block, len, wcf, word(block, wts) + 4096, SCRY_E_CORRUPT,
                  WHAT("offset past struct size"));
    expect_reject(block, len, wcf, word(block, wcf) + 1, SCRY_E_CORRUPT,
                  WHAT("misaligned pointer"));
    expect_reject(block, len, W(minor, DBGF_INTERPRETER_STATE_SIZE), (1u << 20) + 8, SCRY_E_CORRUPT,
                  WHAT("size > 1 MiB"));
    expect_reject(block, len, W(minor, DBGF_RUNTIME_STATE_SIZE), UINT64_MAX, SCRY_E_CORRUPT,
                  WHAT("size 2^64-1"));
    expect_reject(block, len, W(minor, DBGF_CODE_OBJECT_SIZE), 0, SCRY_E_CORRUPT,
                  WHAT("zero size"));
    expect_reject(block, len, W(minor, DBGF_INTERPRETER_FRAME_PREVIOUS), UINT64_MAX - 3,
                  SCRY_E_CORRUPT, WHAT("wrapping offset"));
    expect_reject(block, len, W(minor, DBGF_UNICODE_OBJECT_SIZE),
                  word(block, W(minor, DBGF_UNICODE_OBJECT_SIZE)) + 8, SCRY_E_CORRUPT,
                  WHAT("unexpected PyUnicodeObject size"));
    if (W(minor, DBGF_LLIST_NODE_NEXT) >= 0)
        expect_reject(block, len, W(minor, DBGF_LLIST_NODE_NEXT), 12, SCRY_E_CORRUPT,
                      WHAT("llist_node.next past the node"));
    if (W(minor, DBGF_DEBUGGER_SUPPORT_DEBUGGER_SCRIPT_PATH_SIZE) >= 0)
        expect_reject(block, len, W(minor, DBGF_DEBUGGER_SUPPORT_DEBUGGER_SCRIPT_PATH_SIZE),
                      (1u << 20) + 1, SCRY_E_CORRUPT, WHAT("script path size > 1 MiB"));
    if (W(minor, DBGF_INTERPRETER_STATE_THREADS_MAIN) >= 0)
        expect_reject(block, len, W(minor, DBGF_INTERPRETER_STATE_THREADS_MAIN),
                      word(block, W(minor, DBGF_INTERPRETER_STATE_SIZE)) + 8, SCRY_E_CORRUPT,
                      WHAT("threads_main past PyInterpreterState"));
    if (W(minor, DBGF_HEAP_TYPE_OBJECT_HT_CACHED_KEYS) >= 0)
        expect_reject(block, len, W(minor, DBGF_HEAP_TYPE_OBJECT_HT_CACHED_KEYS),
                      word(block, W(minor, DBGF_HEAP_TYPE_OBJECT_SIZE)), SCRY_E_CORRUPT,
                      WHAT("ht_cached_keys at the end of PyHeapTypeObject"));
#undef WHAT
    /* Every single word set to an absurd value is rejected. */
    int rejected = 0, words = (int)words_of(minor);
    for (int i = 1; i < words; i++) {
        unsigned char copy[PYSTATE_DEBUG_OFFSETS_MAX_SIZE];
        memcpy(copy, block, len);
        set_word(copy, i, 0xffffffff00000001ull);
        if (pystate_debug_offsets_parse(copy, len, &out, NULL) != 0)
            rejected++;
    }
    CHECK(rejected == words - 1, "%s: %d of %d absurd words rejected", name, rejected, words - 1);
    int rc = pystate_debug_offsets_parse(block, len - 1, &out, NULL);
    CHECK(rc == SCRY_E_INVAL, "%s: short buffer: %s", name, scry_err_name(rc));
}

typedef struct capture {
    const char *file;
    int minor;
    uint32_t hex;
    int debug;
} capture_t;

static const capture_t captures[] = {
    {"debug_offsets_3_13_0.bin", 13, 0x030d00f0, 0},
    {"debug_offsets_3_14_10.bin", 14, 0x030e0af0, 0},
    {"debug_offsets_3_14_10d.bin", 14, 0x030e0af0, 1},
    {"debug_offsets_3_15_2.bin", 15, 0x030f02f0, 0},
    {"debug_offsets_3_15_2d.bin", 15, 0x030f02f0, 1},
};

/* A debug build's layout: the object header and every object/frame/code offset equal the
 * release build's (Py_DEBUG does not change the ABI since 3.8); only the interpreter-wide
 * structs grow. */
static void compare_debug(const pystate_layout_t *d, const pystate_layout_t *r, const char *what)
{
#define SAME(f)                                                                                    \
    CHECK(d->f == r->f, "%s: " #f " debug %lld, release %lld", what, (long long)d->f,              \
          (long long)r->f);
    SAME(object_type)
    SAME(var_size)
    SAME(type_name)
    SAME(type_flags)
    SAME(bytes_sval)
    SAME(unicode_length)
    SAME(unicode_state)
    SAME(unicode_ascii_size)
    SAME(iframe_code)
    SAME(iframe_previous)
    SAME(iframe_instr)
    SAME(iframe_owner)
    SAME(iframe_localsplus)
    SAME(code_filename)
    SAME(code_name)
    SAME(code_qualname)
    SAME(code_firstlineno)
    SAME(code_linetable)
    SAME(code_adaptive)
    SAME(dict_keys)
    SAME(long_tag)
    SAME(long_digits)
    SAME(chunk_top)
#undef SAME
    CHECK(d->runtime_size > r->runtime_size, "%s: debug _PyRuntimeState %lld not larger", what,
          (long long)d->runtime_size);
}

/* 3.16: the 3.15 capture with its version patched to 3.16.0a1. */
static void check_316(const unsigned char *b15, size_t len)
{
    unsigned char b[PYSTATE_DEBUG_OFFSETS_MAX_SIZE];
    pystate_layout_t out;
    uint32_t hex = 0;
    char why[160];
    int rc;

    memcpy(b, b15, len);
    set_word(b, 1, 0x031000a1);
    rc = pystate_debug_offsets_parse_as(b, len, 0, &out, &hex, why, sizeof why);
    CHECK(rc == SCRY_E_UNSUPPORTED, "3.16: %s", scry_err_name(rc));
    CHECK(strstr(why, "3.16") && strstr(why, "3.15"), "3.16 reason: %s", why);
    rc = pystate_debug_offsets_parse_as(b, len, 15, &out, &hex, why, sizeof why);
    CHECK(rc == 0, "3.16 as 3.15: %s (%s)", scry_err_name(rc), why);
    CHECK(rc != 0 || (out.minor == 16 && hex == 0x031000a1), "3.16 as 3.15: minor %d", out.minor);
    rc = pystate_debug_offsets_parse_as(b, len, 14, &out, &hex, why, sizeof why);
    CHECK(rc == SCRY_E_UNSUPPORTED, "3.16 as 3.14 (not the newest): %s", scry_err_name(rc));
    /* A known version is read with its own layout whatever is assumed. */
    rc = pystate_debug_offsets_parse_as(b15, len, 15, &out, &hex, why, sizeof why);
    CHECK(rc == 0 && out.minor == 15, "3.15 with an assumption: %s", scry_err_name(rc));
    /* A 3.16 whose block does not fit the 3.15 layout is refused, with the member named. */
    set_word(b, W(15, DBGF_THREAD_STATE_CURRENT_FRAME), word(b, W(15, DBGF_THREAD_STATE_SIZE)));
    rc = pystate_debug_offsets_parse_as(b, len, 15, &out, &hex, why, sizeof why);
    CHECK(rc == SCRY_E_CORRUPT, "3.16 not fitting 3.15: %s", scry_err_name(rc));
    CHECK(strstr(why, "thread_state.current_frame") != NULL, "3.16 misfit reason: %s", why);
    /* Through an image reader: the assumed layout's size is read. */
    memcpy(b, b15, len);
    set_word(b, 1, 0x031000f0);
    rmem_t *m = rmem_open_image();
    CHECK(m && rmem_image_add(m, 0x20000, b, len) == 0, "3.16 image");
    rc = pystate_debug_offsets_read_as(m, 0x20000, 0, &out, NULL, why, sizeof why);
    CHECK(rc == SCRY_E_UNSUPPORTED, "3.16 read: %s", scry_err_name(rc));
    rc = pystate_debug_offsets_read_as(m, 0x20000, 15, &out, NULL, why, sizeof why);
    CHECK(rc == 0 && out.minor == 16, "3.16 read as 3.15: %s", scry_err_name(rc));
    rmem_free(m);
}

/* PEP 768's members (pystate_debug_offsets_read_remote) of capture K's BLOCK: present and
 * inside their structs on 3.14+ (the path buffer is 512 bytes), absent on 3.13, and a
 * corrupted path size or pending-call offset refused. */
static void check_remote(const capture_t *k, const unsigned char *block, size_t len)
{
    unsigned char copy[PYSTATE_DEBUG_OFFSETS_MAX_SIZE];
    pystate_dbg_remote_t r, canary;
    memset(&r, 0xab, sizeof r);
    memcpy(&canary, &r, sizeof r);
    rmem_t *m = rmem_open_image();
    CHECK(m && rmem_image_add(m, 0x10000, block, len) == 0, "%s: image", k->file);
    int rc = pystate_debug_offsets_read_remote(m, 0x10000, 0, &r);
    rmem_free(m);
    if (k->minor < 14) {
        CHECK(rc == SCRY_E_UNSUPPORTED, "%s: remote: %s", k->file, scry_err_name(rc));
        CHECK(memcmp(&r, &canary, sizeof r) == 0, "%s: remote output written", k->file);
        return;
    }
    CHECK(rc == 0, "%s: remote: %s", k->file, scry_err_name(rc));
    CHECK(r.script_path_size == 512 && r.tstate_support > 0 && r.tstate_eval_breaker > 0 &&
              r.interp_remote_enabled > 0 && r.interp_threads_main > 0,
          "%s: remote members %lld %lld %lld %lld %lld", k->file, (long long)r.script_path_size,
          (long long)r.tstate_support, (long long)r.tstate_eval_breaker,
          (long long)r.interp_remote_enabled, (long long)r.interp_threads_main);
    static const struct {
        int f;
        uint64_t v;
    } bad[] = {
        {DBGF_DEBUGGER_SUPPORT_DEBUGGER_SCRIPT_PATH_SIZE, 0},
        {DBGF_DEBUGGER_SUPPORT_DEBUGGER_SCRIPT_PATH_SIZE, 1u << 21},
        {DBGF_DEBUGGER_SUPPORT_DEBUGGER_PENDING_CALL, 1u << 20},
        {DBGF_DEBUGGER_SUPPORT_REMOTE_DEBUGGER_SUPPORT, 1u << 21},
        {DBGF_DEBUGGER_SUPPORT_EVAL_BREAKER, 1u << 19},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(copy, block, len);
        set_word(copy, W(k->minor, bad[i].f), bad[i].v);
        m = rmem_open_image();
        CHECK(m && rmem_image_add(m, 0x10000, copy, len) == 0, "%s: image", k->file);
        memcpy(&r, &canary, sizeof r);
        rc = pystate_debug_offsets_read_remote(m, 0x10000, 0, &r);
        rmem_free(m);
        CHECK(rc == SCRY_E_CORRUPT, "%s: remote member %d = %llu: %s", k->file, bad[i].f,
              (unsigned long long)bad[i].v, scry_err_name(rc));
        CHECK(memcmp(&r, &canary, sizeof r) == 0, "%s: remote output written", k->file);
    }
}

int main(void)
{
    unsigned char block[PYSTATE_DEBUG_OFFSETS_MAX_SIZE + 64];
    pystate_layout_t release[16];
    pystate_layout_t out;
    uint32_t hex = 0;
    int rc;

    CHECK(pystate_debug_offsets_size(0x030d00f0) == 584, "3.13 size");
    CHECK(pystate_debug_offsets_size(0x030e00f0) == 760, "3.14 size");
    CHECK(pystate_debug_offsets_size(0x030f00f0) == 888, "3.15 size");
    CHECK(pystate_debug_offsets_size(0x030c00f0) == 0, "3.12 size");
    CHECK(pystate_debug_offsets_size(0x031000f0) == 0, "3.16 size");
    CHECK(pystate_debug_offsets_oldest_minor() == 13 && pystate_debug_offsets_newest_minor() == 15,
          "known range");
    for (size_t i = 0; i < PYSTATE_DBG_NLAYOUTS; i++)
        CHECK(pystate_dbg_layouts[i].words * 8 <= PYSTATE_DEBUG_OFFSETS_MAX_SIZE, "3.%d fits",
              pystate_dbg_layouts[i].minor);

    for (size_t c = 0; c < sizeof captures / sizeof captures[0]; c++) {
        const capture_t *k = &captures[c];
        size_t len = load(k->file, block, sizeof block);
        const pystate_layout_t *gen = pystate_layout_for(3, k->minor);

        CHECK(len == words_of(k->minor) * 8, "%s has %zu bytes", k->file, len);
        CHECK(gen != NULL, "no generated 3.%d layout", k->minor);
        if (len != words_of(k->minor) * 8 || !gen)
            continue;
        rc = pystate_debug_offsets_parse(block, len, &out, &hex);
        CHECK(rc == 0, "%s: parse: %s", k->file, scry_err_name(rc));
        CHECK(hex == k->hex, "%s: version 0x%08x", k->file, hex);
        if (rc != 0)
            continue;
        if (!k->debug) {
            pystate_layout_t want = *gen;
            if (k->minor == 15) {
                /* Measured: 3.15's headers compiled by the host's GCC 12 (the generator) give
                 * _PyRuntimeState and PyInterpreterState 8 bytes less than Debian's GCC 16
                 * build reports; every offset agrees. Sizes only bound validation. */
                CHECK(out.runtime_size == gen->runtime_size + 8 &&
                          out.interp_size == gen->interp_size + 8,
                      "3.15 sizes: runtime %lld/%lld interp %lld/%lld", (long long)out.runtime_size,
                      (long long)gen->runtime_size, (long long)out.interp_size,
                      (long long)gen->interp_size);
                want.runtime_size = out.runtime_size;
                want.interp_size = out.interp_size;
            }
            compare(&out, &want, k->file);
            release[k->minor] = out;
        } else {
            compare_debug(&out, &release[k->minor], k->file);
        }

        /* Through an image reader at an address _PyRuntime might have. */
        rmem_t *m = rmem_open_image();
        CHECK(m && rmem_image_add(m, 0x7f7f167294c0, block, len) == 0, "image");
        pystate_layout_t viamem;
        rc = pystate_debug_offsets_read(m, 0x7f7f167294c0, &viamem, NULL);
        CHECK(rc == 0 && memcmp(&viamem, &out, sizeof out) == 0, "%s: read: %s", k->file,
              scry_err_name(rc));
        rc = pystate_debug_offsets_read(m, 0x1000, &viamem, NULL);
        CHECK(rc == SCRY_E_FAULT, "%s: unmapped read: %s", k->file, scry_err_name(rc));
        rmem_free(m);
        rmem_t *shortm = rmem_open_image();
        CHECK(shortm && rmem_image_add(shortm, 0x5000, block, 300) == 0, "short image");
        rc = pystate_debug_offsets_read(shortm, 0x5000, &viamem, NULL);
        CHECK(rc == SCRY_E_FAULT, "%s: block cut by the end of the mapping: %s", k->file,
              scry_err_name(rc));
        rmem_free(shortm);

        check_remote(k, block, len);
        corrupt_all(block, len, k->minor, k->file);
        if (k->minor == 15 && !k->debug)
            check_316(block, len);
    }

    rc = pystate_debug_offsets_parse(NULL, 584, &out, NULL);
    CHECK(rc == SCRY_E_INVAL, "NULL buffer: %s", scry_err_name(rc));
    rc = pystate_debug_offsets_parse(block, 584, NULL, NULL);
    CHECK(rc == SCRY_E_INVAL, "NULL out: %s", scry_err_name(rc));

    return check_summary("test_pystate_debug_offsets");
}
