"""Known CPU shares for the bpf sampler: fa and fb burn 1/3 and 2/3 of each 47.3 ms round
of the thread's CPU time, and each call's own time.thread_time() is summed per function
(the truth, written to --out at the end). Stdlib only; one thread."""
import json
import os
import sys
import time

ROUND = 0.0473
# one thread: its CPU time is the process's (3.6 has no thread_time)
CLOCK = getattr(time, "thread_time", time.process_time)


def fa(quota):
    t0 = CLOCK()
    x = 0
    while CLOCK() - t0 < quota:
        for i in range(200):
            x += i
    return CLOCK() - t0


def fb(quota):
    t0 = CLOCK()
    x = 0
    while CLOCK() - t0 < quota:
        for i in range(200):
            x += i
    return CLOCK() - t0


def main():
    seconds, out = float(sys.argv[1]), sys.argv[2]
    spent = {"fa": 0.0, "fb": 0.0}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        spent["fa"] += fa(ROUND / 3)
        spent["fb"] += fb(ROUND * 2 / 3)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"cpu_s": spent, "file": os.path.abspath(__file__)}, f)
    os.rename(tmp, out)


main()
