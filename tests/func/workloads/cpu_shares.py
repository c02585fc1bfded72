"""Known CPU shares: func_a, func_b and func_c burn 50/30/20 of the CPU in rounds.

Each round of ROUND = 47.3 ms gives func_a 50%, func_b 30% and func_c 20% of it in
*process CPU time* (time.process_time; the workload has a single thread), and the
workload measures what each function really got (its own truth, written to --out at
exit or on SIGTERM). The round is deliberately not a multiple of a 10 ms sampling tick,
so that a regular sampler cannot lock onto the same phase of every round (with 50 ms
rounds a 100 Hz sampler sees quantised 2/1/1 or 3/1/1 ticks per round instead of the
true shares). The burn loop is inline in each function, so each one is the leaf of its
own samples.
"""
import time

import _wl

ROUND = 0.0473


def func_a(quota):
    clock = time.process_time
    t0 = clock()
    end = t0 + quota
    x = 0
    while True:
        for i in range(200):
            x += i
        t = clock()
        if t >= end:
            return t - t0


def func_b(quota):
    clock = time.process_time
    t0 = clock()
    end = t0 + quota
    x = 0
    while True:
        for i in range(200):
            x += i
        t = clock()
        if t >= end:
            return t - t0


def func_c(quota):
    clock = time.process_time
    t0 = clock()
    end = t0 + quota
    x = 0
    while True:
        for i in range(200):
            x += i
        t = clock()
        if t >= end:
            return t - t0


def main():
    args = _wl.parse()
    _wl.catch_sigterm()
    spent = {"func_a": 0.0, "func_b": 0.0, "func_c": 0.0}
    rounds = 0
    deadline = time.time() + args.seconds if args.seconds > 0 else None
    cpu0 = time.process_time()
    while not _wl.Stop.flag:
        spent["func_a"] += func_a(0.5 * ROUND)
        spent["func_b"] += func_b(0.3 * ROUND)
        spent["func_c"] += func_c(0.2 * ROUND)
        rounds += 1
        if rounds == 2:
            truth = _wl.base_truth()
            truth["file"] = func_a.__code__.co_filename
            _wl.write_json(args.ready, truth)
        if deadline is not None and time.time() >= deadline:
            break
    total = sum(spent.values())
    out = _wl.base_truth()
    out.update(
        {
            "file": func_a.__code__.co_filename,
            "rounds": rounds,
            "cpu_s": spent,
            "shares_pct": dict((k, 100.0 * v / total) for k, v in spent.items()),
            "process_cpu_s": time.process_time() - cpu0,
        }
    )
    _wl.write_json(args.out, out)


main()
