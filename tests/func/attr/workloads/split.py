"""split.py - known-answer workload for scry's per-line Python / native / system split.

One loop over lines of known class (each line ending with a #@name@ marker):
  py     pure-Python arithmetic loop on one line           -> python
  sha    hashlib.sha256 over a large buffer                -> native (libcrypto)
  zlib   zlib.compress of a large buffer                   -> native (libz)
  np     ndarray.dot of two square matrices (--numpy)      -> native (numpy / BLAS);
         the method, not numpy.dot: that one runs through a Python-level dispatcher frame
         (<__array_function__ internals>) in numpy 1.24, which would own the samples
  mm     a @ b (--numpy): BLAS reached through an operator, no call instruction -> native
  add    x + y on large float arrays (--numpy): a ufunc loop through an operator -> native
  idx    x[idx], fancy indexing with an integer array (--numpy): numpy's gather -> native
  tolist pts.tolist() (--numpy): a C method that makes Python floats in CPython's
         allocator (the leaf is mostly CPython's own code, the instruction a call) -> native
  bmul   bytes * n: CPython's bytes_repeat, a memcpy in the C runtime -> native
         (the lines add, idx and bmul repeat their operator a few times: one operation
         is a millisecond and its result is kept below glibc's mmap threshold)
  sleep  time.sleep                                        -> system (needs scry --idle)
  fill   an unmeasured Python line after the sleep (see the runner: it absorbs the CPU
         time scry carries over a sleep boundary, so that no measured line pays for it)
Each CPU line is calibrated at start-up to take about --unit * its weight of thread CPU
time, so that every line lasts many sampling intervals.

Every execution of a measured line is logged as [index, wall0, wall1, cpu0, cpu1, runq0,
runq1]: CLOCK_MONOTONIC (the clock scry uses), the thread's CPU time, and the time the
thread spent runnable but waiting for a CPU (/proc/.../schedstat, field 2). The runner clips
the log to scry's sampling window. After --seconds the log goes to --out, then os._exit(0).
"""
import hashlib
import os
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "workloads"))  # _wl (beside them in a root)
from _wl import Stop, catch_sigterm, marker_lines, parse, write_json  # noqa: E402

NAMES = ["py", "sha", "zlib", "np", "sleep", "mm", "add", "idx", "tolist", "bmul"]
NUMPY_NAMES = ("np", "mm", "add", "idx", "tolist")
WEIGHTS = {"py": 1.5, "sha": 1.0, "zlib": 0.75, "np": 1.0, "sleep": 2.0, "mm": 1.0, "add": 0.75,
           "idx": 0.75, "tolist": 0.75, "bmul": 0.75}
BIG = 1 << 20  # elements of the add / idx arrays, bytes of the bmul result: 8 and 1 MiB
CPU_ID = time.CLOCK_THREAD_CPUTIME_ID


def thread_cpu():
    return time.clock_gettime(CPU_ID)


class Stamper(object):
    def __init__(self):
        self.fd = os.open("/proc/self/task/%d/schedstat" % os.getpid(), os.O_RDONLY)

    def __call__(self):
        q = int(os.pread(self.fd, 128, 0).split()[1]) * 1e-9
        return (time.monotonic(), thread_cpu(), q)


def cpu_min(fn, reps=3):
    best = None
    for _ in range(reps):
        c0 = thread_cpu()
        fn()
        d = thread_cpu() - c0
        best = d if best is None else min(best, d)
    return max(best, 1e-6)


def calibrate(unit, use_numpy):
    cal = {}
    n0 = 200000

    def pyloop(n):
        acc = 0
        for i in range(n):
            acc += i * i
        return acc

    cal["n_py"] = int(n0 * unit * WEIGHTS["py"] / cpu_min(lambda: pyloop(n0)))
    b0 = os.urandom(1 << 22)
    cal["sha_len"] = int(len(b0) * unit * WEIGHTS["sha"] / cpu_min(lambda: hashlib.sha256(b0)))
    text = b"".join(b"%d,%d;" % (i, (i * 7919) % 100003) for i in range(20000))
    t = cpu_min(lambda: zlib.compress(text, 6))
    cal["zlib_copies"] = max(1, int(round(unit * WEIGHTS["zlib"] / t)))
    if use_numpy:
        import numpy as np

        m = np.ones((160, 160))
        t = cpu_min(lambda: np.dot(m, m))
        cal["np_n"] = max(32, int(160 * (unit * WEIGHTS["np"] / t) ** (1.0 / 3)))
        x = np.ones(BIG)
        cal["add_k"] = max(1, int(round(unit * WEIGHTS["add"] / cpu_min(lambda: x + x))))
        ix = np.arange(BIG)[::-1].copy()
        cal["idx_k"] = max(1, int(round(unit * WEIGHTS["idx"] / cpu_min(lambda: x[ix]))))
        p0 = np.ones((1 << 15, 2))
        t = cpu_min(lambda: p0.tolist())
        cal["tolist_n"] = max(1024, int((1 << 15) * unit * WEIGHTS["tolist"] / t))
    chunk = b"0123456789abcdef"
    t = cpu_min(lambda: chunk * (BIG // 16))
    cal["bmul_k"] = max(1, int(round(unit * WEIGHTS["bmul"] / t)))
    cal["n_fill"] = int(n0 * unit * 0.5 / cpu_min(lambda: pyloop(n0)))
    return cal, text


def rec(log, idx, st0, stamp):
    st1 = stamp()
    log.append([idx, st0[0], st1[0], st0[1], st1[1], st0[2], st1[2]])
    return st1


def work(cal, text, unit, deadline, use_numpy, log):
    stamp = Stamper()
    n_py = cal["n_py"]
    sha_buf = os.urandom(cal["sha_len"])
    z_buf = text * cal["zlib_copies"]
    np_a = np_b = None
    if use_numpy:
        import numpy as np

        rnd = np.random.RandomState(1)
        np_a = rnd.rand(cal["np_n"], cal["np_n"])
        np_b = rnd.rand(cal["np_n"], cal["np_n"])
        np_x = rnd.rand(BIG)
        np_ix = rnd.randint(0, BIG, BIG)
        pts = rnd.rand(cal["tolist_n"], 2)
        add_r = range(cal["add_k"])
        idx_r = range(cal["idx_k"])
    chunk = b"0123456789abcdef"
    n16 = BIG // 16
    bmul_r = range(cal["bmul_k"])
    sleep_s = unit * WEIGHTS["sleep"]
    n_fill = cal["n_fill"]
    acc = 0
    st = stamp()
    while not Stop.flag and st[0] < deadline:
        for i in range(n_py): acc += i * i  # noqa: E701 #@py@
        st = rec(log, 0, st, stamp)
        d = hashlib.sha256(sha_buf).digest()  #@sha@
        st = rec(log, 1, st, stamp)
        z = zlib.compress(z_buf, 6)  #@zlib@
        st = rec(log, 2, st, stamp)
        if np_a is not None:
            r = np_a.dot(np_b)  #@np@
            st = rec(log, 3, st, stamp)
            r = np_a @ np_b  #@mm@
            st = rec(log, 5, st, stamp)
            for _ in add_r: r = np_x + np_x  # noqa: E701 #@add@
            st = rec(log, 6, st, stamp)
            for _ in idx_r: r = np_x[np_ix]  # noqa: E701 #@idx@
            st = rec(log, 7, st, stamp)
            t = pts.tolist()  #@tolist@
            st = rec(log, 8, st, stamp)
            t = r = None  # (freeing them is not the measured lines' work)
            st = stamp()
        for _ in bmul_r: b = chunk * n16  # noqa: E701 #@bmul@
        st = rec(log, 9, st, stamp)
        time.sleep(sleep_s)  #@sleep@
        st = rec(log, 4, st, stamp)
        for i in range(n_fill): pass  # noqa: E701 #@fill@
        st = stamp()
    return acc, d, z


def main():
    args = parse([("--unit", float, 0.04), ("--numpy", bool, False)], seconds=10.0,
                 max_seconds=150)
    catch_sigterm()
    cal, text = calibrate(args.unit, args.numpy)
    lines = marker_lines(os.path.abspath(__file__))
    names = [n for n in NAMES if args.numpy or n not in NUMPY_NAMES]
    write_json(args.ready, {"pid": os.getpid(), "lines": lines, "names": names, "calib": cal,
                            "file": os.path.abspath(__file__)})
    log = []
    work(cal, text, args.unit, time.monotonic() + args.seconds, args.numpy, log)
    end = time.monotonic()
    write_json(args.out, {"events": log, "names": NAMES, "end_mono": end, "calib": cal,
                          "lines": lines})
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
