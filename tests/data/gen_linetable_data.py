#!/usr/bin/env python3
"""Capture CPython line tables and the lines the interpreter itself reports for them.

Run under one interpreter (3.6 .. 3.13) it compiles a set of tricky functions and writes
tests/data/linetable_<major>.<minor>.txt; run with --all it runs itself under every pyenv
interpreter:

    python3 tests/data/gen_linetable_data.py --all

Ground truth, per version: for every 2-byte code unit offset of every code object, the line
returned by the interpreter's own PyCode_Addr2Line(code, byte_offset) (called via ctypes), the
function the interpreter uses for frame.f_lineno. -1 means "no line" (3.10+ only). It is
cross-checked against the dis-level views and any disagreement is reported on stderr and in
the file header:
  <= 3.9 : dis.findlinestarts (co_lnotab semantics: the line of the last start <= offset)
  3.10+  : code.co_lines() ranges (None -> -1)
  3.11+  : also code.co_positions() per code unit

File format (whitespace-separated tokens; '#' starts a comment line):
  version MAJOR MINOR
  style S                         enum pystate_linetable_style
  code NAME FIRSTLINENO CODELEN   CODELEN in bytes
  table HEX                       raw co_lnotab / co_linetable ('-' when empty)
  ranges N END:LINE ...           N contiguous runs from offset 0: [prev_end, END) has LINE
  end
The script must itself stay valid Python 3.6.
"""
import ctypes
import dis
import os
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
PYENV = "/root/.pyenv/versions"
VERSIONS = ["3.6.15", "3.7.16", "3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"]

# ---------------------------------------------------------------------------------------------
# The tricky sources. Each entry: (name, minimum (major, minor), source text).


def _long_function(nlines):
    out = ["def very_long(n):", "    total = 0"]
    for i in range(nlines):
        if i % 97 == 0:
            out.append("")
            out.append("    # a comment line")
        if i % 250 == 0:
            out.append("    if n > %d:" % i)
            out.append("        total += n * %d" % i)
            continue
        out.append("    total += 1" if i % 10 == 0 else "    n")
    out.append("    return total")
    return "\n".join(out) + "\n"


def _big_line():
    items = ", ".join("a%d" % (i % 5) for i in range(160))
    return (
        "def big_line(a0, a1, a2, a3, a4):\n"
        "    x = 1\n"
        "    y = [" + items + "]\n"
        "    return x, y\n"
    )


def _big_loop():
    body = "\n".join("        acc += f(i, %d)" % i for i in range(60))
    return (
        "def big_loop(f, n):\n"
        "    acc = 0\n"
        "    for i in range(n):\n" + body + "\n"
        "        if acc > 1000:\n"
        "            break\n"
        "    while acc > 0:\n"
        "        acc -= 1\n"
        "        if acc == 5:\n"
        "            continue\n"
        "    return acc\n"
    )


def _gaps():
    return (
        "def gaps(a):\n"
        "    x = a\n" + "\n" * 140 + "    y = x + 1\n" + "\n" * 300 + "    z = y + 2\n"
        "    w = (x +\n" + "\n" * 200 + "         z)\n"
        "    return w\n"
    )


def _negative():
    return (
        "def negative(obj, a, b):\n"
        "    r = obj.method(\n"
        "        a,\n" + "\n" * 150 + "        b,\n"
        "    )\n"
        "    with obj:\n" + "".join("        a = a + %d\n" % i for i in range(40)) + "\n" * 130 +
        "        b = a\n"
        "    return r\n"
    )


SOURCES = [
    ("simple", (3, 6), "def simple(a, b):\n    c = a + b\n\n    d = c * 2\n    return d\n"),
    ("empty_lines", (3, 6), "def empty_lines():\n\n\n    # nothing\n\n    pass\n\n\n"),
    ("docstring_only", (3, 6), 'def docstring_only():\n    """doc"""\n'),
    ("multiline", (3, 6),
     "def multiline(a, b, c):\n"
     "    d = {\n"
     "        'a': a,\n"
     "        'b': [b,\n"
     "              c],\n"
     "    }\n"
     "    return (a +\n"
     "            b if c else\n"
     "            d['a'])\n"),
    ("big_line", (3, 6), _big_line()),
    ("big_loop", (3, 6), _big_loop()),
    ("gaps", (3, 6), _gaps()),
    ("negative", (3, 6), _negative()),
    ("exceptions", (3, 6),
     "def exceptions(f):\n"
     "    try:\n"
     "        f()\n"
     "    except ValueError as e:\n"
     "        print(e)\n"
     "    except (KeyError, IndexError):\n"
     "        pass\n"
     "    else:\n"
     "        return 1\n"
     "    finally:\n"
     "        f()\n"
     "    try:\n"
     "        raise RuntimeError('x')\n"
     "    except Exception:\n"
     "        raise\n"),
    ("generators", (3, 6),
     "def gen(n):\n"
     "    for i in range(n):\n"
     "        x = yield i\n"
     "        if x:\n"
     "            yield from range(x)\n"
     "    return n\n"
     "async def agen(s):\n"
     "    async with s as t:\n"
     "        await t\n"
     "    async for u in s:\n"
     "        yield u\n"),
    ("comprehensions", (3, 6),
     "def comps(xs):\n"
     "    a = [x * 2 for x in xs if x]\n"
     "    b = {x: [y for y in range(x)]\n"
     "         for x in xs}\n"
     "    c = {x for x in xs}\n"
     "    d = (x\n"
     "         for x in xs)\n"
     "    f = lambda q: (q +\n"
     "                   1)\n"
     "    return a, b, c, d, f\n"),
    ("klass", (3, 6),
     "class Klass(object):\n"
     "    attr = 1\n"
     "    def method(self):\n"
     "        return self.attr\n"
     "    @property\n"
     "    def prop(self):\n"
     "        return 2\n"),
    ("high_firstline", (3, 6), "\n" * 70000 + "def high(a):\n    b = a\n" + "\n" * 200 +
     "    return b\n"),
    ("ifelse_noline", (3, 6),
     "def ifelse(a):\n"
     "    if a:\n"
     "        x = 1\n"
     "    else:\n"
     "        x = 2\n"
     "    while a:\n"
     "        a -= 1\n"
     "    for i in a:\n"
     "        pass\n"),
    ("long_columns", (3, 6),
     "def long_columns(aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa):\n"
     "    return " + " + ".join(["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"] * 12) + "\n"),
    ("very_long", (3, 6), _long_function(1020)),
    ("match", (3, 10),
     "def matcher(v):\n"
     "    match v:\n"
     "        case [a, b]:\n"
     "            return a\n"
     "        case {'k': c}:\n"
     "            return c\n"
     "        case _:\n"
     "            return None\n"),
    ("except_star", (3, 11),
     "def estar(f):\n"
     "    try:\n"
     "        f()\n"
     "    except* ValueError:\n"
     "        pass\n"),
]

# ---------------------------------------------------------------------------------------------


def style_for(v):
    if v < (3, 10):
        return 0
    if v < (3, 11):
        return 1
    return 2


def code_table(co):
    if sys.version_info < (3, 10):
        return co.co_lnotab
    return co.co_linetable


def all_codes(co, prefix):
    name = "%s/%s@%d" % (prefix, co.co_name, co.co_firstlineno)
    name = name.replace(" ", "_").replace("<", "").replace(">", "")
    yield name, co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            for item in all_codes(c, name):
                yield item


def addr2line_all(co):
    fn = ctypes.pythonapi.PyCode_Addr2Line
    fn.argtypes = [ctypes.py_object, ctypes.c_int]
    fn.restype = ctypes.c_int
    return [fn(co, off) for off in range(0, len(co.co_code), 2)]


def dis_view(co):
    """Line per code unit from the dis-level API, or None where it gives none."""
    n = len(co.co_code) // 2
    out = [None] * n
    if sys.version_info < (3, 10):
        starts = list(dis.findlinestarts(co))
        cur = None
        si = 0
        for i in range(n):
            while si < len(starts) and starts[si][0] <= 2 * i:
                cur = starts[si][1]
                si += 1
            out[i] = cur
        return out
    for start, end, line in co.co_lines():
        for off in range(start, end, 2):
            if off // 2 < n:
                out[off // 2] = -1 if line is None else line
    return out


def positions_view(co):
    if sys.version_info < (3, 11):
        return None
    out = []
    for pos in co.co_positions():
        out.append(-1 if pos[0] is None else pos[0])
    return out


def emit_code(lines, name, co, problems):
    truth = addr2line_all(co)
    view = dis_view(co)
    for i, (a, b) in enumerate(zip(truth, view)):
        if b is not None and a != b:
            problems.append("%s: offset %d: PyCode_Addr2Line %d, dis %s" % (name, 2 * i, a, b))
    pos = positions_view(co)
    if pos is not None:
        for i, (a, b) in enumerate(zip(truth, pos)):
            if a != b:
                problems.append("%s: offset %d: PyCode_Addr2Line %d, co_positions %d" %
                                (name, 2 * i, a, b))
    runs = []
    for i, line in enumerate(truth):
        if runs and runs[-1][1] == line:
            runs[-1][0] = 2 * (i + 1)
        else:
            runs.append([2 * (i + 1), line])
    table = code_table(co)
    lines.append("code %s %d %d" % (name, co.co_firstlineno, len(co.co_code)))
    lines.append("table %s" % (table.hex() if table else "-"))
    toks = ["ranges", str(len(runs))] + ["%d:%d" % (e, l) for e, l in runs]
    cur = ""
    for t in toks:
        if len(cur) + len(t) + 1 > 100:
            lines.append(cur)
            cur = t
        else:
            cur = (cur + " " + t) if cur else t
    lines.append(cur)
    lines.append("end")


def collect(prefix_tag):
    out = []
    v = sys.version_info[:2]
    for name, minv, src in SOURCES:
        if v < minv:
            continue
        top = compile(src, name + ".py", "exec")
        for cname, co in all_codes(top, name + prefix_tag):
            out.append((cname, co))
    return out


def run_one(outdir):
    v = sys.version_info[:2]
    problems = []
    body = []
    codes = collect("")
    for cname, co in codes:
        emit_code(body, cname, co, problems)
    if v >= (3, 11):
        # -X no_debug_ranges makes the compiler emit the 'no column' (13) form.
        child = subprocess.run(
            [sys.executable, "-X", "no_debug_ranges", os.path.abspath(__file__), "--child", outdir],
            stdout=subprocess.PIPE, check=True, universal_newlines=True)
        body.append(child.stdout.rstrip("\n"))
    head = [
        "# linetable_%d.%d.txt: generated by tests/data/gen_linetable_data.py under CPython %s;"
        % (v[0], v[1], sys.version.split()[0]),
        "# do not edit. Ground truth: PyCode_Addr2Line per 2-byte offset; cross-check problems: %d"
        % len(problems),
    ]
    for p in problems[:20]:
        head.append("#   " + p)
    head.append("version %d %d" % v)
    head.append("style %d" % style_for(v))
    path = os.path.join(outdir, "linetable_%d.%d.txt" % v)
    with open(path, "w") as fh:
        fh.write("\n".join(head + body) + "\n")
    for p in problems:
        sys.stderr.write("%d.%d: %s\n" % (v[0], v[1], p))
    print("%s: %d code objects, %d bytes, %d cross-check problems" %
          (path, len(codes), os.path.getsize(path), len(problems)))


def run_child():
    problems = []
    body = []
    for cname, co in collect("[nodebugranges]"):
        if cname.startswith(("simple", "multiline", "long_columns", "negative", "exceptions")):
            emit_code(body, cname, co, problems)
    for p in problems:
        sys.stderr.write("child: %s\n" % p)
    print("\n".join(body))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--all":
        for ver in VERSIONS:
            mm = ".".join(ver.split(".")[:2])
            exe = os.path.join(PYENV, ver, "bin", "python" + mm)
            subprocess.run([exe, os.path.abspath(__file__), HERE], check=True)
        return
    if len(sys.argv) >= 3 and sys.argv[1] == "--child":
        run_child()
        return
    run_one(sys.argv[1] if len(sys.argv) >= 2 else HERE)


if __name__ == "__main__":
    main()
