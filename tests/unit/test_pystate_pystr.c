/* test_pystate_pystr.c - str state words and character data captured from real CPython
 * 3.6, 3.11, 3.12 and 3.13 processes (read with ctypes.string_at from live str objects:
 * compact ASCII, latin-1, UCS2, UCS4, lone surrogate, embedded NUL, str subclasses (non-compact)
 * and interned strings), plus hand-made corner cases. The upper 24 bits of the captured state
 * words are padding garbage, as found in the processes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pystr.h"
#include "scry_err.h"
#include "check.h"

/* The strings, the same in every version (the interned one is named after its version). */
typedef struct str_case {
    const char *what;
    unsigned length; /* code points */
    const char *payload_hex;
    const char *utf8_hex; /* what Python's own encoder gives (U+FFFD for surrogates and NUL) */
} str_case_t;

static const str_case_t strs[] = {
    {"ascii", 3, "616263", "616263"},
    {"e_acute", 1, "e9", "c3a9"},
    {"cafe", 4, "636166e9", "636166c3a9"},
    {"zh", 2, "2d4e8765", "e4b8ade69687"},
    {"emoji", 1, "00f60100", "f09f9880"},
    {"mixed", 4, "6100000000f60100e90000002d4e0000", "61f09f9880c3a9e4b8ad"},
    {"surrogate", 2, "00d87800", "efbfbd78"},
    {"nul", 3, "780079", "78efbfbd79"},
    {"sub_latin1", 2, "6ee9", "6ec3a9"},
    {"sub_ascii", 3, "616263", "616263"},
    {"sub_ucs4", 2, "00f6010021000000", "f09f988021"},
    {"empty", 0, "", ""},
    {"char_a", 1, "61", "61"},
    {"interned", 0, NULL, NULL}, /* "hello_interned_<minor>" */
};
#define NSTRS (sizeof strs / sizeof strs[0])

/* The raw 32-bit state word of each of strs[] in one version. */
typedef struct captured {
    int major, minor;
    int style; /* enum pystate_unicode_style */
    uint32_t state[NSTRS];
} captured_t;

static const captured_t cases[] = {
    {3,
     6,
     0,
     {0x000000e5, 0x000000a4, 0x000000a4, 0x000000a8, 0x864d08b0, 0x000000b0, 0x6f6f72a8,
      0x000000e4, 0x00000084, 0x000000c4, 0x00000090, 0x000000e5, 0x000000e5, 0x000000e5}},
    {3,
     11,
     0,
     {0x000000e5, 0x000000a4, 0x017400a4, 0x000000a8, 0xce3f2ab0, 0x000000b0, 0x000000a8,
      0x000000e4, 0x00000084, 0x000000c4, 0x00000090, 0x000000e5, 0x000000e5, 0xcea602e5}},
    {3,
     12,
     1,
     {0x000000e7, 0x000000a4, 0x30307524, 0x5c666128, 0x65347530, 0x00000030, 0xf655d428,
      0x00007064, 0x00000004, 0x00000044, 0x00000010, 0x000000e7, 0x000000e7, 0x96908066}},
    {3,
     13,
     1,
     {0x00000066, 0x000000a7, 0x30307524, 0x5c666128, 0x65347530, 0x00000030, 0xee926628,
      0x00006664, 0x00000004, 0x00000044, 0x00000010, 0x000000e7, 0x000000e7, 0xad497065}},
};

static size_t unhex(const char *hex, unsigned char *out, size_t max)
{
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n && i < max; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (unsigned char)v;
    }
    return n < max ? n : max;
}

/* One captured string: STATE its state word in MAJOR.MINOR of STYLE. */
static void check_captured(int major, int minor, int style, uint32_t state, const str_case_t *sc)
{
    char name[64], interned[32], interned_hex[64];
    snprintf(name, sizeof name, "%d.%d %s", major, minor, sc->what);
    const char *payload_hex = sc->payload_hex, *utf8_hex = sc->utf8_hex;
    unsigned length = sc->length;
    if (payload_hex == NULL) {
        length = (unsigned)snprintf(interned, sizeof interned, "hello_interned_%d", minor);
        for (unsigned i = 0; i < length; i++)
            snprintf(interned_hex + 2 * i, 3, "%02x", (unsigned char)interned[i]);
        payload_hex = utf8_hex = interned_hex;
    }
    pystate_str_state_t st;
    int rc = pystate_str_decode_state(style, state, &st);
    CHECK(rc == 0, "%s: decode rc %d", name, rc);
    int subclass = strstr(name, " sub_") != NULL;
    CHECK(st.compact == !subclass, "%s: compact %d", name, st.compact);
    CHECK(st.ready == 1, "%s: ready %d", name, st.ready);
    if (strstr(name, "interned") != NULL) {
        CHECK(st.interned != 0, "%s: not interned", name);
    }
    int want_kind = 1;
    if (strstr(name, "zh") || strstr(name, "surrogate")) {
        want_kind = 2;
    } else if (strstr(name, "emoji") || strstr(name, "mixed") || strstr(name, "ucs4")) {
        want_kind = 4;
    }
    CHECK(st.kind == want_kind, "%s: kind %d, want %d", name, st.kind, want_kind);

    /* The data rule against the generated layout of that version. */
    const pystate_layout_t *L = pystate_layout_for(major, minor);
    CHECK(L != NULL, "%s: no layout", name);
    if (L != NULL) {
        int64_t off = -1;
        int indirect = -1;
        rc = pystate_str_data_location(L, &st, &off, &indirect);
        int64_t want = subclass ? L->unicode_data_any
                                : (st.ascii ? L->unicode_ascii_size : L->unicode_compact_size);
        CHECK(rc == 0 && off == want && indirect == subclass, "%s: data at %lld/%d", name,
              (long long)off, indirect);
        CHECK(L->unicode_style == style, "%s: layout style %d", name, L->unicode_style);
    }

    unsigned char payload[64], want_utf8[64];
    size_t plen = unhex(payload_hex, payload, sizeof payload);
    size_t wlen = unhex(utf8_hex, want_utf8, sizeof want_utf8);
    char out[64];
    size_t written = 999;
    rc = pystate_str_to_utf8(payload, plen, st.kind, st.ascii, length, out, sizeof out, &written);
    CHECK(rc == 0 && written == wlen && memcmp(out, want_utf8, wlen) == 0 && out[wlen] == 0,
          "%s: utf8 rc %d, %zu bytes '%s'", name, rc, written, out);

    /* Every output bound: a prefix of whole sequences, NUL-terminated, TRUNC when short. */
    for (size_t cap = 1; cap <= wlen; cap++) {
        char small[64];
        memset(small, 'X', sizeof small);
        rc = pystate_str_to_utf8(payload, plen, st.kind, st.ascii, length, small, cap, &written);
        int cut_ok = written < cap && memcmp(small, want_utf8, written) == 0 &&
                     small[written] == 0 && small[cap] == 'X' &&
                     (written == wlen || (want_utf8[written] & 0xC0) != 0x80);
        CHECK(rc == SCRY_E_TRUNC && cut_ok, "%s: cap %zu rc %d written %zu", name, cap, rc,
              written);
    }
    /* Data shorter than LENGTH code points. */
    if (plen > 0) {
        rc = pystate_str_to_utf8(payload, plen - 1, st.kind, st.ascii, length, out, sizeof out,
                                 &written);
        CHECK(rc == SCRY_E_TRUNC, "%s: short data rc %d", name, rc);
    }
}

static void test_captured(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t j = 0; j < NSTRS; j++)
            check_captured(cases[i].major, cases[i].minor, cases[i].style, cases[i].state[j],
                           &strs[j]);
}

static void test_state_words(void)
{
    pystate_str_state_t st;
    /* PEP 393: interned 1, kind 1, compact, ascii, ready, with garbage above bit 7. */
    CHECK(pystate_str_decode_state(PYSTATE_UNICODE_PEP393, 0xdeadbee5u, &st) == 0 &&
              st.interned == 1 && st.kind == 1 && st.compact && st.ascii && st.ready &&
              !st.statically_allocated,
          "pep393 e5");
    /* 3.12: bit 7 is statically_allocated, 'ready' is implied. */
    CHECK(pystate_str_decode_state(PYSTATE_UNICODE_312, 0xe7u, &st) == 0 && st.interned == 3 &&
              st.statically_allocated && st.ready,
          "312 e7");
    CHECK(pystate_str_decode_state(PYSTATE_UNICODE_312, 0x04u, &st) == 0 && !st.compact &&
              st.kind == 1 && !st.statically_allocated,
          "312 non-compact");
    /* Legacy not-ready string (PyUnicode_FromUnicode(NULL, n) on <= 3.11). */
    CHECK(pystate_str_decode_state(PYSTATE_UNICODE_PEP393, 0x00u, &st) == SCRY_E_UNSUPPORTED,
          "legacy");
    CHECK(pystate_str_decode_state(PYSTATE_UNICODE_PEP393, 0x8cu, &st) == SCRY_E_CORRUPT, "kind 3");
    CHECK(pystate_str_decode_state(PYSTATE_UNICODE_312, 0x00u, &st) == SCRY_E_CORRUPT, "kind 0");
    CHECK(pystate_str_decode_state(PYSTATE_UNICODE_312, 0x68u, &st) == SCRY_E_CORRUPT,
          "ascii kind 2");
    CHECK(pystate_str_decode_state(PYSTATE_UNICODE_PEP393, 0x24u, &st) == SCRY_E_CORRUPT,
          "compact not ready");
    CHECK(pystate_str_decode_state(5, 0xe5u, &st) == SCRY_E_INVAL, "style");
    CHECK(pystate_str_decode_state(0, 0xe5u, NULL) == SCRY_E_INVAL, "NULL");

    pystate_layout_t L;
    memset(&L, 0, sizeof L);
    L.unicode_ascii_size = 40;
    L.unicode_compact_size = -1;
    L.unicode_data_any = 56;
    pystate_str_state_t nonascii = {.kind = 2, .compact = 1, .ready = 1};
    int64_t off;
    int ind;
    CHECK(pystate_str_data_location(&L, &nonascii, &off, &ind) == SCRY_E_UNSUPPORTED, "-1");
}

static void test_conversions(void)
{
    char out[32];
    size_t w;
    static const uint32_t ucs4[] = {0x41, 0x110000, 0xDFFF, 0x10FFFF, 0x7FF, 0x800};
    CHECK(pystate_str_to_utf8(ucs4, sizeof ucs4, 4, 0, 6, out, sizeof out, &w) == 0 && w == 16 &&
              memcmp(out, "A\xef\xbf\xbd\xef\xbf\xbd\xf4\x8f\xbf\xbf\xdf\xbf\xe0\xa0\x80", 16) == 0,
          "ucs4 edges");
    static const unsigned char bad_ascii[] = {'o', 0xe9, 'k'};
    CHECK(pystate_str_to_utf8(bad_ascii, 3, 1, 1, 3, out, sizeof out, &w) == 0 && w == 5 &&
              memcmp(out, "o\xef\xbf\xbdk", 5) == 0,
          "non-ascii byte in ascii string");
    CHECK(pystate_str_to_utf8(bad_ascii, 3, 1, 0, 3, out, sizeof out, &w) == 0 && w == 4 &&
              memcmp(out, "o\xc3\xa9k", 4) == 0,
          "latin-1");
    CHECK(pystate_str_to_utf8(NULL, 0, 1, 1, 0, out, sizeof out, &w) == 0 && w == 0 && !out[0],
          "empty");
    CHECK(pystate_str_to_utf8(bad_ascii, 3, 3, 0, 1, out, sizeof out, &w) == SCRY_E_INVAL,
          "kind 3");
    CHECK(pystate_str_to_utf8(bad_ascii, 3, 1, 0, 1, out, 0, &w) == SCRY_E_INVAL, "size 0");
    CHECK(pystate_str_to_utf8(NULL, 0, 1, 0, 5, out, sizeof out, &w) == SCRY_E_INVAL, "NULL");
    /* A huge claimed length with little data is bounded by the data. */
    CHECK(pystate_str_to_utf8(bad_ascii, 3, 1, 0, UINT64_MAX, out, sizeof out, &w) ==
                  SCRY_E_TRUNC &&
              w == 4,
          "huge length");
}

int main(void)
{
    test_captured();
    test_state_words();
    test_conversions();
    printf("pystr: %zu captured strings\n", sizeof cases / sizeof cases[0] * NSTRS);
    return check_summary("test_pystate_pystr");
}
