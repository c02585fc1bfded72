/* test_unwind_merge.c - merging native and Python frames, on synthetic stacks. */
#include <stdio.h>
#include <string.h>

#include "merge.h"
#include "scry_err.h"
#include "check.h"

#define PYLIB "libpython3.11.so.1.0"

static unwind_frame_t nat(const char *sym, const char *lib, int in_py)
{
    unwind_frame_t f = {0};
    f.ip = 0x1000;
    f.symbol = sym;
    f.lib = lib;
    f.in_python = (uint8_t)in_py;
    f.is_eval = (uint8_t)(sym && strcmp(sym, "_PyEval_EvalFrameDefault") == 0 ? UNWIND_EVAL_DEFAULT
                          : sym && strcmp(sym, "PyEval_EvalFrameEx") == 0     ? UNWIND_EVAL_LEGACY
                                                                              : 0);
    return f;
}

static scry_frame_t pyf(strtab_t *s, const char *name)
{
    scry_frame_t f = {strtab_intern(s, name), strtab_intern(s, "t.py"), 1, SCRY_FRAME_PYTHON};
    return f;
}

/* Renders OUT as "a;b;c" leaf first. */
static const char *render(const scry_frame_t *out, size_t n)
{
    static char buf[4096];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && len < sizeof buf - 64; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? ";" : "", out[i].function);
    return buf;
}

static void expect(const char *got, const char *want, int line)
{
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "line %d:\n  got  %s\n  want %s\n", line, got, want);
        check_failures++;
    }
}

/* A 3.10-like stack: main -> eval(mod) -> plumbing -> eval(f) -> ext -> libfoo. */
static void test_equal_310(strtab_t *s)
{
    unwind_frame_t n[] = {
        nat("foo_work", "libfoo.so", 0),
        nat("ext_call", "ext.so", 0),
        nat("cfunction_call", PYLIB, 1),
        nat("_PyObject_MakeTpCall", PYLIB, 1),
        nat("_PyEval_EvalFrameDefault", PYLIB, 1),
        nat("_PyFunction_Vectorcall", PYLIB, 1),
        nat("PyObject_Call", PYLIB, 1),
        nat("_PyEval_EvalFrameDefault", PYLIB, 1),
        nat("PyEval_EvalCode", PYLIB, 1),
        nat("Py_RunMain", PYLIB, 1),
        nat("main", "python3.10", 1),
    };
    scry_frame_t p[] = {pyf(s, "f"), pyf(s, "<module>")};
    scry_frame_t out[64];
    size_t no = 0;
    unwind_merge_stats_t st = {0};
    int rc = unwind_merge(n, 11, p, NULL, 2, 10, s, out, 64, &no, &st);
    CHECK_INT(rc, ==, 0);
    expect(render(out, no), "foo_work;ext_call;f;<module>;PyEval_EvalCode;Py_RunMain;main",
           __LINE__);
    CHECK(st.matched == 2 && st.extra_eval == 0 && st.leftover_py == 0);
    CHECK_INT(st.filtered, ==, 4);
    CHECK(out[0].kind == SCRY_FRAME_NATIVE && strcmp(out[0].file, "libfoo.so") == 0);
    CHECK(out[2].kind == SCRY_FRAME_PYTHON);

    /* Filter off: every native frame stays. */
    unwind_merge_opts_t o = {0, 1};
    rc = unwind_merge_ex(n, 11, p, NULL, 2, 10, s, &o, out, 64, &no, NULL);
    CHECK(rc == 0 && no == 11);
}

/* More eval frames than Python frames: marker, or dropped. */
static void test_more_eval(strtab_t *s)
{
    unwind_frame_t n[] = {
        nat("_PyEval_EvalFrameDefault", PYLIB, 1),
        nat("_PyEval_EvalFrameDefault", PYLIB, 1),
        nat("_PyEval_EvalFrameDefault", PYLIB, 1),
        nat("main", "python3.9", 1),
    };
    scry_frame_t p[] = {pyf(s, "g"), pyf(s, "f")};
    scry_frame_t out[64];
    size_t no = 0;
    unwind_merge_stats_t st = {0};
    CHECK(unwind_merge(n, 4, p, NULL, 2, 9, s, out, 64, &no, &st) == 0);
    expect(render(out, no), "g;f;<python?>;main", __LINE__);
    CHECK(out[2].kind == SCRY_FRAME_OTHER);
    CHECK(st.extra_eval == 1 && st.mismatched == 1);
    unwind_merge_opts_t o = {1, 0};
    CHECK(unwind_merge_ex(n, 4, p, NULL, 2, 9, s, &o, out, 64, &no, &st) == 0);
    expect(render(out, no), "g;f;main", __LINE__);
    CHECK(st.extra_eval == 2 && st.merges == 2);
}

/* Fewer eval frames (native stack cut short): leftover Python frames at the root end. */
static void test_fewer_eval(strtab_t *s)
{
    unwind_frame_t n[] = {
        nat("memcpy", "libc.so.6", 0), nat("_PyEval_EvalFrameDefault", PYLIB, 1),
        nat(NULL, NULL, 0), /* unknown: the unwind stopped here */
    };
    n[2].ip = 0xdead;
    scry_frame_t p[] = {pyf(s, "c"), pyf(s, "b"), pyf(s, "a")};
    scry_frame_t out[64];
    size_t no = 0;
    unwind_merge_stats_t st = {0};
    CHECK(unwind_merge(n, 3, p, NULL, 3, 9, s, out, 64, &no, &st) == 0);
    expect(render(out, no), "memcpy;c;??;b;a", __LINE__);
    CHECK(st.leftover_py == 2 && st.matched == 1);

    /* No native stack at all: the Python stack alone. */
    CHECK(unwind_merge(NULL, 0, p, NULL, 3, 9, s, out, 64, &no, &st) == 0);
    expect(render(out, no), "c;b;a", __LINE__);
}

/* 3.11+: one eval frame runs a group of Python frames, ended by an entry frame. */
static void test_entry_groups(strtab_t *s)
{
    unwind_frame_t n[] = {
        nat("scry_native_burn", "scryext.so", 0),  nat("cfunction_call", PYLIB, 1),
        nat("_PyEval_EvalFrameDefault", PYLIB, 1), /* runs h, g (g is the entry) */
        nat("builtin_map_next", PYLIB, 1),         /* CPython between evals: dropped */
        nat("_PyEval_EvalFrameDefault", PYLIB, 1), /* runs f, <module> */
        nat("PyEval_EvalCode", PYLIB, 1),          nat("main", "python3.12", 1),
    };
    scry_frame_t p[] = {pyf(s, "h"), pyf(s, "g"), pyf(s, "f"), pyf(s, "<module>")};
    uint8_t entry[] = {0, 1, 0, 1};
    scry_frame_t out[64];
    size_t no = 0;
    unwind_merge_stats_t st = {0};
    CHECK(unwind_merge(n, 7, p, entry, 4, 12, s, out, 64, &no, &st) == 0);
    expect(render(out, no), "scry_native_burn;h;g;f;<module>;PyEval_EvalCode;main", __LINE__);
    CHECK(st.matched == 2 && st.extra_eval == 0 && st.leftover_py == 0);

    /* Same Python frames read as 3.10 (no grouping): mismatched, but never lost. */
    CHECK(unwind_merge(n, 7, p, entry, 4, 10, s, out, 64, &no, &st) == 0);
    expect(render(out, no), "scry_native_burn;h;g;PyEval_EvalCode;main;f;<module>", __LINE__);
    CHECK_INT(st.leftover_py, ==, 2);

    /* 3.11+ with a last group lacking its entry flag: the group runs to the root. */
    uint8_t entry2[] = {0, 1, 0, 0};
    CHECK(unwind_merge(n, 7, p, entry2, 4, 11, s, out, 64, &no, NULL) == 0);
    expect(render(out, no), "scry_native_burn;h;g;f;<module>;PyEval_EvalCode;main", __LINE__);
}

/* The leaf tail in CPython: plumbing names go, real work stays. */
static void test_leaf_tail(strtab_t *s)
{
    unwind_frame_t n[] = {
        nat("unsafe_object_compare", PYLIB, 1),
        nat("list_sort_impl", PYLIB, 1),
        nat("method_vectorcall_FASTCALL_KEYWORDS", PYLIB, 1),
        nat("PyObject_Vectorcall", PYLIB, 1),
        nat("_PyEval_EvalFrameDefault", PYLIB, 1),
        nat("main", "python3.11", 1),
    };
    scry_frame_t p[] = {pyf(s, "<module>")};
    scry_frame_t out[64];
    size_t no = 0;
    CHECK(unwind_merge(n, 6, p, (const uint8_t[]){1}, 1, 11, s, out, 64, &no, NULL) == 0);
    expect(render(out, no), "unsafe_object_compare;list_sort_impl;<module>;main", __LINE__);
}

/* 2.7: PyEval_EvalFrameEx is the eval loop; on 3.6-3.10 it is a wrapper. */
static void test_legacy(strtab_t *s)
{
    unwind_frame_t n27[] = {
        nat("PyEval_EvalFrameEx", "libpython2.7.so.1.0", 0),
        nat("PyEval_EvalFrameEx", "libpython2.7.so.1.0", 0),
        nat("main", "python2.7", 0),
    };
    scry_frame_t p[] = {pyf(s, "f"), pyf(s, "<module>")};
    scry_frame_t out[64];
    size_t no = 0;
    CHECK(unwind_merge(n27, 3, p, NULL, 2, 7, s, out, 64, &no, NULL) == 0);
    expect(render(out, no), "f;<module>;main", __LINE__);

    unwind_frame_t n36[] = {
        nat("_PyEval_EvalFrameDefault", "libpython3.6m.so.1.0", 1),
        nat("PyEval_EvalFrameEx", "libpython3.6m.so.1.0", 1),
        nat("_PyEval_EvalFrameDefault", "libpython3.6m.so.1.0", 1),
        nat("PyEval_EvalFrameEx", "libpython3.6m.so.1.0", 1),
        nat("main", "python3.6", 1),
    };
    CHECK(unwind_merge(n36, 5, p, NULL, 2, 6, s, out, 64, &no, NULL) == 0);
    expect(render(out, no), "f;<module>;PyEval_EvalFrameEx;main", __LINE__);
}

static void test_bounds(strtab_t *s)
{
    unwind_frame_t n[] = {
        nat("a", "x.so", 0),
        nat("_PyEval_EvalFrameDefault", PYLIB, 1),
        nat("main", "python3.11", 1),
    };
    scry_frame_t p[] = {pyf(s, "f"), pyf(s, "g"), pyf(s, "h")};
    scry_frame_t out[3];
    size_t no = 0;
    unwind_merge_stats_t st = {0};
    /* py_minor 10: one Python frame per eval frame, the rest are leftovers. */
    CHECK(unwind_merge(n, 3, p, NULL, 3, 10, s, out, 3, &no, &st) == SCRY_E_TRUNC);
    CHECK(no == 3 && st.truncated == 1);
    expect(render(out, no), "a;f;main", __LINE__);
    CHECK(unwind_merge(n, 3, p, NULL, 3, 10, NULL, out, 3, &no, &st) == SCRY_E_INVAL);
    CHECK(unwind_merge(NULL, 3, p, NULL, 3, 10, s, out, 3, &no, &st) == SCRY_E_INVAL);
    CHECK(unwind_merge(n, 3, p, NULL, 3, 10, s, out, 0, &no, &st) == SCRY_E_INVAL);
    CHECK(unwind_merge_is_plumbing("_PyFunction_Vectorcall"));
    CHECK(unwind_merge_is_plumbing("cfunction_vectorcall_O"));
    CHECK(!unwind_merge_is_plumbing("list_sort_impl"));
    CHECK(!unwind_merge_is_plumbing(NULL));
}

int main(void)
{
    strtab_t *s = strtab_new();
    if (!s)
        return 1;
    test_equal_310(s);
    test_more_eval(s);
    test_fewer_eval(s);
    test_entry_groups(s);
    test_leaf_tail(s);
    test_legacy(s);
    test_bounds(s);
    strtab_free(s);
    return check_summary("test_unwind_merge");
}
