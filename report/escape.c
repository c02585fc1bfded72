/* escape.c - growable string buffer and the escaping rules of every format. */
#include "report_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "scry_err.h"

static int sb_reserve(report__sb_t *b, size_t extra)
{
    if (b->oom)
        return -1;
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t ncap = b->cap ? b->cap : 4096;
    while (ncap < b->len + extra + 1)
        ncap *= 2;
    char *n = realloc(b->buf, ncap);
    if (!n) {
        b->oom = 1;
        return -1;
    }
    b->buf = n;
    b->cap = ncap;
    return 0;
}

void report__sb_free(report__sb_t *b)
{
    free(b->buf);
    memset(b, 0, sizeof *b);
}

void report__sb_putn(report__sb_t *b, const char *s, size_t n)
{
    if (sb_reserve(b, n) < 0)
        return;
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = 0;
}

void report__sb_puts(report__sb_t *b, const char *s)
{
    report__sb_putn(b, s ? s : "", s ? strlen(s) : 0);
}

void report__sb_putc(report__sb_t *b, char c)
{
    if (sb_reserve(b, 1) < 0)
        return;
    b->buf[b->len++] = c;
    b->buf[b->len] = 0;
}

void report__sb_printf(report__sb_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || sb_reserve(b, (size_t)n) < 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

int report__sb_flush(report__sb_t *b, FILE *out)
{
    if (b->oom)
        return SCRY_E_NOMEM;
    if (b->len && fwrite(b->buf, 1, b->len, out) != b->len)
        return SCRY_E_IO;
    b->len = 0;
    if (b->buf)
        b->buf[0] = 0;
    return 0;
}

uint32_t report__utf8_next(const char **sp)
{
    const unsigned char *s = (const unsigned char *)*sp;
    uint32_t c = s[0];
    if (c < 0x80) {
        *sp += 1;
        return c;
    }
    int n;
    uint32_t min;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 1, c &= 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 2, c &= 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 3, c &= 0x07, min = 0x10000;
    } else {
        *sp += 1;
        return 0xFFFD;
    }
    for (int i = 1; i <= n; i++) {
        if ((s[i] & 0xC0) != 0x80) { /* also stops at the NUL */
            *sp += 1;
            return 0xFFFD;
        }
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        *sp += 1;
        return 0xFFFD;
    }
    *sp += n + 1;
    return c;
}

void report__sb_put_cp(report__sb_t *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18)), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    }
    report__sb_putn(b, u, n);
}

/* The ASCII characters JSON strings and XML text escape, and their escapes. */
static const char *const json_escapes[0x80] = {
    ['"'] = "\\\"", ['\\'] = "\\\\", ['\n'] = "\\n", ['\t'] = "\\t", ['\r'] = "\\r",
};
static const char *const xml_escapes[0x80] = {
    ['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;", ['\''] = "&apos;",
};

void report__sb_json(report__sb_t *b, const char *s)
{
    report__sb_putc(b, '"');
    const char *p = s ? s : "";
    while (*p) {
        /* copy runs of plain ASCII at once */
        const char *q = p;
        while (*q && (unsigned char)*q >= 0x20 && (unsigned char)*q < 0x80 && *q != '"' &&
               *q != '\\')
            q++;
        if (q > p) {
            report__sb_putn(b, p, (size_t)(q - p));
            p = q;
            continue;
        }
        uint32_t c = report__utf8_next(&p);
        if (c < 0x80 && json_escapes[c])
            report__sb_puts(b, json_escapes[c]);
        else if (c < 0x20)
            report__sb_printf(b, "\\u%04x", c);
        else
            report__sb_put_cp(b, c);
    }
    report__sb_putc(b, '"');
}

void report__sb_xml(report__sb_t *b, const char *s, size_t maxcp)
{
    const char *p = s ? s : "";
    size_t n = 0;
    while (*p && (!maxcp || n < maxcp)) {
        uint32_t c = report__utf8_next(&p);
        n++;
        if (c < 0x80 && xml_escapes[c]) {
            report__sb_puts(b, xml_escapes[c]);
            continue;
        }
        /* XML 1.0 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | ... */
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0xFFFE || c == 0xFFFF)
            c = 0xFFFD;
        report__sb_put_cp(b, c);
    }
}

/* Appends S with ';' -> ':' and control characters -> ' ' (invalid UTF-8 -> U+FFFD). */
static void put_frame_text(report__sb_t *b, const char *s)
{
    const char *p = s ? s : "";
    while (*p) {
        uint32_t c = report__utf8_next(&p);
        if (c == ';')
            c = ':';
        else if (c < 0x20 || c == 0x7F)
            c = ' ';
        report__sb_put_cp(b, c);
    }
}

const char *report__base_name(const char *path)
{
    if (!path)
        return "";
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void sb_frame(report__sb_t *b, const report__frame_t *f, int base)
{
    put_frame_text(b, f->function && f->function[0] ? f->function : "<unknown>");
    const char *file = base ? report__base_name(f->file) : f->file;
    switch (f->kind) {
    case SCRY_FRAME_PYTHON:
        report__sb_puts(b, " (");
        put_frame_text(b, file);
        report__sb_printf(b, ":%d)", (int)f->line);
        break;
    case SCRY_FRAME_NATIVE:
        if (file && file[0]) {
            report__sb_puts(b, " (");
            put_frame_text(b, file);
            report__sb_putc(b, ')');
        }
        break;
    default:
        break;
    }
}

void report__sb_frame(report__sb_t *b, const report__frame_t *f)
{
    sb_frame(b, f, 0);
}

void report__sb_frame_short(report__sb_t *b, const report__frame_t *f)
{
    sb_frame(b, f, 1);
}

void report__sb_num(report__sb_t *b, double x, int digits)
{
    if (!isfinite(x))
        x = 0;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.*f", digits, x);
    size_t n = strlen(tmp);
    if (strchr(tmp, '.')) {
        while (n > 0 && tmp[n - 1] == '0')
            n--;
        if (n > 0 && tmp[n - 1] == '.')
            n--;
    }
    tmp[n] = 0;
    if (strcmp(tmp, "-0") == 0)
        strcpy(tmp, "0");
    report__sb_puts(b, tmp);
}
