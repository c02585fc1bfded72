# Passed to `python -c` by run_bench.py's launch benchmark: ~0.2 s of pure-Python work in
# a function whose name the profile must contain.  Works on Python 2.7 and 3.x.
import time


def scry_launch_work(seconds):
    end = time.time() + seconds
    x = 0
    while time.time() < end:
        for i in range(500):
            x += i * i
    return x


scry_launch_work(0.2)
