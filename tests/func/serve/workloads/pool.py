"""Services whose threads mostly wait, for the daemon's charging tests (CPython 3.6+).

  --mode pool   a main thread that works (main_work) and hands batches of requests to a
                16-worker ThreadPoolExecutor, whose workers parse (Python) and digest
                (sha256 of 256 KiB, native) each one and then wait on the pool's queue
  --mode many   100 threads: 5 that work in short bursts (busy0..busy4, 1-3 ms of CPU then
                a 4 ms sleep) and 95 that sleep
Truth: each function's own thread CPU time (time.thread_time around each call), and the
process's CPU time, in --truth PATH, rewritten (atomically) every 0.25 s with a history of
[unix time, process CPU, {function: CPU}] so a test can take the truth of any window.
--ready PATH gets {"pid", "version"} once running; --name is there to be matched by rules.
"""
import concurrent.futures
import hashlib
import json
import os
import signal
import sys
import threading
import time

import _svc

lock = threading.Lock()
cpu = {}
BLOB = bytes(range(256)) * 2048
DOC = json.dumps(dict(("field%d" % i, ["v%d" % j for j in range(12)]) for i in range(40)))


def charge(name, t0):
    t = time.thread_time()
    with lock:
        cpu[name] = cpu.get(name, 0.0) + t - t0
    return t


def parse(doc):
    d = json.loads(doc)
    n = 0
    for _ in range(8):
        for k, v in d.items():
            for x in v:
                n += len(x) + len(k)
    return n


def digest(blob):
    return hashlib.sha256(blob).hexdigest()


def handle(doc, blob):
    t0 = time.thread_time()
    parse(doc)
    t1 = charge("parse", t0)
    digest(blob)
    charge("digest", t1)


def main_work(quota):
    burst("main_work", quota)


def run_pool():
    ex = concurrent.futures.ThreadPoolExecutor(16)
    while True:
        futs = [ex.submit(handle, DOC, BLOB) for _ in range(12)]
        main_work(0.006)
        for f in futs:
            f.result()
        time.sleep(0.004)  # about half a CPU in all, so that three fit on two


def burst(name, quota):
    t0 = time.thread_time()
    end = t0 + quota
    x = 0
    while time.thread_time() < end:
        for i in range(300):
            x += i
    charge(name, t0)


def busy0(q):
    burst("busy0", q)


def busy1(q):
    burst("busy1", q)


def busy2(q):
    burst("busy2", q)


def busy3(q):
    burst("busy3", q)


def busy4(q):
    burst("busy4", q)


def busy_loop(fn, quota):
    while True:
        fn(quota)
        time.sleep(0.004)


def run_many():
    for k in range(95):
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    for k, fn in enumerate((busy0, busy1, busy2, busy3, busy4)):
        threading.Thread(target=busy_loop, args=(fn, 0.001 * (1 + k % 3)), daemon=True).start()
    while True:
        time.sleep(1)


def main():
    ap = _svc.options("pool", "pool")
    a = ap.parse_args()
    signal.alarm(300)
    body = run_pool if a.mode == "pool" else run_many
    threading.Thread(target=body, daemon=True).start()
    if a.ready:
        _svc.write_json(a.ready, {"pid": os.getpid(), "version": sys.version.split()[0]})
    history = []
    while True:
        time.sleep(0.25)
        with lock:
            snap = dict(cpu)
        history.append([time.time(), time.process_time(), snap])
        if a.truth:
            _svc.write_json(a.truth, {"history": history[-2000:]})


if __name__ == "__main__":
    main()
