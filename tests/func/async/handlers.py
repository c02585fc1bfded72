"""asyncio workload for record --async (tests/func/async): three request handlers share one
event loop, each burning CPU in short bursts and yielding between them, so every handler's
coroutine is suspended and resumed thousands of times a second. handler-a burns 3 units per
turn, handler-b 2 and handler-c 1, where a unit is a fixed loop; each handler measures its
own CPU time (time.thread_time around its bursts) and the task 'front' gathers them, so the
profile's task roots must be 'task front' over 'task handler-X' in those measured shares.

usage: handlers.py TRUTH.json  (rewrites TRUTH every 0.5 s: CPU seconds per handler)
"""
import asyncio
import json
import os
import sys
import time

TRUTH = sys.argv[1]
cpu = {"handler-a": 0.0, "handler-b": 0.0, "handler-c": 0.0}
UNITS = {"handler-a": 3, "handler-b": 2, "handler-c": 1}


def burn(units):
    x = 0
    for _ in range(units * 20000):
        x += 1
    return x


async def handler(name):
    while True:
        t0 = time.thread_time()
        burn(UNITS[name])
        cpu[name] += time.thread_time() - t0
        await asyncio.sleep(0)


async def reporter():
    while True:
        await asyncio.sleep(0.5)
        tmp = TRUTH + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"cpu": cpu, "pid": os.getpid()}, f)
        os.rename(tmp, TRUTH)


async def front():
    await asyncio.gather(*(asyncio.create_task(handler(n), name=n) for n in sorted(cpu)))


async def main():
    asyncio.create_task(reporter(), name="reporter")
    await asyncio.create_task(front(), name="front")


asyncio.run(main())
