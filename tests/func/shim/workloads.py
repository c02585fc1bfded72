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


def late_churn_best():
    # the best of 3: one 0.3-s phase varies by +-20% on a shared 2-core VM
    return min(late_churn() for _ in range(3))


@mark
def small_objects():
    # many small objects: dicts, tuples, strings
    t = 0
    for i in range(1500000):
        d = {"a": i, "b": str(i), "c": (i, i + 1)}
        t += len(d["b"])
    return t


@mark
def grab_keep(lib):
    # 100 x 1 MiB malloc'ed by a library loaded after the shim was injected
    return lib.grab_keep(MB, 100)


@mark
def grab_copy(lib):
    # 256 memcpy of 4 MiB = 1 GiB in that library
    return lib.grab_copy(4 * MB, 256)


@mark
def grab_dep(lib):
    # 50 x 1 MiB in a library that lib dlopen()s through its RUNPATH after attach
    return lib.grab_dep_keep(b"libshim_test_grab_dep.so", MB, 50)


@mark
def thread_busy(stop, counts, i):
    # allocates and copies without pause while the shim is injected and the GOTs patched
    src = bytearray(200000)
    while not stop.is_set():
        b = bytes(src)
        x = [bytes(100) for _ in range(100)]
        del b, x
        counts[i] += 1


def run_injected(parts):
    """Attach mode through the real injector: the test's inject_attach injects the shim
    into this process while it waits for $SCRY_TEST_GO; then the parts run."""
    parts = parts.split(",")
    keep = []
    np = None
    if "numpy" in parts:
        import numpy as np  # loaded before the shim: its GOT must be patched on attach
        np.ones(10).copy()
    stop, workers, counts = threading.Event(), [], [0] * 4
    if "threads" in parts:  # running while the injector patches the GOTs
        workers = [threading.Thread(target=thread_busy, args=(stop, counts, i)) for i in range(4)]
        for t in workers:
            t.start()
    print("ready", flush=True)
    go = os.environ["SCRY_TEST_GO"]
    t0 = time.time()
    while not os.path.exists(go) and time.time() - t0 < 120:
        time.sleep(0.005)
    t_go = time.time()
    sum(range(1000))  # the pending call installs the PyMem hooks
    time.sleep(0.02)
    for part in parts:
        if part == "keep":
            keep += [keep_small(), keep_large()]
        elif part == "churn":
            churn()
        elif part == "copy":
            keep.append(copy_bytes(bytearray(4 * MB)))
        elif part == "grab":
            import ctypes  # loaded after attach too (dlopen of _ctypes)
            lib = ctypes.CDLL(os.environ["SCRY_TEST_GRAB"])
            lib.grab_keep.argtypes = [ctypes.c_size_t, ctypes.c_int]
            lib.grab_copy.argtypes = [ctypes.c_size_t, ctypes.c_int]
            lib.grab_copy.restype = ctypes.c_size_t
            print("grab_kept %d" % grab_keep(lib))
            print("grab_copied %d" % grab_copy(lib))
            lib.grab_dep_keep.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
            print("grab_dep_kept %d" % grab_dep(lib))
            try:  # a failed dlopen through the hook keeps its dlerror() text
                ctypes.CDLL("libscry-test-missing.so")
            except OSError as e:
                print("dlerror_kept %d" % ("libscry-test-missing.so" in str(e)))
        elif part == "threads":
            time.sleep(1.0)
            stop.set()
            for t in workers:
                t.join()
            print("thread_loops %d" % min(counts))
        elif part == "numpy":
            keep.append(np_keep(np))
            np_copy(np, np.ones(16 * MB // 8))
        elif part == "late":
            # the injector stops beating after 1 s: from 2.5 s on the shim is a pass-through
            time.sleep(max(0.0, 2.5 - (time.time() - t_go)))
            print("late_churn_s %.3f" % late_churn_best())
        else:
            raise SystemExit("unknown part " + part)
    return keep


def run(name):
    if name.startswith("inject:"):
        return run_injected(name[len("inject:"):])
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
        print("late_churn_s %.3f" % late_churn_best())
        return None
    if name == "late":
        print("late_churn_s %.3f" % late_churn_best())
        return None
    if name == "attach":
        # attach mode, as the injector does it: dlopen + scry_shim_attach(ring)
        import ctypes
        lib = ctypes.CDLL(os.environ["SCRY_TEST_SHIM"])
        ring = os.environ["SCRY_TEST_RING"].encode()
        go, t0 = os.environ.get("SCRY_TEST_GO"), time.time()
        while go and not os.path.exists(go) and time.time() - t0 < 60:
            time.sleep(0.005)  # until the ring has its layout (read from this process)
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
