"""Benchmark target for the slowdown test: a fixed amount of CPU-bound pure-Python work.

usage: python slowdown.py UNITS

Prints "ready" and waits for a line on stdin (so a profiler can attach first), then runs
UNITS units of work (one unit is a few tens of milliseconds on a 2020s x86 core) and prints
"elapsed SECONDS" measured around the work phase only.
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


def main():
    units = int(sys.argv[1])
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    t0 = time.perf_counter() if hasattr(time, "perf_counter") else time.time()
    work(units)
    t1 = time.perf_counter() if hasattr(time, "perf_counter") else time.time()
    sys.stdout.write("elapsed %.6f\n" % (t1 - t0))
    sys.stdout.flush()


main()
