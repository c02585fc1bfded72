#!/usr/bin/env python3
"""Memory-sampling overhead: allocation-heavy Python programs unprofiled vs under
LD_PRELOAD=libscry-shim.so with a live consumer (shim_harness drains the ring like the
daemon), interleaved, median of N runs each; plus the hooks' fast-path cost in ns.

usage: shim_bench.py --build BUILD_DIR [--runs 5] [--means 524288,...] [--append FILE]
BUILD_DIR holds shim/libscry-shim.so, shim/shim_harness, shim/shim_microbench.
Times are CPU seconds of the target (user+sys, from wait4) -- less sensitive to other
load on the machine than wall time, which is shown too.
"""
import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
import scrytest as st  # noqa: E402  (interpreters, processes, clock)
HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(HERE, "..", "tests", "func", "shim", "workloads.py")
PROGRAMS = [  # (name, interpreter label, workloads.py workload)
    ("small objects (dict/str/tuple churn)", "3.11", "small"),
    ("bytes kept (200 MB, small+large)", "3.11", "keep"),
    ("large buffers (2 GiB in 4 MiB)", "3.11", "churn"),
    ("bytes(bytearray) copies (2 GiB)", "3.11", "copy"),
    ("numpy keep 300 MiB + .copy() 2 GiB", "debian3.11", "numpy"),
]


def plain(py, wl):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = st.now()
    subprocess.run([py, WORKLOADS, wl], stdout=subprocess.DEVNULL, check=True)
    wall = st.since(t)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime), wall, {
        "child_user": r1.ru_utime - r0.ru_utime}


def shimmed(build, py, wl, ver, mean):
    cmd = [os.path.join(build, "shim", "shim_harness"), "--shim",
           os.path.join(build, "shim", "libscry-shim.so"), "--pyver", ver]
    if mean == -1:  # the shim loaded and the ring live, but both means 0: no sampling
        cmd += ["--mean", "0", "--copy-mean", "0"]
    elif mean:
        cmd += ["--mean", str(mean)]
    out = subprocess.run(cmd + ["--", py, WORKLOADS, wl], stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    stats = {}
    for line in out.splitlines():
        f = line.split()
        if f[0] == "stat":
            stats[f[1]] = float(f[2])
    return stats["child_cpu"], stats["elapsed"], stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--means", default="")
    ap.add_argument("--append")
    args = ap.parse_args()
    means = [int(m) for m in args.means.split(",") if m] or [0]
    lines = []
    out = lines.append
    out("")
    out("## Memory sampling")
    out("")
    out("`bench/shim_bench.py` (%s, %d CPUs, load average %.1f at start); target CPU "
        "seconds (user+sys), median of %d interleaved runs; the shim runs with a live "
        "consumer draining its ring. 'sampling off': same, with both means 0 (isolates "
        "the cost of sampling from that of the environment). Mean 'default' = %s."
        % (time.strftime("%Y-%m-%d"), os.cpu_count(), os.getloadavg()[0], args.runs,
           "128 KiB allocations, 1 MiB copies"))
    out("")
    out("| program | mean | unprofiled CPU s | shim, sampling off | shim | ratio | "
        "ratio vs off | user-time ratio | wall ratio | events |")
    out("|---|---|---|---|---|---|---|---|---|---|")
    for name, label, wl in PROGRAMS:
        try:
            it = st.find(label)
        except st.Skip:
            continue
        py, ver = it.path, it.pyver
        for mean in means:
            p, s, pw, sw, off, pu, su, ev = [], [], [], [], [], [], [], 0
            for _ in range(args.runs):
                c, w, stats = plain(py, wl)
                p.append(c)
                pw.append(w)
                pu.append(stats["child_user"])
                off.append(shimmed(args.build, py, wl, ver, -1)[0])
                c, w, stats = shimmed(args.build, py, wl, ver, mean)
                s.append(c)
                sw.append(w)
                su.append(stats["child_user"])
                ev = int(stats["consumed"])
            mp, ms, mo = statistics.median(p), statistics.median(s), statistics.median(off)
            row = "| %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %d |" % (
                name, mean or "default", mp, mo, ms, ms / mp, ms / mo,
                statistics.median(su) / statistics.median(pu),
                statistics.median(sw) / statistics.median(pw), ev)
            out(row)
            print(row, file=sys.stderr)
    mb = os.path.join(args.build, "shim", "shim_microbench")
    if os.path.exists(mb):
        env = dict(os.environ)
        res = {"plain": [], "shim": []}
        for _ in range(args.runs):
            res["plain"].append(subprocess.run([mb], stdout=subprocess.PIPE,
                                               universal_newlines=True).stdout.split())
            o = subprocess.run([os.path.join(args.build, "shim", "shim_harness"), "--shim",
                                os.path.join(args.build, "shim", "libscry-shim.so"), "--", mb],
                               stdout=subprocess.PIPE, universal_newlines=True, env=env).stdout
            res["shim"].append(o.splitlines()[0].split())
        def med(k, i):
            return statistics.median(float(r[i]) for r in res[k])
        out("")
        out("Fast path (`shim_microbench`, 20M calls, best of 5 inside a run, median of %d "
            "runs): malloc(32)+free %.2f ns unprofiled vs %.2f ns with the shim (+%.2f ns "
            "per pair); memcpy(64) %.2f ns vs %.2f ns (+%.2f ns)."
            % (args.runs, med("plain", 1), med("shim", 1), med("shim", 1) - med("plain", 1),
               med("plain", 4), med("shim", 4), med("shim", 4) - med("plain", 4)))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.append:
        with open(args.append, "a") as f:
            f.write(text)


if __name__ == "__main__":
    main()
