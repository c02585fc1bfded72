#!/usr/bin/env python3
"""The fault suite at length: 1,000 cycles of scry SIGKILLed, interrupted (SIGINT) and
frozen (SIGSTOP, then SIGCONT or SIGKILL) at random moments in every mode, on several
interpreters (tests/func/faults/run_faults.py, which CI runs with about 100 cycles).

usage: faults_long.py [--scry PATH] [--cycles 1000] [--pythons 3.8,3.12,3.13,debian3.11]
                      [--seed S] [--write]

The cycles are spread over the interpreters: four fifths attach cycles (one faulted target
and its untouched twin per interpreter), one fifth launch cycles. Prints a Markdown report;
--write replaces the part of docs/reliability.md between `<!-- faults:begin -->` and
`<!-- faults:end -->` with it. Exit 1 if any cycle found a problem.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SUITE = os.path.join(ROOT, "tests", "func", "faults", "run_faults.py")
DOC = os.path.join(ROOT, "docs", "reliability.md")
BEGIN, END = "<!-- faults:begin -->", "<!-- faults:end -->"


def find_scry():
    for d in ("build", "build-ci", "build-bench"):
        p = os.path.join(ROOT, d, "daemon", "scry")
        if os.access(p, os.X_OK):
            return p
    sys.exit("no scry executable: build it (scripts/build.sh) or pass --scry")


def outcome(rc, first):
    if first:
        return "had exited"
    return {0: "exit 0", -9: "killed", -2: "died of SIGINT"}.get(rc, "exit %d" % rc)


def report(runs, seconds, cycles_asked, seed):
    """Markdown of the per-version JSON figures RUNS."""
    modes, total, problems, speeds = {}, 0, [], []
    for label, fig in runs:
        for tname, t in fig["tests"].items():
            for name, sig, rc, first, delay, wall in t["cycles"]:
                row = modes.setdefault(name, {})
                row[sig] = row.get(sig, 0) + 1
                key = "out:" + outcome(rc, first)
                row[key] = row.get(key, 0) + 1
                total += 1
            problems += ["%s %s: %s" % (label, tname, p) for p in t["problems"]]
            if t.get("error") and not t["problems"]:
                problems.append("%s %s: %s" % (label, tname, t["error"]))
            if t.get("speed"):
                speeds.append((label, t["speed"]))
    sigs = ["KILL", "INT", "STOP-CONT", "STOP-KILL"]
    outs = ["exit 0", "killed", "died of SIGINT", "had exited"]
    lines = [
        "Measured %s UTC on %s (%d CPUs), `%s`, seed %d: %d cycles asked, %d run in %.0f s "
        "(%s)." % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), platform.node(),
                   os.cpu_count(), "python3 bench/faults_long.py --cycles %d --seed %d --write"
                   % (cycles_asked, seed), seed, cycles_asked, total, seconds,
                   ", ".join(label for label, _ in runs)),
        "",
        "| mode | cycles | %s | %s |" % (" | ".join(sigs), " | ".join(outs)),
        "|---|---:|" + "---:|" * (len(sigs) + len(outs)),
    ]
    for name in sorted(modes):
        row = modes[name]
        n = sum(row.get(s, 0) for s in sigs)
        lines.append("| %s | %d | %s | %s |" % (
            name, n, " | ".join(str(row.get(s, 0)) for s in sigs),
            " | ".join(str(row.get("out:" + o, 0)) for o in outs)))
    lines += ["", "Problems found (target dead, stopped or traced, files left, wrong output, "
              "slower than its twin): **%d**." % len(problems)]
    for p in problems[:20]:
        lines.append("- " + p)
    if speeds:
        lines += ["", "CPU per iteration of the faulted target over its untouched twin after "
                  "its attach cycles (medians of 7 interleaved windows; the suite's bound is "
                  "x1.10): " + ", ".join("%s x%.3f" % s for s in speeds) + "."]
    return "\n".join(lines) + "\n", problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scry")
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--pythons", default="3.8,3.12,3.13,debian3.11")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    scry = a.scry or find_scry()
    seed = a.seed if a.seed is not None else int(time.time()) % 1000003
    labels = a.pythons.split(",")
    # run_faults.py runs CYCLES attach cycles and CYCLES/4 launch cycles.
    per = max(4, int(round(a.cycles / len(labels) / 1.25)))
    runs = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="scry-faults-long-") as tmp:
        for label in labels:
            out = os.path.join(tmp, label + ".json")
            cmd = [sys.executable, SUITE, "--scry", scry, "--python", label, "--cycles",
                   str(per), "--seed", str(seed), "--json", out]
            print("$ " + " ".join(cmd), file=sys.stderr)
            p = subprocess.run(cmd, stdout=subprocess.PIPE, universal_newlines=True)
            sys.stderr.write(p.stdout)
            if os.path.exists(out):
                with open(out) as f:
                    runs.append((label, json.load(f)))
    md, problems = report(runs, time.monotonic() - t0, a.cycles, seed)
    print(md)
    if a.write:
        with open(DOC) as f:
            doc = f.read()
        i, j = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        with open(DOC, "w") as f:
            f.write(doc[:i] + "\n" + md + doc[j:])
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
