#!/usr/bin/env python3
"""Generate pystate/opcodes_gen.c: per CPython version, every opcode's name, class (call /
may call / other), inline cache count and base opcode.

    python3 pystate/gen/gen_opcodes.py            # runs every pyenv interpreter 3.6 .. 3.13

Each interpreter describes itself (opcode.opmap, dis._all_opmap with the specialised forms of
3.11+, dis._deoptop, opcode._inline_cache_entries); the classification rules below are ours.
Each interpreter also checks the result against its own running code: a warmed-up (specialised)
and, on 3.12+, a sys.monitoring-instrumented function's _co_code_adaptive must decode, with our
numbers and cache counts, to the same instruction boundaries and base opcodes as co_code.
This script must stay runnable by Python 3.6 (the --dump part runs inside each interpreter).
"""
import json
import os
import subprocess
import sys

PYENV = "/root/.pyenv/versions"
VERSIONS = ["3.6.15", "3.7.16", "3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"]
# Debian sid's 3.14 and 3.15 from the cached sid root (scripts/sid-root.sh), run through
# scripts/sid-python.sh (chroot with this checkout at the same path).
SID_VERSIONS = ["3.14", "3.15"]
SID_PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "scripts", "sid-python.sh")
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "opcodes_gen.c")

# ---------------------------------------------------------------------------------------------
# Part 1: runs inside one interpreter (--dump) and prints JSON.


def _warm_target(xs):
    total = 0
    for x in xs:
        total += len(str(x)) + max(x, 1)
        xs.append if x < 0 else None
    d = {"k": 1}
    return total + d["k"] + isinstance(xs, list)


def _dump():
    import dis
    import opcode

    v = sys.version_info[:2]
    allmap = dict(getattr(dis, "_all_opmap", opcode.opmap))
    names = {}
    for name, num in allmap.items():
        if num < 256:
            names[num] = name
    for num, name in enumerate(opcode.opname):
        if num < 256 and num not in names and not name.startswith("<"):
            names[num] = name

    def base_of(num):
        name = names[num]
        if name.startswith("INSTRUMENTED_"):
            b = opcode.opmap.get(name[len("INSTRUMENTED_"):])
            return b if b is not None and b < 256 else -1
        if name == "ENTER_EXECUTOR":
            return -1  # replaces a JUMP_BACKWARD (3.13); the original is in the executor
        if hasattr(dis, "_deoptop"):
            return dis._deoptop(num)
        return num

    ice = getattr(opcode, "_inline_cache_entries", None)

    def base_caches(b):
        if ice is None:
            return 0
        if hasattr(ice, "get"):  # a dict by name (3.13+; a frozendict in 3.15)
            return ice.get(names[b], 0)
        return ice[b]

    ops = {}
    for num in sorted(names):
        b = base_of(num)
        caches = base_caches(b) if b >= 0 else -1
        if names[num] == "ENTER_EXECUTOR" and "JUMP_BACKWARD" in opcode.opmap:
            # 3.13 only ever puts it over a JUMP_BACKWARD, whose caches stay in place.
            caches = base_caches(opcode.opmap["JUMP_BACKWARD"])
        ops[num] = {"name": names[num], "base": b, "caches": caches}
    problems = []
    checked = _check_live(v, ops, problems)
    print(json.dumps({
        "version": list(v), "full": sys.version.split()[0], "ops": ops,
        "extended_arg": opcode.opmap.get("EXTENDED_ARG", -1), "cache": opcode.opmap.get("CACHE", -1),
        "problems": problems, "checked": checked,
    }))


def _check_live(v, ops, problems):
    """Decodes live adaptive bytecode with OPS; returns the number of instructions checked."""
    if v < (3, 11):
        return 0
    import dis

    def walk(co, label):
        raw = co._co_code_adaptive
        base = co.co_code
        n = 0
        offsets = [ins.offset for ins in dis.get_instructions(co)]
        pos = 0
        for off in offsets:
            if off != pos:
                problems.append("%s: our walk at %d, dis instruction at %d" % (label, pos, off))
                return n
            op = raw[off]
            info = ops.get(op)
            if info is None:
                problems.append("%s: offset %d: unknown opcode %d" % (label, off, op))
                return n
            want = base[off]
            if info["base"] >= 0 and info["base"] != want:
                problems.append("%s: offset %d: %s has base %d, co_code has %d" %
                                (label, off, info["name"], info["base"], want))
            caches = info["caches"] if info["caches"] >= 0 else ops[want]["caches"]
            if caches != ops[want]["caches"]:
                problems.append("%s: offset %d: %s caches %d, base %d" %
                                (label, off, info["name"], caches, ops[want]["caches"]))
            pos = off + 2 * (1 + caches)
            n += 1
        if pos != len(raw):
            problems.append("%s: walk ends at %d of %d" % (label, pos, len(raw)))
        return n

    code = _warm_target.__code__
    for _ in range(3000):
        _warm_target([1, 2, 3])
    seen = set(bytes(code._co_code_adaptive)[0::2])
    spec = [ops[o]["name"] for o in seen if o in ops and ops[o]["base"] != o]
    if not any(s.startswith(("CALL_", "PRECALL_")) for s in spec):
        problems.append("no specialised call seen after warm-up: %s" % sorted(spec))
    n = walk(code, "specialised")
    if v >= (3, 12):
        mon = sys.monitoring
        mon.use_tool_id(3, "gen_opcodes")
        mon.register_callback(3, mon.events.CALL, lambda *a: None)
        mon.register_callback(3, mon.events.LINE, lambda *a: None)
        mon.set_local_events(3, code, mon.events.CALL | mon.events.LINE)
        _warm_target([1, 2, 3])
        seen = set(bytes(code._co_code_adaptive)[0::2])
        inst = [ops[o]["name"] for o in seen if o in ops and ops[o]["name"].startswith("INSTR")]
        if "INSTRUMENTED_CALL" not in inst and "INSTRUMENTED_LINE" not in inst:
            problems.append("no instrumented opcode seen: %s" % sorted(inst))
        n += walk(code, "instrumented")
        mon.set_local_events(3, code, 0)
        mon.free_tool_id(3)
    return n


# ---------------------------------------------------------------------------------------------
# Part 2: classification (ours) and C output.

CALL_BASES = {
    "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_FUNCTION_EX", "CALL_METHOD", "CALL", "CALL_KW",
    "PRECALL",
}
# Instructions that may run arbitrary Python or C code (dunder methods, iterators, imports,
# descriptors) without being a call: a heuristic, checked on base opcodes.
MAYCALL_BASES = {
    "TO_BOOL", "COMPARE_OP", "CONTAINS_OP", "STORE_SUBSCR", "DELETE_SUBSCR", "STORE_SLICE",
    "FOR_ITER", "GET_ITER", "GET_AITER", "GET_ANEXT", "GET_AWAITABLE", "GET_YIELD_FROM_ITER",
    "SEND", "YIELD_FROM", "IMPORT_NAME", "IMPORT_FROM", "IMPORT_STAR", "LOAD_ATTR", "STORE_ATTR",
    "DELETE_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR", "FORMAT_VALUE", "FORMAT_SIMPLE",
    "FORMAT_WITH_SPEC", "CONVERT_VALUE", "BUILD_MAP", "BUILD_CONST_KEY_MAP", "BUILD_SET", "MAP_ADD",
    "SET_ADD", "DICT_MERGE", "DICT_UPDATE", "LIST_EXTEND", "SET_UPDATE", "BUILD_MAP_UNPACK",
    "BUILD_MAP_UNPACK_WITH_CALL", "BUILD_LIST_UNPACK", "BUILD_TUPLE_UNPACK",
    "BUILD_TUPLE_UNPACK_WITH_CALL", "BUILD_SET_UNPACK", "UNPACK_SEQUENCE", "UNPACK_EX",
    "PRINT_EXPR", "RAISE_VARARGS", "SETUP_WITH", "BEFORE_WITH", "BEFORE_ASYNC_WITH",
    "SETUP_ASYNC_WITH", "WITH_EXCEPT_START", "WITH_CLEANUP_START", "WITH_CLEANUP_FINISH",
    "CALL_INTRINSIC_1", "CALL_INTRINSIC_2", "MATCH_CLASS", "MATCH_KEYS", "GET_LEN",
    "COPY_DICT_WITHOUT_KEYS", "CHECK_EXC_MATCH", "CHECK_EG_MATCH", "JUMP_IF_NOT_EXC_MATCH",
    "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_FORWARD_IF_TRUE",
    "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE",
    "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", "END_ASYNC_FOR", "CLEANUP_THROW",
    "SETUP_ANNOTATIONS", "END_SEND",
}
MAYCALL_PREFIXES = ("BINARY_", "INPLACE_", "UNARY_")
UNKNOWN_NAMES = {"INSTRUMENTED_LINE", "INSTRUMENTED_INSTRUCTION", "ENTER_EXECUTOR"}


def classify(v, name, base_name):
    if name in UNKNOWN_NAMES or base_name is None:
        return "PYSTATE_OP_UNKNOWN"
    if v >= (3, 13) and base_name in ("POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE"):
        return "PYSTATE_OP_OTHER"  # 3.13: operands are exact bools (TO_BOOL runs before)
    if base_name in CALL_BASES:
        return "PYSTATE_OP_CALL"
    if base_name in MAYCALL_BASES or base_name.startswith(MAYCALL_PREFIXES):
        return "PYSTATE_OP_MAYCALL"
    return "PYSTATE_OP_OTHER"


def collect():
    dumps = []
    cmds = []
    for ver in VERSIONS:
        mm = ".".join(ver.split(".")[:2])
        cmds.append([os.path.join(PYENV, ver, "bin", "python" + mm)])
    cmds += [[SID_PYTHON, mm] for mm in SID_VERSIONS]
    for cmd in cmds:
        out = subprocess.run(cmd + [os.path.abspath(__file__), "--dump"], stdout=subprocess.PIPE,
                             check=True, universal_newlines=True).stdout
        d = json.loads(out)
        for p in d["problems"]:
            sys.stderr.write("%s: %s\n" % (d["full"], p))
        dumps.append(d)
    return dumps


def emit(dumps):
    lines = [
        "/* opcodes_gen.c - GENERATED by pystate/gen/gen_opcodes.py; do not edit.",
        " *",
        " * Opcode names, classes, inline cache counts and base opcodes of CPython %s," %
        ", ".join(d["full"] for d in dumps),
        " * read from each interpreter's own opcode/dis modules and checked against its live",
        " * specialised (and 3.12+ instrumented) bytecode. Regenerate (needs the pyenv",
        " * interpreters and the sid root): python3 pystate/gen/gen_opcodes.py",
        " */",
        '#include "opcodes.h"',
        "",
    ]
    tabs = []
    for d in dumps:
        v = tuple(d["version"])
        sym = "ops_%d_%d" % v
        tabs.append((v, sym, d))
        lines.append("static const pystate__opcode_entry_t %s[256] = {" % sym)
        ops = {int(k): x for k, x in d["ops"].items()}
        for num in sorted(ops):
            x = ops[num]
            base_name = ops[x["base"]]["name"] if x["base"] >= 0 else None
            klass = classify(v, x["name"], base_name)
            lines.append('    [%d] = {"%s", %s, %d, %d},' %
                         (num, x["name"], klass, x["caches"], x["base"]))
        lines.append("};")
        lines.append("")
    lines.append("const pystate__opcode_table_t pystate__opcode_tables[] = {")
    for v, sym, d in tabs:
        lines.append("    {%d, %d, %d, %d, %s}," % (v[0], v[1], d["extended_arg"], d["cache"], sym))
    lines.append("};")
    lines.append("")
    lines.append("const size_t pystate__opcode_ntables = sizeof pystate__opcode_tables / "
                 "sizeof pystate__opcode_tables[0];")
    with open(OUT, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    try:  # the repository's style (.clang-format at the top)
        subprocess.run(["clang-format", "-i", "--style=file", OUT], check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.stderr.write("clang-format not run: %s\n" % e)
    total = sum(d["checked"] for d in dumps)
    nprob = sum(len(d["problems"]) for d in dumps)
    print("%s: %d versions, %d live instructions checked, %d problems" %
          (OUT, len(dumps), total, nprob))
    return nprob


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--dump":
        _dump()
        return 0
    return 1 if emit(collect()) else 0


if __name__ == "__main__":
    sys.exit(main())
