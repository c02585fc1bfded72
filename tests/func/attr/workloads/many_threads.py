"""many_threads.py - N threads doing a fixed, verifiable amount of pure-Python work.

Thread i iterates x = (A*x + C) mod 2**31 from seed i, ITERS times, in chunks; after each
chunk it stores its iteration count (little-endian u64 at offset 8*i) in the shared file
--progress (mmap), which the runner reads at any time without the target's help. ITERS is
calibrated so that all threads together need about --cpu-seconds of CPU; SIGTERM makes
every thread stop at its next chunk boundary. At the end the main thread checks every
result against the closed form for the iterations that thread did (affine-map powers) and
exits 0 only if all are right (3 otherwise), writing {"ok", "done", "complete"...} to --out.
"""
import mmap
import os
import struct
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "workloads"))  # _wl (beside them in a root)
from _wl import Stop, catch_sigterm, parse, write_json  # noqa: E402

A, C, M = 1103515245, 12345, (1 << 31) - 1
CHUNK = 2000


def run_lcg(x, n):
    for _ in range(n):
        x = (A * x + C) & M
    return x


def lcg_jump(x, n):
    """x after n steps, in O(log n): powers of the affine map (a, c)."""
    ra, rc = 1, 0
    a, c = A, C
    while n:
        if n & 1:
            ra, rc = (a * ra) & M, (a * rc + c) & M
        a, c = (a * a) & M, (a * c + c) & M
        n >>= 1
    return (ra * x + rc) & M


def worker(i, iters, mm, go, results):
    go.wait()
    x, done = i + 1, 0
    while done < iters and not Stop.flag:
        n = min(CHUNK, iters - done)
        x = run_lcg(x, n)
        done += n
        struct.pack_into("<Q", mm, 8 * i, done)
    results[i] = (x, done)


def main():
    args = parse([("--threads", int, 200), ("--cpu-seconds", float, 8.0),
                  ("--progress", str, None), ("--iters", int, 0)], max_seconds=150)
    catch_sigterm()
    n = args.threads
    if args.iters:
        iters = args.iters
    else:
        c0 = time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
        run_lcg(1, 200000)
        rate = 200000 / max(time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID) - c0, 1e-6)
        iters = max(CHUNK, int(rate * args.cpu_seconds / n))
    with open(args.progress, "wb") as f:
        f.write(b"\0" * (8 * n))
    fd = os.open(args.progress, os.O_RDWR)
    mm = mmap.mmap(fd, 8 * n)
    go = threading.Event()
    results = [None] * n
    threads = [threading.Thread(target=worker, args=(i, iters, mm, go, results)) for i in range(n)]
    for t in threads:
        t.start()
    # ready before the start: once 200 threads compete for the GIL, this thread may wait
    # seconds for it
    write_json(args.ready, {"pid": os.getpid(), "threads": n, "iters": iters})
    t0 = time.monotonic()
    go.set()
    for t in threads:
        while t.is_alive():  # a timed join, so that the main thread runs the SIGTERM
            t.join(0.2)  # handler even when the signal was delivered to another thread
    wall = time.monotonic() - t0
    bad = [i for i in range(n) if results[i] is None or results[i][0] != lcg_jump(i + 1, results[i][1])]
    done = sum(r[1] for r in results if r)
    write_json(args.out, {"ok": not bad, "bad": bad[:10], "iters": iters, "done": done,
                          "complete": done == n * iters, "wall_s": wall})
    sys.exit(3 if bad else 0)


if __name__ == "__main__":
    main()
