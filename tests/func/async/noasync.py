"""A Python that never imports asyncio (tests/func/async): writes TRUTH, then sleeps."""
import json
import os
import sys
import time

tmp = sys.argv[1] + ".tmp"
with open(tmp, "w") as f:
    json.dump({"pid": os.getpid()}, f)
os.rename(tmp, sys.argv[1])
time.sleep(600)
