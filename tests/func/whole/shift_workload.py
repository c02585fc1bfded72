"""A workload whose hot function changes between runs, for 'scry diff'.

usage: shift_workload.py MODE SECONDS   (MODE base or new)

Each round gives steady(), other() and grower() quotas of process CPU time: in 'base'
40%, 40% and 20%, in 'new' 15%, 15% and 70%. So between a base and a new recording
grower's share grows by about 50 points and steady's and other's shrink by about 25 each:
grower's line is the line whose share changed most. Each function's loop is one line, so
its line carries all of its time.
"""
import sys
import time


def steady(quota):
    end, x = time.process_time() + quota, 0
    while time.process_time() < end: x = (x * 31 + 7) % 1000003  # noqa: E701  # STEADY_LINE
    return x


def other(quota):
    end, x = time.process_time() + quota, 0
    while time.process_time() < end: x = (x * 31 + 7) % 1000003  # noqa: E701  # OTHER_LINE
    return x


def grower(quota):
    end, x = time.process_time() + quota, 0
    while time.process_time() < end: x = (x * 31 + 7) % 1000003  # noqa: E701  # GROWER_LINE
    return x


def main():
    mode, seconds = sys.argv[1], float(sys.argv[2])
    share = 0.2 if mode == "base" else 0.7
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        steady(0.04 * (1 - share) / 2)
        other(0.04 * (1 - share) / 2)
        grower(0.04 * share)


main()
