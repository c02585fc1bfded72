#!/usr/bin/env python3
"""scalene_side.py - scry and Scalene side by side on issue 11's known-answer workloads.

usage: scalene_side.py --scry PATH [--python /usr/bin/python3.11] [--seconds S] [--reps N]

Scalene is Debian's python3-scalene (1.5.16 in Debian 12, for the system python3.11); it is
not part of scry and not installed by the test suite. Stdlib only.

Both profilers launch the same program, one after the other, and profile all of it; the
workload measures its own truth (tests/func/attr/workloads/split.py: each measured line's
thread CPU time, and for the sleep line its wall time minus the run-queue wait;
tests/func/lines/workloads/libheavy.py: each measured line's thread CPU time, nearly all
of it spent in csv/json/re/numpy's Python code). Figures per line: its share of the measured
lines' total ("all"), and the share in the class the line belongs to (python, native or
system; Scalene's "C" column is native, its "sys" column system), both in percentage points,
against the truth's share. Medians over --reps runs.

Scalene runs the program through a wrapper that turns split.py's final os._exit into
sys.exit (Scalene writes its profile at exit) and is told --profile-only <workload file>,
so that library time is charged to the workload's calling line, as scry does by default.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

import benchlib  # bench/, this script's directory

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SPLIT = os.path.join(ROOT, "tests", "func", "attr", "workloads", "split.py")
LIBHEAVY = os.path.join(ROOT, "tests", "func", "lines", "workloads", "libheavy.py")
WRAP = """import os, runpy, sys
os._exit = lambda code: sys.exit(code)
path = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(path, run_name="__main__")
"""
SPLIT_CLASS = {"py": "python", "sha": "native", "zlib": "native", "np": "native",
               "mm": "native", "add": "native", "idx": "native", "tolist": "native",
               "bmul": "native", "sleep": "system"}
# Native lines whose fresh results fault pages in: the kernel time counts with the line's
# class, as in tests/func/attr (the thread's CPU clock does not tell them apart).
ALSO_SYSTEM = ("add", "tolist")


def split_truth(out):
    acc = {}
    for idx, w0, w1, c0, c1, q0, q1 in out["events"]:
        a = acc.setdefault(out["names"][idx], [0.0, 0.0, 0.0])
        a[0] += w1 - w0
        a[1] += c1 - c0
        a[2] += q1 - q0
    return dict((n, (v[0] - v[2]) if SPLIT_CLASS[n] == "system" else v[1]) for n, v in acc.items())


def marker_lines(path):
    lines = {}
    with open(path) as f:
        for i, text in enumerate(f, 1):
            if "#@" in text:
                name = text.split("#@", 1)[1].split("@", 1)[0]
                lines[name] = i
    return lines


def run_scry(scry, python, workload, args, tmp):
    prof = os.path.join(tmp, "scry.json")
    subprocess.run([scry, "record", "--idle", "--rate", "200", "--format", "json", "-o", prof,
                    "-q", "--", python, workload] + args, check=True, timeout=300,
                   stdout=subprocess.DEVNULL)
    with open(prof) as f:
        rep = json.load(f)
    base = os.path.basename(workload)
    per = {}
    for l in rep["lines"]:
        if os.path.basename(l.get("file", "")) != base:
            continue
        per[l["line"]] = {"python": l["cpu_python_pct"], "native": l["cpu_native_pct"],
                          "system": l["cpu_system_pct"]}
    return per


def run_scalene(python, workload, args, tmp):
    wrap = os.path.join(tmp, "wrap.py")
    with open(wrap, "w") as f:
        f.write(WRAP)
    prof = os.path.join(tmp, "scalene.json")
    subprocess.run([python, "-m", "scalene", "--json", "--outfile", prof, "--cpu",
                    "--profile-only", os.path.basename(workload), wrap, workload] + args,
                   check=True, timeout=300, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(prof) as f:
        rep = json.load(f)
    per = {}
    for fname, v in rep.get("files", {}).items():
        if os.path.basename(fname) != os.path.basename(workload):
            continue
        for l in v["lines"]:
            per[l["lineno"]] = {"python": l["n_cpu_percent_python"],
                                "native": l["n_cpu_percent_c"], "system": l["n_sys_percent"]}
    return per


def shares(per, lines, classes):
    """(all, class) share of each measured line over the measured lines."""
    got = dict((n, per.get(lines[n], {"python": 0.0, "native": 0.0, "system": 0.0}))
               for n in classes)
    total = sum(sum(g.values()) for g in got.values()) or 1.0
    res = {}
    for n, g in got.items():
        cls = g[classes[n]] + (g["system"] if n in ALSO_SYSTEM else 0.0)
        res[n] = (100.0 * sum(g.values()) / total, 100.0 * cls / total)
    return res


def one_run(tool, opts, name, tmp):
    out = os.path.join(tmp, "truth.json")
    if name == "split":
        workload, args = SPLIT, ["--seconds", str(opts.seconds), "--numpy", "--max-seconds", "0",
                                 "--out", out]
    else:
        workload, args = LIBHEAVY, ["--seconds", str(opts.seconds), "--max-seconds", "0",
                                    "--out", out]
    per = (run_scry(opts.scry, opts.python, workload, args, tmp) if tool == "scry"
           else run_scalene(opts.python, workload, args, tmp))
    with open(out) as f:
        truth_out = json.load(f)
    lines = marker_lines(workload)
    if name == "split":
        truth = split_truth(truth_out)
        classes = dict((n, SPLIT_CLASS[n]) for n in truth)
    else:
        truth = dict(truth_out["cpu"])
        classes = dict((n, "python") for n in truth)  # the line's share is what is checked
    t_total = sum(truth.values())
    t_share = dict((n, 100.0 * v / t_total) for n, v in truth.items())
    return t_share, shares(per, lines, classes)


def main():
    ap = benchlib.parser(__doc__, python=(None, "/usr/bin/python3.11"), seconds=8.0, reps=3)
    opts = ap.parse_args()
    if subprocess.run([opts.python, "-c", "import scalene"], stderr=subprocess.DEVNULL).returncode:
        sys.exit("scalene_side: %s cannot import scalene (apt-get install python3-scalene)"
                 % opts.python)
    for name in ("split", "libheavy"):
        runs = {"scry": [], "scalene": []}
        for _ in range(opts.reps):
            for tool in ("scry", "scalene"):  # interleaved: the same machine state
                with tempfile.TemporaryDirectory(prefix="scry-scalene-") as tmp:
                    runs[tool].append(one_run(tool, opts, name, tmp))
        names = sorted(runs["scry"][0][0], key=lambda n: -runs["scry"][0][0][n])
        print("\n%s (%d runs, %.0f s each; medians: truth | scry all / class | "
              "Scalene all / class)\n" % (name, opts.reps, opts.seconds))
        print("| line | truth | scry | Scalene |")
        print("|---|---:|---:|---:|")
        err = {"scry": [], "scalene": []}
        for n in names:
            t = statistics.median(r[0][n] for r in runs["scry"] + runs["scalene"])
            cells = []
            for tool in ("scry", "scalene"):
                a = statistics.median(r[1][n][0] for r in runs[tool])
                c = statistics.median(r[1][n][1] for r in runs[tool])
                err[tool].append(abs((c if name == "split" else a) - t))
                cells.append("%.1f / %.1f" % (a, c) if name == "split" else "%.1f" % a)
            print("| %s | %.1f | %s | %s |" % (n, t, cells[0], cells[1]))
        print("\nmean |share - truth| (points; split: the class share): scry %.1f, Scalene %.1f" % (
            statistics.mean(err["scry"]), statistics.mean(err["scalene"])))


if __name__ == "__main__":
    main()
