#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/ from real interpreters' data: the line
tables and debug offsets captured in tests/data, this machine's /proc files, the version
strings and file names of the installed interpreters, code and a small ELF object built
here. Run from anywhere; rewrites only the seed-* files (regression inputs, crash-*, stay).
usage: make_seeds.py [--cc CC]
"""
import glob
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(HERE), "data")
CORPUS = os.path.join(HERE, "corpus")


def put(target, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def clear(target):
    for p in glob.glob(os.path.join(CORPUS, target, "seed-*")):
        os.unlink(p)


def linetables():
    clear("pystate_linetable")
    for path in sorted(glob.glob(os.path.join(DATA, "linetable_*.txt"))):
        style = first = None
        n = 0
        with open(path) as f:
            for line in f:
                w = line.split()
                if not w:
                    continue
                if w[0] == "style":
                    style = int(w[1])
                elif w[0] == "code":
                    first = int(w[2])
                elif w[0] == "table" and n < 12:
                    tab = bytes.fromhex(w[1]) if len(w) > 1 and w[1] != "-" else b""
                    put("pystate_linetable", bytes([style]) + struct.pack("<i", first) + tab)
                    n += 1


def debug_offsets():
    clear("pystate_debugoffsets")
    for p in glob.glob(os.path.join(DATA, "debug_offsets_*.bin")):
        with open(p, "rb") as f:
            put("pystate_debugoffsets", f.read())


def pystr():
    clear("pystate_pystr")
    # style, state word, kind, ascii, length, out size, characters
    cases = [(0, 0xE4, 1, 1, 5, 64, b"hello"), (1, 0x64, 1, 0, 3, 64, "\xe9t\xe9".encode("latin-1")),
             (0, 0x28, 2, 0, 2, 64, "\u4e2d\u6587".encode("utf-16-le")),
             (1, 0x30, 4, 0, 2, 3, "\U0001f600x".encode("utf-32-le"))]
    for st, word, kind, ascii, length, out, chars in cases:
        put("pystate_pystr", struct.pack("<BIBBQH", st, word, kind, ascii, length, out) + chars)


def proc_files():
    clear("elfsym_maps")
    clear("proc_task")
    clear("common_status")
    p = subprocess.Popen([sys.executable, "-c", "import threading,time; time.sleep(5)"])
    try:
        time.sleep(0.3)
        with open("/proc/%d/maps" % p.pid, "rb") as f:
            maps = f.read()
        put("elfsym_maps", maps[:4000])
        put("elfsym_maps", b"7f0000000000-7f0000001000 r-xp 00000000 fd:01 1234 /usr/lib/x (deleted)\n"
            b"7f0000001000-7f0000002000 rw-s 00001000 00:00 0 [heap]\n")
        for i, name in enumerate(("stat", "syscall", "schedstat")):
            with open("/proc/%d/task/%d/%s" % (p.pid, p.pid, name), "rb") as f:
                put("proc_task", bytes([i]) + f.read())
        put("proc_task", b"\x01running\n")
        put("proc_task", b"\x00123 (a) b) c) S 1 2 3\n")
        with open("/proc/%d/status" % p.pid, "rb") as f:
            status = f.read()
            put("common_status", status)
            put("proc_task", b"\x03" + status)
        put("proc_task", b"\x03NSpid:\t31337\t120\t1\n")
        with open("/proc/%d/cgroup" % p.pid, "rb") as f:
            put("proc_task", b"\x04" + f.read())
        put("proc_task", b"\x04" + b"4:memory:/docker/" + b"ab" * 32 + b"\n0::/\n")
    finally:
        p.kill()
        p.wait()


def versions():
    clear("elfsym_pyversion")
    for s in (b"3.11.2 (main, Mar 13 2023, 12:18:29) [GCC 12.2.0]", b"3.13.0rc1+", b"2.7.18",
              b"3.15.0a1", b"libpython3.6m.so.1.0", b"/usr/lib/x86_64-linux-gnu/libpython3.11.so",
              b"python3.12", b"python2.7d", b"/usr/bin/python3.14-dbg"):
        put("elfsym_pyversion", s)


def code_and_elf(cc):
    clear("elfsym_disasm")
    clear("elfsym_elfobj")
    clear("elfsym_debugfile")
    clear("report_source")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "o.c")
        with open(src, "w") as f:
            f.write("int g_counter; const char *g_name = \"x\";\n"
                    "int f(int x) { g_counter += x; return g_counter; }\n"
                    "const char *name(void) { return g_name; }\n")
        so = os.path.join(d, "o.so")
        subprocess.check_call([cc, "-O1", "-fPIC", "-shared", "-nostdlib", "-Wl,--build-id",
                               "-o", so, src])
        subprocess.check_call(["strip", "--only-keep-debug", "-o", so + ".debug", so])
        subprocess.check_call(["objcopy", "--add-gnu-debuglink=" + so + ".debug", so])
        with open(so, "rb") as f:
            elf = f.read()
        put("elfsym_elfobj", elf)
        exe = os.path.join(d, "e")
        subprocess.check_call([cc, "-O1", "-fno-pie", "-no-pie", "-static", "-nostdlib",
                               "-Wl,-e,f", "-o", exe, src])
        with open(exe, "rb") as f:
            put("elfsym_elfobj", f.read())
        dis = subprocess.check_output(["objdump", "-d", "--section=.text", so]).decode()
        code = bytes.fromhex("".join(re.findall(r"^\s+[0-9a-f]+:\t((?:[0-9a-f]{2} )+)", dis,
                                                re.M)).replace(" ", ""))
        for flags in (0x77, 0xf7, 0x01, 0x0a):
            put("elfsym_disasm", struct.pack("<QB", 0x1000, flags) + code)
        put("elfsym_disasm", struct.pack("<QB", 0x401000, 0x74) +
            bytes.fromhex("48c7c0401f4000" "488b0500100000" "0f05" "c3"))
    put("elfsym_debugfile", b"/proc/1/root/usr/lib/libpython3.11.so.1.0\x00libpython3.11.so.debug"
        b"\x00\x12\x34\x56\x78")
    put("elfsym_debugfile", b"/usr/bin/python3.11\x00python3.11.debug\x00")
    with open(os.path.join(os.path.dirname(os.path.dirname(HERE)), "demo", "demo.py"), "rb") as f:
        put("report_source", f.read()[:3000])
    put("report_source", b"a\r\nb\n\n\x00c\nlast")


def unwind():
    """Registers and stacks for fuzz_unwind_copied: top-bit words become code addresses."""
    clear("unwind_copied")
    put("unwind_copied", struct.pack("<IIB", 0x1234, 16, 0x80) +
        b"".join(struct.pack("<Q", (1 << 63) | (0x1000 * i)) for i in range(16)))
    put("unwind_copied", struct.pack("<IIB", 0x40, 0, 0x01) + struct.pack("<Q", 0) * 8)


def image():
    """fuzz_pystate_image: one empty image per version (the fuzzer builds the objects), read
    as a sampler does and (selector bit 7) as a dump does."""
    clear("pystate_image")
    for v in range(8):
        for careful in (0, 0x80):
            put("pystate_image", struct.pack("<BHI", v | careful, 0x40, 4) + bytes(512))


def repr_images():
    """fuzz_pystate_repr: per version and type name, an object at 0x40 whose ob_type (offset
    8) leads to a type at 0x100 whose tp_name (offset 24) is that name at 0x200; the rest
    zero (the fuzzer builds values, items and code objects)."""
    clear("pystate_repr")
    img = 0x100000
    for v in range(10):
        for i, name in enumerate([b"int", b"str", b"tuple", b"list", b"float", b"bytes", b"code"]):
            b = bytearray(1024)
            struct.pack_into("<Q", b, 0x40 + 8, img + 0x100)
            struct.pack_into("<Q", b, 0x100 + 24, img + 0x200)
            b[0x200:0x200 + len(name)] = name
            put("pystate_repr", struct.pack("<BHH", v + 10 * i, 0x40, 0x40) + bytes(b))
        # a dict and a set (and a frozenset) holding themselves (a cycle the depth bound
        # cuts), with a deleted entry or slot: dict keys <= 3.10 {dk_size 8, dk_nentries 32,
        # dk_indices 40}, 3.11+ {dk_log2_size 8, dk_log2_index_bytes 9, dk_kind 10 (general),
        # dk_nentries 24, dk_indices 32}, 8 index bytes, then 24-byte {hash, key, value}
        # entries; a set {used 24, mask 32, table 40} of 16-byte {key, hash} slots
        for i, name in enumerate([b"dict", b"set", b"frozenset"]):
            b = bytearray(1024)
            struct.pack_into("<Q", b, 0x40 + 8, img + 0x100)
            struct.pack_into("<Q", b, 0x100 + 24, img + 0x200)
            b[0x200:0x200 + len(name)] = name
            me = img + 0x40
            if name == b"dict":
                struct.pack_into("<qQQ", b, 0x40 + 16, 2, 0, img + 0x300)
                if v < 5:
                    struct.pack_into("<q", b, 0x308, 8)
                    struct.pack_into("<q", b, 0x320, 3)
                    entries = 0x300 + 40 + 8
                else:
                    b[0x308:0x30b] = bytes([3, 3, 0])
                    struct.pack_into("<q", b, 0x318, 3)
                    entries = 0x300 + 32 + 8
                struct.pack_into("<QQQQQQQQQ", b, entries, 1, me, me, 2, 0, 0, 3, me, me)
            else:
                struct.pack_into("<qqQ", b, 0x40 + 24, 2, 7, img + 0x300)
                struct.pack_into("<QQQQQQ", b, 0x300, me, 1, 0, 0, me, 3)
            put("pystate_repr", struct.pack("<BHH", v + 10 * (7 + i), 0x40, 0x40) + bytes(b))


def ring_records(n, base_time):
    """N records as the shim writes them for lap 0 (common/scry_ring.h): ALLOC, FREE and COPY events with
    a few Python frames (code addresses of a 3.12 heap), one truncated, one native."""
    out = b""
    for i in range(n):
        kind = 1 + i % 3
        nframes = [3, 1, 0, 32][i % 4]
        code = [0x7f3a1c000000 + 0x1000 * (i + k) for k in range(nframes)] + [0] * (32 - nframes)
        instr = [2 * (k + 1) * (i + 3) for k in range(nframes)] + [0] * (32 - nframes)
        size = 64 << (i % 8)
        out += struct.pack("<QQQQQQiBBBBQ", i + 1, i, 0x55d0a0000000 + 0x40 * i if kind != 3
                           else 0x7ffd0000 + i, size, max(size, 131072), base_time + 1000 * i,
                           4242 + i % 2, kind, i % 2, nframes, 1 if nframes == 32 else 0, 0)
        out += struct.pack("<32Q", *code) + struct.pack("<32i", *instr)
    return out


def ringconsumer():
    """fuzz_shim_ringconsumer: flags, shape, a header as scry makes it, committed records."""
    clear("shim_ringconsumer")
    layout = struct.pack("<4i11q5q", 3, 12, 2, 0, 72, -1, -1, -1, -1, 0, 8, 56, 70, -1, 200,
                         0, 0, 0, 0, 0)
    for flags, shape, nrec, head in ((0x06, 0x05, 8, 8), (0x02, 0x00, 4, 0), (0x00, 0xfe, 32, 0),
                                     (0x16, 0x41, 8, 3), (0x0e, 0x03, 32, 32)):
        hdr = struct.pack("<QIIIIQQQQiI", 0x474E495259524353, 1, 4096, 448, 0, nrec,
                          4096 + nrec * 448, 131072, 1048576, 4242, 0) + layout
        hdr = hdr.ljust(256, b"\0") + struct.pack("<QIIQ", 123456789, 1, 0, 0)
        hdr = hdr.ljust(320, b"\0") + struct.pack("<iI", 4242, 0x01f).ljust(192, b"\0")
        hdr = hdr.ljust(512, b"\0") + struct.pack("<Q", head)
        put("shim_ringconsumer", bytes([flags, shape]) + hdr + ring_records(8, 10 ** 12))


def asyncio_blocks():
    """fuzz_pystate_asyncio: the real _AsyncioDebug blocks of Debian's 3.14.10 and 3.15.2
    (interpreter sizes as the fuzz target's 3.13 layout would need them replaced) with an
    empty image; the fuzzer builds the lists, tasks and coroutines."""
    clear("pystate_asyncio")
    blocks = [(168, 136, 96, 108, 109, 128, 152, 225864, 10880, 936, 864, 872, 880),
              (168, 136, 96, 108, 109, 128, 152, 226240, 10856, 1104, 1024, 1032, 1048)]
    for v, b in enumerate(blocks):
        put("pystate_asyncio", bytes([v]) + struct.pack("<13Q", *b) + bytes(range(8)) +
            bytes(1024))
    # A small consistent image for the 3.13 layout the target reads with (offsets from
    # pystate/layouts_gen.c): a runtime, an interpreter with an empty list, a thread whose
    # list holds two tasks (a str name, an int name; awaited_by one task and a set), types,
    # a coroutine in 'await'. gsel picks gen_iframe 16, frame state at 100, stackpointer at
    # frame + 64, set used/mask/table at 16/32/40, list next at 0.
    base = 0x100000
    img = bytearray(0x10000)

    def q(off, val):
        img[off:off + 8] = struct.pack("<Q", val)

    q(632, base + 0x1000)                       # runtime -> interpreters.head
    q(0x1000 + 7344, base + 0x8000)             # interp -> threads.head
    q(0x1000 + 10880, base + 0x1000 + 10880)    # interp task list: empty (points to itself)
    q(0x8000 + 160, 4242)                       # native thread id
    q(0x8000 + 304, base + 0x9000)              # running loop
    q(0x8000 + 312, base + 0xA000)              # running task (record --async labels)
    q(0x8000 + 320, base + 0xA000 + 152)        # thread task list -> task 1
    for name, at in ((b"Task", 0xC000), (b"Future", 0xC200), (b"coroutine", 0xC400),
                     (b"str", 0xC600), (b"int", 0xC800), (b"Loop", 0xCA00)):
        q(at + 24, base + at + 0x100)
        img[at + 0x100:at + 0x100 + len(name)] = name
    q(0x9000 + 8, base + 0xCA00)
    for task, nxt, aby, is_set, name, coro in (
            (0xA000, 0xA800 + 152, 0xA800, 0, 0xF000, 0xE000),
            (0xA800, 0x8000 + 320, 0xB000, 1, 0xF100, 0)):
        q(task + 8, base + 0xC000)
        q(task + 16, base + 0x9000)
        q(task + 96, base + aby)
        img[task + 108] = 1
        img[task + 109] = is_set
        q(task + 120, base + 0xD000)
        q(task + 128, base + coro if coro else 0)
        q(task + 136, base + name)
        q(task + 152, base + nxt)
    q(0xB000 + 16, 1)
    q(0xB000 + 32, 3)
    q(0xB000 + 40, base + 0xB100)
    q(0xB100, base + 0xA000)
    q(0xD000 + 8, base + 0xC200)
    q(0xE000 + 8, base + 0xC400)
    img[0xE000 + 100] = 0xff                    # 3.14: FRAME_SUSPENDED_YIELD_FROM
    q(0xE000 + 16, base + 0xF800)               # code object (not a valid one)
    q(0xE000 + 16 + 64, base + 0xE000 + 0x80 + 8)
    q(0xE000 + 0x80, base + 0xE000)             # awaits itself: the depth bound
    q(0xF000 + 8, base + 0xC600)
    q(0xF000 + 16, 5)
    img[0xF000 + 32] = 0x64                     # compact ASCII, kind 1
    img[0xF000 + 40:0xF000 + 45] = b"hello"
    q(0xF100 + 8, base + 0xC800)
    q(0xF100 + 16, 1 << 3)
    img[0xF100 + 24] = 7
    put("pystate_asyncio", bytes([0]) + bytes(104) + bytes([10, 2, 100, 8, 2, 5, 4, 0]) +
        bytes(img))


def elf_note(name, ntype, desc):
    """One ELF note: header, name and descriptor, each padded to 4 bytes."""
    nm = name + b"\0"
    pad = lambda b: b + b"\0" * (-len(b) % 4)  # noqa: E731
    return struct.pack("<III", len(nm), len(desc), ntype) + pad(nm) + pad(desc)


def core_image(signo, two_threads, with_files):
    """A small x86-64 ELF core as the kernel writes one: PRSTATUS per thread (the first holds
    SIGNO), PRPSINFO, SIGINFO, AUXV, FILE (an object mapped at 0x400000 whose first page, with
    its build-id note, is dumped) and two PT_LOAD segments (that page, and a stack page)."""
    regs = lambda ip, sp: struct.pack("<27Q", *([0] * 16 + [ip, 0x33, 0x246, sp] + [0] * 7))  # noqa: E731

    def prstatus(tid, sig, ip, sp):
        return (struct.pack("<iii", sig, 0, 0) + struct.pack("<h", sig) + b"\0" * 2 +
                struct.pack("<QQiiii", 0, 0, tid, 1, tid, tid) + b"\0" * 64 + regs(ip, sp) +
                struct.pack("<i", 1) + b"\0" * 4)
    notes = elf_note(b"CORE", 1, prstatus(100, signo, 0x400ff0, 0x7ffff000))
    notes += elf_note(b"CORE", 3, b"R" + b"\0" * 23 + struct.pack("<iiii", 100, 1, 100, 100) +
                      b"python3\0".ljust(16, b"\0") + b"python3 x.py".ljust(80, b"\0"))
    notes += elf_note(b"CORE", 0x53494749, struct.pack("<iiiiQ", signo, 0, 1, 0, 0x10).ljust(128, b"\0"))
    notes += elf_note(b"CORE", 6, struct.pack("<6Q", 9, 0x400100, 3, 0x400040, 0, 0))
    if with_files:
        path = b"/usr/bin/python3\0"
        notes += elf_note(b"CORE", 0x46494c45, struct.pack("<5Q", 1, 4096, 0x400000, 0x402000, 0) + path)
    if two_threads:
        notes += elf_note(b"CORE", 1, prstatus(101, 0, 0x400f00, 0x7ffff800))
    # the dumped first page of the mapped object: an ELF header, one PT_LOAD, one PT_NOTE
    bid = elf_note(b"GNU", 3, bytes(range(20)))
    obj = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01", 2, 62, 1, 0x400100, 64, 0, 0,
                      64, 56, 2, 64, 0, 0)
    obj += struct.pack("<IIQQQQQQ", 1, 5, 0, 0x400000, 0x400000, 0x2000, 0x2000, 4096)
    obj += struct.pack("<IIQQQQQQ", 4, 4, 176, 0x4000b0, 0x4000b0, len(bid), len(bid), 4)
    obj = (obj + bid).ljust(4096, b"\0")
    stack = bytes(range(256)) * 16
    nph = 3
    phoff = 64
    data_off = phoff + nph * 56
    notes_off = data_off
    load1 = notes_off + len(notes)
    load1 += -load1 % 8
    load2 = load1 + len(obj)
    eh = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01", 4, 62, 1, 0, phoff, 0, 0, 64,
                     56, nph, 64, 0, 0)
    ph = struct.pack("<IIQQQQQQ", 4, 4, notes_off, 0, 0, len(notes), 0, 1)
    ph += struct.pack("<IIQQQQQQ", 1, 5, load1, 0x400000, 0, len(obj), 0x2000, 4096)
    ph += struct.pack("<IIQQQQQQ", 1, 6, load2, 0x7ffff000, 0, len(stack), len(stack), 4096)
    img = eh + ph + notes
    img += b"\0" * (load1 - len(img))
    return img + obj + stack


def cores():
    """fuzz_core_parse: small cores of every shape the parser handles."""
    clear("core_parse")
    for signo, two, files in ((11, True, True), (0, False, True), (6, True, False)):
        put("core_parse", core_image(signo, two, files))


if __name__ == "__main__":
    import time
    cc = sys.argv[sys.argv.index("--cc") + 1] if "--cc" in sys.argv else "cc"
    linetables()
    debug_offsets()
    pystr()
    proc_files()
    versions()
    code_and_elf(cc)
    unwind()
    image()
    repr_images()
    ringconsumer()
    asyncio_blocks()
    cores()
