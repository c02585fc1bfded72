"""Target of tests/func/faults/run_faults.py: a busy interpreter that scry is signalled
around. Stdlib only; Python 3.7+ (time.thread_time).

usage: faultwork.py CTLDIR LIFETIME
  The main thread runs a pure-Python loop (calls, dicts, small allocations); a second thread
  allocates and sleeps (memory events, a thread that is mostly off-CPU). Once started it
  writes CTLDIR/ready ({"pid", "tids"}). It exits after LIFETIME seconds (a launched target
  runs only that long; SIGALRM ends it even if the runner was killed).
  CTLDIR/quiet: the main thread stops its loop and only serves measurements: for each
  request file CTLDIR/measure-N it runs ITERS iterations and writes CTLDIR/result-N with the
  main thread's CPU seconds per iteration (time.thread_time: the target's own clock, blind
  to what else runs on the machine).
"""
import json
import os
import signal
import sys
import threading
import time

CTL, LIFETIME = sys.argv[1], float(sys.argv[2])
ITERS = 800
signal.alarm(int(LIFETIME) + 5)  # default action: terminate, no extra thread


def put(name, obj):
    tmp = os.path.join(CTL, name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, os.path.join(CTL, name))


def leaf(i):
    return {"k": i, "v": [i, str(i)]}


def middle(n):
    d = {}
    for i in range(n):
        d[i % 97] = leaf(i)
    return len(d)


def work():
    return middle(300)


def churn(tids):
    tids["churn"] = threading.get_native_id()
    keep = []
    while True:
        keep.append(bytearray(4096 + len(keep)))
        if len(keep) > 64:
            keep = []
        time.sleep(0.002)


def main():
    end = time.monotonic() + LIFETIME
    tids = {"main": threading.get_native_id()}
    threading.Thread(target=churn, args=(tids,), daemon=True).start()
    while len(tids) < 2:
        time.sleep(0.001)
    put("ready", {"pid": os.getpid(), "tids": tids})
    quiet = os.path.join(CTL, "quiet")
    while time.monotonic() < end and not os.path.exists(quiet):
        for _ in range(20):
            work()
    n = 0
    while time.monotonic() < end:
        req = os.path.join(CTL, "measure-%d" % n)
        if not os.path.exists(req):
            time.sleep(0.005)
            continue
        for _ in range(20):  # warm (a twin that waited has not run the loop yet)
            work()
        t0 = time.thread_time()
        for _ in range(ITERS):
            work()
        put("result-%d" % n, {"cpu_per_iter": (time.thread_time() - t0) / ITERS})
        n += 1


main()
