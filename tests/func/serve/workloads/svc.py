"""A service for scry serve's tests (CPython 3.6+, stdlib only).

  --mode busy   fa, fb, fc burn 50/30/20 of every 47.3 ms round of process CPU time and
                measure what each really got (CPU: process_time, wall: perf_counter)
  --mode idle   sleeps (an idle service: the daemon must cost almost nothing for it)
  --mode alloc  every 20 ms, alloc_big() allocates 3 blocks of 2 MiB at one line and
                alloc_small() 1 block at one line (known answer of `scry ctl record
                --memory`: their bytes 3:1, counted in the truth file's "alloc")
  --exit-after S   exit after S seconds
  --exec-after S   after S seconds exec the same interpreter on svc_exec.py (same options)
--ready PATH gets {"pid", "version"} once running; --truth PATH is rewritten (atomically)
every second with the totals per function. --name is only there to be matched by rules.
"""
import os
import signal
import sys
import time

import _svc

ROUND = 0.0473
SPLIT = {"fa": 0.5, "fb": 0.3, "fc": 0.2}
totals = {"fa": [0.0, 0.0], "fb": [0.0, 0.0], "fc": [0.0, 0.0]}
BLOCK = 2 << 20
allocated = {"big": 0, "small": 0}


def alloc_big():
    for _ in range(3):
        b = bytes(BLOCK)  # MARK:alloc_big
        allocated["big"] += len(b)


def alloc_small():
    b = bytes(BLOCK)  # MARK:alloc_small
    allocated["small"] += len(b)


def burn(name, quota):
    w0, t0 = time.perf_counter(), time.process_time()
    x = 0
    while time.process_time() < t0 + quota:
        for i in range(200):
            x += i
    totals[name][0] += time.process_time() - t0
    totals[name][1] += time.perf_counter() - w0


def fa(q):
    burn("fa", q)


def fb(q):
    burn("fb", q)


def fc(q):
    burn("fc", q)


def main():
    ap = _svc.options("idle", "svc")
    ap.add_argument("--exit-after", type=float, default=0)
    ap.add_argument("--exec-after", type=float, default=0)
    ap.add_argument("--idle-sleep", type=float, default=0.2)
    a = ap.parse_args()
    signal.alarm(180)
    start = time.monotonic()
    if a.ready:
        _svc.write_json(a.ready, {"pid": os.getpid(), "version": sys.version.split()[0],
                             "script": os.path.basename(__file__)})
    last = start
    while True:
        now = time.monotonic()
        if a.exit_after and now - start >= a.exit_after:
            return 0
        if a.exec_after and now - start >= a.exec_after:
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "svc_exec.py")
            args = [sys.executable, script] + [x for x in sys.argv[1:]]
            i = args.index("--exec-after")
            del args[i:i + 2]
            if a.ready:
                os.unlink(a.ready)
            os.execv(sys.executable, args)
        if a.mode == "busy":
            fa(ROUND * SPLIT["fa"])
            fb(ROUND * SPLIT["fb"])
            fc(ROUND * SPLIT["fc"])
        elif a.mode == "alloc":
            alloc_big()
            alloc_small()
            time.sleep(0.02)
        else:
            time.sleep(a.idle_sleep)
        if a.truth and (now - last >= 1.0 or a.mode == "alloc" and now - last >= 0.1):
            last = now
            _svc.write_json(a.truth, {"cpu": dict((k, v[0]) for k, v in totals.items()),
                                 "wall": dict((k, v[1]) for k, v in totals.items()),
                                 "process_cpu": time.process_time(), "alive_s": now - start,
                                 "alloc": allocated})


if __name__ == "__main__":
    sys.exit(main())
