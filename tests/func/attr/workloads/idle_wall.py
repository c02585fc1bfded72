#!/usr/bin/env python3
"""idle_wall.py - known answer of `scry record --idle`: each thread's wall time split where it
went, also on a machine loaded by other processes.

The main thread loops over three lines, each timed by the program itself (perf_counter):
  py     a pure-Python loop of about 3 ms              -> python
  sha    hashlib.sha256 of a buffer, about 3 ms        -> native
  sleep  time.sleep(0.004)                             -> system
--busy threads hash all the time (hashlib lets go of the GIL, so they keep no one from
running): each one's wall time is the whole run, most of it runnable on a loaded machine.
--load child processes spin on a CPU for as long as the workload lives. After --seconds the
per-line totals of the main thread go to --out, then it exits.
"""
import hashlib
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "workloads"))  # _wl (beside them in a root)
from _wl import Stop, catch_sigterm, marker_lines, parse, write_json  # noqa: E402


def spin_child():
    pid = os.fork()
    if pid == 0:
        signal.alarm(120)
        while True:
            pass
    return pid


def busy(buf):
    while not Stop.flag:
        hashlib.sha256(buf).digest()  #@busy@


def best_of(fn, reps=5):
    best = None
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        d = time.perf_counter() - t0
        best = d if best is None else min(best, d)
    return max(best, 1e-6)


def pyloop(n):
    acc = 0
    for i in range(n):
        acc += i * i
    return acc


def calibrate():
    """Before the load: about 3 ms of each line on a quiet CPU."""
    n_py = max(1000, int(100000 * 0.003 / best_of(lambda: pyloop(100000))))
    buf = os.urandom(1 << 20)
    sha_len = max(1 << 16, int((1 << 20) * 0.003 / best_of(lambda: hashlib.sha256(buf).digest())))
    return n_py, os.urandom(sha_len)


def main():
    args = parse([("--busy", int, 2), ("--load", int, 2)], seconds=6.0, max_seconds=150)
    catch_sigterm()
    n_py, sha_buf = calibrate()
    kids = [spin_child() for _ in range(args.load)]
    try:
        big = os.urandom(1 << 22)  # ~12 ms a hash: the GIL is asked for rarely
        for _ in range(args.busy):
            threading.Thread(target=busy, args=(big,), daemon=True).start()
        write_json(args.ready, {"pid": os.getpid(), "lines": marker_lines(os.path.abspath(__file__)),
                                "busy": args.busy, "load": args.load})
        tot = {"py": 0.0, "sha": 0.0, "sleep": 0.0}
        pc = time.perf_counter
        acc = 0
        deadline = pc() + args.seconds
        t = pc()
        while t < deadline:
            for i in range(n_py): acc += i * i  # noqa: E701 #@py@
            t1 = pc()
            hashlib.sha256(sha_buf).digest()  #@sha@
            t2 = pc()
            time.sleep(0.004)  #@sleep@
            t3 = pc()
            tot["py"] += t1 - t
            tot["sha"] += t2 - t1
            tot["sleep"] += t3 - t2
            t = t3
        Stop.flag = True
        write_json(args.out, tot)
    finally:
        for k in kids:
            os.kill(k, signal.SIGKILL)
            os.waitpid(k, 0)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
