#!/usr/bin/env python3
"""scry dump --async: asyncio tasks and their await graph, read from outside (issue 13).

usage: run_async.py --scry PATH [-k PATTERN] [-v]

Known answers by construction: tasks.py builds two event loops (the main thread's and a
second thread's) with named tasks awaiting each other through gather, a TaskGroup, a queue
and a plain 'await task', plus one running task; it writes the graph it built and the
threads' native ids. Each graph.<version> test (3.14, 3.15 from the Debian sid root) runs
'scry dump --async --json' and the text form and asserts every task (name, loop, thread,
state, the tasks awaiting it, its own coroutine chain innermost first, what it awaits) and
nothing more. record.<version> (3.14, 3.15): handlers.py burns 3:2:1 in three gathered
handler tasks; the task root frames of record --async carry its measured CPU shares.
refused.<version> (3.12, 3.13) checks the clear refusal of versions without
the asyncio debug offsets; noasync.3.14 a process that never imported asyncio; options the
refusal of option combinations that are not implemented. The target must survive every run.
Stdlib only; prints "PASS|FAIL|SKIP name: detail" lines and "N passed, N failed, N skipped".
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import scrytest as st  # noqa: E402
from scrytest import Fail, check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
tests = st.Tests()
ARGS = None


def ctx(name, label):
    interp = st.interp.find(label)  # Skip when missing
    return st.Ctx(name, interp=interp, scry=ARGS.scry, verbose=ARGS.v, prefix="scry-async")


def start(c, script):
    path = c.stage(os.path.join(HERE, script))
    truth_host = c.path("truth.json")
    p, truth = c.start_target([path, c.tpath(truth_host)], truth_host, script)
    return p, truth, path


def dump_json(c, pid):
    r = c.scry_ok(["dump", "--async", "--json", "--pid", str(pid)])
    try:
        return json.loads(r.out)
    except ValueError as e:
        raise Fail("dump --async --json is not JSON (%s): %s" % (e, st.short(r.out, 300)))


def check_graph(doc, truth, script):
    check(doc.get("asyncio") is True, "asyncio not found: %s" % st.short(json.dumps(doc), 300))
    loops = doc["loops"]
    want_tid = {"A": truth["main_tid"], "B": truth["bg_tid"]}
    check(len(loops) == 2, "%d event loops, want 2: %s" % (
        len(loops), [(lp["type"], lp["thread"], len(lp["tasks"])) for lp in loops]))
    by_name, addr_name = {}, {}
    for lp in loops:
        for t in lp["tasks"]:
            check(t["name"] not in by_name, "task %s listed twice" % t["name"])
            by_name[t["name"]] = (lp, t)
            addr_name[t["address"]] = t["name"]
    want = truth["tasks"]
    check(sorted(by_name) == sorted(want), "tasks %s, want %s" % (sorted(by_name), sorted(want)))
    loop_of = {}
    for name, (loop, state, awaiters, chain, awaits) in sorted(want.items()):
        lp, t = by_name[name]
        loop_of.setdefault(loop, lp["address"])
        check(lp["address"] == loop_of[loop], "%s is in loop %s, want the loop of its peers %s"
              % (name, lp["address"], loop_of[loop]))
        check(lp["thread"] == want_tid[loop], "%s's loop runs in thread %s, want %s"
              % (name, lp["thread"], want_tid[loop]))
        check(t["thread"] == want_tid[loop], "%s was listed by thread %s, want %s"
              % (name, t["thread"], want_tid[loop]))
        check(t["state"] == state, "%s is %s, want %s" % (name, t["state"], state))
        got_by = sorted(addr_name.get(a, a) for a in t["awaited_by"])
        check(got_by == sorted(awaiters), "%s awaited by %s, want %s" % (name, got_by, awaiters))
        own = [f["function"] for f in t["stack"] if f["file"] == script]
        check(own == chain, "%s's own coroutines %s, want %s (stack %s)" % (
            name, own, chain, [(f["function"], f["line"]) for f in t["stack"]]))
        check(all(f["line"] > 0 for f in t["stack"]), "%s has a frame without a line: %s"
              % (name, t["stack"]))
        check(not t["truncated"], "%s truncated" % name)
        aw = t["awaits"]
        if awaits is None:
            check(aw is None, "%s awaits %s, want nothing" % (name, aw))
        elif awaits.startswith("task:"):
            check(aw is not None and aw["task"] == awaits[5:], "%s awaits %s, want task %s"
                  % (name, aw, awaits[5:]))
        else:
            check(aw is not None and aw["type"] == awaits and aw["task"] is None,
                  "%s awaits %s, want a %s" % (name, aw, awaits))
    check(doc["dropped"] == 0, "%d tasks dropped" % doc["dropped"])
    return len(by_name)


def check_text(out, truth):
    for tid, n in ((truth["main_tid"], 9), (truth["bg_tid"], 2)):
        check(re.search(r"^Event loop 0x[0-9a-f]+ \(\w+\), running in thread %d: %d tasks$"
                        % (tid, n), out, re.M), "no loop line for thread %d with %d tasks:\n%s"
              % (tid, n, st.short(out, 1500)))
    indent = {}
    for line in out.splitlines():
        m = re.match(r"^( *)\(T\) (\S+) \[", line)
        if m:
            indent[m.group(2)] = len(m.group(1))
    for child, parent in (("ch-1", "Task-1"), ("tg-w2", "grouper"), ("bg-child", "bg-main")):
        check(indent.get(child, 0) == indent.get(parent, -9) + 4,
              "%s is not drawn under %s: %s" % (child, parent, indent))


def graph(label):
    def run(c):
        p, truth, script = start(c, "tasks.py")
        n = 0
        for _ in range(2):  # twice: the target goes on unharmed and the answer is the same
            n = check_graph(dump_json(c, p.pid), truth, script)
        check_text(c.scry_ok(["dump", "--async", "--pid", str(p.pid)]).out, truth)
        c.check_alive()
        return "%d tasks in 2 loops, graph, states, chains and awaits as built" % n
    return run


for _label in ("3.14", "3.15", "3.14d", "3.15d"):
    tests.add("graph.%s" % _label, graph(_label), label=_label)


def refused(label):
    def run(c):
        p, truth, script = start(c, "tasks.py")
        r = c.scry(["dump", "--async", "--pid", str(p.pid)])
        check(r.rc == 1, "exit %d, want 1: %s" % (r.rc, r.err))
        check("3.14" in r.err and "%d.%d" % tuple(c.version[:2]) in r.err and r.out == "",
              "the refusal does not say what is needed and what runs: %s" % r.err)
        c.check_alive()
        return "refused: %s" % st.short(r.err.strip(), 160)
    return run


for _label in ("3.12", "3.13"):
    tests.add("refused.%s" % _label, refused(_label), label=_label)


def record(label):
    def run(c):
        p, truth0, script = start(c, "handlers.py")
        before = st.load_json(c.path("truth.json"), "truth")
        res, text = c.record(["-q", "--async", "-r", "400", "-d", "4", "--pid", str(p.pid)],
                             "collapsed")
        # the workload rewrites its truth every 0.5 s: take the next one
        t_end = st.Deadline(3)
        after = before
        while not t_end.expired() and after == before:
            after = st.load_json(c.path("truth.json"), "truth")
        names = sorted(before["cpu"])
        spent = dict((k, after["cpu"][k] - before["cpu"][k]) for k in names)
        truth = st.shares(spent, names)
        got, n, other = {}, 0, 0
        for frames, count in st.parse_collapsed(text):
            roots = [f for f in frames if f.startswith("task ")]
            # root first: the gathering chain, then the running task
            if roots[:2] == ["task Task-1", "task front"] and len(roots) == 3:
                got[roots[2][5:]] = got.get(roots[2][5:], 0) + count
                n += count
            elif roots:
                check(roots[-1] in ("task reporter",) or roots == ["task Task-1"] or
                      roots == ["task Task-1", "task front"],
                      "unexpected task chain %s" % roots)
                other += count
        check(n >= 300, "only %d samples under the handlers (%d elsewhere)" % (n, other))
        detail = st.compare_shares(st.shares(got, names), truth, n,
                                   "handler shares under task Task-1;task front", 8.0)
        c.check_alive()
        return detail
    return run


for _label in ("3.14", "3.15"):
    tests.add("record.%s" % _label, record(_label), label=_label)


def record_refused(c):
    p, truth, script = start(c, "tasks.py")
    r = c.scry(["record", "--async", "-d", "1", "-o", c.path("x.txt"), "--pid", str(p.pid)])
    check(r.rc == 1 and "3.14" in r.err and "3.13" in r.err and not os.path.exists(c.path("x.txt")),
          "record --async on 3.13: exit %d: %s" % (r.rc, r.err))
    c.check_alive()
    return "refused: %s" % st.short(r.err.strip(), 120)


tests.add("record_refused.3.13", record_refused, label="3.13")


def t_noasync(c):
    p, truth, script = start(c, "noasync.py")
    doc = dump_json(c, p.pid)
    check(doc["asyncio"] is False and doc["loops"] == [], "want no asyncio: %s" % doc)
    r = c.scry_ok(["dump", "--async", "--pid", str(p.pid)])
    check("has not loaded the _asyncio module" in r.out, "text: %s" % r.out)
    c.check_alive()
    return "no _asyncio loaded: said so, exit 0"


tests.add("noasync.3.14", t_noasync, label="3.14")


def t_options(c):
    for args, what in ((["dump", "--async", "--native", "--pid", "1"], "--native"),
                       (["dump", "--async", "--blocking", "--pid", "1"], "--blocking"),
                       (["top", "--async", "--pid", "1"], "async")):
        r = c.scry(args)
        check(r.rc != 0 and what in r.err and "Traceback" not in r.err,
              "%s: exit %d: %s" % (" ".join(args), r.rc, r.err))
    return "--native/--blocking with dump --async and top --async refused"


tests.add("options", t_options, label=None)


def main():
    global ARGS
    ap = st.add_common_args(st.runner.parser(__doc__))
    ARGS = ap.parse_args()
    ARGS.scry = os.path.abspath(ARGS.scry)
    sel = tests.select(ARGS.k)

    def make(t):
        label = t.meta.get("label")
        if label is None:
            return st.Ctx(t.name, scry=ARGS.scry, verbose=ARGS.v, prefix="scry-async")
        return ctx(t.name, label)
    return st.run(sel, make, "async", verbose=ARGS.v)


if __name__ == "__main__":
    sys.exit(main())
