#!/usr/bin/env python3
"""debug_offsets_capture.py - capture the real bytes of _Py_DebugOffsets from a live CPython.

Starts PYTHON (default: pyenv's 3.13.0), finds the _PyRuntime symbol in the ELF object
that defines it (libpython or the executable) with `readelf`, locates that object's load
bias in /proc/PID/maps, reads the leading _Py_DebugOffsets of _PyRuntime from
/proc/PID/mem, stops the child, and writes:

    OUT.bin   the raw bytes (exactly the struct's size for the version: 584 for 3.13,
              760 for 3.14)
    OUT.txt   what was captured, from where (for humans)

Used to make tests/data/debug_offsets_*.bin for tests/unit/test_pystate_debug_offsets.c:

    python3 tests/data/debug_offsets_capture.py \\
        /root/.pyenv/versions/3.13.0/bin/python3.13 tests/data/debug_offsets_3_13_0
    python3 tests/data/debug_offsets_capture.py --root /var/cache/scry-tests/sid-root \\
        /usr/bin/python3.15d tests/data/debug_offsets_3_15_2d

With --root ROOT the interpreter runs under chroot ROOT (its files are read through
/proc/PID/root).

Standard library only; needs readelf (binutils) and permission to read the child's memory
(root, or ptrace_scope 0).
"""

import os
import re
import struct
import subprocess
import sys

# Bytes of _Py_DebugOffsets per minor version (all members are char[8]/uint64_t).
STRUCT_SIZE = {13: 584, 14: 760, 15: 888}


def elf_symbol(path, name):
    """Returns st_value of NAME in PATH (symtab or dynsym), or None."""
    out = subprocess.run(["readelf", "-sW", path], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, universal_newlines=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[7] == name and f[3] == "OBJECT":
            return int(f[1], 16)
    return None


def first_load_vaddr(path):
    out = subprocess.run(["readelf", "-lW", path], stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            return int(f[2], 16) & ~0xFFF
    raise SystemExit("no PT_LOAD in " + path)


def mapped_objects(pid):
    """Returns {path: lowest start of a mapping at file offset 0}."""
    objs = {}
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            f6 = line.split(None, 5)
            if len(f6) < 6 or not f6[5].startswith("/"):
                continue
            start = int(f6[0].split("-")[0], 16)
            offset = int(f6[2], 16)
            path = f6[5].strip()
            if offset == 0 and (path not in objs or start < objs[path]):
                objs[path] = start
    return objs


def main():
    args = sys.argv[1:]
    prefix = []
    if args[:1] == ["--root"]:
        prefix = ["chroot", args[1]]
        args = args[2:]
    python = args[0] if args else "/root/.pyenv/versions/3.13.0/bin/python3.13"
    out = args[1] if len(args) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "debug_offsets_3_13_0")
    child = subprocess.Popen(
        prefix + [python, "-c", "import sys, time; print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, universal_newlines=True)
    try:
        if child.stdout.readline().strip() != "ready":
            raise SystemExit("child did not start")
        addr = None
        for path, start in sorted(mapped_objects(child.pid).items()):
            if not re.search(r"(libpython3\.\d+|python3(\.\d+)?)[^/]*$", path):
                continue
            host = "/proc/%d/root%s" % (child.pid, path)
            if not os.path.exists(host):  # chroot: maps name the file as the host sees it
                host = path
            value = elf_symbol(host, "_PyRuntime")
            if value is None:
                continue
            bias = start - first_load_vaddr(host)
            addr, obj = bias + value, path
            break
        if addr is None:
            raise SystemExit("_PyRuntime not found in any mapped object of " + python)
        with open("/proc/%d/mem" % child.pid, "rb") as mem:
            mem.seek(addr)
            head = mem.read(24)
            cookie, version, free_threaded = struct.unpack("<8sQQ", head)
            if cookie != b"xdebugpy":
                raise SystemExit("no xdebugpy cookie at 0x%x (got %r)" % (addr, cookie))
            minor = (version >> 16) & 0xFF
            if minor not in STRUCT_SIZE:
                raise SystemExit("unknown _Py_DebugOffsets layout for 3.%d" % minor)
            mem.seek(addr)
            data = mem.read(STRUCT_SIZE[minor])
    finally:
        child.kill()
        child.wait()
    with open(out + ".bin", "wb") as f:
        f.write(data)
    with open(out + ".txt", "w") as f:
        f.write("_Py_DebugOffsets captured by tests/data/debug_offsets_capture.py\n")
        f.write("python: %s%s\nobject: %s\n" % (" ".join(prefix + [""]), python, obj))
        f.write("_PyRuntime: 0x%x (ASLR; informational)\n" % addr)
        f.write("version: 0x%08x free_threaded: %d bytes: %d\n" % (version, free_threaded,
                                                                 len(data)))
    print("wrote %s.bin (%d bytes, version 0x%08x)" % (out, len(data), version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
