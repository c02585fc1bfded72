#!/usr/bin/env python3
"""bpf_bench.py - scry's own CPU per sample, the bpf back end against the perf back end.

usage: bpf_bench.py --scry PATH [--python PATH] [--seconds S] [--reps N] [--units N]
                    [--native] [cpu1] [slowdown]

One target (bench/workloads/spin.py: 1 thread, 25 Python frames, busy), recorded at 1 kHz
for S seconds by `scry record --sampler perf` and `--sampler bpf` in turn, REPS times
each, interleaved, each as a pair of runs of S and 2S seconds. CPU is scry's user+system
time (wait4); per sample, marginal = (CPU of the long run - CPU of the short one) / (their
difference in samples), so the start-up (symbols, layouts, loading the program) drops out.
The BPF program's own time runs in the target's context (at its clock's interrupt) and is
not in scry's CPU: scry's summary gives it ("us of the target's CPU per run").
--native: both back ends record with --native (the perf back end's sample and the BPF
program copy the registers and 32 KiB of stack; scry unwinds each), and one more bpf run
prints the program's own time per run from scry's summary.

slowdown: peers_bench.py's case (bench/workloads/slowdown.py, UNITS of work, its own CPU
time) unprofiled, under scry's perf and bpf samplers at 1 kHz, and under `perf record -e
task-clock` at 1 kHz alone, REPS + 2 runs of each, interleaved; ratios of medians.
"""
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402
import peers_bench as pb  # noqa: E402  (the spin target, scry_record, med)
import scrytest as st  # noqa: E402


def kernel_us(a, pid):
    """The BPF program's own time per run (scry's summary) in one --native bpf run."""
    _, _, err, _ = pb.profile([a.scry, "record", "--pid", str(pid), "--rate", "1000",
                               "--duration", str(a.seconds), "--sampler", "bpf", "--native",
                               "-o", "/tmp/bpf-bench.json", "--format", "json"])
    m = re.search(r"([0-9.]+) us of the target's CPU per run", err)
    return float(m.group(1)) if m else None


def bench_cpu1(a):
    p = pb.start_spin(a.python, 25, 1)
    rows = {"perf": [], "bpf": []}
    extra = ["--native"] if a.native else []
    try:
        for _ in range(a.reps):
            for name in ("perf", "bpf"):
                # The marginal cost: a run twice as long, less the short run, over the extra
                # samples (start-up, the same for both lengths, drops out).
                short = pb.scry_record(a, p.pid, 1000, a.seconds, ["--sampler", name] + extra,
                                       "/tmp/bpf-bench.json")
                long_ = pb.scry_record(a, p.pid, 1000, 2 * a.seconds,
                                       ["--sampler", name] + extra, "/tmp/bpf-bench.json")
                dn = long_[1] - short[1]
                rows[name].append(((long_[0] - short[0]) / max(1, dn) * 1e6,
                                   long_[0] / max(1, long_[1]) * 1e6, long_[1]))
        kus = kernel_us(a, p.pid) if a.native else None
    finally:
        p.kill()
        p.wait()
    print("python %s, runs of %g and %g s, %d pairs each%s, load %.1f" % (
        a.python, a.seconds, 2 * a.seconds, a.reps, ", --native" if a.native else "",
        os.getloadavg()[0]))
    if kus is not None:
        print("the BPF program: %.1f us of the target's CPU per run (--native)" % kus)
    print("| back end | scry CPU µs per sample, marginal (median, min-max) | "
          "whole long run incl. start-up | samples (long run) |")
    print("|---|---:|---:|---:|")
    for name, r in rows.items():
        us = [x[0] for x in r]
        print("| %s | %.1f (%.1f-%.1f) | %.1f | %d |" % (
            name, pb.med(us), min(us), max(us), pb.med([x[1] for x in r]),
            pb.med([x[2] for x in r])))


def bench_slowdown(a):
    rows = {"unprofiled": [], "scry": [], "scry bpf": []}
    if shutil.which("perf"):
        rows["perf record"] = []
    for _ in range(a.reps + 2):
        for how in rows:
            rows[how].append(pb.slow_once(a, how, a.units))
    base = pb.med([r[1] for r in rows["unprofiled"]])
    print("python %s, %d units, %d runs each, load %.1f" % (a.python, a.units, a.reps + 2,
                                                          os.getloadavg()[0]))
    print("| target under | its CPU s, median (min-max) | ratio to unprofiled |")
    print("|---|---:|---:|")
    for how, r in rows.items():
        cpu = [x[1] for x in r]
        print("| %s | %.2f (%.2f-%.2f) | %.3f |" % (how, pb.med(cpu), min(cpu), max(cpu),
                                                   pb.med(cpu) / base))


def main():
    ap = benchlib.parser(__doc__, python=("interpreter path (default: scrytest's 3.12)", None),
                         seconds=5, reps=5)
    ap.add_argument("--units", type=int, default=2000)
    ap.add_argument("--native", action="store_true", help="cpu1 with --native")
    ap.add_argument("only", nargs="*", default=["cpu1", "slowdown"])
    a = ap.parse_args()
    a.python = a.python or st.find("3.12").path
    if "cpu1" in a.only:
        bench_cpu1(a)
    if "slowdown" in a.only:
        bench_slowdown(a)

if __name__ == "__main__":
    main()
