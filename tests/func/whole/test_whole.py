#!/usr/bin/env python3
"""Whole-program features of scry (issue 13) against real interpreters.

usage: test_whole.py SCRY PYTHON [TEST...]   (PYTHON a path or a scrytest label: 3.12, 3.14d)

diff: a workload whose hot function changes between two runs (shift_workload.py: grower()
gets 20% of the CPU in the base run and 70% in the new one, steady() and other() 40% then
15% each) is recorded twice with -f json; 'scry diff -f text' must list grower's line first
with a change of +50 points (within 15) and steady's with -25; 'scry diff -f flamegraph'
must draw grower's frames red and steady's blue; a report compared with itself shows no
change.
diff_bad_input: hostile or wrong files give a clear message and exit status 1, never a
crash.
function: spread_workload.py gives hot() 70% and cold() 30% of its CPU, each spread over
several lines; 'record -F -f collapsed' must show each function as frames at its def line
only (a line profile shows several lines), with shares 70/30 within 15 points.
The runner is tests/lib/scrytest's: one PASS/FAIL/SKIP line per test.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import scrytest as st  # noqa: E402

SHIFT = os.path.join(HERE, "shift_workload.py")
SPREAD = os.path.join(HERE, "spread_workload.py")
TOL_PP = 15.0  # percentage points: the shares are set by process-CPU quotas


def marker(path, tag):
    with open(path) as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith("# " + tag):
                return n
    raise st.Fail("no marker %s in %s" % (tag, path))


def record_json(c, mode, name):
    out = c.path(name)
    res = c.scry_ok(["record", "-q", "-f", "json", "-o", out, "-r", "200", "--"]
                    + c.interp.argv(c.stage(SHIFT), mode, "2"), timeout=120)
    st.check(os.path.exists(out), "no %s: %s" % (name, res))
    return out


ROW = re.compile(r"^\s*([\d.]+)%\s+([\d.]+)%\s+([+-][\d.]+)%\s+(.*)$")


def text_rows(out):
    rows = []
    for line in out.splitlines():
        m = ROW.match(line)
        if m:
            rows.append((float(m.group(1)), float(m.group(2)), float(m.group(3)), m.group(4)))
    return rows


FRAME = re.compile(r'<g class="f"[^>]*><title>([^<]*)</title><rect [^>]*fill="rgb\((\d+),(\d+),(\d+)\)"')


def run_diff(c):
    check = c.expect
    base = record_json(c, "base", "base.json")
    new = record_json(c, "new", "new.json")
    gl, sl = marker(SHIFT, "GROWER_LINE"), marker(SHIFT, "STEADY_LINE")
    res = c.scry_ok(["diff", base, new, "-f", "text"])
    rows = text_rows(res.out)
    check(len(rows) >= 2, "text: at least two changed lines\n%s" % res.out)
    if len(rows) < 2:
        return
    first = rows[0]
    check("grower (" in first[3] and (":%d)" % gl) in first[3],
          "text: grower's line %d is first: %s" % (gl, first[3]))
    check(abs(first[2] - 50) <= TOL_PP, "text: grower's share grew by %.1f points "
          "(truth +50 +- %.0f)" % (first[2], TOL_PP))
    st_rows = [r for r in rows if "steady (" in r[3] and (":%d)" % sl) in r[3]]
    check(st_rows and abs(st_rows[0][2] + 25) <= TOL_PP,
          "text: steady's share shrank by about 25 points: %s" % (st_rows[:1],))
    # the base share in the diff is the base report's own figure
    with open(base) as f:
        b = json.load(f)
    bl = [x for x in b["lines"] if x["line"] == gl and x["function"].endswith("grower")]
    check(bl and abs(bl[0]["total_pct"] - first[0]) < 0.01,
          "text: base share %.2f is the base report's %s" % (first[0], bl[:1]))

    svg = c.path("diff.svg")
    c.scry_ok(["diff", base, new, "-o", svg])  # the format from the .svg name
    with open(svg) as f:
        doc = f.read()
    check("Differential Flame Graph" in doc, "flamegraph: titled as a differential graph")
    frames = FRAME.findall(doc)
    # each function's loop line (a stray sample on its first line, new in one run, is red)
    grow = [f for f in frames if f[0].startswith("grower (") and (":%d)" % gl) in f[0]]
    shrink = [f for f in frames if f[0].startswith("steady (") and (":%d)" % sl) in f[0]]
    red = lambda f: int(f[1]) == 255 and int(f[2]) == int(f[3]) < 200  # noqa: E731
    blue = lambda f: int(f[3]) == 255 and int(f[1]) == int(f[2]) < 200  # noqa: E731
    check(grow and all(red(f) for f in grow), "flamegraph: grower is red %s" % grow[:2])
    check(shrink and all(blue(f) for f in shrink), "flamegraph: steady is blue %s" % shrink[:2])

    res = c.scry_ok(["diff", new, new])
    check(not text_rows(res.out), "text: a report against itself shows no change\n%s" % res.out)
    return "grower +%.1f points, first; red/blue in the flame graph" % first[2]


def run_bad_input(c):
    check = c.expect
    good = record_json(c, "base", "good.json")
    with open(good) as f:
        doc = json.load(f)
    cases = {}

    def case(name, text):
        p = c.path(name)
        with open(p, "w") as f:
            f.write(text)
        cases[name] = p

    case("empty.json", "")
    case("notjson.json", "{not json")
    case("deep.json", "[" * 100000 + "]" * 100000)
    case("other.json", json.dumps({"format": "speedscope"}))
    old = dict(doc)
    del old["stacks"]
    case("nostacks.json", json.dumps(old))
    bad = dict(doc)
    bad["stacks"] = [{"frames": [0, 10 ** 9], "samples": 1, "value": 1}]
    case("badindex.json", json.dumps(bad))
    bad = dict(doc)
    bad["stacks"] = [{"frames": [0], "samples": -5, "value": 1}]
    case("negative.json", json.dumps(bad))
    bad = dict(doc)
    bad["stacks"] = [{"frames": [0] * 5000, "samples": 1, "value": 1}]
    case("toodeep.json", json.dumps(bad))
    bad = dict(doc)
    bad["version"] = 7
    case("version.json", json.dumps(bad))
    bad = dict(doc)
    bad["lines"] = [{"file": 3, "line": 1, "function": "f", "kind": "python", "total_pct": 1}]
    case("badline.json", json.dumps(bad))
    cases["missing.json"] = c.path("missing.json")
    cases["directory"] = c.tmp
    for name, p in sorted(cases.items()):
        for args in (["diff", p, good], ["diff", good, p, "-f", "flamegraph"]):
            res = c.scry(args)
            msg = res.err.strip()
            check(res.rc == 1 and msg.startswith("scry: ") and "\n" not in msg,
                  "%s: exit 1 with one message (rc %d: %s)" % (name, res.rc, st.short(msg, 160)))
    for args, what in ((["diff", good], "one file"), (["diff", good, good, good], "three files"),
                       (["diff", good, good, "-f", "html"], "format html"),
                       (["diff", good, good, "--pid", "1"], "--pid")):
        res = c.scry(args)
        check(res.rc == 2 and res.err.startswith("scry: "),
              "refused: %s (rc %d: %s)" % (what, res.rc, st.short(res.err, 160)))
    return "%d bad files refused" % len(cases)


def function_frames(text, script):
    """{function: {line: samples}} of SCRIPT's frames hot and cold in collapsed TEXT (each
    stack counted once per distinct frame of the function)."""
    base = os.path.basename(script)
    out = {"hot": {}, "cold": {}}
    for row in text.splitlines():
        stack, _, n = row.rpartition(" ")
        seen = set()
        for fr in stack.split(";"):
            m = re.match(r"^(hot|cold) \((.*):(\d+)\)$", fr)
            if m and os.path.basename(m.group(2)) == base and (m.group(1), m.group(3)) not in seen:
                seen.add((m.group(1), m.group(3)))
                d = out[m.group(1)]
                d[int(m.group(3))] = d.get(int(m.group(3)), 0) + int(n)
    return out


def run_function(c):
    check = c.expect
    script = c.stage(SPREAD)
    hot_def, cold_def = marker(SPREAD, "HOT_DEF"), marker(SPREAD, "COLD_DEF")
    _, fn_text = c.record(["-q", "-F", "-r", "200", "--"] + c.interp.argv(script, "2"),
                          "collapsed", name="function.txt", timeout=120)
    _, line_text = c.record(["-q", "-r", "200", "--"] + c.interp.argv(script, "1"),
                            "collapsed", name="lines.txt", timeout=120)
    fn, ln = function_frames(fn_text, script), function_frames(line_text, script)
    check(set(fn["hot"]) == {hot_def}, "-F: hot() only at its def line %d: %s"
          % (hot_def, fn["hot"]))
    check(set(fn["cold"]) == {cold_def}, "-F: cold() only at its def line %d: %s"
          % (cold_def, fn["cold"]))
    check(len(ln["hot"]) >= 2 and hot_def not in ln["hot"],
          "without -F: hot() at its lines (several, not the def line): %s" % ln["hot"])
    h, co = sum(fn["hot"].values()), sum(fn["cold"].values())
    share = 100.0 * h / (h + co) if h + co else 0
    check(abs(share - 70) <= TOL_PP, "-F: hot() %.1f%% of hot+cold (truth 70 +- %.0f)"
          % (share, TOL_PP))
    res = c.scry(["record", "-F", "-f", "html", "-o", c.path("x.html"), "--pid", "1"])
    check(res.rc == 2 and "stack formats" in res.err, "-F with html refused: %s" % res.err.strip())
    return "hot %.1f%% at line %d" % (share, hot_def)


def main():
    scry, python, patterns = st.positional(__doc__)
    tests = st.Tests()
    tests.add("diff", run_diff)
    tests.add("diff_bad_input", run_bad_input)
    tests.add("function", run_function)
    return st.run_on(tests.select(patterns), scry, python, "whole", "scry-whole",
                     skip_label="whole" if python.startswith("/") else python)


if __name__ == "__main__":
    sys.exit(main())
