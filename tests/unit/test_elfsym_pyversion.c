/* test_elfsym_pyversion.c - CPython versions from file names, version strings, and the
 * files of every interpreter installed here (pyenv 2.7-3.13 and Debian's 3.11.2). */
#include <stdio.h>
#include <string.h>

#include "elfsym.h"
#include "scry_err.h"
#include "check.h"

static void test_names(void)
{
    static const struct {
        const char *name;
        int major, minor; /* 0: not a versioned name */
    } cases[] = {
        {"libpython3.6m.so.1.0", 3, 6},
        {"/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", 3, 11},
        {"libpython3.11.so", 3, 11},
        {"libpython2.7.so.1.0", 2, 7},
        {"libpython3.13t.so.1.0", 3, 13},
        {"libpython3.8d.so", 3, 8},
        {"/root/.pyenv/versions/3.12.1/bin/python3.12", 3, 12},
        {"python2.7", 2, 7},
        {"libpython3.so", 0, 0},
        {"libpython3.11.a", 0, 0},
        {"python3", 0, 0},
        {"python3.11-config", 0, 0},
        {"libfoo.so", 0, 0},
        {"libpython.so", 0, 0},
        {"", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int ma = -1, mi = -1;
        int rc = elfsym_pyversion_from_name(cases[i].name, &ma, &mi);
        if (cases[i].major)
            CHECK(rc == 0 && ma == cases[i].major && mi == cases[i].minor, "%s -> %d %d.%d",
                  cases[i].name, rc, ma, mi);
        else
            CHECK(rc == SCRY_E_NOTFOUND, "%s should not parse", cases[i].name);
    }
    CHECK(elfsym_is_libpython_name("/x/libpython3.6m.so.1.0"), "is lib");
    CHECK(!elfsym_is_libpython_name("/x/python3.6"), "exe is not lib");
    CHECK(!elfsym_is_libpython_name("/x/libpython3.so"), "stable ABI stub is not");
}

static void test_strings(void)
{
    elfsym_pyversion_t v;
    const char *s = "3.11.2 (main, Mar 13 2023, 12:18:29) [GCC 12.2.0]";
    CHECK(elfsym_pyversion_parse(s, strlen(s), &v) == 0 && v.major == 3 && v.minor == 11 &&
              v.micro == 2 && v.level == 'f' && v.serial == 0,
          "full");
    s = "3.13.0rc1+";
    CHECK(elfsym_pyversion_parse(s, strlen(s), &v) == 0 && v.minor == 13 && v.level == 'c' &&
              v.serial == 1,
          "rc");
    s = "3.12.0a7";
    CHECK(elfsym_pyversion_parse(s, strlen(s) + 1, &v) == 0 && v.level == 'a' && v.serial == 7,
          "alpha with NUL");
    s = "2.7.18";
    CHECK(elfsym_pyversion_parse(s, 6, &v) == 0 && v.major == 2 && v.micro == 18, "2.7");
    static const char *bad[] = {"3.11",   "3.11.", "x3.11.2",  "3.11.2x",
                                "1.2.13", "3..2",  "3.1111.2", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(elfsym_pyversion_parse(bad[i], strlen(bad[i]), &v) == SCRY_E_NOTFOUND, "bad '%s'",
              bad[i]);
    CHECK(elfsym_pyversion_parse(NULL, 0, &v) == SCRY_E_NOTFOUND, "NULL");
}

static void check_file(const char *path, int major, int minor, int micro)
{
    int err;
    elfsym_obj_t *o = elfsym_obj_open(path, &err);
    CHECK(o != NULL, "open %s: %s", path, scry_strerror(err));
    if (!o)
        return;
    elfsym_pyversion_t v = {0};
    err = elfsym_obj_pyversion(o, &v);
    CHECK(err == 0 && v.major == major && v.minor == minor && v.micro == micro,
          "%s: %d -> %d.%d.%d", path, err, v.major, v.minor, v.micro);
    elfsym_obj_free(o);
}

static void test_files(void)
{
    check_file("/usr/bin/python3.11", 3, 11, 2);
    check_file("/root/.pyenv/versions/3.8.18/lib/libpython3.8.so.1.0", 3, 8, 18);
    check_file("/root/.pyenv/versions/2.7.18/lib/libpython2.7.so.1.0", 2, 7, 18);
    check_file("/root/.pyenv/versions/3.6.15/lib/libpython3.6m.so.1.0", 3, 6, 15);
    check_file("/root/.pyenv/versions/3.7.16/lib/libpython3.7m.so.1.0", 3, 7, 16);
    check_file("/root/.pyenv/versions/3.9.18/lib/libpython3.9.so.1.0", 3, 9, 18);
    check_file("/root/.pyenv/versions/3.10.13/lib/libpython3.10.so.1.0", 3, 10, 13);
    check_file("/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0", 3, 11, 7);
    check_file("/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0", 3, 12, 1);
    check_file("/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0", 3, 13, 0);
    /* Not Python at all. */
    int err;
    elfsym_obj_t *o = elfsym_obj_open("/usr/lib/x86_64-linux-gnu/libelf.so.1", &err);
    elfsym_pyversion_t v;
    CHECK(o && elfsym_obj_pyversion(o, &v) == SCRY_E_NOTFOUND, "libelf has no version");
    elfsym_obj_free(o);
}

int main(void)
{
    test_names();
    test_strings();
    test_files();
    elfsym_cache_clear();
    return check_summary("test_elfsym_pyversion");
}
