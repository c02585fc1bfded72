#!/usr/bin/env python3
"""bpf_bench.py - scry's own CPU per sample, the bpf back end against the perf back end.

usage: bpf_bench.py --scry PATH [--python PATH] [--seconds S] [--reps N]

One target (bench/workloads/spin.py: 1 thread, 25 Python frames, busy), recorded at 1 kHz
for S seconds by `scry record --sampler perf` and `--sampler bpf` in turn, REPS times
each, interleaved. CPU is scry's user+system time (wait4); per sample = CPU / samples in
the report. The BPF program's own time runs in the target's context (at its clock's
interrupt) and is not in scry's CPU: the target's CPU per sample is shown beside it, from
the target's utime+stime over the run, minus what an unprofiled run of the same length
costs (the spin loop keeps one CPU busy either way, so this is the profiled run's extra).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peers_bench as pb  # noqa: E402  (the spin target, scry_record, med)
import scrytest as st  # noqa: E402


def target_cpu(pid):
    """utime+stime of PID in seconds (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scry", required=True)
    ap.add_argument("--python", help="interpreter path (default: scrytest's 3.12)")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    a.python = a.python or st.find("3.12").path
    p = pb.start_spin(a.python, 25, 1)
    rows = {"perf": [], "bpf": []}
    try:
        for _ in range(a.reps):
            for name in ("perf", "bpf"):
                c0 = target_cpu(p.pid)
                cpu, n, ticks, err = pb.scry_record(a, p.pid, 1000, a.seconds,
                                                    ["--sampler", name], "/tmp/bpf-bench.json")
                rows[name].append((cpu / max(1, n) * 1e6, n, target_cpu(p.pid) - c0))
    finally:
        p.kill()
        p.wait()
    print("python %s, %g s per run, %d runs each, load %.1f" % (a.python, a.seconds, a.reps,
                                                                os.getloadavg()[0]))
    print("| back end | scry CPU µs per sample (median, min-max) | samples | target CPU s |")
    print("|---|---:|---:|---:|")
    for name, r in rows.items():
        us = [x[0] for x in r]
        print("| %s | %.1f (%.1f-%.1f) | %d | %.2f |" % (name, pb.med(us), min(us), max(us),
                                                        pb.med([x[1] for x in r]),
                                                        pb.med([x[2] for x in r])))


if __name__ == "__main__":
    main()
