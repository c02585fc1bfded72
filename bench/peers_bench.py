#!/usr/bin/env python3
"""peers_bench.py - scry's samplers side by side with Austin and austinp, in one run.

usage: peers_bench.py --scry PATH --austin PATH --austinp PATH [--python PATH]
                      [--seconds S] [--reps N] [--json OUT]

Austin and austinp are not part of scry and are not built by this script: build them from
their public source outside the repository (docs/performance.md says how). Stdlib only.

Every figure is a median over --reps runs; profilers run one after the other on the same
target process (bench/workloads/spin.py), so they see the same program:
  cpu1     1 thread, depth 25, busy, 1 kHz: profiler CPU (user+sys, wait4) per sample
  cpu100   100 threads, depth 25, busy, 1 kHz: profiler CPU per thread per tick
  native   1 thread, depth 25, busy, 1 kHz, native stacks: CPU per sample, and whether a
           thread of the target was seen stopped or traced (polled every 0.5 ms)
  slowdown the target's own CPU time for fixed work (bench/workloads/slowdown.py):
           unprofiled, under scry (perf, ptrace) at 1 kHz, under Austin at 1 kHz, and
           under Linux's own `perf record -e task-clock` at 1 kHz (when `perf` is
           installed: what the kernel's clock alone costs the target, the floor of any
           perf-event sampler; it wakes only when its ring is half full), interleaved
  dump     wall time of one dump of a 100-thread target: scry dump vs austin -w
"""
import atexit
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
import scrytest as st  # noqa: E402  (interpreters, clock)
import benchlib  # noqa: E402  (bench/, this script's directory)

HERE = os.path.dirname(os.path.abspath(__file__))
SPIN = os.path.join(HERE, "workloads", "spin.py")
SLOW = os.path.join(HERE, "workloads", "slowdown.py")
# This process's own files: other benchmarks (this script, bpf_bench.py) may run at once.
TMP = "/tmp/scry-bench-%d" % os.getpid()


def tmp(name):
    """The path of NAME in this process's own directory (made on first use, removed at exit)."""
    if not os.path.isdir(TMP):
        os.makedirs(TMP)
        atexit.register(shutil.rmtree, TMP, True)
    return os.path.join(TMP, name)


def start_spin(python, depth, threads):
    p = subprocess.Popen([python, SPIN, str(depth), str(threads), "busy", "600"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline().decode()
    if "ready" not in line:
        p.kill()
        raise SystemExit("spin.py did not start: %r" % line)
    time.sleep(0.5)
    return p


def profile(cmd):
    """Runs profiler CMD as a child; (CPU s, wall s, stdout, stderr) with CPU from wait4."""
    err_path = tmp("err.txt")
    t0 = st.now()
    pid = os.fork()
    if pid == 0:
        fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.execv(cmd[0], cmd)
    _, status, ru = os.wait4(pid, 0)
    wall = st.now() - t0
    with open(err_path, "rb") as f:
        err = f.read().decode("utf-8", "replace")
    return ru.ru_utime + ru.ru_stime, wall, err, status


def scry_record(a, pid, rate, seconds, extra, out, quiet=True):
    """Records PID with a.scry; (CPU s, samples, ticks, stderr: the summary unless QUIET)."""
    cmd = [a.scry, "record", "--pid", str(pid), "--rate", str(rate), "--duration", str(seconds),
           "--format", "json", "-o", out] + (["-q"] if quiet else []) + extra
    cpu, wall, err, st = profile(cmd)
    with open(out) as f:
        rep = json.load(f)
    return cpu, rep["samples"], rep["ticks"], err


def austin_record(binary, pid, seconds, out, extra=()):
    cmd = [binary, "-i", "1ms", "-x", str(int(seconds)), "-p", str(pid), "-o", out] + list(extra)
    cpu, wall, err, st = profile(cmd)
    n = 0
    with open(out, "rb") as f:
        for line in f:
            if line.strip() and not line.startswith(b"#"):
                n += 1
    return cpu, n, err


class Watch(threading.Thread):
    """Polls State and TracerPid of every thread of PID."""

    def __init__(self, pid):
        threading.Thread.__init__(self, daemon=True)
        self.pid, self.halt, self.polls, self.seen = pid, False, 0, 0

    def run(self):
        while not self.halt:
            try:
                tids = os.listdir("/proc/%d/task" % self.pid)
            except OSError:
                return
            for t in tids:
                try:
                    with open("/proc/%d/task/%s/status" % (self.pid, t)) as f:
                        s = f.read()
                except OSError:
                    continue
                st = re.search(r"^State:\s+(\S)", s, re.M)
                tr = re.search(r"^TracerPid:\s+(\d+)", s, re.M)
                if (st and st.group(1) in "tT") or (tr and tr.group(1) != "0"):
                    self.seen += 1
            self.polls += 1
            time.sleep(0.0005)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def bench_cpu(a, threads, res):
    p = start_spin(a.python, 25, threads)
    key = "cpu%d" % threads
    rows = {"scry perf": [], "scry ptrace": [], "austin": []}
    try:
        for _ in range(a.reps):
            for name, extra in (("scry perf", ["--sampler", "perf"]),
                                ("scry ptrace", ["--sampler", "ptrace"])):
                cpu, n, ticks, err = scry_record(a, p.pid, 1000, a.seconds, extra, tmp("pb.json"))
                per = cpu / max(1, n) if threads == 1 else cpu / max(1, ticks * threads)
                rows[name].append((per * 1e6, cpu, n, ticks, cpu / max(1, ticks) * 1e6))
            cpu, n, err = austin_record(a.austin, p.pid, a.seconds, tmp("pb.austin"))
            ticks = n / threads
            rows["austin"].append((cpu / max(1, n) * 1e6, cpu, n, ticks,
                                   cpu / max(1, ticks) * 1e6))
    finally:
        p.kill()
        p.wait()
    res[key] = dict((k, {"us": med([r[0] for r in v]), "cpu_s": med([r[1] for r in v]),
                         "samples": med([r[2] for r in v]), "ticks": med([r[3] for r in v]),
                         "us_per_tick": med([r[4] for r in v])})
                    for k, v in rows.items())


def bench_native(a, res):
    p = start_spin(a.python, 25, 1)
    rows = {"scry perf --native": [], "scry ptrace --native": [], "austinp": []}
    stopped = {}
    try:
        for _ in range(a.reps):
            for name, extra in (("scry perf --native", ["--sampler", "perf", "--native"]),
                                ("scry ptrace --native", ["--sampler", "ptrace", "--native"])):
                w = Watch(p.pid)
                w.start()
                cpu, n, ticks, err = scry_record(a, p.pid, 1000, a.seconds, extra, tmp("pb.json"))
                w.halt = True
                w.join()
                stopped[name] = stopped.get(name, 0) + w.seen
                rows[name].append((cpu / max(1, n) * 1e6, cpu, n))
            w = Watch(p.pid)
            w.start()
            cpu, n, err = austin_record(a.austinp, p.pid, a.seconds, tmp("pb.austinp"))
            w.halt = True
            w.join()
            stopped["austinp"] = stopped.get("austinp", 0) + w.seen
            rows["austinp"].append((cpu / max(1, n) * 1e6, cpu, n))
    finally:
        p.kill()
        p.wait()
    res["native"] = dict((k, {"us": med([r[0] for r in v]), "cpu_s": med([r[1] for r in v]),
                              "samples": med([r[2] for r in v]),
                              "stopped_or_traced_polls": stopped.get(k, 0)})
                         for k, v in rows.items())


def slow_once(a, how, units):
    p = subprocess.Popen([a.python, SLOW, str(units)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    p.stdout.readline()
    prof = None
    if how.startswith("scry"):
        extra = {"scry ptrace": ["--sampler", "ptrace"], "scry bpf": ["--sampler", "bpf"]}.get(
            how, [])
        prof = subprocess.Popen([a.scry, "record", "--pid", str(p.pid), "--rate", "1000", "-q",
                                 "--format", "collapsed", "-o", tmp("slow.txt")] + extra,
                                stderr=subprocess.DEVNULL)
    elif how == "austin":
        prof = subprocess.Popen([a.austin, "-i", "1ms", "-p", str(p.pid), "-o", tmp("slow.austin")],
                                stderr=subprocess.DEVNULL)
    elif how == "perf record":
        prof = subprocess.Popen(["perf", "record", "-q", "-e", "task-clock", "-c", "1000000",
                                 "--per-thread", "-p", str(p.pid), "-o", tmp("slow.perf")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    p.stdin.write(b"go\n")
    p.stdin.flush()
    out = p.stdout.readline().decode().split()
    p.wait()
    if prof:
        if how == "perf record":
            prof.send_signal(signal.SIGINT)  # perf record -p outlives its target's exit
        prof.wait(timeout=60)
    return float(out[1]), float(out[2])


def bench_slowdown(a, res):
    rows = {"unprofiled": [], "scry": [], "scry ptrace": [], "austin": []}
    if shutil.which("perf"):
        rows["perf record"] = []
    for _ in range(a.reps + 2):
        for how in rows:
            rows[how].append(slow_once(a, how, a.units))
    base_w = med([r[0] for r in rows["unprofiled"]])
    base_c = med([r[1] for r in rows["unprofiled"]])
    res["slowdown"] = dict((k, {"wall_s": med([r[0] for r in v]), "cpu_s": med([r[1] for r in v]),
                                "wall_ratio": med([r[0] for r in v]) / base_w,
                                "cpu_ratio": med([r[1] for r in v]) / base_c,
                                "cpu_min_max": [min(r[1] for r in v), max(r[1] for r in v)]})
                           for k, v in rows.items())


def bench_dump(a, res):
    p = start_spin(a.python, 25, 100)
    cmds = {"scry dump": [a.scry, "dump", "--pid", str(p.pid)]}
    if a.scry_base:
        cmds["scry dump (base)"] = [a.scry_base, "dump", "--pid", str(p.pid)]
    cmds["austin -w"] = [a.austin, "-w", str(p.pid)]
    rows = dict((k, []) for k in cmds)
    try:
        for _ in range(10):
            for k, cmd in cmds.items():  # interleaved: the same load for each
                cpu, wall, _, _ = profile(cmd)
                rows[k].append((wall, cpu))
    finally:
        p.kill()
        p.wait()
    res["dump"] = dict((k, {"ms": med([r[0] for r in v]) * 1e3,
                            "min_ms": min(r[0] for r in v) * 1e3,
                            "max_ms": max(r[0] for r in v) * 1e3,
                            "cpu_ms": med([r[1] for r in v]) * 1e3})
                       for k, v in rows.items())


def report(res):
    out = []
    c1, c100, nat = res.get("cpu1"), res.get("cpu100"), res.get("native")
    if c1:
        out.append("| 1 thread, depth 25, 1 kHz | CPU µs per sample | %s |" % " | ".join(
            "%s %.1f" % (k, v["us"]) for k, v in c1.items()))
        out.append("| | ratio scry perf / Austin | %.2f (ptrace %.2f) |" % (
            c1["scry perf"]["us"] / c1["austin"]["us"], c1["scry ptrace"]["us"] / c1["austin"]["us"]))
        out.append("| | CPU µs per tick (samples, ticks) | %s |" % " | ".join(
            "%s %.1f (%d, %d)" % (k, v["us_per_tick"], v["samples"], v["ticks"]) for k, v in c1.items()))
    if c100:
        out.append("| 100 threads, depth 25, 1 kHz | CPU µs per thread per tick | %s |" % " | ".join(
            "%s %.2f" % (k, v["us"]) for k, v in c100.items()))
        out.append("| | ratio scry perf / Austin | %.3f (ptrace %.3f) |" % (
            c100["scry perf"]["us"] / c100["austin"]["us"],
            c100["scry ptrace"]["us"] / c100["austin"]["us"]))
    if nat:
        out.append("| --native, 1 thread, 1 kHz | CPU µs per sample (stopped/traced polls) | %s |"
                   % " | ".join("%s %.1f (%d)" % (k, v["us"], v["stopped_or_traced_polls"])
                                for k, v in nat.items()))
    if "slowdown" in res:
        out.append("| slowdown, 1 kHz | target CPU ratio (wall ratio) | %s |" % " | ".join(
            "%s %.3f (%.3f)" % (k, v["cpu_ratio"], v["wall_ratio"]) for k, v in res["slowdown"].items()))
    if "dump" in res:
        out.append("| dump, 100 threads | wall ms median (min-max); CPU ms median | %s |" % " | ".join(
            "%s %.1f (%.1f-%.1f); %.1f" % (k, v["ms"], v["min_ms"], v["max_ms"], v["cpu_ms"])
            for k, v in res["dump"].items()))
    return "\n".join(out)


def main():
    ap = benchlib.parser(__doc__, python=("interpreter path (default: scrytest's debian3.11)",
                                          None), seconds=5, reps=3)
    ap.add_argument("--austin", required=True)
    ap.add_argument("--austinp", required=True)
    ap.add_argument("--scry-base", help="dump: a second scry binary (before a change), interleaved")
    ap.add_argument("--units", type=int, default=400)
    ap.add_argument("--json")
    ap.add_argument("only", nargs="*", default=["cpu1", "cpu100", "native", "slowdown", "dump"])
    a = ap.parse_args()
    if not a.python:
        try:
            a.python = st.find("debian3.11").path
        except st.Skip as e:
            sys.exit("no Debian python3.11: %s (pass --python)" % e)
    res = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "load": os.getloadavg()[0], "python": a.python}
    for name in a.only:
        t0 = st.now()
        if name == "cpu1":
            bench_cpu(a, 1, res)
        elif name == "cpu100":
            bench_cpu(a, 100, res)
        elif name == "native":
            bench_native(a, res)
        elif name == "slowdown":
            bench_slowdown(a, res)
        elif name == "dump":
            bench_dump(a, res)
        print("%s done in %.0f s" % (name, st.now() - t0), file=sys.stderr)
    res["load_end"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    print(report(res))


if __name__ == "__main__":
    main()
