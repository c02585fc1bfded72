#!/usr/bin/env python3
"""gen_layouts.py - generate pystate/layouts_gen.c from each CPython's own headers.

For every CPython 3.6 .. 3.13 installed under the pyenv root, this compiles a small C
probe against THAT version's headers (Py_BUILD_CORE, plus the internal headers the
version needs), runs it, and collects offsetof()/sizeof() values for every field of
pystate_layout_t (pystate/layout.h). It then writes pystate/layouts_gen.c: one
`static const pystate_layout_t` per minor version and pystate_layout_for().

Standard library only. See pystate/gen/README.md.

    python3 pystate/gen/gen_layouts.py            # rewrite pystate/layouts_gen.c
    python3 pystate/gen/gen_layouts.py --check    # exit 1 if the file is out of date
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYSTATE = os.path.dirname(HERE)
LAYOUT_H = os.path.join(PYSTATE, "layout.h")
OUTPUT = os.path.join(PYSTATE, "layouts_gen.c")

MINORS = range(6, 16)  # 3.6 .. 3.15
SID_MINORS = (14, 15)  # from the Debian sid root's libpython3.X-dev, not pyenv
SID_ROOT = "/var/cache/scry-tests/sid-root"

# ---------------------------------------------------------------------------------------
# Headers each version's probe includes (after "Python.h"), with Py_BUILD_CORE defined.
# 3.6 keeps everything scry needs in the public headers; 3.7 has Include/internal/*.h
# (no pycore_ prefix); 3.8+ has Include/internal/pycore_*.h.
# ---------------------------------------------------------------------------------------
INCLUDES = {
    6: ["frameobject.h", "longintrepr.h"],
    7: ["frameobject.h", "longintrepr.h", "internal/pystate.h"],
    8: ["frameobject.h", "longintrepr.h", "internal/pycore_pystate.h"],
    9: ["frameobject.h", "longintrepr.h", "internal/pycore_runtime.h",
        "internal/pycore_interp.h"],
    10: ["frameobject.h", "longintrepr.h", "internal/pycore_runtime.h",
         "internal/pycore_interp.h"],
    11: ["internal/pycore_runtime.h", "internal/pycore_interp.h", "internal/pycore_frame.h",
         "internal/pycore_object.h", "internal/pycore_dict.h"],
    12: ["internal/pycore_runtime.h", "internal/pycore_interp.h", "internal/pycore_frame.h",
         "internal/pycore_object.h", "internal/pycore_dict.h"],
    13: ["internal/pycore_runtime.h", "internal/pycore_interp.h", "internal/pycore_frame.h",
         "internal/pycore_object.h", "internal/pycore_dict.h"],
}
INCLUDES[14] = INCLUDES[15] = INCLUDES[13]

# ---------------------------------------------------------------------------------------
# Up to 3.10 the dict keys object and its entries are private to Objects/dictobject.c
# (declared in Objects/dict-common.h, which is not installed): the public headers only
# have the incomplete `struct _dictkeysobject`. The probe completes it with the version's
# own declaration, transcribed member for member (types and order) from
# Objects/dict-common.h of that release. dk_lookup's exact signature does not matter (a
# function pointer either way). 3.6 has a union for dk_indices; 3.7-3.10 a flexible array
# (3.11 replaced dk_size by uint8_t dk_log2_size and dk_log2_index_bytes).
# ---------------------------------------------------------------------------------------
_DICT_ENTRY = """typedef struct {
    Py_hash_t me_hash;
    PyObject *me_key;
    PyObject *me_value;
} PyDictKeyEntry;
"""
_DICT_KEYS_36 = """struct _dictkeysobject {
    Py_ssize_t dk_refcnt;
    Py_ssize_t dk_size;
    void *dk_lookup;
    Py_ssize_t dk_usable;
    Py_ssize_t dk_nentries;
    union {
        int8_t as_1[8];
        int16_t as_2[4];
        int32_t as_4[2];
        int64_t as_8[1];
    } dk_indices;
};
"""
_DICT_KEYS_37 = """struct _dictkeysobject {
    Py_ssize_t dk_refcnt;
    Py_ssize_t dk_size;
    void *dk_lookup;
    Py_ssize_t dk_usable;
    Py_ssize_t dk_nentries;
    char dk_indices[];
};
"""
PRELUDE = {
    6: _DICT_ENTRY + _DICT_KEYS_36,
    7: _DICT_ENTRY + _DICT_KEYS_37,
    8: _DICT_ENTRY + _DICT_KEYS_37,
    9: _DICT_ENTRY + _DICT_KEYS_37,
    10: _DICT_ENTRY + _DICT_KEYS_37,
}

# A fake object whose type has FLAGS, for measuring the 3.11+ pre-header accessors (static
# inline functions of pycore_object.h that assert on the type's flags).
_FAKE_OBJECT = """static PyObject *scry_fake_object(unsigned long flags)
{
    static PyTypeObject tp;
    static PyObject objs[16];
    tp.tp_flags = flags;
    objs[8].ob_type = &tp;
    return &objs[8];
}
"""

NONE = None  # the field does not exist in this version: emitted as -1

OFF = "offsetof({}, {})".format
SIZE = "sizeof({})".format


def spec_for(minor):
    """Returns {field: C expression or NONE} for 3.MINOR. Every int64_t field of
    pystate_layout_t must appear (checked against layout.h)."""
    s = {}
    rt = "_PyRuntimeState"
    interp = "PyInterpreterState"
    ts = "PyThreadState"

    # _PyRuntimeState: 3.7+. 3.6 has no runtime struct (interp_head and
    # _PyThreadState_Current are separate static/global variables).
    if minor >= 7:
        s["runtime_size"] = SIZE(rt)
        s["runtime_interpreters_head"] = OFF(rt, "interpreters.head")
        s["runtime_interpreters_main"] = OFF(rt, "interpreters.main")
    else:
        s["runtime_size"] = s["runtime_interpreters_head"] = NONE
        s["runtime_interpreters_main"] = NONE
    # The thread state running Py_Finalize: 'finalizing' in 3.7/3.8, '_finalizing' later.
    if minor >= 9:
        s["runtime_finalizing"] = OFF(rt, "_finalizing")
    elif minor >= 7:
        s["runtime_finalizing"] = OFF(rt, "finalizing")
    else:
        s["runtime_finalizing"] = NONE
    # gilstate.tstate_current exists 3.7-3.11; 3.12 made the current tstate thread-local.
    s["runtime_tstate_current"] = OFF(rt, "gilstate.tstate_current") if 7 <= minor <= 11 else NONE
    # The GIL lives in _PyRuntime.ceval.gil 3.7-3.11; 3.12+ has a pointer in the
    # interpreter (interp->ceval.gil). 3.6's GIL is static variables in ceval_gil.h.
    s["runtime_gil"] = OFF(rt, "ceval.gil") if 7 <= minor <= 11 else NONE
    gil = "struct _gil_runtime_state"
    s["gil_locked"] = OFF(gil, "locked") if minor >= 7 else NONE
    s["gil_last_holder"] = OFF(gil, "last_holder") if minor >= 7 else NONE

    # PyInterpreterState
    s["interp_size"] = SIZE(interp)
    s["interp_next"] = OFF(interp, "next")
    # 3.11 already moved the thread list into interp->threads (head).
    s["interp_tstate_head"] = OFF(interp, "threads.head" if minor >= 11 else "tstate_head")
    s["interp_id"] = OFF(interp, "id") if minor >= 7 else NONE
    s["interp_gil_ptr"] = OFF(interp, "ceval.gil") if minor >= 12 else NONE
    s["interp_modules"] = OFF(interp, "imports.modules" if minor >= 12 else "modules")

    # PyThreadState
    s["tstate_size"] = SIZE(ts)
    s["tstate_prev"] = OFF(ts, "prev")
    s["tstate_next"] = OFF(ts, "next")
    s["tstate_interp"] = OFF(ts, "interp")
    if minor <= 10:
        s["tstate_frame"] = OFF(ts, "frame")
    elif minor <= 12:
        s["tstate_frame"] = OFF(ts, "cframe")
    else:
        s["tstate_frame"] = OFF(ts, "current_frame")
    s["cframe_current_frame"] = OFF("_PyCFrame", "current_frame") if minor in (11, 12) else NONE
    s["tstate_thread_id"] = OFF(ts, "thread_id")
    # native_thread_id appeared in PyThreadState in 3.11 (3.8-3.10 only have
    # threading.get_native_id(), not the field).
    s["tstate_native_thread_id"] = OFF(ts, "native_thread_id") if minor >= 11 else NONE
    s["tstate_datastack_chunk"] = OFF(ts, "datastack_chunk") if minor >= 11 else NONE

    # _PyStackChunk
    for f in ("previous", "size", "top", "data"):
        s["chunk_" + f] = OFF("_PyStackChunk", f) if minor >= 11 else NONE

    # PyFrameObject (<= 3.10)
    fo = "PyFrameObject"
    for name, f in (("frame_back", "f_back"), ("frame_code", "f_code"),
                    ("frame_lasti", "f_lasti"), ("frame_lineno", "f_lineno")):
        s[name] = OFF(fo, f) if minor <= 10 else NONE
    s["frame_localsplus"] = OFF(fo, "f_localsplus") if minor <= 10 else NONE

    # _PyInterpreterFrame (3.11+)
    fr = "_PyInterpreterFrame"
    if minor >= 11:
        s["iframe_code"] = OFF(fr, "f_executable" if minor >= 13 else "f_code")
        s["iframe_previous"] = OFF(fr, "previous")
        s["iframe_instr"] = OFF(fr, "instr_ptr" if minor >= 13 else "prev_instr")
        s["iframe_owner"] = OFF(fr, "owner")
        s["iframe_is_entry"] = OFF(fr, "is_entry") if minor == 11 else NONE
        s["iframe_localsplus"] = OFF(fr, "localsplus")
    else:
        for f in ("code", "previous", "instr", "owner", "is_entry", "localsplus"):
            s["iframe_" + f] = NONE

    # PyCodeObject
    co = "PyCodeObject"
    s["code_size"] = SIZE(co)
    s["code_filename"] = OFF(co, "co_filename")
    s["code_name"] = OFF(co, "co_name")
    s["code_qualname"] = OFF(co, "co_qualname") if minor >= 11 else NONE
    s["code_firstlineno"] = OFF(co, "co_firstlineno")
    s["code_linetable"] = OFF(co, "co_linetable" if minor >= 10 else "co_lnotab")
    s["code_code"] = OFF(co, "co_code") if minor <= 10 else NONE
    s["code_adaptive"] = OFF(co, "co_code_adaptive") if minor >= 11 else NONE
    # 3.11+: PyCodeObject starts with PyObject_VAR_HEAD and ob_size counts code units.
    s["code_size_field"] = OFF(co, "ob_base.ob_size") if minor >= 11 else NONE
    # Locals: 3.11 merged varnames/cellvars/freevars into co_localsplusnames with a kind
    # byte per slot (CO_FAST_LOCAL/CELL/FREE).
    s["code_argcount"] = OFF(co, "co_argcount")
    s["code_posonlyargcount"] = OFF(co, "co_posonlyargcount") if minor >= 8 else NONE
    s["code_kwonlyargcount"] = OFF(co, "co_kwonlyargcount")
    s["code_flags"] = OFF(co, "co_flags")
    for name, f in (("code_nlocals", "co_nlocals"), ("code_varnames", "co_varnames"),
                    ("code_cellvars", "co_cellvars"), ("code_freevars", "co_freevars")):
        s[name] = OFF(co, f) if minor <= 10 else NONE
    for name, f in (("code_localsplusnames", "co_localsplusnames"),
                    ("code_localspluskinds", "co_localspluskinds")):
        s[name] = OFF(co, f) if minor >= 11 else NONE

    # Objects
    s["object_type"] = OFF("PyObject", "ob_type")
    s["var_size"] = OFF("PyVarObject", "ob_size")
    s["type_name"] = OFF("PyTypeObject", "tp_name")
    s["bytes_sval"] = OFF("PyBytesObject", "ob_sval")
    s["unicode_length"] = OFF("PyASCIIObject", "length")
    # PyASCIIObject.state is a struct of bitfields (one 32-bit word). The struct member
    # itself is offsetof-able; the probe also checks with a _Static_assert that it sits
    # right after 'hash' (offsetof(hash) + sizeof(Py_hash_t)), the way one would compute
    # it if the bitfields were not wrapped in a named struct.
    s["unicode_state"] = OFF("PyASCIIObject", "state")
    s["unicode_ascii_size"] = SIZE("PyASCIIObject")
    s["unicode_compact_size"] = SIZE("PyCompactUnicodeObject")
    s["unicode_data_any"] = OFF("PyUnicodeObject", "data.any")

    # Dicts (thread names). <= 3.10 through the PRELUDE mirrors of Objects/dict-common.h.
    dk = "PyDictKeysObject"
    s["dict_keys"] = OFF("PyDictObject", "ma_keys")
    s["dict_values"] = OFF("PyDictObject", "ma_values")
    s["dictkeys_size"] = OFF(dk, "dk_size") if minor <= 10 else NONE
    s["dictkeys_log2_size"] = OFF(dk, "dk_log2_size") if minor >= 11 else NONE
    s["dictkeys_log2_index_bytes"] = OFF(dk, "dk_log2_index_bytes") if minor >= 11 else NONE
    s["dictkeys_kind"] = OFF(dk, "dk_kind") if minor >= 11 else NONE
    s["dictkeys_nentries"] = OFF(dk, "dk_nentries")
    s["dictkeys_indices"] = OFF(dk, "dk_indices")
    s["dictkeys_kind_general"] = "DICT_KEYS_GENERAL" if minor >= 11 else NONE
    s["dictentry_size"] = SIZE("PyDictKeyEntry")
    s["dictentry_key"] = OFF("PyDictKeyEntry", "me_key")
    s["dictentry_value"] = OFF("PyDictKeyEntry", "me_value")
    s["dictuentry_size"] = SIZE("PyDictUnicodeEntry") if minor >= 11 else NONE
    s["dictuentry_key"] = OFF("PyDictUnicodeEntry", "me_key") if minor >= 11 else NONE
    s["dictuentry_value"] = OFF("PyDictUnicodeEntry", "me_value") if minor >= 11 else NONE
    # <= 3.10 ma_values is a PyObject ** (values start at 0); 3.11+ a PyDictValues *.
    s["dictvalues_values"] = OFF("PyDictValues", "values") if minor >= 11 else "0"
    s["dictvalues_valid"] = OFF("PyDictValues", "valid") if minor >= 13 else NONE

    # Ints. 3.12 moved the digits into long_value and replaced ob_size by lv_tag.
    if minor >= 12:
        s["long_size"] = NONE
        s["long_tag"] = OFF("PyLongObject", "long_value.lv_tag")
        s["long_tag_shift"] = "_PyLong_NON_SIZE_BITS"
        s["long_digits"] = OFF("PyLongObject", "long_value.ob_digit")
    else:
        s["long_size"] = OFF("PyLongObject", "ob_base.ob_size")
        s["long_tag"] = s["long_tag_shift"] = NONE
        s["long_digits"] = OFF("PyLongObject", "ob_digit")
    s["long_shift"] = "PyLong_SHIFT"
    s["long_digit_size"] = SIZE("digit")

    # Containers and scalars (dump --locals).
    s["float_fval"] = OFF("PyFloatObject", "ob_fval")
    s["tuple_items"] = OFF("PyTupleObject", "ob_item")
    s["list_items"] = OFF("PyListObject", "ob_item")
    s["dict_used"] = OFF("PyDictObject", "ma_used")
    s["set_used"] = OFF("PySetObject", "used")
    s["cell_ref"] = OFF("PyCellObject", "ob_ref")

    # Types and instance dicts.
    s["type_size"] = SIZE("PyTypeObject")
    s["type_basicsize"] = OFF("PyTypeObject", "tp_basicsize")
    s["type_dictoffset"] = OFF("PyTypeObject", "tp_dictoffset")
    s["type_flags"] = OFF("PyTypeObject", "tp_flags")
    s["heaptype_cached_keys"] = OFF("PyHeapTypeObject", "ht_cached_keys")
    s["type_flag_managed_dict"] = "Py_TPFLAGS_MANAGED_DICT" if minor >= 11 else NONE
    s["type_flag_inline_values"] = "Py_TPFLAGS_INLINE_VALUES" if minor >= 13 else NONE
    # Measured with the version's own accessors on a fake object (see _FAKE_OBJECT).
    fake = "scry_fake_object(Py_TPFLAGS_MANAGED_DICT)"
    if minor == 11:
        s["object_managed_dict_before"] = (
            "(char *)%s - (char *)_PyObject_ManagedDictPointer(%s)" % (fake, fake))
        s["object_managed_values_before"] = (
            "(char *)%s - (char *)_PyObject_ValuesPointer(%s)" % (fake, fake))
    elif minor == 12:
        s["object_managed_dict_before"] = (
            "(char *)%s - (char *)_PyObject_DictOrValuesPointer(%s)" % (fake, fake))
        s["object_managed_values_before"] = NONE
    elif minor >= 13:
        s["object_managed_dict_before"] = (
            "(char *)%s - (char *)_PyObject_ManagedDictPointer(%s)" % (fake, fake))
        s["object_managed_values_before"] = NONE
    else:
        s["object_managed_dict_before"] = s["object_managed_values_before"] = NONE
    # 3.12's PyDictOrValues: a values pointer is stored minus one (odd); the accessor adds
    # it back. The probe checks the tag bit and measures what _PyDictOrValues_GetValues
    # adds.
    s["object_dict_values_tag"] = (
        "({ static PyObject *vals[2]; PyDictOrValues d; d.values = (char *)vals - 1; "
        "_PyDictOrValues_IsValues(d) ? (char *)_PyDictOrValues_GetValues(d) - d.values "
        ": -2; })" if minor == 12 else NONE)
    return s


def styles_for(minor):
    unicode_style = "PYSTATE_UNICODE_312" if minor >= 12 else "PYSTATE_UNICODE_PEP393"
    frame_style = {11: "PYSTATE_FRAMES_311", 12: "PYSTATE_FRAMES_312"}.get(
        minor, "PYSTATE_FRAMES_313" if minor >= 13 else "PYSTATE_FRAMES_OBJECTS")
    if minor <= 9:
        linetable = "PYSTATE_LNOTAB"
    elif minor == 10:
        linetable = "PYSTATE_LINETABLE_310"
    else:
        linetable = "PYSTATE_LOCATIONS_311"
    return {"unicode_style": unicode_style, "frame_style": frame_style,
            "linetable_style": linetable}


# ---------------------------------------------------------------------------------------


def layout_fields():
    """Parses layout.h: the ordered list of (type, name) of pystate_layout_t."""
    with open(LAYOUT_H) as f:
        text = f.read()
    m = re.search(r"typedef struct pystate_layout \{(.*?)\} pystate_layout_t;", text, re.S)
    if not m:
        sys.exit("gen_layouts: cannot find pystate_layout_t in " + LAYOUT_H)
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    fields = []
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl:
            continue
        dm = re.match(r"(int64_t|uint8_t|int)\s+(.*)$", decl, re.S)
        if not dm:
            sys.exit("gen_layouts: unexpected declaration in layout.h: " + decl)
        for name in dm.group(2).split(","):
            fields.append((dm.group(1), name.strip()))
    return fields


def find_installs(root):
    """Returns {minor: (version string, include dir)}, the newest patch per minor."""
    found = {}
    try:
        names = os.listdir(root)
    except OSError:
        names = []
    for name in names:
        m = re.fullmatch(r"3\.(\d+)\.(\d+)", name)
        if not m:
            continue
        minor, patch = int(m.group(1)), int(m.group(2))
        if minor not in MINORS:
            continue
        inc = None
        for suffix in ("", "m"):
            d = os.path.join(root, name, "include", "python3.%d%s" % (minor, suffix))
            if os.path.isfile(os.path.join(d, "Python.h")):
                inc = d
                break
        if inc is None:
            continue
        if minor not in found or patch > found[minor][2]:
            found[minor] = (name, inc, patch)
    return {k: (v[0], v[1]) for k, v in found.items()}


def find_sid_installs(root):
    """{minor: (version, include dir, pyconfig dir)} for Debian's python3.X headers under
    ROOT: Python.h in usr/include/python3.X, pyconfig.h in
    usr/include/x86_64-linux-gnu/python3.X (included as <x86_64-linux-gnu/python3.X/...>)."""
    found = {}
    for minor in SID_MINORS:
        inc = os.path.join(root, "usr/include/python3.%d" % minor)
        if not os.path.isfile(os.path.join(inc, "Python.h")):
            continue
        with open(os.path.join(inc, "patchlevel.h")) as f:
            m = re.search(r'#define\s+PY_VERSION\s+"([^"]+)"', f.read())
        found[minor] = (m.group(1) if m else "3.%d" % minor, inc,
                        os.path.join(root, "usr/include/x86_64-linux-gnu/python3.%d" % minor))
    return found


def probe(minor, incdir, spec, cc, archdir=None):
    """Compiles and runs the probe; returns (PY_VERSION_HEX, {field: value}). ARCHDIR: the
    directory Debian's pyconfig.h wrapper includes as <x86_64-linux-gnu/python3.X/...>."""
    lines = ["#define Py_BUILD_CORE 1", '#include "Python.h"']
    lines += ['#include "%s"' % h for h in INCLUDES[minor]]
    lines += ["#include <stddef.h>", "#include <stdio.h>", ""]
    lines.append(PRELUDE.get(minor, ""))
    if minor >= 11:
        lines.append(_FAKE_OBJECT)
    lines.append("_Static_assert(offsetof(PyASCIIObject, state) == "
                 "offsetof(PyASCIIObject, hash) + sizeof(Py_hash_t), "
                 '"PyASCIIObject.state does not follow hash");')
    lines.append("_Static_assert(sizeof(void *) == 8, \"64-bit targets only\");")
    lines += ["", "int main(void)", "{",
              '    printf("PY_VERSION_HEX %lu\\n", (unsigned long)PY_VERSION_HEX);']
    for name, expr in spec.items():
        if expr is not None:
            lines.append('    printf("%s %%lld\\n", (long long)(%s));' % (name, expr))
    lines += ["    return 0;", "}", ""]
    with tempfile.TemporaryDirectory(prefix="scry-layout-") as tmp:
        src = os.path.join(tmp, "probe.c")
        exe = os.path.join(tmp, "probe")
        with open(src, "w") as f:
            f.write("\n".join(lines))
        cmd = [cc, "-std=gnu11", "-w", "-I", incdir, src, "-o", exe]
        if archdir:
            os.makedirs(os.path.join(tmp, "inc", "x86_64-linux-gnu"))
            os.symlink(archdir, os.path.join(tmp, "inc", "x86_64-linux-gnu",
                                             os.path.basename(archdir)))
            cmd[3:3] = ["-I", os.path.join(tmp, "inc")]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        if r.returncode != 0:
            sys.exit("gen_layouts: probe for 3.%d failed to compile:\n%s\n%s"
                     % (minor, " ".join(cmd), r.stdout))
        out = subprocess.run([exe], stdout=subprocess.PIPE, check=True,
                             universal_newlines=True).stdout
    values = {}
    hexv = None
    for line in out.splitlines():
        k, v = line.split()
        if k == "PY_VERSION_HEX":
            hexv = int(v)
        else:
            values[k] = int(v)
    return hexv, values


def render(results, fields):
    out = []
    w = out.append
    w("/* layouts_gen.c - GENERATED by pystate/gen/gen_layouts.py. DO NOT EDIT.")
    w(" *")
    w(" * Per-version CPython struct layouts (x86_64), measured with offsetof()/sizeof() by a")
    w(" * probe compiled against each version's own headers (Py_BUILD_CORE + internal headers).")
    w(" * Regenerate (needs the pyenv CPythons 3.6-3.13 and gcc):")
    w(" *     python3 pystate/gen/gen_layouts.py")
    w(" * Check it is up to date:")
    w(" *     python3 pystate/gen/gen_layouts.py --check")
    w(" * See pystate/gen/README.md and pystate/layout.h. -1 means \"no such field\".")
    w(" */")
    w('#include "layout.h"')
    w("")
    w("#include <stddef.h>")
    for minor in sorted(results):
        version, hexv, values = results[minor]
        w("")
        w("/* 3.%d: from the headers of CPython %s (PY_VERSION_HEX 0x%08x) */" % (minor, version,
                                                                                hexv))
        w("static const pystate_layout_t layout_3_%d = {" % minor)
        styles = styles_for(minor)
        for typ, name in fields:
            if name == "major":
                val = "3"
            elif name == "minor":
                val = str(minor)
            elif name in styles:
                val = styles[name]
            else:
                val = str(values.get(name, -1))
            w("    .%s = %s," % (name, val))
        w("};")
    w("")
    w("const pystate_layout_t *pystate_layout_for(int major, int minor)")
    w("{")
    w("    if (major != 3)")
    w("        return NULL;")
    w("    switch (minor) {")
    for minor in sorted(results):
        w("    case %d:" % minor)
        w("        return &layout_3_%d;" % minor)
    w("    default:")
    w("        return NULL;")
    w("    }")
    w("}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pyenv-root", default=os.environ.get(
        "PYENV_ROOT_VERSIONS", "/root/.pyenv/versions"),
        help="directory holding 3.X.Y installs (default /root/.pyenv/versions)")
    ap.add_argument("--sid-root", default=SID_ROOT,
                    help="root file system with libpython3.14-dev and 3.15-dev (default %s)"
                    % SID_ROOT)
    ap.add_argument("--cc", default=os.environ.get("CC", "gcc"))
    ap.add_argument("-o", "--output", default=OUTPUT)
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 if OUTPUT differs from what would be generated")
    ap.add_argument("--dump", action="store_true", help="print the values per version")
    args = ap.parse_args()

    fields = layout_fields()
    int_fields = [n for t, n in fields if t == "int64_t"]
    special = {"major", "minor", "unicode_style", "frame_style", "linetable_style"}
    for t, n in fields:
        if t != "int64_t" and n not in special:
            sys.exit("gen_layouts: layout.h field %s (%s) has no rule here" % (n, t))

    installs = {m: v + (None,) for m, v in find_installs(args.pyenv_root).items()}
    installs.update(find_sid_installs(args.sid_root))
    missing = [m for m in MINORS if m not in installs]
    if missing:
        sys.exit("gen_layouts: no CPython 3.%s under %s or %s (need all of 3.6-3.15)" %
                 (", 3.".join(str(m) for m in missing), args.pyenv_root, args.sid_root))

    results = {}
    for minor in MINORS:
        spec = spec_for(minor)
        unknown = set(spec) - set(int_fields)
        lacking = set(int_fields) - set(spec)
        if unknown or lacking:
            sys.exit("gen_layouts: 3.%d spec out of sync with layout.h: unknown %s, "
                     "missing %s" % (minor, sorted(unknown), sorted(lacking)))
        version, inc, archdir = installs[minor]
        hexv, values = probe(minor, inc, spec, args.cc, archdir)
        if (hexv >> 24, (hexv >> 16) & 0xFF) != (3, minor):
            sys.exit("gen_layouts: %s headers say PY_VERSION_HEX 0x%08x" % (inc, hexv))
        results[minor] = (version, hexv, values)
        if args.dump:
            print("3.%d (%s, 0x%08x)" % (minor, version, hexv))
            for n in int_fields:
                print("    %-28s %d" % (n, values.get(n, -1)))

    text = render(results, fields)
    if args.check:
        try:
            with open(args.output) as f:
                current = f.read()
        except OSError:
            current = None
        if current != text:
            print("gen_layouts: %s is out of date; rerun pystate/gen/gen_layouts.py"
                  % args.output, file=sys.stderr)
            return 1
        return 0
    tmp = args.output + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
