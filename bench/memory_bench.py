#!/usr/bin/env python3
"""Memory profiling through scry: the cost to the target of `scry record --memory`
(launch mode, default sampling rate) next to unprofiled runs and `scry record` without
--memory, on allocation-heavy programs. Interleaved (one run of each configuration per
round, rotating the order), median of N rounds.

usage: memory_bench.py --scry PATH [--runs 5] [--append-md FILE]

Programs are tests/func/memory/workloads/memwork.py cases (bench_small: many small
objects; bench_large: 1-8 MiB buffers allocated and copied; bench_numpy: numpy arrays
allocated, copied and added, on Debian's /usr/bin/python3.11 which has python3-numpy).
Reported per configuration: the target's CPU seconds for its work (time.process_time()
measured by the program itself, so scry's own CPU is not counted), the work's wall time,
and the whole command's wall time (start-up, scry's attach and report included). Ratios
are medians of per-round ratios against the unprofiled run of the same round.
--append-md FILE replaces the '## Memory profiling through scry' section of FILE
(docs/performance.md) with the results.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
import scrytest as st  # noqa: E402  (interpreters, processes, clock)
HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "..", "tests", "func", "memory", "workloads", "memwork.py")
PROGRAMS = [  # (name, interpreter label, memwork.py case)
    ("many small objects (3M dicts/str/tuples)", "3.11", "bench_small"),
    ("large buffers (400 x 1-8 MiB alloc+copy)", "3.11", "bench_large"),
    ("numpy (200 x ones/copy/add, 1-4 MiB)", "debian3.11", "bench_numpy"),
]
CONFIGS = ["plain", "scry", "scry --memory"]
SECTION = "## Memory profiling through scry"


def run_one(scry, config, py, case, tmp):
    truth = os.path.join(tmp, "truth.json")
    if os.path.exists(truth):
        os.unlink(truth)
    cmd = [py, WORKLOAD, case, "--truth", truth]
    if config != "plain":
        extra = ["--memory"] if "--memory" in config else []
        cmd = [scry, "record", "-q", "-f", "json", "-o", os.path.join(tmp, "p.json")] + \
            extra + ["--"] + cmd
    t = st.now()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=st.clean_env(),
                       timeout=600)
    wall = st.now() - t
    if p.returncode != 0 or not os.path.exists(truth):
        raise SystemExit("%s failed (%d): %s" % (" ".join(cmd), p.returncode,
                                                 p.stderr.decode("utf-8", "replace")[-500:]))
    with open(truth) as f:
        tr = json.load(f)
    mem = None
    if "--memory" in config:
        with open(os.path.join(tmp, "p.json")) as f:
            doc = json.load(f)
        m = doc.get("memory") or {}
        mem = (m.get("alloc_mb", 0), m.get("copy_mb", 0), doc.get("memory_samples", 0))
    return {"cpu": tr["work_cpu_s"], "work": tr["work_s"], "wall": wall, "mem": mem}


def bench(scry, runs):
    tmp = tempfile.mkdtemp(prefix="scry-membench-")
    results = []
    for name, label, case in PROGRAMS:
        try:
            it = st.find(label)
        except st.Skip as e:
            print("skip %s: %s" % (name, e))
            continue
        py = it.path
        if case == "bench_numpy" and not it.has_module("numpy"):
            print("skip %s: no numpy for %s" % (name, py))
            continue
        rows = dict((c, []) for c in CONFIGS)
        for r in range(runs):
            order = CONFIGS[r % 3:] + CONFIGS[: r % 3]
            for c in order:
                rows[c].append(run_one(scry, c, py, case, tmp))
        res = {"name": name, "python": py}
        for c in CONFIGS:
            res[c] = dict((k, statistics.median(x[k] for x in rows[c]))
                          for k in ("cpu", "work", "wall"))
            if c != "plain":
                for k in ("cpu", "work", "wall"):
                    res[c][k + "_ratio"] = statistics.median(
                        rows[c][i][k] / rows["plain"][i][k] for i in range(runs))
        mems = [x["mem"] for x in rows["scry --memory"]]
        res["mem"] = tuple(statistics.median(m[i] for m in mems) for i in range(3))
        results.append(res)
        print_row(res)
        sys.stdout.flush()
    return results


def print_row(res):
    p = res["plain"]
    print("%s (%s)" % (res["name"], res["python"]))
    print("  plain          cpu %.3f s  work %.3f s  wall %.3f s" % (p["cpu"], p["work"],
                                                                    p["wall"]))
    for c in CONFIGS[1:]:
        x = res[c]
        print("  %-14s cpu %.3f s (x%.3f)  work %.3f s (x%.3f)  wall %.3f s (x%.3f)" % (
            c, x["cpu"], x["cpu_ratio"], x["work"], x["work_ratio"], x["wall"],
            x["wall_ratio"]))
    print("  --memory saw %.0f MB allocated, %.0f MB copied, %d samples" % res["mem"])


def markdown(results, runs, scry):
    load = os.getloadavg()
    out = [SECTION, "",
           "Generated by `bench/memory_bench.py --scry %s --runs %d` on %s (%s, %d CPUs, "
           "load average %.1f at the end: other builds and tests were running). Each "
           "program ran unprofiled, under `scry record` (CPU sampling at 100 Hz, launch "
           "mode) and under `scry record --memory` (CPU sampling plus the preloaded shim at "
           "the default means, 128 KiB between allocation samples and 1 MiB between copy "
           "samples), interleaved, %d rounds; medians. **cpu** is the target's own CPU time "
           "for its work (`time.process_time()` inside the program: scry's CPU is not "
           "counted), **work** the wall time of that work, **wall** the whole command "
           "(interpreter start-up, scry's launch and report included). Ratios are medians of "
           "the per-round ratios to the unprofiled run." % (
               os.path.relpath(scry, os.path.join(HERE, "..")), runs, time.strftime("%Y-%m-%d"),
               platform.machine(), os.cpu_count() or 0, load[0], runs),
           "",
           "| program | plain cpu / work / wall (s) | scry: cpu, work, wall ratio | "
           "scry --memory: cpu, work, wall ratio | --memory saw |",
           "|---|---|---|---|---|"]
    for r in results:
        p, s, m = r["plain"], r["scry"], r["scry --memory"]
        out.append("| %s, `%s` | %.2f / %.2f / %.2f | x%.3f, x%.3f, x%.3f | **x%.3f**, x%.3f, "
                   "x%.3f | %.0f MB alloc, %.0f MB copied, %d samples |" % (
                       r["name"], r["python"], p["cpu"], p["work"], p["wall"], s["cpu_ratio"],
                       s["work_ratio"], s["wall_ratio"], m["cpu_ratio"], m["work_ratio"],
                       m["wall_ratio"], r["mem"][0], r["mem"][1], r["mem"][2]))
    out.append("")
    return "\n".join(out)


def replace_section(path, text):
    with open(path) as f:
        doc = f.read()
    pat = re.compile(r"^%s\n.*?(?=^## |\Z)" % re.escape(SECTION), re.S | re.M)
    if pat.search(doc):
        doc = pat.sub(lambda m: text + "\n", doc, count=1)
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    with open(path, "w") as f:
        f.write(doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scry", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--append-md", metavar="FILE")
    a = ap.parse_args()
    scry = os.path.abspath(a.scry)
    results = bench(scry, a.runs)
    md = markdown(results, a.runs, scry)
    print()
    print(md)
    if a.append_md:
        replace_section(a.append_md, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
