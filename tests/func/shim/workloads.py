"""Workloads for the shim's functional tests (run_shim_tests.py) and benchmark.

usage: python workloads.py NAME [CODES_FILE]
Writes "function_name code_object_address" lines to CODES_FILE so that the harness's
per-code totals can be matched to the lines that allocated. Runs on Python 3.6+.
"""
import os
import sys
import threading
import time

MB = 1 << 20
_codes = {}


def mark(fn):
    _codes[fn.__name__] = id(fn.__code__)
    return fn


@mark
def keep_small():
    # 250000 x (400 + 33 header) bytes = 108.25 MB, served by pymalloc pools
    return [bytes(400) for _ in range(250000)]


@mark
def keep_large():
    # 1000 x (100000 + 33) bytes = 100.03 MB, pymalloc falls through to malloc
    return [bytes(100000) for _ in range(1000)]


@mark
def churn():
    # allocate and free 2 GiB in 4 MiB pieces
    for _ in range(512):
        b = bytes(4 * MB)
        del b


@mark
def copy_bytes(src):
    # 512 copies of 4 MiB: 2 GiB through memcpy
    out = None
    for _ in range(512):
        out = bytes(src)
    return out


@mark
def np_keep(np):
    # 30 x 10 MiB float64 arrays = 300 MiB, numpy's own (native) allocations
    return [np.ones(10 * MB // 8) for _ in range(30)]


@mark
def np_copy(np, a):
    # 128 copies of a 16 MiB array: 2 GiB allocated and copied
    for _ in range(128):
        b = a.copy()
        del b


@mark
def thread_keep(out, i):
    # 4 threads x 50 MB in 5000-byte objects
    out[i] = [bytes(5000) for _ in range(50 * MB // 5033)]


@mark
def fork_child_alloc():
    return [bytes(100000) for _ in range(3000)]  # 300 MB, in the child only


@mark
def parent_keep():
    return [bytes(100000) for _ in range(1000)]  # 100 MB


@mark
def late_churn():
    t = time.process_time()  # CPU time: less sensitive to a loaded machine
    for _ in range(2):
        for _ in range(512):
            b = bytes(4 * MB)
            del b
        x = [bytes(200) for _ in range(500000)]
        del x
    return time.process_time() - t


@mark
def small_objects():
    # many small objects: dicts, tuples, strings
    t = 0
    for i in range(1500000):
        d = {"a": i, "b": str(i), "c": (i, i + 1)}
        t += len(d["b"])
    return t


def run(name):
    if name == "keep":
        a = keep_small()
        b = keep_large()
        return a, b
    if name == "churn":
        return churn()
    if name == "copy":
        src = bytearray(4 * MB)
        return copy_bytes(src)
    if name == "numpy":
        import numpy as np
        a = np_keep(np)
        src = np.ones(16 * MB // 8)
        np_copy(np, src)
        return a
    if name == "threads":
        out = [None] * 4
        ts = [threading.Thread(target=thread_keep, args=(out, i)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return out
    if name == "fork":
        import subprocess
        keep = parent_keep()
        pid = os.fork()
        if pid == 0:
            fork_child_alloc()
            os._exit(0)
        os.waitpid(pid, 0)
        subprocess.run([sys.executable, "-c", "x=[bytes(100000) for _ in range(3000)]"],
                       check=True)
        return keep
    if name == "gone":
        time.sleep(2.5)  # the harness stops its heartbeat meanwhile
        print("late_churn_s %.3f" % late_churn())
        return None
    if name == "late":
        print("late_churn_s %.3f" % late_churn())
        return None
    if name == "attach":
        # attach mode, as the injector does it: dlopen + scry_shim_attach(ring)
        import ctypes
        lib = ctypes.CDLL(os.environ["SCRY_TEST_SHIM"])
        ring = os.environ["SCRY_TEST_RING"].encode()
        rc = [lib.scry_shim_attach(ring), lib.scry_shim_attach(ring)]  # idempotent
        print("attach_rc %d %d" % tuple(rc))
        sum(range(1000))  # give the pending call a chance to run
        a = keep_small()
        b = keep_large()
        return a, b
    if name == "small":
        return small_objects()
    raise SystemExit("unknown workload " + name)


if __name__ == "__main__":
    keep = run(sys.argv[1])
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            for k, v in _codes.items():
                f.write("%s %x\n" % (k, v))
    sys.stdout.flush()
    os._exit(0)  # no finalisation: what is live now stays live for the net totals
