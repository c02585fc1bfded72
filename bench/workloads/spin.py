"""Benchmark target: THREADS threads, each recursing to exactly DEPTH Python frames.

usage: python spin.py DEPTH THREADS busy|sleep [SECONDS]

Each thread (the main thread is one of them) calls itself until its own stack holds DEPTH
frames, counted from the thread's bottom frame, so the depth is exact whatever the
interpreter's threading bootstrap adds.  The leaf then either spins in pure Python
(`busy`, so the stack is stable and the thread is always runnable) or sleeps (`sleep`, an
idle thread).  When every thread has reached its leaf the main thread prints "ready" on
stdout.  The process exits after SECONDS (default 600) so a lost target never lingers.
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

arrived = [0]
lock = threading.Lock()
deadline = time.time() + LIFETIME


def stack_depth():
    f = sys._getframe(1)
    n = 0
    while f is not None:
        n += 1
        f = f.f_back
    return n


def leaf_busy(is_main):
    announced = False
    while time.time() < deadline:
        x = 0
        for i in range(300):
            x += i * i
        if is_main and not announced and arrived[0] >= THREADS:
            sys.stdout.write("ready\n")
            sys.stdout.flush()
            announced = True


def leaf_sleep(is_main):
    announced = False
    while time.time() < deadline:
        if is_main and not announced and arrived[0] >= THREADS:
            sys.stdout.write("ready\n")
            sys.stdout.flush()
            announced = True
        time.sleep(0.02 if not announced else 0.5)


def descend(remaining, is_main):
    # remaining counts the frames still to add below this one.
    if remaining > 1:
        descend(remaining - 1, is_main)
        return
    with lock:
        arrived[0] += 1
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
