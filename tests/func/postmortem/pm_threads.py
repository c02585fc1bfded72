"""dump --core known answers: NTHREADS threads each waiting at a known depth of level()
calls (thread i: i % 5 + 1 levels), named pm-I, and the main thread in main_wait(). Writes
{"pid", "nthreads"} to argv[1] once every thread waits, then sleeps until killed.
Python 3.6+ stdlib only."""
import json
import os
import signal
import sys
import threading
import time

signal.alarm(120)  # no workload outlives a runner that died (SIGALRM ends it)

NTHREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
started = []
lock = threading.Lock()


def level(n):
    if n > 1:
        return level(n - 1)
    with lock:
        started.append(1)
    while True:
        time.sleep(1)


def main_wait(path):
    while len(started) < NTHREADS:
        time.sleep(0.01)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "nthreads": NTHREADS}, f)
    os.rename(tmp, path)
    while True:
        time.sleep(1)


for i in range(NTHREADS):
    threading.Thread(target=level, args=(i % 5 + 1,), name="pm-%d" % i, daemon=True).start()
main_wait(sys.argv[1])
