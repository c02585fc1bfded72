"""dump --core: four threads named spin-I contend for the GIL in a pure-Python loop while
the main thread sleeps. Writes {"pid"} to argv[1] once they run. Python 3.6+ stdlib only."""
import json
import os
import signal
import sys
import threading
import time

signal.alarm(120)  # no workload outlives a runner that died (SIGALRM ends it)


def spin():
    x = 0
    while True:
        x += 1


for i in range(4):
    threading.Thread(target=spin, name="spin-%d" % i, daemon=True).start()
time.sleep(0.3)
with open(sys.argv[1] + ".tmp", "w") as f:
    json.dump({"pid": os.getpid()}, f)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    time.sleep(1)
