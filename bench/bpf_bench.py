#!/usr/bin/env python3
"""bpf_bench.py - scry's own CPU per sample, the bpf back end against the perf back end and Austin.

usage: bpf_bench.py --scry PATH [--austin PATH] [--python PATH] [--seconds S] [--reps N]
                    [--units N] [--native] [cpu1] [slowdown]

cpu1: one target (bench/workloads/spin.py: 1 thread, 25 Python frames, busy), recorded at
1 kHz for S seconds by `scry record --sampler perf`, `--sampler bpf` and, with --austin,
Austin (`-i 1ms`, peers_bench.py's runner) in turn, REPS times each, interleaved, each as a
pair of runs of S and 2S seconds (S whole: Austin's -x takes seconds). CPU is the
profiler's user+system time (wait4); per sample, marginal = (CPU of the long run - CPU of
the short one) / (their difference in samples), so the start-up (symbols, layouts, loading
the program) drops out. The BPF program's own time runs in the target's context (at its
clock's interrupt) and is not in scry's CPU: scry's summary gives it ("us of the target's
CPU per run"), added in the "with the kernel's part" column and ratio. Ratios to Austin are
per repetition (the runs of one repetition are adjacent in time), median and min-max.
--native: scry's runs record with --native (the perf back end's sample and the BPF program
copy the registers and 32 KiB of stack; scry unwinds each); Austin's are unchanged.

slowdown: peers_bench.py's case (bench/workloads/slowdown.py, UNITS of work, its own CPU
time) unprofiled, under `perf record -e task-clock` at 1 kHz alone, under scry's perf and
bpf samplers at 1 kHz and, with --austin, under Austin at 1 kHz, REPS + 2 runs of each,
interleaved; ratios of medians.

Austin is not part of scry: build it from its public source outside the repository
(docs/performance.md says how).
"""
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402
import peers_bench as pb  # noqa: E402  (the spin target, scry_record, austin_record, med)
import scrytest as st  # noqa: E402

KERNEL_US = re.compile(r"([0-9.]+) us of the target's CPU per run")
STARVED = 1.5  # a run of 2S seconds with fewer samples than this times the S run's


def run_scry(a, pid, seconds, name):
    """One scry record of PID: (CPU s, samples, µs of the BPF program per sample or 0)."""
    cpu, n, _, err = pb.scry_record(a, pid, 1000, seconds,
                                    ["--sampler", name] + (["--native"] if a.native else []),
                                    pb.tmp("run.json"), quiet=False)
    m = KERNEL_US.search(err)
    if name == "bpf" and not m:
        raise SystemExit("no BPF run time in scry's summary: %r" % err[-400:])
    return cpu, n, float(m.group(1)) if m else 0.0


def run_austin(a, pid, seconds):
    cpu, n, _ = pb.austin_record(a.austin, pid, seconds, pb.tmp("run.austin"))
    return cpu, n, 0.0


def marginal(run, seconds):
    """RUN(seconds) -> (CPU s, samples, kernel µs per sample), for S and 2S seconds: (scry's
    marginal µs per sample, the same plus the kernel's part, whole long run µs per sample,
    samples of the long run); None when the long run got less than STARVED times the short
    run's samples (the target lost its CPU: the difference would measure the load)."""
    short, long_ = run(seconds), run(2 * seconds)
    if long_[1] < STARVED * short[1]:
        return None
    us = (long_[0] - short[0]) / max(1, long_[1] - short[1]) * 1e6
    return us, us + long_[2], long_[0] / max(1, long_[1]) * 1e6, long_[1]


def span(xs):
    return "%.1f (%.1f-%.1f)" % (pb.med(xs), min(xs), max(xs))


def ratio_line(rows, num, col, den):
    rs = [x[col] / y[0] for x, y in zip(rows[num], rows[den])]
    return "%.3f (%.3f-%.3f)" % (pb.med(rs), min(rs), max(rs))


def bench_cpu1(a):
    p = pb.start_spin(a.python, 25, 1)
    runs = {"scry perf": lambda s: run_scry(a, p.pid, s, "perf"),
            "scry bpf": lambda s: run_scry(a, p.pid, s, "bpf")}
    if a.austin:
        runs["austin"] = lambda s: run_austin(a, p.pid, s)
    rows = dict((k, []) for k in runs)
    load = [os.getloadavg()[0]]
    try:
        for _ in range(a.reps):
            rep = dict((name, marginal(run, a.seconds)) for name, run in runs.items())
            load.append(os.getloadavg()[0])
            if None in rep.values():  # a repetition counts whole or not at all
                continue
            for name, r in rep.items():
                rows[name].append(r)
    finally:
        p.kill()
        p.wait()
    print("python %s, runs of %g and %g s, %d of %d repetitions kept (the others had a 2S run "
          "with less than %g times its S run's samples), load %.1f-%.1f" % (
              a.python, a.seconds, 2 * a.seconds, len(rows["scry bpf"]), a.reps, STARVED,
              min(load), max(load)))
    if not rows["scry bpf"]:
        return
    print("| profiler | own CPU µs per sample, marginal (median, min-max) | with the BPF "
          "program's time in the target | whole long run incl. start-up | samples (long run) |")
    print("|---|---:|---:|---:|---:|")
    for name, r in rows.items():
        print("| %s | %s | %s | %.1f | %d |" % (
            name, span([x[0] for x in r]), span([x[1] for x in r]) if name == "scry bpf" else "",
            pb.med([x[2] for x in r]), pb.med([x[3] for x in r])))
    if a.austin:
        print("\nratio to Austin, per repetition, median (min-max): scry bpf %s, with the "
              "kernel's part %s; scry perf %s" % (
                  ratio_line(rows, "scry bpf", 0, "austin"),
                  ratio_line(rows, "scry bpf", 1, "austin"),
                  ratio_line(rows, "scry perf", 0, "austin")))


def bench_slowdown(a):
    rows = {"unprofiled": []}
    if shutil.which("perf"):
        rows["perf record"] = []
    rows.update({"scry": [], "scry bpf": []})
    if a.austin:
        rows["austin"] = []
    load = [os.getloadavg()[0]]
    for _ in range(a.reps + 2):
        for how in rows:
            rows[how].append(pb.slow_once(a, how, a.units))
        load.append(os.getloadavg()[0])
    base = pb.med([r[1] for r in rows["unprofiled"]])
    print("python %s, %d units, %d runs each, load %.1f-%.1f" % (
        a.python, a.units, a.reps + 2, min(load), max(load)))
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
    ap.add_argument("--austin", help="an Austin binary, built outside the repository")
    ap.add_argument("--native", action="store_true",
                    help="scry's runs with --native (the registers and 32 KiB of stack copied)")
    ap.add_argument("only", nargs="*", default=["cpu1", "slowdown"])
    a = ap.parse_args()
    a.python = a.python or st.find("3.12").path
    if "cpu1" in a.only:
        bench_cpu1(a)
    if "slowdown" in a.only:
        bench_slowdown(a)


if __name__ == "__main__":
    main()
