/* test_common_parse.c - the validators every user-given value goes through: whole strings,
 * finite numbers, ranges after units, booleans, names and words with their own length. */
#include "scry_err.h"
#include "scry_parse.h"

#include <math.h>
#include <string.h>

#include "check.h"

static void test_numbers(void)
{
    double d = -1;
    CHECK(scry_parse_number("19", 1, 1000, &d) == 0 && d == 19, "%g", d);
    CHECK(scry_parse_number("2.5e1", 1, 1000, &d) == 0 && d == 25, "%g", d);
    static const char *bad[] = {"",       " 1",    "1 ",    "nan", "NaN",  "inf", "-inf", "0x10",
                                "1e-300", "1e300", "1e999", "abc", "1..2", "+",   "1e",   "0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d = -1;
        CHECK(scry_parse_number(bad[i], 1, 1000, &d) != 0 && d == -1, "accepted '%s'", bad[i]);
    }
    CHECK(scry_in_range(5, 1, 10) && !scry_in_range(NAN, 1, 10) && !scry_in_range(11, 1, 10),
          "in_range");
}

static void test_units(void)
{
    double s = 0;
    CHECK(scry_parse_seconds("90", 0, 1e9, &s) == 0 && s == 90, "%g", s);
    CHECK(scry_parse_seconds("250ms", 0, 1e9, &s) == 0 && fabs(s - 0.25) < 1e-12, "%g", s);
    CHECK(scry_parse_seconds("10m", 0, 1e9, &s) == 0 && s == 600, "%g", s);
    CHECK(scry_parse_seconds("7d", 0, 1e9, &s) == 0 && s == 7 * 86400, "%g", s);
    CHECK(scry_parse_seconds("2x", 0, 1e9, &s) != 0, "unknown unit");
    CHECK(scry_parse_seconds("700d", 0, 3600, &s) != 0, "range after the unit");
    uint64_t b = 0;
    CHECK(scry_parse_bytes("512k", 1, 1ull << 40, &b) == 0 && b == 512 * 1024, "%llu",
          (unsigned long long)b);
    CHECK(scry_parse_bytes("2GiB", 1, 1ull << 40, &b) == 0 && b == 2ull << 30, "%llu",
          (unsigned long long)b);
    CHECK(scry_parse_bytes("1M", 1, 1ull << 40, &b) == 0 && b == 1 << 20, "%llu",
          (unsigned long long)b);
    CHECK(scry_parse_bytes("nan", 1, 1ull << 40, &b) != 0, "nan bytes");
    CHECK(scry_parse_bytes("-1k", 1, 1ull << 40, &b) != 0, "negative bytes");
    CHECK(scry_parse_bytes("2T", 1, 1ull << 40, &b) != 0, "above the range");
    double p = 0;
    CHECK(scry_parse_quantity("1%", scry_units_percent, 0, 100, &p) == 0 && p == 1, "%g", p);
    CHECK(scry_parse_quantity("1%%", scry_units_percent, 0, 100, &p) != 0, "1%%%%");
}

static void test_ints_bools_words(void)
{
    long long v = 0;
    CHECK(scry_parse_int("1234", 1, 0x3fffffff, &v) == 0 && v == 1234, "%lld", v);
    static const char *bad[] = {"",   "12abc", " 1", "1.0", "0", "99999999999999999999",
                                "+1", "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(scry_parse_int(bad[i], 1, 0x3fffffff, &v) != 0, "accepted '%s'", bad[i]);
    int b = -1;
    static const char *yes[] = {"yes", "TRUE", "on", "1"}, *no[] = {"no", "False", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        CHECK(scry_parse_bool(yes[i], &b) == 0 && b == 1, "%s", yes[i]);
        CHECK(scry_parse_bool(no[i], &b) == 0 && b == 0, "%s", no[i]);
    }
    CHECK(scry_parse_bool("maybe", &b) != 0 && scry_parse_bool("", &b) != 0, "bad bools");
    static const char *const words[] = {"list", "reload"};
    CHECK(scry_parse_word("reload", 6, words, 2) == 1, "reload");
    CHECK(scry_parse_word("reload\0", 7, words, 2) < 0, "a NUL is part of the word");
    CHECK(scry_parse_word("relo", 4, words, 2) < 0, "prefix");
    CHECK(scry_parse_name("web-1.api_x", 11, 64) == 0, "name");
    static const char *badnames[] = {"", "..", "../../etc", ".hidden", "-x", "a/b", "a b", "é"};
    for (size_t i = 0; i < sizeof badnames / sizeof badnames[0]; i++)
        CHECK(scry_parse_name(badnames[i], strlen(badnames[i]), 64) != 0, "name '%s'", badnames[i]);
    CHECK(scry_parse_name("ab\0c", 4, 64) != 0, "NUL in a name");
    CHECK(scry_parse_name("abcd", 4, 3) != 0, "too long");
}

int main(void)
{
    test_numbers();
    test_units();
    test_ints_bools_words();
    return check_summary("test_common_parse");
}
