"""Targets for tests/func/memory/run_memsafe.py: what an attached `scry record --memory`
must leave unharmed. Stdlib only; any Python 3.6+.

usage: safework.py MODE CTLDIR
  twin    allocate, copy and free in a loop (Python objects, malloc'd buffers, memcpy); each
          request file CTLDIR/measure-N makes it time its next iterations (CPU seconds per
          iteration, time.process_time) and write CTLDIR/result-N.
  signals count every SIGRTMIN delivered (the C-level handler writes one byte per signal
          to a wakeup socket; Python's own handler coalesces, so the bytes are counted); on
          CTLDIR/stop write the count to CTLDIR/count. Single-threaded: every signal sent to
          the process reaches this (main) thread, the one scry borrows.
  idle    sleep (a target for kill/attach cycles).
Each writes CTLDIR/ready (its pid) once started; each exits after 600 s at the latest.
"""
import json
import os
import signal
import socket
import sys
import time

MODE, CTL = sys.argv[1], sys.argv[2]
DEADLINE = time.time() + 600
ITER_PER_WINDOW = 200


def put(name, obj):
    tmp = os.path.join(CTL, name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, os.path.join(CTL, name))


def work():
    d = {}
    for i in range(1500):
        s = str(i) * 4
        d[s] = [s, i, (i, s), {"k": s}]
        b = bytearray(s.encode() * 60)  # malloc'd buffer + memcpy
        bytes(b)
    return len(d)


def twin():
    put("ready", {"pid": os.getpid()})
    n = 0
    while time.time() < DEADLINE:
        work()
        req = os.path.join(CTL, "measure-%d" % n)
        if os.path.exists(req):
            work()  # warm
            t0 = time.process_time()
            for _ in range(ITER_PER_WINDOW):
                work()
            put("result-%d" % n, {"cpu_per_iter": (time.process_time() - t0) / ITER_PER_WINDOW})
            n += 1


def signals():
    rd, wr = socket.socketpair()
    for s in (rd, wr):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    rd.setblocking(False)
    wr.setblocking(False)
    signal.signal(signal.SIGRTMIN, lambda signum, frame: None)
    signal.set_wakeup_fd(wr.fileno())
    count = 0

    def drain():
        got = 0
        while True:
            try:
                data = rd.recv(65536)
            except (BlockingIOError, InterruptedError):
                return got
            if not data:
                return got
            got += data.count(bytes([int(signal.SIGRTMIN)]))

    put("ready", {"pid": os.getpid()})
    stop = os.path.join(CTL, "stop")
    while time.time() < DEADLINE and not os.path.exists(stop):
        count += drain()
        time.sleep(0.002)
    time.sleep(0.2)
    count += drain()
    put("count", {"count": count})


def idle():
    put("ready", {"pid": os.getpid()})
    while time.time() < DEADLINE:
        time.sleep(0.05)


{"twin": twin, "signals": signals, "idle": idle}[MODE]()
