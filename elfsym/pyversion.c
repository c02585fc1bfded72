/* pyversion.c - the CPython version from a file name or the file's read-only data.
 *
 * The PY_VERSION literal ("3.8.18") is not always a string of its own in .rodata: the
 * linker merges string tails, so it may be the end of "/tmp/python-build.../Python-3.8.18".
 * Py_GetVersion passes it to snprintf, so its code holds the literal's exact address;
 * that is tried first, and a scored .rodata scan is the fallback. 3.11+ export Py_Version
 * (PY_VERSION_HEX), read before either.
 */
#include "pyversion.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "disasm.h"
#include "scry_err.h"

#define RODATA_SCAN_MAX ((size_t)64 << 20)
#define VERSION_MAX_LEN 24

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Parses 1..3 digits at S[*i]. */
static int parse_num(const char *s, size_t len, size_t *i, int *out)
{
    int v = 0, d = 0;
    while (*i < len && is_digit(s[*i]) && d < 3) {
        v = v * 10 + (s[*i] - '0');
        (*i)++;
        d++;
    }
    if (d == 0 || (*i < len && is_digit(s[*i])))
        return -1;
    *out = v;
    return 0;
}

/* Parses a version at S; on success *END is the index just past it. */
static int parse_at(const char *s, size_t len, elfsym_pyversion_t *out, size_t *end)
{
    elfsym_pyversion_t v = {0};
    size_t i = 0;
    v.level = 'f';
    if (parse_num(s, len, &i, &v.major) || i >= len || s[i++] != '.' ||
        parse_num(s, len, &i, &v.minor) || i >= len || s[i++] != '.' ||
        parse_num(s, len, &i, &v.micro))
        return SCRY_E_NOTFOUND;
    if (v.major < 2 || v.major > 4)
        return SCRY_E_NOTFOUND;
    if (i + 1 < len && (s[i] == 'a' || s[i] == 'b') && is_digit(s[i + 1])) {
        v.level = s[i++];
        if (parse_num(s, len, &i, &v.serial))
            return SCRY_E_NOTFOUND;
    } else if (i + 2 < len && s[i] == 'r' && s[i + 1] == 'c' && is_digit(s[i + 2])) {
        v.level = 'c';
        i += 2;
        if (parse_num(s, len, &i, &v.serial))
            return SCRY_E_NOTFOUND;
    }
    if (i < len && s[i] == '+')
        i++;
    if (i < len && s[i] != '\0' && s[i] != ' ')
        return SCRY_E_NOTFOUND;
    if (out)
        *out = v;
    *end = i;
    return 0;
}

int elfsym_pyversion_parse(const char *s, size_t len, elfsym_pyversion_t *out)
{
    size_t end;
    if (!s)
        return SCRY_E_NOTFOUND;
    return parse_at(s, len, out, &end);
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* Parses "X.Y" + ABI flags after a "python"/"libpython" prefix; *REST is what follows. */
static int parse_name_version(const char *s, int *major, int *minor, const char **rest)
{
    size_t len = strnlen(s, 64), i = 0;
    int a, b;
    if (parse_num(s, len, &i, &a) || i >= len || s[i++] != '.' || parse_num(s, len, &i, &b))
        return SCRY_E_NOTFOUND;
    while (i < len && i < 40 && s[i] >= 'a' && s[i] <= 'z')
        i++; /* ABI flags: d, m, u, t */
    if (a < 2 || a > 4)
        return SCRY_E_NOTFOUND;
    *major = a;
    *minor = b;
    *rest = s + i;
    return 0;
}

int elfsym_pyversion_from_name(const char *path, int *major, int *minor)
{
    int a, b;
    const char *rest;
    if (!path)
        return SCRY_E_NOTFOUND;
    const char *base = base_name(path);
    if (strncmp(base, "libpython", 9) == 0) {
        if (parse_name_version(base + 9, &a, &b, &rest) || strncmp(rest, ".so", 3) != 0)
            return SCRY_E_NOTFOUND;
    } else if (strncmp(base, "python", 6) == 0) {
        if (parse_name_version(base + 6, &a, &b, &rest) || rest[0] != '\0')
            return SCRY_E_NOTFOUND;
    } else {
        return SCRY_E_NOTFOUND;
    }
    if (major)
        *major = a;
    if (minor)
        *minor = b;
    return 0;
}

int elfsym_is_libpython_name(const char *path)
{
    return path && strncmp(base_name(path), "libpython", 9) == 0 &&
           elfsym_pyversion_from_name(path, NULL, NULL) == 0;
}

/* The strings Py_GetVersion refers to: one of them is PY_VERSION. */
static int version_from_code(const elfsym_obj_t *obj, elfsym_pyversion_t *out)
{
    elfsym_ref_t refs[32];
    int n = elfsym_obj_func_refs(obj, "Py_GetVersion", ELFSYM_REF_ALL, refs, 32);
    for (int i = 0; i < n; i++) {
        char buf[VERSION_MAX_LEN + 1];
        size_t len = VERSION_MAX_LEN;
        int rc;
        while ((rc = elfsym_obj_read_vaddr(obj, refs[i].target, buf, len)) == SCRY_E_FAULT &&
               len > 8)
            len /= 2;
        if (rc)
            continue;
        buf[len] = '\0';
        size_t end;
        /* The literal itself: the version and its NUL, nothing else. */
        if (parse_at(buf, len, out, &end) == 0 && end < len && buf[end] == '\0')
            return 0;
    }
    return SCRY_E_NOTFOUND;
}

/* Scores the NUL-terminated string S (length LEN) as a version carrier:
 * 4 "3.11.2 (main, ...", 3 "3.11.2", 2 "...Python-3.8.18", 1 ".../3.8.18", else 0. */
static int score_string(const char *s, size_t len, elfsym_pyversion_t *v)
{
    size_t end;
    if (len == 0)
        return 0;
    if (is_digit(s[0]) && parse_at(s, len, v, &end) == 0) {
        if (end == len)
            return 3;
        if (end + 1 < len && s[end] == ' ' && s[end + 1] == '(')
            return 4;
    }
    /* A version at the tail, after '-' or '/'. */
    size_t i = len;
    while (i > 0 && len - i < VERSION_MAX_LEN &&
           (is_digit(s[i - 1]) || s[i - 1] == '.' || s[i - 1] == '+' ||
            (s[i - 1] >= 'a' && s[i - 1] <= 'c') || s[i - 1] == 'r'))
        i--;
    while (i < len && !is_digit(s[i]))
        i++;
    if (i == 0 || i >= len || (s[i - 1] != '-' && s[i - 1] != '/'))
        return 0;
    if (parse_at(s + i, len - i, v, &end) != 0 || i + end != len)
        return 0;
    return s[i - 1] == '-' ? 2 : 1;
}

static int version_from_rodata(const elfsym_obj_t *obj, elfsym_pyversion_t *out)
{
    elfsym_section_t sec;
    int rc = elfsym_obj_section(obj, ".rodata", &sec);
    if (rc)
        return rc;
    size_t max = sec.size < RODATA_SCAN_MAX ? (size_t)sec.size : RODATA_SCAN_MAX;
    char *buf = malloc(max + 1);
    if (!buf)
        return SCRY_E_NOMEM;
    long got = elfsym_obj_read_section(obj, ".rodata", buf, max);
    if (got < 0) {
        free(buf);
        return (int)got;
    }
    buf[got] = '\0';
    int want_major = 0, want_minor = 0;
    if (elfsym_pyversion_from_name(elfsym_obj_path(obj), &want_major, &want_minor) != 0)
        want_major = 0;
    int best = 0;
    size_t start = 0;
    for (size_t i = 0; i <= (size_t)got; i++) {
        if (buf[i] != '\0')
            continue;
        elfsym_pyversion_t v;
        int sc = score_string(buf + start, i - start, &v);
        if (sc > best && (!want_major || (v.major == want_major && v.minor == want_minor))) {
            best = sc;
            *out = v;
        }
        start = i + 1;
    }
    free(buf);
    return best ? 0 : SCRY_E_NOTFOUND;
}

/* 3.11+: the exported constant Py_Version (PY_VERSION_HEX, an unsigned long): no
 * disassembly needed. Only a plausible value is taken (3.11 or later, a known release
 * level); anything else leaves the other ways to decide. */
static int version_from_hex(const elfsym_obj_t *obj, elfsym_pyversion_t *out)
{
    elfsym_sym_t s;
    uint64_t hex = 0;
    if (elfsym_obj_lookup(obj, "Py_Version", &s) != 0 || s.type != STT_OBJECT || s.size != 8 ||
        elfsym_obj_read_vaddr(obj, s.value, &hex, sizeof hex) != 0)
        return SCRY_E_NOTFOUND;
    int major = (int)(hex >> 24 & 0xff), minor = (int)(hex >> 16 & 0xff);
    int micro = (int)(hex >> 8 & 0xff), level = (int)(hex >> 4 & 0xf);
    if (hex >> 32 || major != 3 || minor < 11 || minor > 99 || micro > 99 || level < 0xa ||
        level == 0xd || level == 0xe)
        return SCRY_E_NOTFOUND;
    out->major = major;
    out->minor = minor;
    out->micro = micro;
    out->level = level == 0xa ? 'a' : level == 0xb ? 'b' : level == 0xc ? 'c' : 'f';
    out->serial = level == 0xf ? 0 : (int)(hex & 0xf);
    return 0;
}

int elfsym_obj_pyversion(const elfsym_obj_t *obj, elfsym_pyversion_t *out)
{
    elfsym_pyversion_t v;
    if (!obj || !out)
        return SCRY_E_INVAL;
    if (version_from_hex(obj, &v) == 0 || version_from_code(obj, &v) == 0 ||
        version_from_rodata(obj, &v) == 0) {
        *out = v;
        return 0;
    }
    return SCRY_E_NOTFOUND;
}
