"""The containerised target of run_containers.py (runs as pid 1 of its own PID namespace).

Threads: "burner" spends its own CPU time (time.thread_time) 75/25 on burn_a/burn_b in
rounds of 31.7 ms and counts what each really got (30,000 additions, about 1 ms, between
two clock reads: --blocking's stops landed on the clock's syscall line far more often than
its CPU share, 15-35% of the function's samples with 3,000, so the marked line is kept far
ahead; that bias is now corrected and tested by attr's blocking_clock_line); "napper" sleeps in nap() and the main
thread in main_wait() (0.5 s naps: idle nearly all the time, even on a loaded machine). --ready gets the ids the process sees (its own namespace's:
os.getpid() is 1) and the marked lines; on SIGTERM --out gets the CPU each function got.
"""
import json
import os
import signal
import sys
import threading
import time

ROUND = 0.0317
stop = threading.Event()
spent = {"burn_a": 0.0, "burn_b": 0.0}
tids = {}


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, path)


def burn_a(quota):
    t0 = time.thread_time()
    end = t0 + quota
    x = 0
    while time.thread_time() < end:
        for i in range(30000): x += i  #@burn_a@  # noqa: E701
    return time.thread_time() - t0


def burn_b(quota):
    t0 = time.thread_time()
    end = t0 + quota
    x = 0
    while time.thread_time() < end:
        for i in range(30000): x += i  #@burn_b@  # noqa: E701
    return time.thread_time() - t0


def burner():
    tids["burner"] = threading.get_native_id()
    while not stop.is_set():
        spent["burn_a"] += burn_a(0.75 * ROUND)
        spent["burn_b"] += burn_b(0.25 * ROUND)


def nap():
    tids["napper"] = threading.get_native_id()
    while not stop.is_set():
        time.sleep(0.5)  #@nap@


def main_wait(out, ready, facts):
    # Ready is written from in here, so that a dump taken as soon as it appears finds
    # main_wait (and its argument out) on the main thread's stack.
    write_json(ready, facts)
    while not stop.is_set():
        time.sleep(0.5)  #@main_wait@
    write_json(out, {"cpu_s": dict(spent)})


def marker(name):
    with open(__file__) as f:
        for n, text in enumerate(f, 1):
            if ("#@%s@" % name) in text:
                return n
    raise ValueError(name)


def main():
    ready, out = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    # never outlives a crashed runner: as pid 1 of its namespace it ignores a signal it
    # has no handler for, SIGALRM's default action included
    signal.signal(signal.SIGALRM, lambda *a: os._exit(3))
    signal.alarm(120)
    tids["MainThread"] = threading.get_native_id()
    threading.Thread(target=burner, name="burner", daemon=True).start()
    threading.Thread(target=nap, name="napper", daemon=True).start()
    while len(tids) < 3 or spent["burn_a"] < 0.1:
        time.sleep(0.01)
    main_wait(out, ready, {"pid": os.getpid(), "tids": tids, "file": __file__,
                           "lines": dict((k, marker(k)) for k in
                                         ("burn_a", "burn_b", "nap", "main_wait"))})


main()
