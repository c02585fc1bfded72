#!/usr/bin/env python3
"""gen_debug_offsets.py - the _Py_DebugOffsets block layouts of 3.13+ from each version's header.

CPython 3.13+ starts _PyRuntime with a _Py_DebugOffsets block: char cookie[8], then only
uint64_t members grouped in nested structs. The member order changes with every minor
version. This reads the struct declaration from each version's own header
(Include/internal/pycore_runtime.h in 3.13, pycore_debug_offsets.h from 3.14) and writes:

    pystate/debug_layouts_gen.h   enum of every member any known version has (DBGF_*)
    pystate/debug_layouts_gen.c   per minor version: the word index of each member (-1
                                  where that version lacks it), the block's size in words
                                  and the PY_VERSION_HEX of the headers used

pystate/debug_offsets.c reads a block through these tables. Adding a version (3.16) is
`--header 16=/path/to/pycore_debug_offsets.h` plus rerunning; debug_offsets.c needs a
change only if a member the walkers use was renamed or removed.

Standard library only. See pystate/gen/README.md.

    python3 pystate/gen/gen_debug_offsets.py          # rewrite both files
    python3 pystate/gen/gen_debug_offsets.py --check  # exit 1 if either is out of date
"""

import argparse
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYSTATE = os.path.dirname(HERE)
OUT_H = os.path.join(PYSTATE, "debug_layouts_gen.h")
OUT_C = os.path.join(PYSTATE, "debug_layouts_gen.c")

PYENV = "/root/.pyenv/versions"
SID = "/var/cache/scry-tests/sid-root"


def default_headers(pyenv, sid):
    """{minor: [header paths]}: the first is used, the others (debug builds' copies) must
    declare the same struct."""
    h = {}
    v13 = sorted(glob.glob(os.path.join(pyenv, "3.13.*")),
                 key=lambda p: [int(x) for x in re.findall(r"\d+", os.path.basename(p))])
    if v13:
        h[13] = [os.path.join(v13[-1], "include/python3.13/internal/pycore_runtime.h")]
    for minor in (14, 15):
        h[minor] = [os.path.join(sid, "usr/include/python3.%d%s/internal/pycore_debug_offsets.h"
                                 % (minor, d)) for d in ("", "d")]
    return h


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def parse_struct(path):
    """Returns [(section, member)] in declaration order; section '' for top-level members.
    Refuses anything but char cookie[8] and uint64_t members in nested structs."""
    with open(path) as f:
        text = strip_comments(f.read())
    m = re.search(r"typedef\s+struct\s+_Py_DebugOffsets\s*\{(.*?)\}\s*_Py_DebugOffsets\s*;",
                  text, flags=re.S)
    if not m:
        sys.exit("gen_debug_offsets: no _Py_DebugOffsets declaration in %s" % path)
    body = m.group(1)
    if "#" in body:
        sys.exit("gen_debug_offsets: preprocessor lines inside _Py_DebugOffsets in %s" % path)
    toks = re.findall(r"[A-Za-z_]\w*|\d+|[{}\[\];]", body)
    out, i, section, pending = [], 0, None, []
    while i < len(toks):
        t = toks[i]
        if t == "struct":
            if section is not None:
                sys.exit("gen_debug_offsets: nested struct too deep in %s" % path)
            i += 1
            if toks[i] != "{":
                i += 1  # the struct tag
            if toks[i] != "{":
                sys.exit("gen_debug_offsets: unexpected '%s' in %s" % (toks[i], path))
            section, pending = "", []
            i += 1
        elif t == "}":
            name = toks[i + 1]
            if toks[i + 2] != ";":
                sys.exit("gen_debug_offsets: expected ';' after %s in %s" % (name, path))
            out.extend((name, mem) for mem in pending)
            section = None
            i += 3
        elif t == "uint64_t":
            name = toks[i + 1]
            if toks[i + 2] != ";":
                sys.exit("gen_debug_offsets: unexpected declaration of %s in %s" % (name, path))
            if section is None:
                out.append(("", name))
            else:
                pending.append(name)
            i += 3
        elif t == "char" and toks[i + 1:i + 5] == ["cookie", "[", "8", "]"] and not out:
            out.append(("", "cookie"))
            i += 5
            while toks[i] != ";":  # attributes such as _Py_NONSTRING
                i += 1
            i += 1
        else:
            sys.exit("gen_debug_offsets: unexpected '%s' in %s" % (t, path))
    if out[:3] != [("", "cookie"), ("", "version"), ("", "free_threaded")]:
        sys.exit("gen_debug_offsets: %s does not start with cookie, version, free_threaded"
                 % path)
    return out


def version_hex(header):
    inc = os.path.dirname(os.path.dirname(header))
    with open(os.path.join(inc, "patchlevel.h")) as f:
        text = f.read()
    vals = {}
    for key in ("PY_MAJOR_VERSION", "PY_MINOR_VERSION", "PY_MICRO_VERSION",
                "PY_RELEASE_LEVEL", "PY_RELEASE_SERIAL"):
        m = re.search(r"#define\s+%s\s+(\w+)" % key, text)
        if not m:
            sys.exit("gen_debug_offsets: no %s in %s/patchlevel.h" % (key, inc))
        vals[key] = m.group(1)
    level = {"PY_RELEASE_LEVEL_ALPHA": 0xA, "PY_RELEASE_LEVEL_BETA": 0xB,
             "PY_RELEASE_LEVEL_GAMMA": 0xC, "PY_RELEASE_LEVEL_FINAL": 0xF}
    lv = level.get(vals["PY_RELEASE_LEVEL"])
    if lv is None:
        lv = int(vals["PY_RELEASE_LEVEL"], 0)
    return (int(vals["PY_MAJOR_VERSION"]) << 24 | int(vals["PY_MINOR_VERSION"]) << 16 |
            int(vals["PY_MICRO_VERSION"]) << 8 | lv << 4 | int(vals["PY_RELEASE_SERIAL"]))


def enum_name(section, member):
    return "DBGF_" + ("%s_%s" % (section, member) if section else member).upper()


def render(layouts):
    """layouts: {minor: (header, hexv, members)} -> (header text, source text)."""
    names = []
    for minor in sorted(layouts):
        for sm in layouts[minor][2]:
            if sm not in names:
                names.append(sm)
    gen = "/* Generated by pystate/gen/gen_debug_offsets.py from each version's own header. " \
          "Do not edit. */\n"
    h = [gen, "#ifndef SCRY_PYSTATE_DEBUG_LAYOUTS_GEN_H\n",
         "#define SCRY_PYSTATE_DEBUG_LAYOUTS_GEN_H\n\n",
         "#include <stddef.h>\n#include <stdint.h>\n\n",
         "/* Every _Py_DebugOffsets member any known version has (section_member). */\n",
         "enum pystate_dbg_field {\n"]
    for s, m in names:
        h.append("    %s,\n" % enum_name(s, m))
    h.append("    DBGF_COUNT\n};\n\n")
    h.append("/* One minor version's block: word[f] is the index of member f in 8-byte words "
             "(the\n * cookie is word 0), or -1 where the version lacks it. */\n")
    h.append("typedef struct pystate_dbg_layout {\n    int minor;\n"
             "    uint32_t header_hex; /* PY_VERSION_HEX of the headers it was generated from "
             "*/\n    size_t words;        /* sizeof(_Py_DebugOffsets) / 8 */\n"
             "    const int16_t *word; /* DBGF_COUNT entries */\n"
             "    const char *header;  /* the header's name inside that version's tree */\n"
             "} pystate_dbg_layout_t;\n\n")
    h.append("/* The known layouts, oldest first (PYSTATE_DBG_NLAYOUTS of them). */\n")
    h.append("#define PYSTATE_DBG_NLAYOUTS %d\n" % len(layouts))
    h.append("extern const pystate_dbg_layout_t pystate_dbg_layouts[PYSTATE_DBG_NLAYOUTS];\n\n")
    h.append("/* The member that is the size of F's struct (DBGF_THREAD_STATE_SIZE for "
             "thread_state.*),\n * or -1 for a top-level member or a struct without a "
             "size member. */\nint pystate_dbg_field_struct_size(int f);\n\n")
    h.append("/* The name of member F (\"thread_state.current_frame\"); \"?\" when out of range. "
             "*/\nconst char *pystate_dbg_field_name(int f);\n\n#endif\n")

    c = [gen, '#include "debug_layouts_gen.h"\n\n']
    c.append("static const char *const names[DBGF_COUNT] = {\n")
    for s, m in names:
        c.append('    "%s",\n' % ("%s.%s" % (s, m) if s else m))
    c.append("};\n\n")
    c.append("const char *pystate_dbg_field_name(int f)\n{\n"
             "    return f >= 0 && f < DBGF_COUNT ? names[f] : \"?\";\n}\n\n")
    c.append("static const int16_t struct_size[DBGF_COUNT] = {\n")
    for s, m in names:
        size = enum_name(s, "size") if s and (s, "size") in names else "-1"
        c.append("    [%s] = %s,\n" % (enum_name(s, m), size))
    c.append("};\n\n")
    c.append("int pystate_dbg_field_struct_size(int f)\n{\n"
             "    return f >= 0 && f < DBGF_COUNT ? struct_size[f] : -1;\n}\n")
    for minor in sorted(layouts):
        header, hexv, members = layouts[minor]
        idx = {sm: i for i, sm in enumerate(members)}
        # cookie is 8 bytes = one word, so member k is word k
        c.append("\n/* 3.%d: %s (PY_VERSION_HEX 0x%08x), %d words */\n"
                 % (minor, header, hexv, len(members)))
        c.append("static const int16_t w3_%d[DBGF_COUNT] = {\n" % minor)
        for sm in names:
            c.append("    [%s] = %d,\n" % (enum_name(*sm), idx.get(sm, -1)))
        c.append("};\n")
    c.append("\nconst pystate_dbg_layout_t pystate_dbg_layouts[PYSTATE_DBG_NLAYOUTS] = {\n")
    for minor in sorted(layouts):
        header, hexv, members = layouts[minor]
        c.append('    {%d, 0x%08x, %d, w3_%d, "%s"},\n'
                 % (minor, hexv, len(members), minor, header))
    c.append("};\n")
    return "".join(h), "".join(c)


def short_name(path):
    m = re.search(r"(python3\.\d+d?/internal/\w+\.h)$", path)
    return m.group(1) if m else os.path.basename(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pyenv-root", default=PYENV, help="holds 3.13.X/ (default %s)" % PYENV)
    ap.add_argument("--sid-root", default=SID,
                    help="root file system with libpython3.1x-dev (default %s)" % SID)
    ap.add_argument("--header", action="append", default=[], metavar="MINOR=PATH",
                    help="use PATH for 3.MINOR (adds a version, e.g. 16=.../pycore_debug_offsets.h)")
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 if the outputs differ from what would be generated")
    ap.add_argument("--dump", action="store_true", help="print each version's member order")
    args = ap.parse_args()

    headers = default_headers(args.pyenv_root, args.sid_root)
    for spec in args.header:
        minor, _, path = spec.partition("=")
        headers[int(minor)] = [path]
    layouts = {}
    for minor, paths in sorted(headers.items()):
        if not os.path.exists(paths[0]):
            sys.exit("gen_debug_offsets: no header for 3.%d: %s" % (minor, paths[0]))
        members = parse_struct(paths[0])
        for other in paths[1:]:
            if os.path.exists(other) and parse_struct(other) != members:
                sys.exit("gen_debug_offsets: %s and %s declare different blocks"
                         % (paths[0], other))
        hexv = version_hex(paths[0])
        if (hexv >> 16) != (0x300 | minor):
            sys.exit("gen_debug_offsets: %s is 0x%08x, not 3.%d" % (paths[0], hexv, minor))
        layouts[minor] = (short_name(paths[0]), hexv, members)
        if args.dump:
            print("3.%d 0x%08x %d words" % (minor, hexv, len(members)))
            for i, (s, m) in enumerate(members):
                print("    %3d %s" % (i, "%s.%s" % (s, m) if s else m))

    h, c = render(layouts)
    if args.check:
        stale = []
        for path, text in ((OUT_H, h), (OUT_C, c)):
            try:
                with open(path) as f:
                    if f.read() == text:
                        continue
            except OSError:
                pass
            stale.append(path)
        for path in stale:
            print("gen_debug_offsets: %s is out of date; rerun pystate/gen/gen_debug_offsets.py"
                  % path, file=sys.stderr)
        return 1 if stale else 0
    for path, text in ((OUT_H, h), (OUT_C, c)):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
