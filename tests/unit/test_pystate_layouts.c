/* test_pystate_layouts.c - sanity of the generated per-version layout table
 * (pystate/layouts_gen.c): every version 3.6-3.15 present, each field present or -1
 * exactly where the version has it, offsets inside their structs, no table for 2.7, 3.5,
 * 3.16. */
#include <stdint.h>
#include <stdio.h>

#include "layout.h"
#include "check.h"

/* Field present (>= 0) when HAVE, else exactly -1. */
#define PRESENT(L, field, have)                                                                    \
    CHECK((have) ? (L)->field >= 0 : (L)->field == -1, "3.%d " #field " = %lld (expected %s)",     \
          (L)->minor, (long long)(L)->field, (have) ? "present" : "-1")

/* A member of WIDTH bytes at field lies inside a struct of SIZE bytes (when present). */
#define INSIDE(L, field, width, size)                                                              \
    CHECK((L)->field < 0 || ((L)->field + (width) <= (size)),                                      \
          "3.%d " #field " = %lld outside %lld bytes", (L)->minor, (long long)(L)->field,          \
          (long long)(size))

static void check_version(int minor)
{
    const pystate_layout_t *l = pystate_layout_for(3, minor);

    CHECK(l != NULL, "no layout for 3.%d", minor);
    if (!l)
        return;
    CHECK(l->major == 3 && l->minor == minor, "3.%d entry says %d.%d", minor, l->major, l->minor);

    /* styles */
    CHECK(l->unicode_style == (minor >= 12 ? PYSTATE_UNICODE_312 : PYSTATE_UNICODE_PEP393),
          "3.%d unicode_style %d", minor, l->unicode_style);
    int fs = minor <= 10   ? PYSTATE_FRAMES_OBJECTS
             : minor == 11 ? PYSTATE_FRAMES_311
             : minor == 12 ? PYSTATE_FRAMES_312
                           : PYSTATE_FRAMES_313;
    CHECK(l->frame_style == fs, "3.%d frame_style %d", minor, l->frame_style);
    int ls = minor <= 9    ? PYSTATE_LNOTAB
             : minor == 10 ? PYSTATE_LINETABLE_310
                           : PYSTATE_LOCATIONS_311;
    CHECK(l->linetable_style == ls, "3.%d linetable_style %d", minor, l->linetable_style);

    /* runtime and GIL */
    PRESENT(l, runtime_size, minor >= 7);
    PRESENT(l, runtime_interpreters_head, minor >= 7);
    PRESENT(l, runtime_interpreters_main, minor >= 7);
    PRESENT(l, runtime_tstate_current, minor >= 7 && minor <= 11);
    PRESENT(l, runtime_gil, minor >= 7 && minor <= 11);
    PRESENT(l, gil_locked, minor >= 7);
    PRESENT(l, gil_last_holder, minor >= 7);
    PRESENT(l, interp_gil_ptr, minor >= 12);
    if (minor >= 7) {
        INSIDE(l, runtime_interpreters_head, 8, l->runtime_size);
        INSIDE(l, runtime_interpreters_main, 8, l->runtime_size);
        INSIDE(l, runtime_tstate_current, 8, l->runtime_size);
        INSIDE(l, runtime_gil, 24, l->runtime_size);
        CHECK(l->runtime_interpreters_main == l->runtime_interpreters_head + 8,
              "3.%d interpreters.main does not follow head", minor);
        CHECK(l->gil_locked != l->gil_last_holder, "3.%d gil fields collide", minor);
    }

    /* interpreter */
    CHECK(l->interp_size > 0, "3.%d interp_size", minor);
    PRESENT(l, interp_next, 1);
    PRESENT(l, interp_tstate_head, 1);
    PRESENT(l, interp_id, minor >= 7);
    PRESENT(l, interp_modules, 1);
    INSIDE(l, interp_next, 8, l->interp_size);
    INSIDE(l, interp_tstate_head, 8, l->interp_size);
    INSIDE(l, interp_id, 8, l->interp_size);
    INSIDE(l, interp_gil_ptr, 8, l->interp_size);
    INSIDE(l, interp_modules, 8, l->interp_size);

    /* thread */
    CHECK(l->tstate_size > 0, "3.%d tstate_size", minor);
    PRESENT(l, tstate_prev, 1);
    PRESENT(l, tstate_next, 1);
    PRESENT(l, tstate_interp, 1);
    PRESENT(l, tstate_frame, 1);
    PRESENT(l, tstate_thread_id, 1);
    PRESENT(l, cframe_current_frame, minor == 11 || minor == 12);
    PRESENT(l, tstate_native_thread_id, minor >= 11);
    PRESENT(l, tstate_datastack_chunk, minor >= 11);
    INSIDE(l, tstate_prev, 8, l->tstate_size);
    INSIDE(l, tstate_next, 8, l->tstate_size);
    INSIDE(l, tstate_interp, 8, l->tstate_size);
    INSIDE(l, tstate_frame, 8, l->tstate_size);
    INSIDE(l, tstate_thread_id, 8, l->tstate_size);
    INSIDE(l, tstate_native_thread_id, 8, l->tstate_size);
    INSIDE(l, tstate_datastack_chunk, 8, l->tstate_size);
    CHECK(l->tstate_prev != l->tstate_next, "3.%d prev == next", minor);

    PRESENT(l, chunk_previous, minor >= 11);
    PRESENT(l, chunk_size, minor >= 11);
    PRESENT(l, chunk_top, minor >= 11);
    PRESENT(l, chunk_data, minor >= 11);

    /* frames */
    PRESENT(l, frame_back, minor <= 10);
    PRESENT(l, frame_code, minor <= 10);
    PRESENT(l, frame_lasti, minor <= 10);
    PRESENT(l, frame_lineno, minor <= 10);
    PRESENT(l, iframe_code, minor >= 11);
    PRESENT(l, iframe_previous, minor >= 11);
    PRESENT(l, iframe_instr, minor >= 11);
    PRESENT(l, iframe_owner, minor >= 11);
    PRESENT(l, iframe_is_entry, minor == 11);
    PRESENT(l, iframe_localsplus, minor >= 11);
    INSIDE(l, iframe_code, 8, l->iframe_localsplus);
    INSIDE(l, iframe_previous, 8, l->iframe_localsplus);
    INSIDE(l, iframe_instr, 8, l->iframe_localsplus);
    INSIDE(l, iframe_owner, 1, l->iframe_localsplus);
    INSIDE(l, iframe_is_entry, 1, l->iframe_localsplus);

    /* code */
    CHECK(l->code_size > 0, "3.%d code_size", minor);
    PRESENT(l, code_filename, 1);
    PRESENT(l, code_name, 1);
    PRESENT(l, code_qualname, minor >= 11);
    PRESENT(l, code_firstlineno, 1);
    PRESENT(l, code_linetable, 1);
    PRESENT(l, code_code, minor <= 10);
    PRESENT(l, code_adaptive, minor >= 11);
    PRESENT(l, code_size_field, minor >= 11);
    INSIDE(l, code_filename, 8, l->code_size);
    INSIDE(l, code_name, 8, l->code_size);
    INSIDE(l, code_qualname, 8, l->code_size);
    INSIDE(l, code_firstlineno, 4, l->code_size);
    INSIDE(l, code_linetable, 8, l->code_size);
    INSIDE(l, code_code, 8, l->code_size);
    INSIDE(l, code_adaptive, 2, l->code_size);
    if (minor >= 11)
        CHECK(l->code_size_field == l->var_size, "3.%d code ob_size", minor);

    /* objects (x86_64, default build: the PyObject header is 16 bytes) */
    CHECK(l->object_type == 8, "3.%d object_type %lld", minor, (long long)l->object_type);
    CHECK(l->var_size == 16, "3.%d var_size %lld", minor, (long long)l->var_size);
    CHECK(l->type_name == 24, "3.%d type_name %lld", minor, (long long)l->type_name);
    CHECK(l->bytes_sval == 32, "3.%d bytes_sval %lld", minor, (long long)l->bytes_sval);
    CHECK(l->unicode_length == 16, "3.%d unicode_length", minor);
    CHECK(l->unicode_state == 32, "3.%d unicode_state %lld", minor, (long long)l->unicode_state);
    CHECK(l->unicode_ascii_size == (minor >= 12 ? 40 : 48), "3.%d ascii size %lld", minor,
          (long long)l->unicode_ascii_size);
    CHECK(l->unicode_compact_size == l->unicode_ascii_size + (minor >= 12 ? 16 : 24),
          "3.%d compact size %lld", minor, (long long)l->unicode_compact_size);
    CHECK(l->unicode_data_any == l->unicode_compact_size, "3.%d data.any %lld", minor,
          (long long)l->unicode_data_any);
}

int main(void)
{
    for (int minor = 6; minor <= 15; minor++)
        check_version(minor);

    CHECK(pystate_layout_for(2, 7) == NULL, "2.7");
    CHECK(pystate_layout_for(3, 5) == NULL, "3.5");
    CHECK(pystate_layout_for(3, 16) == NULL, "3.16");
    CHECK(pystate_layout_for(3, -1) == NULL, "3.-1");
    CHECK(pystate_layout_for(4, 6) == NULL, "4.6");
    CHECK(pystate_layout_for(0, 0) == NULL, "0.0");

    /* Spot values cross-checked by hand against the headers and the 3.13 debug offsets. */
    const pystate_layout_t *l311 = pystate_layout_for(3, 11);
    const pystate_layout_t *l313 = pystate_layout_for(3, 13);
    if (l311 && l313) {
        CHECK(l311->iframe_code == 32 && l311->iframe_previous == 48 && l311->iframe_instr == 56,
              "3.11 _PyInterpreterFrame");
        CHECK(l313->runtime_size == 0x452b8, "3.13 sizeof(_PyRuntimeState) = st_size of "
                                             "_PyRuntime in libpython3.13");
        CHECK(l313->interp_tstate_head == 0x1cb0 && l313->interp_modules == 0x1de8,
              "3.13 PyInterpreterState");
    }

    return check_summary("test_pystate_layouts");
}
