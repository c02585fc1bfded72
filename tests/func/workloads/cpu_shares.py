"""Known CPU shares: func_a, func_b and func_c burn 50/30/20 of the CPU in rounds.

Each round of ROUND = 47.3 ms gives func_a 50%, func_b 30% and func_c 20% of it in
*process CPU time* (time.process_time; the workload has a single thread), and the
workload measures what each function really got (its own truth, written to --out at
exit or on SIGTERM). The round is deliberately not a multiple of a 10 ms sampling tick,
so that a regular sampler cannot lock onto the same phase of every round (with 50 ms
rounds a 100 Hz sampler sees quantised 2/1/1 or 3/1/1 ticks per round instead of the
true shares). The burn loop is inline in each function, so each one is the leaf of its
own samples.

Both the CPU time (process_time) and the wall time (perf_counter) of every call are
summed: on a loaded machine the two differ (the workload waits for a CPU while runnable),
and a sampler that counts runnable samples measures wall shares while one that weighs
samples by the CPU time used measures CPU shares. The per-round log (with
time.monotonic() stamps) lets the runner compute both truths over exactly the window
that scry recorded.
"""
import time

import _wl

ROUND = 0.0473


def func_a(quota):
    clock = time.process_time
    w0 = time.perf_counter()
    t0 = clock()
    end = t0 + quota
    x = 0
    while True:
        for i in range(200):
            x += i
        t = clock()
        if t >= end:
            return t - t0, time.perf_counter() - w0


def func_b(quota):
    clock = time.process_time
    w0 = time.perf_counter()
    t0 = clock()
    end = t0 + quota
    x = 0
    while True:
        for i in range(200):
            x += i
        t = clock()
        if t >= end:
            return t - t0, time.perf_counter() - w0


def func_c(quota):
    clock = time.process_time
    w0 = time.perf_counter()
    t0 = clock()
    end = t0 + quota
    x = 0
    while True:
        for i in range(200):
            x += i
        t = clock()
        if t >= end:
            return t - t0, time.perf_counter() - w0


def main():
    args = _wl.parse()
    _wl.catch_sigterm()
    funcs = (("func_a", func_a, 0.5), ("func_b", func_b, 0.3), ("func_c", func_c, 0.2))
    spent = dict((name, 0.0) for name, _, _ in funcs)
    wall = dict((name, 0.0) for name, _, _ in funcs)
    rounds = 0
    deadline = time.time() + args.seconds if args.seconds > 0 else None
    cpu0 = time.process_time()
    log = []  # per round: [time.monotonic() at its end, cpu a, b, c, wall a, b, c]
    while not _wl.Stop.flag:
        row = [0.0] * 7
        for i, (name, fn, share) in enumerate(funcs):
            cpu, w = fn(share * ROUND)
            spent[name] += cpu
            wall[name] += w
            row[1 + i] = cpu
            row[4 + i] = w
        row[0] = time.monotonic()
        log.append(row)
        rounds += 1
        if rounds == 2:
            truth = _wl.base_truth()
            truth["file"] = func_a.__code__.co_filename
            _wl.write_json(args.ready, truth)
        if deadline is not None and time.time() >= deadline:
            break
    total = sum(spent.values())
    wall_total = sum(wall.values())
    out = _wl.base_truth()
    out.update(
        {
            "file": func_a.__code__.co_filename,
            "rounds": rounds,
            "cpu_s": spent,
            "wall_s": wall,
            "shares_pct": dict((k, 100.0 * v / total) for k, v in spent.items()),
            "wall_shares_pct": dict((k, 100.0 * v / wall_total) for k, v in wall.items()),
            "process_cpu_s": time.process_time() - cpu0,
            "functions": [name for name, _, _ in funcs],
            "rounds_log": log,
        }
    )
    _wl.write_json(args.out, out)


main()
