"""Benchmark target for the slowdown test: a fixed amount of CPU-bound pure-Python work.

usage: python slowdown.py UNITS

Prints "ready" and waits for a line on stdin (so a profiler can attach first), then runs
UNITS units of work (one unit is a few milliseconds on a 2020s x86 core) and prints
"elapsed SECONDS CPU_SECONDS WAIT_SECONDS PREEMPTIONS" measured around the work phase only:
wall time, the process's own CPU time (which a loaded machine inflates much less), the time
it spent runnable but waiting for a CPU (/proc/self/schedstat) and how often it was
preempted (nonvoluntary_ctxt_switches); the last two are -1 where /proc lacks them.
"""
import sys
import time


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def mix(n):
    acc = 0
    d = {}
    for i in range(n):
        acc = (acc * 31 + i) % 1000003
        d[i & 255] = acc
    return acc + len(d)


def unit():
    return fib(18) + mix(20000)


def work(units):
    total = 0
    for _ in range(units):
        total += unit()
    return total


def sched():
    """(seconds waiting on a run queue, involuntary context switches), or (-1, -1)."""
    try:
        with open("/proc/self/schedstat") as f:
            wait = int(f.read().split()[1]) / 1e9
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("nonvoluntary_ctxt_switches:"):
                    return wait, int(line.split()[1])
    except (IOError, OSError, ValueError, IndexError):
        pass
    return -1.0, -1


def main():
    units = int(sys.argv[1])
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    wall = time.perf_counter if hasattr(time, "perf_counter") else time.time
    cpu = time.process_time if hasattr(time, "process_time") else time.clock
    w0, n0 = sched()
    t0, c0 = wall(), cpu()
    work(units)
    t1, c1 = wall(), cpu()
    w1, n1 = sched()
    wait = w1 - w0 if w0 >= 0 else -1.0
    pre = n1 - n0 if n0 >= 0 else -1
    sys.stdout.write("elapsed %.6f %.6f %.6f %d\n" % (t1 - t0, c1 - c0, wait, pre))
    sys.stdout.flush()


main()
