#!/usr/bin/env python3
"""How right scry serve's short windows are (docs/daemon.md, "Where the CPU is charged").

One thread-pool service (tests/func/serve/workloads/pool.py --mode pool: a busy main
thread and 16 workers, each function timed by its own thread CPU clock) is read by one
daemon per SCRY and back end at the same time, in 2-s windows at 19 Hz. For each daemon,
over the windows after the first 12 s: samples per window, each function's share of a
window's samples against its share of the process's CPU in that window (mean error and
root mean square, in points), and the share of waiting lines. With ~20 samples a window
the sampling error alone is about 10 points RMS; what is above it is the charging's.

Run as root: python3 bench/serve_windows.py --scry build/daemon/scry [--scry OLD]
             [--sampler perf --sampler ptrace] [--seconds 50]
Markdown on stdout, progress on stderr.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVE_TESTS = os.path.join(HERE, "..", "tests", "func", "serve")
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
sys.path.insert(0, SERVE_TESTS)
import scrytest as st  # noqa: E402
from truth import classify, truth_between  # noqa: E402

POOL = os.path.join(SERVE_TESTS, "workloads", "pool.py")
NAMES = ("parse", "digest", "main_work")
TOKEN = "scrywindows%d" % os.getpid()


def log(*a):
    print(*a, file=sys.stderr)
    sys.stderr.flush()


def judge(out, truth):
    """The row of one daemon's out-dir OUT against the workload's TRUTH file."""
    ws = [w for w in st.load_json(os.path.join(out, "index.json"), "index")["windows"]
          if w["until"] - w["from"] == 2]
    ws.sort(key=lambda w: w["from"])
    ws = ws[6:]  # the carries' first seconds
    errs = dict((k, []) for k in NAMES)
    waits, counts = [], []
    for w in ws:
        c = {}
        with open(os.path.join(out, w["files"]["collapsed"])) as f:
            for frames, n in st.parse_collapsed(f.read()):
                k = classify(frames, NAMES)
                c[k] = c.get(k, 0) + n
        n = sum(c.values())
        counts.append(n)
        if n < 5:
            continue
        t, _ = truth_between(truth, w["from"], w["until"], NAMES)
        for k in NAMES:
            errs[k].append(100.0 * c.get(k, 0) / n - 100.0 * t[k])
        waits.append(100.0 * c.get("wait", 0) / n)
    if not waits:
        return "no window with 5 samples or more (%d windows)" % len(ws)
    cells = []
    for k in NAMES:
        e = errs[k]
        cells.append("%+.1f / %.1f" % (sum(e) / len(e), (sum(x * x for x in e) / len(e)) ** 0.5))
    return "%d | %.1f | %s | %.1f%%" % (len(ws), sum(counts) / float(len(counts)),
                                        " | ".join(cells), sum(waits) / len(waits))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scry", action="append", required=True)
    ap.add_argument("--sampler", action="append", choices=("perf", "ptrace"))
    ap.add_argument("--seconds", type=float, default=50)
    a = ap.parse_args()
    samplers = a.sampler or ["perf", "ptrace"]
    tmp = tempfile.mkdtemp(prefix="scry-serve-windows-")
    os.chmod(tmp, 0o755)
    procs = []
    try:
        truth, ready = os.path.join(tmp, "truth.json"), os.path.join(tmp, "ready.json")
        svc = subprocess.Popen([sys.executable, POOL, "--mode", "pool", "--name", TOKEN,
                                "--truth", truth, "--ready", ready], start_new_session=True)
        procs.append(svc)
        d = st.Deadline(30)
        while not os.path.exists(ready) and not d.expired():
            time.sleep(0.1)
        conf = os.path.join(tmp, "scry.conf")
        with open(conf, "w") as f:
            f.write("interval = 2\nrate = 19\n\n[service pool]\nmatch = --name %s( |$)\n" % TOKEN)
        runs = []
        for i, scry in enumerate(a.scry):
            for smp in samplers:
                out = os.path.join(tmp, "out-%d-%s" % (i, smp))
                p = subprocess.Popen([scry, "serve", "--config", conf, "--out-dir", out,
                                      "--socket", os.path.join(tmp, "s-%d-%s.sock" % (i, smp)),
                                      "--match", TOKEN, "--sampler", smp],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
                procs.append(p)
                runs.append((scry, smp, out))
        log("%d daemons on pid %d for %g s" % (len(runs), svc.pid, a.seconds))
        time.sleep(a.seconds)
        for p in procs[1:]:
            p.send_signal(signal.SIGTERM)
            p.wait(30)
        print("Each function: mean / RMS of (share of a window's samples - share of its CPU), "
              "in points.\n")
        print("| scry | sampler | windows | samples/window | %s | waiting lines |"
              % " | ".join(NAMES))
        print("|---|---|---|---|%s---|" % ("---|" * len(NAMES)))
        for scry, smp, out in runs:
            print("| %s | %s | %s |" % (scry, smp, judge(out, truth)))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
