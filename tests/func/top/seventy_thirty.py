"""Two functions sharing one CPU about 70/30: hot() and cold(), single thread.

Each round gives hot() 35 ms and cold() 15 ms of process CPU time, then lib() 10 ms on one
line of ours (LIB_LINE) that calls the standard library's pure-Python colorsys: top's lines
view charges that time to LIB_LINE, not to colorsys.py (--all-lines: to colorsys.py).
Writes a JSON {"pid", "hot_line", "cold_line", "lib_line", "file"} to argv[1] (atomically)
once running.
"""
import colorsys
import json
import os
import sys
import time


def hot(quota):
    end = time.process_time() + quota
    x = 0
    while time.process_time() < end:
        for i in range(300):
            x += i  # HOT_LINE
    return x


def cold(quota):
    end = time.process_time() + quota
    x = 0
    while time.process_time() < end:
        for i in range(300):
            x += i  # COLD_LINE
    return x


def lib(quota):
    end = time.process_time() + quota
    while time.process_time() < end:
        colorsys.rgb_to_hls(0.2, 0.4, 0.6); colorsys.hls_to_rgb(0.5, 0.4, 0.6)  # LIB_LINE


def marker(tag):
    with open(__file__) as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith("# " + tag):
                return n
    return 0


def main():
    ready = sys.argv[1] if len(sys.argv) > 1 else None
    limit = time.time() + (float(sys.argv[2]) if len(sys.argv) > 2 else 120)
    rounds = 0
    while time.time() < limit:
        hot(0.035)
        cold(0.015)
        lib(0.010)
        rounds += 1
        if rounds == 2 and ready:
            info = {
                "pid": os.getpid(),
                "file": os.path.abspath(__file__),
                "hot_line": marker("HOT_LINE"),
                "cold_line": marker("COLD_LINE"),
                "lib_line": marker("LIB_LINE"),
            }
            with open(ready + ".tmp", "w") as f:
                json.dump(info, f)
            os.rename(ready + ".tmp", ready)


main()
