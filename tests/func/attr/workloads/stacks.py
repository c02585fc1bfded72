"""stacks.py - a thread in a known native call chain, for scry --native stack checks.

--mode ext    call_ext() -> scryext.deep(DEPTH, s) -> scry_native_recurse x DEPTH+1
              -> scry_native_burn        (needs --ext-dir with a scryext built for us)
--mode hash   call_hash() -> hashlib.sha256(large buffer) -> _hashlib -> libcrypto
--mode numpy  call_numpy() -> numpy.dot(a, b) -> _multiarray_umath -> BLAS
--mode sleep  call_sleep() -> time.sleep(long)          -> clock_nanosleep
--mode recv   call_recv()  -> socket.recv on a silent socketpair -> recv
--mode burst  call_hash() for about 15 ms of CPU, then call_nap(): time.sleep(20 ms), in
              a loop: the nap line uses almost no CPU (its thread CPU time is measured and
              given in the ready file, as a share of the loop's CPU)
--mode clock  clock_loop(): a line that reads the CPU clock (a system call) and a line of
              3,000 additions, in turn, beside a napping thread; the ready file gives the
              clock line's share of the two lines' CPU, estimated from timing each alone
CPU modes loop until SIGTERM; blocking modes block until SIGTERM (the default action
ends them). Ready (with pid and the caller's line) once the first call is under way.
"""
import hashlib
import os
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "workloads"))  # _wl (beside them in a root)
from _wl import Stop, catch_sigterm, marker_lines, parse, write_json  # noqa: E402

DEPTH = 3


def call_ext(ext):
    return ext.deep(DEPTH, 0.05)  #@ext@


def call_hash(buf):
    return hashlib.sha256(buf).digest()  #@hash@


def call_numpy(np, a, b):
    return np.dot(a, b)  #@numpy@


def call_sleep():
    time.sleep(3600)  #@sleep@


def call_nap():
    time.sleep(0.02)  #@nap@


def call_recv(sock):
    return sock.recv(1)  #@recv@


def clock_loop(ready, args):
    clock = time.process_time  # one busy thread: the process's CPU time is its own
    x = 0
    rounds = 0
    while not Stop.flag:
        end = clock() + 0.02
        while clock() < end:  #@clock@
            for i in range(3000): x += i  # noqa: E701  #@adds@
        rounds += 1
        if rounds == 10:
            ready["lines"] = marker_lines(os.path.abspath(__file__))
            ready["clock_share"] = clock_share(clock)
            write_json(args.ready, ready)


def clock_share(clock):
    """The clock line's CPU over both lines', from the best of 5 timings of each alone."""
    n, best_c, best_a = 2000, None, None
    for _ in range(5):
        t0 = clock()
        for _ in range(n):
            clock() < 0
        c = (clock() - t0) / n
        t0 = clock()
        x = 0
        for _ in range(20):
            for i in range(3000): x += i  # noqa: E701
        a = (clock() - t0) / 20
        best_c = c if best_c is None else min(best_c, c)
        best_a = a if best_a is None else min(best_a, a)
    return best_c / (best_c + best_a)


def napper():
    while not Stop.flag:
        time.sleep(0.5)


def burst(args, ready):
    buf = os.urandom(4 << 20)
    best = None
    for _ in range(3):
        c0 = time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
        call_hash(buf)
        d = time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID) - c0
        best = d if best is None else min(best, d)
    per_mib = max(best / 4, 1e-6)
    buf = os.urandom(max(1, int(0.015 / per_mib)) << 20)
    tcpu = time.clock_gettime
    nap = total = 0.0
    loops = 0
    while not Stop.flag:
        a = tcpu(time.CLOCK_THREAD_CPUTIME_ID)
        call_hash(buf)
        b = tcpu(time.CLOCK_THREAD_CPUTIME_ID)
        call_nap()
        c = tcpu(time.CLOCK_THREAD_CPUTIME_ID)
        nap += c - b
        total += c - a
        loops += 1
        if loops == 20:
            ready["lines"] = marker_lines(os.path.abspath(__file__))
            ready["nap_cpu_share"] = nap / total
            ready["hash_ms"] = 1000 * (total - nap) / loops
            write_json(args.ready, ready)


def main():
    args = parse([("--mode", str, "ext"), ("--ext-dir", str, None)], max_seconds=150)
    catch_sigterm()
    ready = {"pid": os.getpid(), "mode": args.mode, "depth": DEPTH}
    if args.mode in ("sleep", "recv"):
        signal_ready = threading.Timer(0.3, write_json, (args.ready, ready))
        signal_ready.daemon = True
        signal_ready.start()
        if args.mode == "sleep":
            call_sleep()
        else:
            a, b = socket.socketpair()
            call_recv(a)
        return
    if args.mode == "ext":
        sys.path.insert(0, args.ext_dir)
        import scryext

        call, cargs = call_ext, (scryext,)
    elif args.mode == "hash":
        call, cargs = call_hash, (os.urandom(1 << 24),)
    elif args.mode == "burst":
        burst(args, ready)
        return
    elif args.mode == "clock":
        t = threading.Thread(target=napper, name="napper")
        t.daemon = True
        t.start()
        clock_loop(ready, args)
        return
    elif args.mode == "numpy":
        import numpy as np

        m = np.random.RandomState(2).rand(300, 300)
        call, cargs = call_numpy, (np, m, m)
    else:
        raise SystemExit("unknown mode %s" % args.mode)
    call(*cargs)
    write_json(args.ready, ready)
    while not Stop.flag:
        call(*cargs)


if __name__ == "__main__":
    main()
