"""Programs of several processes whose CPU time per process is known, for --subprocesses.

usage: family_workload.py MODE OUT [ARGS...]

Every process that burns CPU does it in burn() and writes its own truth, the CPU time it
burnt there (time.process_time()), to OUT.<pid>.json when done; the parent writes OUT (a
list of the workers' pids) when every worker is done, and OUT.ready as soon as its workers
run (for attach mode).

pool SECONDS   a multiprocessing pool (fork) of 3 workers; worker k (k = 1..3) burns k units
               of SECONDS/6 CPU seconds each, so the workers' shares are 1:2:3
prefork N      a parent forks N workers (os.fork, as gunicorn does); worker k burns 0.4*k s
late DELAY     the parent idles DELAY s, then starts a child through subprocess (fork+exec
               of this script) that burns 1.0 s at once; the parent burns nothing
burn SECONDS   one process burns SECONDS (the child of 'late', or run through a shell)
hold SECONDS   pool of 3 workers that burn 1:2:3 for SECONDS of wall time (attach mode)
mixed          a parent with a shell child (sleep), a Python child (sleeping), and a
               multiprocessing child that returns at once and is never joined (a zombie);
               writes OUT.ready with the pids, then idles 8 s (the facts py-spy's
               dump_subprocesses_non_python.py and subprocesses_zombie_child.py check)
mem DELAY      pool of 3 workers (fork); worker k idles DELAY s (for the shim to be put in),
               then keeps k * 32 MiB allocated in keep<k>() (256 KiB bytearrays) and writes
               {"pid", "k", "bytes", "line"} to OUT.<pid>.json
"""
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads"))
import _wl  # noqa: E402  (_wl.py: beside this script in a root)


def burn(seconds):
    t0 = time.process_time()
    end, x = t0 + seconds, 0
    while time.process_time() < end:
        for i in range(2000):  # BURN_LINE
            x = (x * 31 + i) % 1000003
    return time.process_time() - t0


def burn_wall(seconds, weight):
    """Burns WEIGHT/3 of each 30 ms for SECONDS of wall time: shares by weight."""
    t0 = time.process_time()
    end = time.time() + seconds
    while time.time() < end:
        burn(0.01 * weight)
        time.sleep(0.01 * (3 - weight) + 0.001)
    return time.process_time() - t0


def pool_task(args):
    out, k, seconds, wall = args
    spent = burn_wall(seconds, k) if wall else burn(seconds)
    _wl.write_json("%s.%d.json" % (out, os.getpid()), {"pid": os.getpid(), "k": k, "cpu_s": spent})
    return os.getpid()


def keep1(n):
    return [bytearray(262144) for _ in range(n)]  # KEEP1


def keep2(n):
    return [bytearray(262144) for _ in range(n)]  # KEEP2


def keep3(n):
    return [bytearray(262144) for _ in range(n)]  # KEEP3


def mem_task(args):
    out, k, delay = args
    time.sleep(delay)
    n = k * 128  # k * 32 MiB
    kept = (keep1, keep2, keep3)[k - 1](n)
    _wl.write_json("%s.%d.json" % (out, os.getpid()),
          {"pid": os.getpid(), "k": k, "bytes": n * 262144, "cpu_s": 0})
    time.sleep(0.5)
    return len(kept)


def run_mem(out, delay):
    ctx = mp.get_context("fork")
    with ctx.Pool(3) as p:
        res = p.map_async(mem_task, [(out, k, delay) for k in (1, 2, 3)], chunksize=1)
        _wl.write_json(out + ".ready", {"pid": os.getpid()})
        res.get(timeout=120)
    _wl.write_json(out, {"parent": os.getpid()})


def nothing():
    pass


def run_mixed(out):
    shell = subprocess.Popen(["sh", "-c", "sleep 60"])
    # the Python child ends with its parent (a test stops the parent with SIGTERM)
    child = subprocess.Popen([sys.executable, "-c", "import os, time\nparent = os.getppid()\n"
                              "while os.getppid() == parent: time.sleep(0.2)"])
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    zombie = mp.get_context("fork").Process(target=nothing)
    zombie.start()
    while zombie.exitcode is None and not os.path.exists("/proc/%d/status" % zombie.pid):
        time.sleep(0.01)
    time.sleep(0.5)  # the zombie has exited by now; nobody reaps it
    _wl.write_json(out + ".ready", {"pid": os.getpid(), "shell": shell.pid, "python": child.pid,
                           "zombie": zombie.pid})
    try:
        time.sleep(8)
    finally:
        for p in (shell, child):
            p.kill()
            p.wait()


def run_pool(out, seconds, wall):
    ctx = mp.get_context("fork")
    with ctx.Pool(3) as p:
        # one task per worker: each worker k runs exactly one task
        tasks = [(out, k, seconds if wall else seconds / 6 * k, wall) for k in (1, 2, 3)]
        res = p.map_async(pool_task, tasks, chunksize=1)
        _wl.write_json(out + ".ready", {"pid": os.getpid()})
        pids = res.get(timeout=120)
    _wl.write_json(out, {"parent": os.getpid(), "workers": pids})


def run_prefork(out, n):
    kids = []
    for k in range(1, n + 1):
        pid = os.fork()
        if pid == 0:
            spent = burn(0.4 * k)
            _wl.write_json("%s.%d.json" % (out, os.getpid()), {"pid": os.getpid(), "k": k, "cpu_s": spent})
            os._exit(0)
        kids.append(pid)
    _wl.write_json(out + ".ready", {"pid": os.getpid()})
    for pid in kids:
        os.waitpid(pid, 0)
    _wl.write_json(out, {"parent": os.getpid(), "workers": kids})


def run_late(out, delay):
    time.sleep(delay)
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "burn", out, "1.0"])
    child.wait()
    _wl.write_json(out, {"parent": os.getpid(), "workers": [child.pid], "started": started})


def main():
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "pool":
        run_pool(out, float(sys.argv[3]), False)
    elif mode == "hold":
        run_pool(out, float(sys.argv[3]), True)
    elif mode == "prefork":
        run_prefork(out, int(sys.argv[3]))
    elif mode == "late":
        run_late(out, float(sys.argv[3]))
    elif mode == "mixed":
        run_mixed(out)
    elif mode == "mem":
        run_mem(out, float(sys.argv[3]))
    elif mode == "burn":
        spent = burn(float(sys.argv[3]))
        _wl.write_json("%s.%d.json" % (out, os.getpid()), {"pid": os.getpid(), "k": 1, "cpu_s": spent})
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
