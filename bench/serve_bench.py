#!/usr/bin/env python3
"""What scry serve costs (docs/performance.md, "The daemon").

  idle    N idle Python services (default 200; Debian's python3.11 and pyenv versions, each
          waking once a second): the daemon's own CPU (utime+stime from /proc) over a
          measured period after a warm-up, as a share of one core
  busy    20 busy services (a CPU-bound loop) at the default 19 Hz: the daemon's CPU share
          and its CPU per sample (samples from `scry ctl list`)
  pool    20 thread-pool services (tests/func/serve/workloads/pool.py: a busy main thread and
          16 workers that mostly wait) at 19 Hz: the same figures, with 17 threads a target
  busyscaled  the same 20 busy services, with the daemon's rate raised by 20 / CPUs (190 Hz
          on 2 CPUs), so that it takes as many samples a second as at 19 Hz with each
          service on a core of its own (380/s): what 20 busy services cost on a host big
          enough to run them all, on a machine that is not
  busyfull  as many busy services as there are CPUs, each on a core of its own, at the
          rate of busyscaled (190 Hz on 2 CPUs): the same 380 samples a second, but every
          tick of every target finds a record, as with 20 services on 20 cores at 19 Hz
          (busyscaled's services get a tenth of a CPU each, so nine of ten of its ticks
          find none; it has 20 targets' thread listings, this one 2)
  mixed   --idle idle services (default 200) and 20 busy ones at 19 Hz together (issue 29's
          case): the daemon's CPU share, its RSS, and the kernel memory of its BPF maps and
          programs (the `memlock` of each in /proc/PID/fdinfo; 0 without the bpf back end)
  record  `scry record --pid` of one busy service at 19 Hz for the same duration: CPU per
          sample of the one-shot front end, side by side
  churn   services that start and exit all the time (one every 0.4 s, each living 2 s),
          for --churn-minutes: the daemon's RSS over time
  forkburst  --idle idle services, then --bursts bursts of --burst-size concurrent forks of
          a matched Python process (each child sleeps 2 s and exits; the daemon opens each
          as a target): the daemon's idle RSS fresh and after each burst (issue 24: it
          ratcheted, 52 MB fresh to 320 MB after one burst of 450)

Run as root: python3 bench/serve_bench.py --scry build/daemon/scry [--quick] [--sampler ptrace]
             [--churn-minutes 10] [--bursts 10 --burst-size 450]
             [only: idle busy pool busyscaled busyfull mixed record churn forkburst]
--sampler: the daemon's back end (its `sampler` option: perf, ptrace, bpf; default: perf where
allowed); several, comma-separated (`--sampler perf,bpf`), run each case once with each, one
after the other (interleaved: a change of the host's load hits both alike).
Markdown on stdout, progress on stderr.
"""
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
import scrytest as st  # noqa: E402
import benchlib  # noqa: E402  (bench/, this script's directory)

SVC = os.path.join(HERE, "..", "tests", "func", "serve", "workloads", "svc.py")
POOL = os.path.join(HERE, "..", "tests", "func", "serve", "workloads", "pool.py")
TOKEN = "scrybench%d" % os.getpid()
CLK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print(*a, file=sys.stderr)
    sys.stderr.flush()


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def bpf_kernel_kb(pid):
    """The kernel memory of PID's BPF maps and programs (each one's memlock in fdinfo), kB."""
    total, fds = 0, "/proc/%d/fd" % pid
    for fd in os.listdir(fds):
        try:
            if not os.readlink(os.path.join(fds, fd)).startswith("anon_inode:bpf-"):
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                for line in f:
                    if line.startswith("memlock:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total // 1024


class Bench(object):
    def __init__(self, scry, sampler=None):
        self.scry = scry
        self.set_sampler(sampler)
        self.tmp = tempfile.mkdtemp(prefix="scry-serve-bench-")
        os.chmod(self.tmp, 0o755)
        self.procs = []
        self.interps = []
        for label in ("debian3.11", "3.12", "3.11", "3.10", "3.13", "3.9", "3.8"):
            try:
                self.interps.append(st.find(label))
            except st.Skip:
                pass

    def set_sampler(self, sampler):
        self.sampler = ["--sampler", sampler] if sampler else []

    def spawn(self, args, **kw):
        p = subprocess.Popen([str(a) for a in args], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def service(self, i, mode, extra=(), script=SVC):
        it = self.interps[i % len(self.interps)]
        return self.spawn(it.argv(script, "--mode", mode, "--name", "%s-%d" % (TOKEN, i), *extra))

    def daemon(self, *args):
        sock = os.path.join(self.tmp, "scry-%d.sock" % len(self.procs))
        out = os.path.join(self.tmp, "out")
        p = subprocess.Popen([self.scry, "serve", "--config", "/dev/null", "--out-dir", out,
                              "--socket", sock, "--match", TOKEN] + self.sampler +
                             [str(a) for a in args],
                             stdout=subprocess.DEVNULL, stderr=open(os.path.join(
                                 self.tmp, "serve.log"), "ab"), start_new_session=True)
        self.procs.append(p)
        p.sock = sock
        return p

    def ctl_list(self, d):
        r = subprocess.run([self.scry, "ctl", "--socket", d.sock, "--json", "list"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        return json.loads(r.stdout.decode() or "{}")

    def wait_targets(self, d, n, timeout=120):
        deadline = st.Deadline(timeout)
        while not deadline.expired():
            try:
                got = len(self.ctl_list(d).get("targets", []))
            except (ValueError, subprocess.SubprocessError):
                got = 0
            if got >= n:
                return got
            time.sleep(1)
        raise RuntimeError("only %d of %d targets after %d s" % (got, n, timeout))

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.procs = []

    def cleanup(self):
        self.stop_all()
        shutil.rmtree(self.tmp, ignore_errors=True)


def measure(pid, seconds):
    c0, t0 = cpu_s(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_s(pid) - c0) / (time.monotonic() - t0)


def bench_idle(b, n, seconds):
    log("idle: starting %d idle services" % n)
    for i in range(n):
        b.service(i, "idle", ("--idle-sleep", "1"))
    time.sleep(3)
    d = b.daemon()
    got = b.wait_targets(d, n)
    time.sleep(5)
    share = measure(d.pid, seconds)
    rss = rss_kb(d.pid)
    b.stop_all()
    return "| %d idle services (%s)%s | %.3f%% of a core, RSS %.1f MB | %d s measured after the " \
           "%d targets were found; aim < 0.5%% |" % (n, "/".join(it.label for it in b.interps),
                                                   " (%s)" % " ".join(b.sampler) if b.sampler
                                                   else "", 100 * share, rss / 1024.0, seconds,
                                                   got)


def bench_mixed(b, n_idle, n_busy, seconds):
    log("mixed: %d idle and %d busy services at 19 Hz" % (n_idle, n_busy))
    for i in range(n_idle):
        b.service(i, "idle", ("--idle-sleep", "1"))
    for i in range(n_idle, n_idle + n_busy):
        b.service(i, "busy")
    time.sleep(3)
    t0 = time.monotonic()
    d = b.daemon()
    got = b.wait_targets(d, n_idle + n_busy)
    found = time.monotonic() - t0
    time.sleep(5)
    s0 = sum(t["samples"] for t in b.ctl_list(d)["targets"])
    c0, t0 = cpu_s(d.pid), time.monotonic()
    time.sleep(seconds)
    c1, t1 = cpu_s(d.pid), time.monotonic()
    lst = b.ctl_list(d)["targets"]
    s1 = sum(t["samples"] for t in lst)
    used = sorted(set(t.get("sampler", "?") for t in lst))
    rss, kern = rss_kb(d.pid), bpf_kernel_kb(d.pid)
    b.stop_all()
    share = (c1 - c0) / (t1 - t0)
    return "| %d idle + %d busy services at 19 Hz (%s) | %.3f%% of a core, RSS %.1f MB, BPF " \
           "maps and programs %.1f MB | %.0f samples/s, %.0f us of CPU per sample; %d targets " \
           "found in %.0f s; back end of the targets: %s |" % (
               n_idle, n_busy, " ".join(b.sampler) or "default", 100 * share, rss / 1024.0,
               kern / 1024.0, (s1 - s0) / (t1 - t0), (c1 - c0) / max(1, s1 - s0) * 1e6, got,
               found, "/".join(used))


def bench_busy(b, n, seconds, rate=19, mode="busy"):
    log("%s: %d services at %g Hz" % (mode, n, rate))
    for i in range(n):
        b.service(i, mode, script=POOL if mode == "pool" else SVC)
    time.sleep(2)
    d = b.daemon("--rate", rate)
    b.wait_targets(d, n)
    time.sleep(3)
    s0 = sum(t["samples"] for t in b.ctl_list(d)["targets"])
    c0, t0 = cpu_s(d.pid), time.monotonic()
    time.sleep(seconds)
    c1, t1 = cpu_s(d.pid), time.monotonic()
    s1 = sum(t["samples"] for t in b.ctl_list(d)["targets"])
    b.stop_all()
    share = (c1 - c0) / (t1 - t0)
    per = (c1 - c0) / max(1, s1 - s0) * 1e6
    return share, per, (s1 - s0) / (t1 - t0), \
        "| %d %s services at %g Hz%s | %.3f%% of a core | %.0f samples/s, %.0f us of CPU per " \
        "sample (the whole daemon: checks, windows, files); aim < 1%% |" % (
            n, "thread-pool" if mode == "pool" else "busy", rate,
            " (%s)" % " ".join(b.sampler) if b.sampler else "", 100 * share,
            (s1 - s0) / (t1 - t0), per)


def bench_record(b, seconds):
    log("record: scry record --pid at 19 Hz")
    p = b.service(0, "busy")
    time.sleep(2)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([str(x) for x in [b.scry, "record", "--pid", p.pid, "--rate", 19, "--duration", seconds,
                        "-f", "collapsed", "-o", os.path.join(b.tmp, "rec.txt")]],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=seconds + 60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    b.stop_all()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    m = re.search(r"(\d+) samples", r.stderr.decode())
    n = int(m.group(1)) if m else 0
    return cpu / max(n, 1) * 1e6, "| `scry record --pid` of one busy service at 19 Hz | %.0f us " \
        "of CPU per sample (%d samples in %d s, start-up included) |" % (
            cpu / max(n, 1) * 1e6, n, seconds)


def bench_churn(b, minutes):
    log("churn: %g minutes" % minutes)
    d = b.daemon("--interval", 10)
    t0 = time.monotonic()
    rss, k, last = [], 0, 0
    kids = []
    while time.monotonic() - t0 < minutes * 60:
        kids.append(b.service(k, "busy" if k % 3 == 0 else "idle", ("--exit-after", "2")))
        k += 1
        time.sleep(0.4)
        kids = [p for p in kids if p.poll() is None]
        b.procs = [p for p in b.procs if p.poll() is None or p is d]
        if time.monotonic() - last >= 10:
            last = time.monotonic()
            rss.append((last - t0, rss_kb(d.pid)))
    b.stop_all()
    warm = [r for t, r in rss if t >= 60] or [r for _, r in rss]
    return "| churn: %d services started and exited in %g min | daemon RSS %d kB after 1 min, " \
           "%d kB at the end, max %d kB |" % (k, minutes, warm[0], warm[-1], max(warm))


BURSTER = os.path.join(HERE, "..", "tests", "func", "serve", "workloads", "burster.py")


def settle_rss(d, seconds):
    """The daemon's RSS once it has been idle for a while (windows flushed, trimmed)."""
    time.sleep(seconds)
    return rss_kb(d.pid)


def bench_forkburst(b, n_idle, bursts, size):
    log("forkburst: %d idle services, %d bursts of %d forks" % (n_idle, bursts, size))
    for i in range(n_idle):
        b.service(i, "idle", ("--idle-sleep", "1"))
    time.sleep(3)
    d = b.daemon()  # the default 60-s interval: a burst's memory must not wait for a flush
    b.wait_targets(d, n_idle)
    fresh = settle_rss(d, 10)
    it = b.interps[0]
    after = []
    for k in range(bursts):
        p = b.spawn(it.argv(BURSTER, size, "--name", TOKEN))
        p.wait(120)
        after.append(settle_rss(d, 10))
        log("  burst %d: RSS %d kB (fresh %d kB)" % (k + 1, after[-1], fresh))
    b.stop_all()
    return "| %d idle services, then %d bursts of %d concurrent short-lived forks | idle RSS " \
           "fresh %.1f MB, after the bursts %s MB (last/fresh %.2f); aim <= 1.3 |" % (
               n_idle, bursts, size, fresh / 1024.0,
               ", ".join("%.0f" % (r / 1024.0) for r in after), after[-1] / float(fresh))


def main():
    ap = benchlib.parser(__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sampler", help="perf, ptrace, bpf, or several comma-separated")
    ap.add_argument("--idle", type=int, default=200)
    ap.add_argument("--churn-minutes", type=float, default=10)
    ap.add_argument("--bursts", type=int, default=10)
    ap.add_argument("--burst-size", type=int, default=450)
    ap.add_argument("only", nargs="*")
    a = ap.parse_args()
    which = a.only or ["idle", "busy", "pool", "busyscaled", "busyfull", "record", "churn"]
    secs = 20 if a.quick else 60
    samplers = a.sampler.split(",") if a.sampler else [None]
    for sm in samplers:
        if sm not in (None, "perf", "ptrace", "bpf"):
            ap.error("--sampler: perf, ptrace or bpf, not %r" % sm)
    b = Bench(os.path.abspath(a.scry))
    rows = []

    def each(fn):
        for sm in samplers:  # interleaved: each case with every back end in turn
            b.set_sampler(sm)
            rows.append(fn())
        b.set_sampler(None)

    try:
        if "idle" in which:
            each(lambda: bench_idle(b, a.idle, secs))
        if "busy" in which:
            each(lambda: bench_busy(b, 20, secs)[3])
        if "pool" in which:
            each(lambda: bench_busy(b, 20, secs, mode="pool")[3])
        if "mixed" in which:
            each(lambda: bench_mixed(b, a.idle, 20, secs))
        if "busyscaled" in which:
            rate = round(19.0 * 20 / (os.cpu_count() or 1))
            each(lambda: bench_busy(b, 20, secs, rate)[3][:-2] +
                 "; scaled: %g Hz = 19 Hz x 20 services / %d CPUs |" % (rate, os.cpu_count() or 1))
        if "busyfull" in which:
            cpus = os.cpu_count() or 1
            rate = round(19.0 * 20 / cpus)

            def busyfull():
                share, per, got, _ = bench_busy(b, cpus, secs, rate)
                return "| %d busy services, a core each, at %g Hz%s | %.3f%% of a core | %.0f " \
                    "samples/s, %.0f us of CPU per sample: the samples of 20 services on 20 " \
                    "cores at 19 Hz, each tick with a record; aim < 1%% |" % (
                        cpus, rate, " (%s)" % " ".join(b.sampler) if b.sampler else "",
                        100 * share, got, per)
            each(busyfull)
        if "record" in which:
            rows.append(bench_record(b, secs)[1])
        if "churn" in which:
            rows.append(bench_churn(b, 1 if a.quick else a.churn_minutes))
        if "forkburst" in which:
            rows.append(bench_forkburst(b, a.idle, a.bursts, a.burst_size))
    finally:
        b.cleanup()
    print("| what | result | notes |")
    print("|---|---|---|")
    for r in rows:
        print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
