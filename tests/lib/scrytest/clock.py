"""The one clock of the Python tests and benchmarks.

`now()` is CLOCK_MONOTONIC in seconds (time.monotonic), the clock the workloads stamp their
own truth with, so a test's readings and a workload's can be compared directly. Never use
time.time() for intervals or deadlines (it jumps with the wall clock).
"""
import time


def now():
    """Seconds on CLOCK_MONOTONIC (the workloads' clock)."""
    return time.monotonic()


def since(t0):
    """Seconds elapsed since now() returned t0."""
    return time.monotonic() - t0


class Deadline(object):
    """A point SECONDS after its creation: `while not d.expired(): ...`, d.left()."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self):
        return max(0.0, self.end - time.monotonic())

    def expired(self):
        return time.monotonic() >= self.end
