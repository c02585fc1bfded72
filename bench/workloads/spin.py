"""Benchmark target: THREADS threads, each recursing to exactly DEPTH Python frames.

usage: python spin.py DEPTH THREADS busy|sleep [SECONDS]

Each thread (the main thread is one of them) calls itself until its own stack holds DEPTH
frames, counted from the thread's bottom frame, so the depth is exact whatever the
interpreter's threading bootstrap adds.  The leaf then either spins in pure Python
(`busy`, so the stack is stable and the thread is always runnable) or sleeps (`sleep`, an
idle thread).  When every thread has reached its leaf the main thread prints "ready" on
stdout (the threads start their leaf loops together then).  The process exits after SECONDS (default 600) so a lost target never lingers.
Works on Python 2.7 and 3.x (stdlib only).
"""
import sys
import threading
import time

DEPTH = int(sys.argv[1])
THREADS = int(sys.argv[2])
MODE = sys.argv[3]
LIFETIME = float(sys.argv[4]) if len(sys.argv) > 4 else 600.0

sys.setrecursionlimit(max(1000, DEPTH + 200))
if hasattr(threading, "stack_size") and DEPTH > 200:
    threading.stack_size(64 << 20)

# Counters as lists that threads append to (atomic under the GIL, no lock: a lock holder
# that loses the GIL to a spinning thread stalls every other thread behind it).
arrived = []  # threads that reached their leaf
in_leaf = []  # threads past the start barrier
in_loop = []  # threads running their leaf loop
go = threading.Event()
deadline = time.time() + LIFETIME


def stack_depth():
    f = sys._getframe(1)
    n = 0
    while f is not None:
        n += 1
        f = f.f_back
    return n


def wait_for_all(is_main):
    # Threads start their leaf loops together: 100 threads started one by one next to
    # threads that already spin would take minutes to get going (GIL hand-offs).
    if is_main:
        while len(arrived) < THREADS and time.time() < deadline:
            time.sleep(0.005)
        go.set()
    else:
        go.wait()
    in_leaf.append(1)
    # Nobody spins before everyone is past the barrier: a thread leaving go.wait() must
    # win the GIL, which takes long when others already spin.
    while len(in_leaf) < THREADS and time.time() < deadline:
        time.sleep(0.001)
    in_loop.append(1)


def announce_when_all_in_leaf():
    # "ready" only once every thread left go.wait() and runs its leaf loop, so the stacks
    # are the steady ones from the first sample on.
    if len(in_loop) >= THREADS:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        return True
    return False


def leaf_busy(is_main):
    wait_for_all(is_main)
    announced = not is_main
    while time.time() < deadline:
        x = 0
        for i in range(300):
            x += i * i
        if not announced:
            announced = announce_when_all_in_leaf()


def leaf_sleep(is_main):
    wait_for_all(is_main)
    announced = not is_main
    while time.time() < deadline:
        if not announced:
            announced = announce_when_all_in_leaf()
        time.sleep(0.01 if not announced else 0.5)


def descend(remaining, is_main):
    # remaining counts the frames still to add below this one.
    if remaining > 1:
        descend(remaining - 1, is_main)
        return
    arrived.append(1)
    if MODE == "busy":
        leaf_busy(is_main)
    else:
        leaf_sleep(is_main)


def start(is_main):
    # This frame plus those below it: descend adds the rest, and the leaf loop is called
    # from the last descend frame, so the leaf counts as one frame of DEPTH.
    have = stack_depth()  # start and the frames under it
    descend(max(1, DEPTH - have - 1), is_main)


for _ in range(THREADS - 1):
    t = threading.Thread(target=start, args=(False,))
    t.daemon = True
    t.start()
start(True)
