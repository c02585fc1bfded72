"""asyncio workload with a known await graph, for scry dump --async (tests/func/async).

usage: tasks.py TRUTH.json

Main thread, loop A (asyncio.run): the main task (automatic name Task-1) gathers ch-1 and
ch-2 (child -> leaf -> asyncio.sleep); grouper runs a TaskGroup with tg-w1 and tg-w2
(group_worker -> asyncio.sleep); consumer-1 and consumer-2 wait on one queue; spinner is the
running task, spinning in plain Python. A second thread, loop B: bg-main awaits the task
bg-child directly (bg_child -> asyncio.sleep). Once every task is suspended where it will
stay, spinner writes TRUTH (the expected graph, the threads' native ids) and spins forever.
"""
import asyncio
import json
import os
import sys
import threading

TRUTH = sys.argv[1]
bg_ready = threading.Event()
bg_tid = []


async def leaf(n):
    await asyncio.sleep(3600)


async def child(n):
    await leaf(n)


async def group_worker(n):
    await asyncio.sleep(3600)


async def grouped():
    async with asyncio.TaskGroup() as tg:
        tg.create_task(group_worker(1), name="tg-w1")
        tg.create_task(group_worker(2), name="tg-w2")


async def consumer(q):
    while True:
        await q.get()


def spin():
    x = 0
    while True:
        x += 1


async def spinner():
    await asyncio.sleep(0.3)  # every other task has reached its await
    bg_ready.wait(30)
    truth = {
        "main_tid": threading.get_native_id(),
        "bg_tid": bg_tid[0],
        "tasks": {
            # name: [loop, state, awaited by, own coroutine chain innermost first, awaits]
            "Task-1": ["A", "pending", [], ["main"], "_GatheringFuture"],
            "ch-1": ["A", "pending", ["Task-1"], ["leaf", "child"], "Future"],
            "ch-2": ["A", "pending", ["Task-1"], ["leaf", "child"], "Future"],
            "grouper": ["A", "pending", [], ["grouped"], "Future"],
            "tg-w1": ["A", "pending", ["grouper"], ["group_worker"], "Future"],
            "tg-w2": ["A", "pending", ["grouper"], ["group_worker"], "Future"],
            "consumer-1": ["A", "pending", [], ["consumer"], "Future"],
            "consumer-2": ["A", "pending", [], ["consumer"], "Future"],
            "spinner": ["A", "running", [], ["spinner"], None],
            "bg-main": ["B", "pending", [], ["bg_main"], "task:bg-child"],
            "bg-child": ["B", "pending", ["bg-main"], ["bg_child"], "Future"],
        },
    }
    tmp = TRUTH + ".tmp"
    with open(tmp, "w") as f:
        json.dump(truth, f)
    os.rename(tmp, TRUTH)
    spin()


async def bg_child():
    await asyncio.sleep(3600)


async def bg_main():
    asyncio.current_task().set_name("bg-main")
    t = asyncio.create_task(bg_child(), name="bg-child")
    await asyncio.sleep(0)
    bg_ready.set()
    await t


def bg_thread():
    bg_tid.append(threading.get_native_id())
    asyncio.run(bg_main())


async def main():
    asyncio.current_task()  # Task-1: the first task of the process, named automatically
    q = asyncio.Queue()
    asyncio.create_task(consumer(q), name="consumer-1")
    asyncio.create_task(consumer(q), name="consumer-2")
    asyncio.create_task(grouped(), name="grouper")
    asyncio.create_task(spinner(), name="spinner")
    threading.Thread(target=bg_thread, daemon=True).start()
    await asyncio.gather(asyncio.create_task(child(1), name="ch-1"),
                         asyncio.create_task(child(2), name="ch-2"))


asyncio.run(main())
