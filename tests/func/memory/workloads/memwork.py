"""Workloads for scry's memory tests through the command line (run_memory.py) and for
bench/memory_bench.py. Each measures its own truth and writes it as JSON (--truth).

usage: python memwork.py CASE [--ready FILE] [--truth FILE] [--wait-ring SECONDS]
                         [--stop FILE] [--log FILE] [--max-seconds S]

Every line whose allocations or copies a test checks ends with a comment "# MARK:name";
the truth gives each mark's line number and the function it is in, so the tests compare
scry's per-line numbers with what this line really did.

--wait-ring S: before the measured work, wait (at most S seconds) until scry's memory ring
is mapped into this process (/dev/shm/scry-* or memfd:scry-ring in /proc/self/maps: preloaded at start in
launch mode, injected in attach mode), enabled by the daemon, and the shim's PyMem hooks
are installed (header bits, see common/scry_ring.h); then warm up (64 MiB allocated and copied),
so that every thread's countdown has left the idle stride. Runs on Python 3.6+.
"""
import json
import os
import random
import re
import struct
import subprocess
import sys
import threading
import time

MB = 1 << 20
FILE = os.path.abspath(__file__)
sys.path.insert(0, os.path.join(os.path.dirname(FILE), "..", "..", "workloads"))  # _wl
from _wl import run_threads, write_json  # noqa: E402

# common/scry_ring.h: offsets in struct scry_ring_header (checked by run_memory.py's self-test)
RING_MAGIC = 0x474E495259524353
OFF_NRECORDS, OFF_FILE_SIZE, OFF_ENABLED, OFF_OWNER, OFF_STATE = 24, 32, 264, 320, 324
RING_HEADER_SIZE, RING_RECORD_SIZE = 4096, 448
STATE_ATTACHED, STATE_PY_HOOKS = 0x1, 0x8


def marks():
    """{mark: (line, function)} from the '# MARK:' comments of this file."""
    out = {}
    func = "<module>"
    with open(FILE) as f:
        for n, text in enumerate(f, 1):
            s = text.strip()
            if text.startswith("def "):
                func = text[4:].split("(")[0]
            elif not text.startswith(" ") and s and not s.startswith("#"):
                func = "<module>"
            m = re.search(r"# MARK:(\w+)\s*$", text)
            if m and not s.startswith("#"):
                out[m.group(1)] = (n, func)
    return out


def find_ring(pid="self"):
    """(path, start address) of scry's ring mapped in PID, or None: a /dev/shm/scry-* file
    (launch mode; its name is removed once the shim claimed it, so the path may end in
    ' (deleted)') or the shim's own memfd 'memfd:scry-ring' (attach mode). With several
    (an earlier session's ring not unmapped yet), an enabled one first."""
    found = []
    try:
        with open("/proc/%s/maps" % pid) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and (parts[5].startswith("/dev/shm/scry-") or
                                        parts[5].startswith("/memfd:scry-ring")):
                    found.append((parts[5], int(parts[0].split("-")[0], 16)))
    except OSError:
        pass
    for ring in found:
        h = ring_header(ring, pid)
        if h and h[3] == 1:
            return ring
    return found[0] if found else None


def ring_header(ring, pid="self"):
    """(magic, nrecords, file_size, enabled, owner_pid, shim_state) or None, read from the
    mapping itself (/proc/PID/mem), which works after the file was unlinked."""
    try:
        with open("/proc/%s/mem" % pid, "rb") as f:
            f.seek(ring[1])
            h = f.read(512)
    except (OSError, ValueError, OverflowError):
        return None
    if len(h) < 512:
        return None
    magic, = struct.unpack_from("<Q", h, 0)
    nrec, fsize = struct.unpack_from("<QQ", h, OFF_NRECORDS)
    enabled, = struct.unpack_from("<I", h, OFF_ENABLED)
    owner, state = struct.unpack_from("<iI", h, OFF_OWNER)
    return magic, nrec, fsize, enabled, owner, state


def wait_ring(limit, hooks=True):
    """Waits until scry records memory in this process (HOOKS: with the PyMem hooks in);
    returns (ring path, seconds waited, last header seen), the path None on time-out (the
    test then reports why)."""
    t0 = time.monotonic()
    h = None
    while time.monotonic() - t0 < limit:
        ring = find_ring()
        h = ring_header(ring) if ring else None
        if h and h[0] == RING_MAGIC and h[3] == 1 and h[4] == os.getpid() and (
                h[5] & STATE_PY_HOOKS or not hooks):
            return ring[0], time.monotonic() - t0, h
        time.sleep(0.005)
    return None, limit, h


def warmup():
    src = bytearray(2 * MB)
    for _ in range(32):
        b = bytes(src)  # MARK:warmup
    return len(b)


# --- known answers -----------------------------------------------------------------------


def keep_200():
    out = []
    for _ in range(20000):
        b = bytes(10000)  # MARK:keep
        out.append(b)
    return out, sum(sys.getsizeof(x) for x in out)


def churn_2g():
    n = 0
    for _ in range(512):
        b = bytes(4 * MB)  # MARK:churn
        n += sys.getsizeof(b)
        del b
    return n


def copy_2g():
    src = bytearray(4 * MB)
    n = 0
    for _ in range(512):
        out = bytes(src)  # MARK:copy
        n += len(src)
    return n


def tail_keep():
    out = []
    for _ in range(2000):
        b = bytes(10000)  # MARK:tail_keep
        out.append(b)
    return out, sum(sys.getsizeof(x) for x in out)


def np_keep_300(np):
    out = []
    for _ in range(30):
        a = np.arange(10 * MB // 8, dtype=np.float64)  # MARK:np_keep
        out.append(a)
    return out, sum(a.nbytes for a in out)


def np_copy_2g(np):
    # (np.ones is Python code in numpy: its allocation belongs to numpy's own line)
    a = np.arange(16 * MB // 8, dtype=np.float64)
    n = 0
    for _ in range(128):
        b = a.copy()  # MARK:np_copy
        n += b.nbytes
        del b
    return n


# --- robustness --------------------------------------------------------------------------


def thread_keep(out, i):
    mine = []
    for _ in range(50 * MB // 5033):
        b = bytes(5000)  # MARK:thread_keep
        mine.append(b)
    out[i] = mine


def twice_keep_1():
    out = []
    for _ in range(2000):
        b = bytes(10000)  # MARK:twice_keep_1
        out.append(b)
    return out


def twice_keep_2():
    out = []
    for _ in range(3000):
        b = bytes(10000)  # MARK:twice_keep_2
        out.append(b)
    return out


def twice_hook(event, args):
    if event == "cpython.remote_debugger_script":
        time.sleep(0.5)  # scry's PEP 768 script starts late, as on a loaded machine


def twice_idle():
    time.sleep(0.02)  # MARK:twice_idle


def twice_ring(limit, enabled, ring=None):
    """Polls until scry's ring in this process (RING, else any) is enabled (ENABLED True)
    or no longer (False), idling on the marked line in between: where the main thread takes
    scry's PEP 768 script. Returns (the ring or None on time-out, seconds waited)."""
    t0 = time.monotonic()
    watch = ring
    while time.monotonic() - t0 < limit:
        ring = watch or find_ring()
        h = ring_header(ring) if ring else None
        on = bool(h and h[0] == RING_MAGIC and h[3] == 1 and h[4] == os.getpid())
        if on == enabled:
            return ring, time.monotonic() - t0
        twice_idle()
    return None, limit


def twice(truth, ready, truth_path, limit):
    """Two --memory sessions one after the other (run_memory.py twice_attach): in each,
    once scry's ring is enabled, a warm-up and then known bytes kept on the phase's own
    line (20 and 30 MB), then the phase waits for the session's end (the interpreter's own
    shutdown is not part of a session). While waiting, the main thread idles on a marked
    line that allocates nothing, where it takes a PEP 768 request; an audit hook holds
    scry's script 0.5 s at its start (3.14+), as a loaded machine would. Nothing else
    allocates in another file during a session: the truth is written by hand."""
    sys.addaudithook(twice_hook)
    write_json(ready, truth)
    kept, waits = [], []
    for fn in (twice_keep_1, twice_keep_2):
        ring, waited = twice_ring(limit, True)
        waits.append(round(waited, 2))
        if not ring:
            break
        warmup()
        kept.append(fn())
        twice_ring(limit, False, ring)  # this session's ring: the next may start at once
    sizes = [sum(sys.getsizeof(b) for b in k) for k in kept]
    text = '{"twice_bytes": [%s], "ring_wait_s": [%s], "file": "%s", "marks": {%s}}' % (
        ", ".join("%d" % n for n in sizes), ", ".join("%.2f" % w for w in waits), FILE,
        ", ".join('"%s": [%d, "%s"]' % (k, v[0], v[1]) for k, v in truth["marks"].items()))
    with open(truth_path + ".tmp", "w") as f:
        f.write(text)
    os.rename(truth_path + ".tmp", truth_path)
    return kept


def reattach(truth, ready, truth_path, limit):
    """A pool whose threads exist before scry's first session and churn through its end,
    then keep memory in a second session (issue 11: an attached --memory session must see
    every thread, whatever that thread did before). Truth: the bytes the second phase kept."""
    go, keep_go = threading.Event(), threading.Event()
    stop = [False]
    out = [None] * 4

    def worker(i):
        go.wait(limit)
        while not stop[0]:
            b = bytes(10000)  # churned: the threads pass the first session's end
            del b
            time.sleep(0.0005)
        keep_go.wait(limit)
        mine = []
        for _ in range(2000):
            b = bytes(10000)  # MARK:reattach_keep
            mine.append(b)
        out[i] = mine

    ts = [threading.Thread(target=worker, args=(i,), name="W%d" % i) for i in range(4)]
    for t in ts:
        t.start()
    write_json(ready, truth)
    truth["ring1"], truth["ring1_wait_s"], _ = wait_ring(limit)  # the first session
    go.set()
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:  # until the first session is over
        ring = find_ring()
        h = ring_header(ring) if ring else None
        if not h or h[3] != 1:
            break
        time.sleep(0.005)
    time.sleep(0.3)  # the workers allocate after its end
    stop[0] = True
    # the second session: its malloc hooks suffice (bytes(10000) is malloc'd); whether the
    # PyMem hooks went in again is in the truth (once not within 30 s on 3.8: a follow-up)
    truth["ring"], truth["ring_wait_s"], truth["ring_header"] = wait_ring(limit, hooks=False)
    keep_go.set()
    for t in ts:
        t.join()
    truth["reattach_keep_bytes"] = sum(sys.getsizeof(b) for o in out for b in o)
    write_json(truth_path, truth)
    return out


def parent_keep():
    out = []
    for _ in range(1000):
        b = bytes(100000)  # MARK:parent_keep
        out.append(b)
    return out, sum(sys.getsizeof(x) for x in out)


def fork_child_alloc():
    out = []
    for _ in range(3000):
        b = bytes(100000)  # MARK:fork_child
        out.append(b)
    return len(out)


def subprocess_child_alloc():
    out = []
    for _ in range(3000):
        b = bytes(100000)  # MARK:subprocess_child
        out.append(b)
    return len(out)


def exit_keep():
    out = []
    for _ in range(1000):
        b = bytes(100000)  # MARK:exit_keep
        out.append(b)
    return out, sum(sys.getsizeof(x) for x in out)


def exit_midway(truth, out_path):
    write_json(out_path, truth)
    t0 = time.monotonic()
    while True:
        x = [bytes(1000) for _ in range(1000)]  # MARK:exit_loop
        if time.monotonic() - t0 > 0.5:
            os._exit(3)  # mid-recording, no interpreter teardown
        del x


def speed_work():
    x = [bytes(200) for _ in range(200)]  # MARK:speed
    y = bytes(65536)
    return len(x) + len(y)


def flood(stop_at):
    n = 0
    while time.monotonic() < stop_at:
        x = [bytes(64) for _ in range(1000)]  # MARK:flood
        n += len(x)
    return n


def scribble(path, stop_at, stats):
    """Writes random bytes over the ring's records (the area the shim fills and scry
    reads) until stop_at."""
    rnd = random.Random(12345)
    ring = find_ring()
    if not ring:
        return
    base = ring[1]  # the whole file is mapped from offset 0; written through /proc/self/mem
    with open("/proc/self/mem", "r+b", buffering=0) as f:
        f.seek(base)
        nrec = struct.unpack_from("<Q", f.read(64), OFF_NRECORDS)[0]
        nrec = max(1, min(nrec, 1 << 22))
        while time.monotonic() < stop_at:
            i = rnd.randrange(nrec)
            n = rnd.randrange(1, 8)
            off = RING_HEADER_SIZE + i * RING_RECORD_SIZE + rnd.randrange(RING_RECORD_SIZE)
            if off + n * 64 > RING_HEADER_SIZE + nrec * RING_RECORD_SIZE:
                continue
            f.seek(base + off)
            f.write(bytes(rnd.getrandbits(8) for _ in range(n * 64)))
            f.flush()
            stats["writes"] += 1
            if stats["writes"] % 50 == 0:
                time.sleep(0.001)


# --- driver ------------------------------------------------------------------------------


def opt(name, default=None):
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


def main():
    case = sys.argv[1]
    ready, truth_path = opt("--ready"), opt("--truth")
    wait_limit = float(opt("--wait-ring", "0"))
    truth = {"pid": os.getpid(), "file": FILE, "case": case, "marks": marks(),
             "python": "%d.%d.%d" % sys.version_info[:3]}
    if case == "subprocess_child":
        subprocess_child_alloc()
        return
    np = None
    if case in ("numpy", "bench_numpy"):
        import numpy as np
    if case == "reattach":
        return reattach(truth, ready, truth_path, wait_limit)
    if case == "twice":
        return twice(truth, ready, truth_path, wait_limit)
    write_json(ready, truth)
    if wait_limit > 0:
        ring, waited, header = wait_ring(wait_limit)
        truth["ring"], truth["ring_wait_s"], truth["ring_header"] = ring, waited, header
        if ring:
            warmup()
    t0, c0 = time.monotonic(), time.process_time()
    keep = []
    if case == "known":
        kept, truth["keep_bytes"] = keep_200()
        keep.append(kept)
        truth["churn_bytes"] = churn_2g()
        truth["copy_bytes"] = copy_2g()
    elif case == "tail":
        # the program's last 20 MB, allocated a few ms before the main module ends
        time.sleep(0.2)
        truth["work_s"] = time.monotonic() - t0
        truth["work_cpu_s"] = time.process_time() - c0
        write_json(truth_path, truth)
        kept, nbytes = tail_keep()
        keep.append(kept)
        truth["tail_keep_bytes"] = nbytes
        return keep
    elif case == "numpy":
        kept, truth["np_keep_bytes"] = np_keep_300(np)
        keep.append(kept)
        truth["np_copy_bytes"] = np_copy_2g(np)
    elif case == "threads":
        out = run_threads(thread_keep, 4)
        keep.append(out)
        truth["thread_keep_bytes"] = sum(sys.getsizeof(b) for o in out for b in o)
    elif case == "fork":
        kept, truth["parent_keep_bytes"] = parent_keep()
        keep.append(kept)
        pid = os.fork()
        if pid == 0:
            try:
                fork_child_alloc()
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        truth["fork_status"] = status
        env = dict(os.environ)
        truth["subprocess_rc"] = subprocess.call([sys.executable, FILE, "subprocess_child"],
                                                 env=env)
    elif case == "exit":
        kept, truth["exit_keep_bytes"] = exit_keep()
        keep.append(kept)
        exit_midway(truth, truth_path)  # never returns
    elif case == "speed":
        # rate log: one JSON line per 0.2 s window [t_end, iterations, cpu_s, wall_s]
        stop, log = opt("--stop"), opt("--log")
        deadline = t0 + float(opt("--max-seconds", "120"))
        total = iters = 0
        with open(log, "a") as f:
            while not os.path.exists(stop) and time.monotonic() < deadline:
                w0, c0, n = time.monotonic(), time.process_time(), 0
                while time.monotonic() - w0 < 0.2:
                    total += speed_work()
                    n += 1
                f.write(json.dumps([time.monotonic(), n, time.process_time() - c0,
                                    time.monotonic() - w0]) + "\n")
                f.flush()
                iters += n
        truth["iterations"], truth["total"] = iters, total
        truth["total_ok"] = total == iters * (200 + 65536)
    elif case == "flood":
        n_threads = int(opt("--threads", "4"))
        stop_at = time.monotonic() + float(opt("--seconds", "2"))

        def run(res, i):
            res[i] = flood(stop_at)

        truth["objects"] = sum(run_threads(run, n_threads))
    elif case == "hostile":
        stats = {"writes": 0}
        ring = truth.get("ring")
        stop_at = time.monotonic() + float(opt("--seconds", "2"))
        if ring:
            th = threading.Thread(target=scribble, args=(ring, stop_at, stats))
            th.start()
        n = 0
        while time.monotonic() < stop_at:
            kept, nb = parent_keep()
            n += nb
            del kept
            churn_2g()
        if ring:
            th.join()
        truth["scribbles"] = stats["writes"]
        truth["alloc_bytes"] = n
    elif case == "bench_small":
        # many small objects: dicts, tuples, strings
        t = 0
        for i in range(int(opt("--n", "3000000"))):
            d = {"a": i, "b": str(i), "c": (i, i + 1)}
            t += len(d["b"])
        truth["result"] = t
    elif case == "bench_large":
        # large buffers: allocate, fill (copy) and drop 1 MiB .. 8 MiB blocks
        src = memoryview(bytearray(8 * MB))
        t = 0
        for i in range(int(opt("--n", "400"))):
            b = bytes(src[: (1 + i % 8) * MB])
            t += len(b)
        truth["result"] = t
    elif case == "bench_numpy":
        t = 0.0
        for i in range(int(opt("--n", "200"))):
            a = np.ones(((1 + i % 4) * MB) // 8)
            b = a.copy()
            c = a + b
            t += float(c[0])
        truth["result"] = t
    else:
        raise SystemExit("unknown case %r" % case)
    truth["work_s"] = time.monotonic() - t0
    truth["work_cpu_s"] = time.process_time() - c0
    write_json(truth_path, truth)
    return keep


if __name__ == "__main__":
    KEEP = main()  # kept until the main module ends (scry stops the ring there)
