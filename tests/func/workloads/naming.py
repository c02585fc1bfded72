"""Frames of every kind of code object, each parked (sleeping) in its own thread.

kinds: a generator, an asyncio coroutine chain, a lambda, a nested function inside a
method, a method, exec'd code ('<string>' file) and a function with a non-ASCII name in
a file with a non-ASCII name. The truth written to --ready gives, per kind, the thread's
kernel tid, the file and the line where the leaf frame sleeps, and the parent's line.
"""
import asyncio
import importlib.util
import os
import threading
import time

import _wl

_TIDS = {}
_LOCK = threading.Lock()


def _register(kind):
    with _LOCK:
        _TIDS[kind] = _wl.native_tid()


def gen_sleeper():
    time.sleep(1000)  #@GEN@
    yield 1


def consume_gen():
    _register("generator")
    for _ in gen_sleeper():  #@GEN_PARENT@
        pass


async def coro_inner():
    time.sleep(1000)  #@CORO@


async def coro_outer():
    await coro_inner()  #@CORO_PARENT@


def run_coro():
    _register("coroutine")
    loop = asyncio.new_event_loop()
    loop.run_until_complete(coro_outer())


_SLEEPER = lambda: time.sleep(1000)  #@LAMBDA@


def run_lambda():
    _register("lambda")
    _SLEEPER()  #@LAMBDA_PARENT@


class Outer(object):
    def inner(self):
        def f():
            time.sleep(1000)  #@NESTED@

        f()  #@NESTED_PARENT@


def run_nested():
    _register("nested")
    Outer().inner()


class K(object):
    def meth(self):
        time.sleep(1000)  #@METHOD@


def run_method():
    _register("method")
    K().meth()  #@METHOD_PARENT@


EXEC_SRC = "def ex_func():\n    time.sleep(1000)\n\nex_func()\n"


def run_exec():
    _register("exec")
    exec(compile(EXEC_SRC, "<string>", "exec"), {"time": time})  #@EXEC_PARENT@


def run_unicode(mod):
    _register("unicode")
    mod.関数()  #@UNICODE_PARENT@


def main():
    args = _wl.parse()
    here = os.path.dirname(os.path.abspath(__file__))
    upath = os.path.join(here, "ünïcödé_模块.py")
    spec = importlib.util.spec_from_file_location("unicode_mod", upath)
    umod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(umod)
    f = run_coro.__code__.co_filename
    uf = umod.関数.__code__.co_filename

    def m(name):
        return _wl.marker_line(f, name)

    expect = {
        "generator": (f, m("GEN"), f, m("GEN_PARENT")),
        "coroutine": (f, m("CORO"), f, m("CORO_PARENT")),
        "lambda": (f, m("LAMBDA"), f, m("LAMBDA_PARENT")),
        "nested": (f, m("NESTED"), f, m("NESTED_PARENT")),
        "method": (f, m("METHOD"), f, m("METHOD_PARENT")),
        "exec": ("<string>", 2, "<string>", 4),
        "unicode": (uf, _wl.marker_line(uf, "UNICODE"), f, m("UNICODE_PARENT")),
    }
    targets = [
        (consume_gen, ()),
        (run_coro, ()),
        (run_lambda, ()),
        (run_nested, ()),
        (run_method, ()),
        (run_exec, ()),
        (run_unicode, (umod,)),
    ]
    for fn, a in targets:
        t = threading.Thread(target=fn, args=a)
        t.daemon = True
        t.start()
    deadline = time.time() + 60
    while len(_TIDS) < len(targets):
        if time.time() > deadline:
            raise SystemExit("threads did not start")
        time.sleep(0.01)
    time.sleep(0.2)  # let every thread reach its sleep
    truth = _wl.base_truth()
    kinds = {}
    for kind, (leaf_file, leaf_line, parent_file, parent_line) in expect.items():
        kinds[kind] = {
            "tid": _TIDS[kind],
            "file": leaf_file,
            "line": leaf_line,
            "parent_file": parent_file,
            "parent_line": parent_line,
        }
    truth.update({"file": f, "kinds": kinds})
    _wl.write_json(args.ready, truth)
    while True:
        time.sleep(1000)


main()
