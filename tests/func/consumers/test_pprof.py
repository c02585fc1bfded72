#!/usr/bin/env python3
"""scry's pprof output read by the real consumer, `go tool pprof` (Debian's golang-go).

Records shares_workload.py (hot_a does 70% of the work, hot_b 30%) twice with the built
scry: once as json, once as pprof (without -o, to check the default .pb.gz name). Then
checks that `go tool pprof -top` reads the file, that its two hottest functions are hot_a
and hot_b with the shares the json report gives (and about 70/30), that the sample types,
labels and line numbers come through (-raw, -tags, -list).

usage: test_pprof.py SCRY [PYTHON]     PYTHON: a path or a scrytest label (3.15); prints "SKIP pprof: reason" and exits 0 without go.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import scrytest as st  # noqa: E402
WORKLOAD = os.path.join(HERE, "shares_workload.py")
SECONDS = "3"
RATE = "200"
TOLERANCE = 15.0  # percentage points between the two recordings / the expected 70%

def find_go():
    go = shutil.which("go")
    if not go and os.access("/usr/lib/go/bin/go", os.X_OK):
        go = "/usr/lib/go/bin/go"
    return go


def record(c, fmt, out):
    """scry record (launch mode, in the test's directory, with a time-out): exit code."""
    cmd = ["record", "-q", "--rate", RATE, "--format", fmt]
    if out:
        cmd += ["-o", out]
    r = c.scry(cmd + ["--"] + c.interp.argv(c.stage(WORKLOAD), SECONDS), cwd=c.tmp, timeout=120)
    if r.rc != 0:
        print(r.err)
    return r.rc


def pprof(go, env, *args):
    # run in the scratch directory: pprof's -list guesses a trim prefix from the basename of
    # its working directory (e.g. ".../consumers/"), which would cut the workload's path
    r = subprocess.run([go, "tool", "pprof"] + list(args), env=env, cwd=env["PPROF_TMPDIR"],
                       stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def top_rows(text):
    """(flat_pct, name) of each row of `pprof -top`."""
    rows = []
    for line in text.splitlines():
        m = re.match(r"^\s*\S+\s+([\d.]+)%\s+[\d.]+%\s+\S+\s+[\d.]+%\s+(.+)$", line)
        if m:
            rows.append((float(m.group(1)), m.group(2).strip()))
    return rows


def run(c, go):
    tmp = c.tmp
    env = dict(os.environ)
    env.update(HOME=os.path.join(tmp, "home"), GOCACHE=os.path.join(tmp, "gocache"),
               GOPATH=os.path.join(tmp, "gopath"), GOFLAGS="", GOPROXY="off",
               GOTOOLCHAIN="local", PPROF_TMPDIR=tmp)
    os.makedirs(env["HOME"])
    check = c.expect

    check(record(c, "json", os.path.join(tmp, "r.json")) == 0, "scry record --format json")
    check(record(c, "pprof", None) == 0, "scry record --format pprof")
    found = glob.glob(os.path.join(tmp, "scry-*.pb.gz"))
    check(len(found) == 1, "default output name scry-PID-TIME.pb.gz (%s)" % found)
    if not found:
        raise st.Fail("no pprof file")
    pb = found[0]
    with open(pb, "rb") as f:
        check(f.read(2) == b"\x1f\x8b", "the file is gzip-compressed")

    rc, out, err = pprof(go, env, "-top", "-nodecount=5", pb)
    print(out + err)
    check(rc == 0, "go tool pprof -top reads the file")
    check("Type: cpu" in out, "default sample type is cpu")
    rows = top_rows(out)
    names = [n for _, n in rows[:2]]
    check(sorted(names) == ["hot_a", "hot_b"], "top two functions are hot_a, hot_b: %s" % names)
    flat = {n: p for p, n in rows}

    with open(os.path.join(tmp, "r.json")) as f:
        report = json.load(f)
    js = {fn["function"]: fn["self_pct"] for fn in report["functions"]}
    a_pp, b_pp = flat.get("hot_a", 0.0), flat.get("hot_b", 0.0)
    a_js, b_js = js.get("hot_a", 0.0), js.get("hot_b", 0.0)
    share_pp = 100.0 * a_pp / (a_pp + b_pp) if a_pp + b_pp else 0.0
    share_js = 100.0 * a_js / (a_js + b_js) if a_js + b_js else 0.0
    print("hot_a share of hot_a+hot_b: pprof %.1f%%, json %.1f%% (expected ~70%%)"
          % (share_pp, share_js))
    check(a_pp > b_pp, "pprof: hot_a (%.1f%%) hotter than hot_b (%.1f%%)" % (a_pp, b_pp))
    check(abs(share_pp - share_js) <= TOLERANCE, "pprof and json shares agree within %g points"
          % TOLERANCE)
    check(abs(share_pp - 70.0) <= TOLERANCE, "pprof share near 70%")
    check(a_pp + b_pp >= 80.0, "hot_a + hot_b hold most of the time (%.1f%%)" % (a_pp + b_pp))

    rc, out, err = pprof(go, env, "-top", "-sample_index=samples", "-nodecount=3", pb)
    rows = top_rows(out)
    check(rc == 0 and rows and rows[0][1] == "hot_a", "-sample_index=samples: hot_a first")

    rc, out, err = pprof(go, env, "-raw", pb)
    check(rc == 0 and "samples/count cpu/nanoseconds[dflt]" in out,
          "-raw: sample types samples/count, cpu/nanoseconds (default)")
    check("Period: %d" % (10 ** 9 // int(RATE)) in out, "-raw: period 1e9/rate")
    check(re.search(r"class:\[python\]", out) is not None, "-raw: class label")
    check(re.search(r"thread_id:\[\d+\]", out) is not None, "-raw: thread_id label")
    check("shares_workload.py:10" in out, "-raw: locations carry file:line")

    rc, out, err = pprof(go, env, "-tags", pb)
    check(rc == 0 and "python" in out and "thread_name" in out, "-tags: class and thread_name")

    rc, out, err = pprof(go, env, "-list", "^hot_a$", pb)
    if "x += i * i" not in out:
        print(out + err)
    check(rc == 0 and "x += i * i" in out, "-list hot_a shows its source lines")
    return "go tool pprof reads it: top, shares, sample types, labels, tags, -list"


def main():
    scry, python, _ = st.positional(__doc__)
    go = find_go()
    if not go:
        return st.skip_all("pprof", "go not found (install Debian's golang-go for "
                           "`go tool pprof`)", 1)
    tests = st.Tests()
    tests.add("pprof", lambda c: run(c, go))
    return st.run_on(tests.select(), scry, python, "pprof", "scry-consumers")


if __name__ == "__main__":
    sys.exit(main())
