/* pystr.c - PEP 393 str state decoding and conversion of its characters to UTF-8. */
#include "pystr.h"

#include <string.h>

#include "scry_err.h"

#define REPLACEMENT 0xFFFDu

int pystate_str_decode_state(int style, uint32_t state_word, pystate_str_state_t *out)
{
    if (out == NULL || (style != PYSTATE_UNICODE_PEP393 && style != PYSTATE_UNICODE_312)) {
        return SCRY_E_INVAL;
    }
    /* Bit positions of GCC's little-endian bitfield allocation: first field lowest. */
    out->interned = (int)(state_word & 3u);
    out->kind = (int)((state_word >> 2) & 7u);
    out->compact = (int)((state_word >> 5) & 1u);
    out->ascii = (int)((state_word >> 6) & 1u);
    if (style == PYSTATE_UNICODE_PEP393) {
        out->ready = (int)((state_word >> 7) & 1u);
        out->statically_allocated = 0;
    } else {
        out->ready = 1;
        out->statically_allocated = (int)((state_word >> 7) & 1u);
    }
    if (style == PYSTATE_UNICODE_PEP393 && !out->ready) {
        /* Legacy wstr-only strings: kind is PyUnicode_WCHAR_KIND (0), never compact. */
        return (out->kind == 0 && !out->compact) ? SCRY_E_UNSUPPORTED : SCRY_E_CORRUPT;
    }
    if (out->kind != 1 && out->kind != 2 && out->kind != 4) {
        return SCRY_E_CORRUPT;
    }
    if (out->ascii && out->kind != 1) {
        return SCRY_E_CORRUPT;
    }
    return 0;
}

int pystate_str_data_location(const pystate_layout_t *layout, const pystate_str_state_t *st,
                              int64_t *offset_out, int *indirect_out)
{
    if (layout == NULL || st == NULL || offset_out == NULL || indirect_out == NULL) {
        return SCRY_E_INVAL;
    }
    int64_t off;
    int indirect = 0;
    if (st->compact && st->ascii) {
        off = layout->unicode_ascii_size;
    } else if (st->compact) {
        off = layout->unicode_compact_size;
    } else {
        off = layout->unicode_data_any;
        indirect = 1;
    }
    if (off < 0) {
        return SCRY_E_UNSUPPORTED;
    }
    *offset_out = off;
    *indirect_out = indirect;
    return 0;
}

/* Encodes CP (valid, non-surrogate, <= U+10FFFF) into BUF; returns its length. */
static size_t utf8_encode(uint32_t cp, unsigned char buf[4])
{
    if (cp < 0x80) {
        buf[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        buf[0] = (unsigned char)(0xC0 | (cp >> 6));
        buf[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        buf[0] = (unsigned char)(0xE0 | (cp >> 12));
        buf[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        buf[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    buf[0] = (unsigned char)(0xF0 | (cp >> 18));
    buf[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    buf[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    buf[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

static uint32_t code_point_at(const unsigned char *p, int kind)
{
    if (kind == 1) {
        return p[0];
    }
    if (kind == 2) {
        uint16_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

int pystate_str_to_utf8(const void *data, size_t data_len, int kind, int ascii, uint64_t length,
                        char *out, size_t out_size, size_t *written_out)
{
    if ((kind != 1 && kind != 2 && kind != 4) || out == NULL || out_size == 0 ||
        (data == NULL && length > 0)) {
        return SCRY_E_INVAL;
    }
    const unsigned char *p = data;
    size_t avail = data_len / (size_t)kind;
    int rc = 0;
    uint64_t n = length;
    if (n > avail) {
        n = avail;
        rc = SCRY_E_TRUNC;
    }
    size_t w = 0;
    uint64_t i;
    for (i = 0; i < n; i++) {
        uint32_t cp = code_point_at(p + i * (size_t)kind, kind);
        if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF || (ascii && cp >= 0x80)) {
            cp = REPLACEMENT;
        }
        unsigned char buf[4];
        size_t len = utf8_encode(cp, buf);
        if (len > out_size - 1 - w) {
            rc = SCRY_E_TRUNC;
            break;
        }
        memcpy(out + w, buf, len);
        w += len;
    }
    out[w] = '\0';
    if (written_out != NULL) {
        *written_out = w;
    }
    return rc;
}
