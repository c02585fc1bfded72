#!/usr/bin/env python3
"""native_bench.py - what `scry record --native` costs the target and the profiler.

usage: native_bench.py [--scry PATH] [--python PATH] [--threads 1,20,200] [--reps 5]
                       [--rate 100] [--work-seconds 3] [--write] [--json FILE]

For each thread count, the same fixed amount of CPU-bound pure-Python work (split evenly
over the threads, which share the GIL) is run, timed by the target itself, in three modes,
interleaved round by round (the order rotates each round):
  base    no profiler
  plain   scry record --pid P --rate R            (Python stacks only)
  native  scry record --pid P --rate R --native   (ptrace stop + unwind + merge)
The profiler attaches while the target's threads wait at a start line; the target starts
working on SIGUSR1 (sent 1 s after scry started, the same wait for base runs) and exits
when done; scry stops when it sees the exit. Reported: the target's time (median, min-max
spread, ratio of medians to base), scry's own CPU time (wait4 user+sys) per sample and per
tick, and the extra CPU of a native sample over a plain one ((cpu_native - cpu_plain) /
samples, both from the same round). --write puts the Markdown into docs/performance.md,
replacing only its '## Native stacks and attribution' section. Stdlib only, run as root.
"""
import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
import scrytest as st  # noqa: E402  (interpreters, processes, clock)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "performance.md")
HEADING = "## Native stacks and attribution"

# Static text under the table: how accurate the attribution is (tests/func/attr) and the
# problems these measurements found. Update it when they are fixed.
NOTES = [
    "Accuracy of the per-line split (`ctest -L attr`, tests/func/attr/README.md): when scry "
    "takes every tick, each line's share and its Python / native / system class match the "
    "workload's own measurement (thread CPU time for CPU lines, wall minus run-queue wait "
    "for the sleep line) within about 1 point, with and without `--native`, on 3.8-3.13 "
    "and Debian's 3.11 with numpy. Two problems found (open when this was written):",
    "",
    "1. *Off-CPU time is lost when ticks are late or skipped.* `sample_weight()` "
    "(sampler/sampler.c) weights a running thread's sample by its CPU time since the previous "
    "tick (up to 4 intervals) but an off-CPU sample by the nominal interval, so the "
    "sleeping time of every skipped tick disappears while CPU time does not: a thread asleep "
    "for the whole of a 3-s `--idle --native --rate 200` recording weighs 2.78 s (557 ticks "
    "of 600), and under load the sleep line of the split test comes out 4-7 points low "
    "(e.g. 26.7 % vs 33.3 %, 1655 ticks of 2368). Weighting off-CPU samples by the wall "
    "time since the thread's previous sample (capped like the CPU case) would fix it.",
    "2. *A thread can be left ptrace-stopped.* When a stop times out (`TASKS_STOP_MS`, 20 "
    "ms, easily exceeded under load) the interrupt stays queued; the thread then sits in "
    "`t` state, is no longer `R`, so it is neither sampled nor stopped again, and "
    "`unwind_reap_pending()` only runs from `unwind_stop_thread_timeout()` or when "
    "`tasks_resume_all()` resumed some other thread. A single-threaded target stays stopped "
    "until scry exits (seen: 1 sample in 186 ticks, all later ticks read `t`); a "
    "multi-threaded one deadlocks when the stopped thread holds the GIL (seen in this "
    "benchmark: 200 threads, one in `t` with TracerPid = scry, 70 waiting for the GIL, no "
    "progress for over a minute until scry was killed). Reaping at the start of every tick "
    "(and treating `t` of a thread scry itself left pending as running) would fix it.",
]

TARGET = r'''
import os, signal, sys, threading, time
n_threads, iters = int(sys.argv[1]), int(sys.argv[2])
ready, out = sys.argv[3], sys.argv[4]
A, C, M = 1103515245, 12345, (1 << 31) - 1

def work(i, n, res):
    x = i + 1
    for _ in range(n):
        x = (A * x + C) & M
    res[i] = x

signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
go = threading.Event()
res = [None] * n_threads
per = iters // n_threads

def runner(i):
    go.wait()
    work(i, per, res)

threads = [threading.Thread(target=runner, args=(i,)) for i in range(n_threads)]
for t in threads:
    t.start()
with open(ready + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(ready + ".tmp", ready)
signal.sigwait([signal.SIGUSR1])
t0 = time.monotonic()
c0 = time.process_time()
go.set()
for t in threads:
    t.join()
wall = time.monotonic() - t0
cpu = time.process_time() - c0
with open(out, "w") as f:
    f.write("%r %r\n" % (wall, cpu))
'''


def run_ns(pid):
    """CPU time (s) used so far by all threads of PID (schedstat, ns resolution)."""
    total = 0
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
    except (OSError, ValueError):
        pass
    return total * 1e-9


def find_scry(given):
    for p in [given, os.environ.get("SCRY")] + [
        os.path.join(REPO, d, "daemon", "scry") for d in ("build-bench", "build-attr", "build")
    ]:
        if p and os.access(p, os.X_OK):
            return os.path.abspath(p)
    sys.exit("scry not found: pass --scry")


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


class Bench(object):
    def __init__(self, a):
        self.a = a
        self.tmp = tempfile.mkdtemp(prefix="scry-native-bench-")
        self.target = os.path.join(self.tmp, "target.py")
        with open(self.target, "w") as f:
            f.write(TARGET)
        self.n = 0

    def run(self, threads, iters, mode):
        """One run; returns dict(wall, cpu, scry_cpu, samples, ticks, duration)."""
        self.n += 1
        ready = os.path.join(self.tmp, "ready-%d" % self.n)
        out = os.path.join(self.tmp, "out-%d" % self.n)
        prof = os.path.join(self.tmp, "prof-%d.json" % self.n)
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        tgt = subprocess.Popen([self.a.python, self.target, str(threads), str(iters), ready, out],
                               env=env, start_new_session=True)
        scry = None
        try:
            deadline = st.now() + 60
            while not os.path.exists(ready):
                if tgt.poll() is not None or st.now() > deadline:
                    raise RuntimeError("target did not start")
                time.sleep(0.01)
            if mode != "base":
                cmd = [self.a.scry, "record", "--pid", str(tgt.pid), "--rate", str(self.a.rate),
                       "--duration", "600", "--format", "json", "-o", prof, "-q"]
                if mode == "native":
                    cmd.append("--native")
                scry = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True)
            time.sleep(1.0)
            attach_cpu = run_ns(scry.pid) if scry else 0.0
            os.kill(tgt.pid, signal.SIGUSR1)
            stalled = None
            try:
                tgt.wait(self.a.stall_seconds)
            except subprocess.TimeoutExpired:
                # A target that is far too slow while profiled: note which threads are left
                # ptrace-stopped, then SIGKILL scry (the kernel detaches and resumes them).
                states = st.task_states(tgt.pid)
                stalled = {"stopped": sorted(t for t, st in states.items() if st in "tT"),
                           "threads": len(states)}
                log("STALL: target %d not done after %.0f s with scry %s running; %d of %d "
                    "threads in t/T; killing scry" % (tgt.pid, self.a.stall_seconds, mode,
                                                      len(stalled["stopped"]), len(states)))
                if scry:
                    os.kill(scry.pid, signal.SIGKILL)
                tgt.wait(900)
            if tgt.returncode != 0:
                raise RuntimeError("target exit %s" % tgt.returncode)
            with open(out) as f:
                wall, cpu = [float(x) for x in f.read().split()]
            r = {"wall": wall, "cpu": cpu}
            if stalled:
                r.update(stalled=stalled)
                if scry:
                    scry.wait()
                return r
            if scry:
                _, status, ru = os.wait4(scry.pid, 0)
                scry.returncode = status
                if status != 0:
                    raise RuntimeError("scry exit status %d" % status)
                with open(prof) as f:
                    rep = json.load(f)
                # the CPU scry spent while the target worked: its total minus what it had
                # used by the start signal (attach, symbol tables, idle ticks)
                r.update(scry_cpu=ru.ru_utime + ru.ru_stime - attach_cpu,
                         scry_cpu_total=ru.ru_utime + ru.ru_stime, samples=rep["samples"],
                         ticks=rep["ticks"], duration=rep["duration_s"],
                         late=rep["late"]["count"])
            return r
        finally:
            for p in (scry, tgt):
                if p is not None and p.returncode is None and p.poll() is None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except OSError:
                        pass
                    p.wait()

    def calibrate(self):
        """Iterations for about --work-seconds unprofiled with one thread."""
        iters = 2000000
        r = self.run(1, iters, "base")
        return max(200000, int(iters * self.a.work_seconds / max(r["wall"], 1e-3)))


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def summarize(results, modes):
    s = {}
    for m in modes:
        rs = [r for r in results[m] if "stalled" not in r]
        walls = [r["wall"] for r in rs]
        e = {"wall_med": med(walls), "wall_min": min(walls), "wall_max": max(walls)}
        if m != "base":
            e["cpu_per_sample_us"] = med([1e6 * r["scry_cpu"] / max(r["samples"], 1) for r in rs])
            e["cpu_per_tick_us"] = med([1e6 * r["scry_cpu"] / max(r["ticks"], 1) for r in rs])
            e["samples_per_s"] = med([r["samples"] / max(r["duration"], 1e-3) for r in rs])
            e["ticks_per_s"] = med([r["ticks"] / max(r["duration"], 1e-3) for r in rs])
            e["late_pct"] = med([100.0 * r["late"] / max(r["ticks"], 1) for r in rs])
            e["scry_cpu_s"] = med([r["scry_cpu"] for r in rs])
        e["stalls"] = len(results[m]) - len(rs)
        s[m] = e
    for m in modes:
        s[m]["ratio"] = s[m]["wall_med"] / s["base"]["wall_med"]
    # extra CPU of a native sample over a plain one, round by round
    extra = []
    for p, n in zip(results["plain"], results["native"]):
        if "stalled" in p or "stalled" in n:
            continue
        extra.append(1e6 * (n["scry_cpu"] / max(n["samples"], 1) - p["scry_cpu"] / max(p["samples"], 1)))
    s["native"]["extra_per_sample_us"] = med(extra)
    s["native"]["extra_spread_us"] = (min(extra), max(extra)) if extra else (float("nan"),) * 2
    return s


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return float("nan")


def markdown(a, table, meta):
    L = [HEADING, ""]
    L.append("`bench/native_bench.py` (%s): fixed CPU-bound pure-Python work (an LCG loop, %d "
             "iterations in all, split over the threads, which share the GIL), timed by the "
             "target itself; modes interleaved round by round, %d rounds, medians (min-max). "
             "Python %s, scry at %d Hz, `--duration` longer than the run (scry stops when the "
             "target exits). Load average during the run: %s (2-core VM)." % (
                 meta["date"], meta["iters"], a.reps, meta["python"], a.rate, meta["load"]))
    L.append("")
    L.append("| threads | base s | plain s | native s | plain / base | native / base | "
             "scry CPU per sample, plain | native | extra per native sample | samples/s native | late ticks native | stalled rounds plain/native |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for th, s in table:
        b, p, n = s["base"], s["plain"], s["native"]
        L.append("| %d | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.3f | %.3f | "
                 "%.0f µs | %.0f µs | %.0f µs (%.0f to %.0f) | %.0f | %.0f%% | %d/%d |" % (
                     th, b["wall_med"], b["wall_min"], b["wall_max"], p["wall_med"], p["wall_min"],
                     p["wall_max"], n["wall_med"], n["wall_min"], n["wall_max"], p["ratio"],
                     n["ratio"], p["cpu_per_sample_us"], n["cpu_per_sample_us"],
                     n["extra_per_sample_us"], n["extra_spread_us"][0], n["extra_spread_us"][1],
                     n["samples_per_s"], n["late_pct"], p["stalls"], n["stalls"]))
    L.append("")
    L.append("- *base / plain / native s*: the target's own time for the work (median of the "
             "rounds, min-max in brackets); the ratios are ratios of medians.")
    L.append("- *scry CPU per sample*: scry's user+sys CPU (`wait4`) minus what it had used "
             "when the work started (attach, symbol tables; read from `/proc/PID/task/*/"
             "schedstat`), divided by the samples of the report: it includes the per-tick "
             "cost of reading `/proc/PID/task/*/stat` for every thread, which grows with the "
             "thread count. *extra per native sample*: (native - plain) CPU per sample, "
             "paired round by round, median (min to max).")
    L.append("- Without `--idle` only running threads are sampled (and, with `--native`, "
             "stopped): with the GIL, one or two of the N threads per tick.")
    L.append("- *stalled rounds*: runs not finished after %.0f s; scry was then SIGKILLed "
             "(which resumes any thread it left stopped) and the round left out of the "
             "medians. See the stop bug below the table when native stalls are not 0." % a.stall_seconds)
    L.append("- Caveats: a 2-core VM shared with other jobs (see the load average): the target "
             "and scry compete with them for the CPUs, so wall times vary by tens of percent "
             "between runs and a ratio below 1 is noise; a stop of a running thread waits "
             "until the kernel schedules it, so the whole-sample time under load is far above "
             "the unwind time. Compare the columns of one table, not tables of different days.")
    if meta.get("unit"):
        L.append("")
        L.append("`tests/unit/test_unwind_cost` in the same session (load %.1f): one thread, a "
                 "30-frame native stack, 1000 samples each way:" % meta["load_unit"])
        L.append("")
        L.append("```")
        L.extend(meta["unit"])
        L.append("```")
    L.append("")
    L.extend(NOTES)
    L.extend(meta.get("notes", []))
    return "\n".join(L).rstrip() + "\n"


def write_section(md):
    text = ""
    if os.path.exists(DOC):
        with open(DOC) as f:
            text = f.read()
    if HEADING in text:
        pre, rest = text.split(HEADING, 1)
        cut = len(rest)
        for stop in ("\n## ", "\n<!-- bench:"):
            k = rest.find(stop)
            if k >= 0:
                cut = min(cut, k + 1)
        new = pre + md + ("\n" + rest[cut:] if rest[cut:] else "")
    else:
        if not text:
            text = "# Performance\n"
        new = text.rstrip("\n") + "\n\n" + md
    tmp = DOC + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, DOC)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scry")
    ap.add_argument("--python", help="interpreter path (default: scrytest's 3.11)")
    ap.add_argument("--threads", default="1,20,200")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--work-seconds", type=float, default=3.0)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--from-json", help="render the Markdown of a run saved with --json")
    ap.add_argument("--stall-seconds", type=float, default=0,
                    help="a run not done after this long is a stall (default 15 x --work-seconds, >= 60)")
    ap.add_argument("--unit-cost", help="tests/unit/test_unwind_cost executable (default: "
                    "next to scry's build)")
    ap.add_argument("--no-unit", action="store_true", help="do not run test_unwind_cost")
    a = ap.parse_args()
    if a.from_json:  # re-render a saved run (e.g. after editing NOTES)
        with open(a.from_json) as f:
            saved = json.load(f)
        a.stall_seconds = a.stall_seconds or max(60.0, 15 * a.work_seconds)
        table = sorted(((int(k), v) for k, v in saved["summary"].items()), key=lambda x: x[0])
        md = markdown(a, table, saved["meta"])
        print(md)
        if a.write:
            write_section(md)
        return
    a.scry = find_scry(a.scry)
    if not a.python:
        try:
            a.python = st.find("3.11").path
        except st.Skip as e:
            sys.exit("no Python 3.11: %s (pass --python)" % e)
    if a.stall_seconds <= 0:
        a.stall_seconds = max(60.0, 15 * a.work_seconds)
    b = Bench(a)
    try:
        run_all(a, b)
    finally:
        shutil.rmtree(b.tmp, ignore_errors=True)


def run_all(a, b):
    modes = ["base", "plain", "native"]
    loads = [loadavg()]
    iters = b.calibrate()
    log("calibrated: %d iterations (~%.1f s unprofiled)" % (iters, a.work_seconds))
    table, raw = [], {}
    for th in [int(x) for x in a.threads.split(",")]:
        results = dict((m, []) for m in modes)
        for rep in range(a.reps):
            order = modes[rep % 3 :] + modes[: rep % 3]
            for m in order:
                r = b.run(th, iters, m)
                results[m].append(r)
                loads.append(loadavg())
                log("threads %d round %d %-6s wall %.2f s%s" % (
                    th, rep, m, r["wall"], "" if m == "base" or "stalled" in r else
                    ", scry %.3f s CPU, %d samples" % (r["scry_cpu"], r["samples"])))
        table.append((th, summarize(results, modes)))
        raw[th] = results
    ver = subprocess.run([a.python, "-c", "import sys; print(sys.version.split()[0])"],
                         stdout=subprocess.PIPE).stdout.decode().strip()
    meta = {"date": time.strftime("%Y-%m-%d"), "iters": iters, "python": ver,
            "load": "%.1f-%.1f (median %.1f)" % (min(loads), max(loads), statistics.median(loads)),
            "platform": platform.platform()}
    unit = a.unit_cost or os.path.join(os.path.dirname(os.path.dirname(a.scry)), "tests",
                                       "test_unwind_cost")
    if os.access(unit, os.X_OK) and not a.no_unit:
        log("running %s" % unit)
        u = subprocess.run([unit], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        lines = [l.rstrip() for l in u.stdout.decode("utf-8", "replace").splitlines()]
        keep = [l for l in lines if l.strip() and not l.startswith(("ok", "PASS", "1.."))][-6:]
        meta["unit"] = keep
        meta["load_unit"] = loadavg()
    md = markdown(a, table, meta)
    print(md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "summary": dict((str(k), v) for k, v in table), "raw": raw,
                       "reps": a.reps, "rate": a.rate}, f, indent=1)
    if a.write:
        write_section(md)
        log("wrote %s" % DOC)


if __name__ == "__main__":
    main()
