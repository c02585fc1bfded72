"""Two functions whose time is spread over several lines, for --function.

usage: spread_workload.py SECONDS

Each round gives hot() 70% and cold() 30% of a quota of process CPU time; hot() spends it
on three lines and cold() on two, so a line profile splits each function while a function
profile (--function) must show each as one frame at its first line (the def line).
"""
import sys
import time


def hot(quota):  # HOT_DEF
    end, x = time.process_time() + quota / 3, 0
    while time.process_time() < end: x = (x * 31 + 7) % 1000003  # noqa: E701
    end = time.process_time() + quota / 3
    while time.process_time() < end: x = (x * 37 + 5) % 1000003  # noqa: E701
    end = time.process_time() + quota / 3
    while time.process_time() < end: x = (x * 41 + 3) % 1000003  # noqa: E701
    return x


def cold(quota):  # COLD_DEF
    end, x = time.process_time() + quota / 2, 0
    while time.process_time() < end: x = (x * 31 + 7) % 1000003  # noqa: E701
    end = time.process_time() + quota / 2
    while time.process_time() < end: x = (x * 37 + 5) % 1000003  # noqa: E701
    return x


def main():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        hot(0.028)
        cold(0.012)


main()
