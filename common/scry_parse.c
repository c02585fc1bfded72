/* scry_parse.c - validators for user-given values (scry_parse.h). */
#include "scry_parse.h"
#include "scry_err.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const scry_unit_t scry_units_seconds[] = {
    {"", 1}, {"s", 1}, {"ms", 0.001}, {"m", 60}, {"h", 3600}, {"d", 86400}, {NULL, 0},
};

const scry_unit_t scry_units_bytes[] = {
    {"", 1},
    {"b", 1},
    {"k", 1024.0},
    {"kb", 1024.0},
    {"kib", 1024.0},
    {"m", 1048576.0},
    {"mb", 1048576.0},
    {"mib", 1048576.0},
    {"g", 1073741824.0},
    {"gb", 1073741824.0},
    {"gib", 1073741824.0},
    {"t", 1099511627776.0},
    {"tb", 1099511627776.0},
    {"tib", 1099511627776.0},
    {NULL, 0},
};

const scry_unit_t scry_units_percent[] = {{"", 1}, {"%", 1}, {NULL, 0}};

int scry_in_range(double d, double lo, double hi)
{
    return isfinite(d) && d >= lo && d <= hi;
}

/* The decimal number at the start of S: [+-]digits[.digits][e[+-]digits], nothing else
 * (strtod alone would take blanks, "nan", "inf" and hexadecimal). Returns its length, 0
 * when S does not start with one. */
static size_t number_len(const char *s)
{
    size_t i = 0, digits = 0;
    if (s[i] == '+' || s[i] == '-')
        i++;
    while (isdigit((unsigned char)s[i]))
        i++, digits++;
    if (s[i] == '.') {
        i++;
        while (isdigit((unsigned char)s[i]))
            i++, digits++;
    }
    if (digits == 0)
        return 0;
    if (s[i] == 'e' || s[i] == 'E') {
        size_t j = i + 1;
        if (s[j] == '+' || s[j] == '-')
            j++;
        if (isdigit((unsigned char)s[j])) {
            while (isdigit((unsigned char)s[j]))
                j++;
            i = j;
        }
    }
    return i;
}

int scry_parse_quantity(const char *s, const scry_unit_t *units, double lo, double hi, double *out)
{
    if (!s)
        return SCRY_E_INVAL;
    size_t n = number_len(s);
    if (n == 0 || n > 64)
        return SCRY_E_INVAL;
    char num[65];
    memcpy(num, s, n);
    num[n] = '\0';
    errno = 0;
    double d = strtod(num, NULL);
    if (errno == ERANGE && d != 0)
        return SCRY_E_INVAL; /* overflow; an underflow to 0 is range-checked below */
    double mul = s[n] == '\0' ? 1 : 0;
    for (size_t i = 0; units && units[i].suffix && s[n]; i++)
        if (strcasecmp(s + n, units[i].suffix) == 0)
            mul = units[i].mul;
    if (mul == 0)
        return SCRY_E_INVAL;
    d *= mul;
    if (!scry_in_range(d, lo, hi))
        return SCRY_E_INVAL;
    *out = d;
    return 0;
}

int scry_parse_number(const char *s, double lo, double hi, double *out)
{
    return scry_parse_quantity(s, NULL, lo, hi, out);
}

int scry_parse_seconds(const char *s, double lo, double hi, double *out)
{
    return scry_parse_quantity(s, scry_units_seconds, lo, hi, out);
}

int scry_parse_bytes(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    double d;
    if (hi > (1ull << 53))
        hi = 1ull << 53;
    if (scry_parse_quantity(s, scry_units_bytes, (double)lo, (double)hi, &d) != 0)
        return SCRY_E_INVAL;
    *out = (uint64_t)d;
    return 0;
}

int scry_parse_int(const char *s, long long lo, long long hi, long long *out)
{
    if (!s)
        return SCRY_E_INVAL;
    const char *p = s + (s[0] == '-');
    if (!isdigit((unsigned char)*p) || strspn(p, "0123456789") != strlen(p))
        return SCRY_E_INVAL;
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno || v < lo || v > hi)
        return SCRY_E_INVAL;
    *out = v;
    return 0;
}

int scry_parse_bool(const char *s, int *out)
{
    static const char *const words[] = {"0", "no", "false", "off", "1", "yes", "true", "on"};
    char low[8];
    size_t n = s ? strlen(s) : sizeof low;
    if (n >= sizeof low)
        return SCRY_E_INVAL;
    for (size_t k = 0; k < n; k++)
        low[k] = (char)tolower((unsigned char)s[k]);
    int i = scry_parse_word(low, n, words, 8);
    if (i < 0)
        return SCRY_E_INVAL;
    *out = i >= 4;
    return 0;
}

int scry_parse_word(const char *s, size_t len, const char *const *words, size_t n)
{
    if (!s || memchr(s, '\0', len))
        return SCRY_E_INVAL;
    for (size_t i = 0; i < n; i++)
        if (strlen(words[i]) == len && memcmp(words[i], s, len) == 0)
            return (int)i;
    return SCRY_E_INVAL;
}

int scry_parse_name(const char *s, size_t len, size_t maxlen)
{
    if (!s || len == 0 || len > maxlen || s[0] == '.' || s[0] == '-')
        return SCRY_E_INVAL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(c < 128 && isalnum(c)) && c != '.' && c != '_' && c != '-')
            return SCRY_E_INVAL;
    }
    return 0;
}
