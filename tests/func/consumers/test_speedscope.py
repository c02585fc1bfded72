#!/usr/bin/env python3
"""scry's speedscope output checked against speedscope's published file-format schema.

The schema (https://www.speedscope.app/file-format-schema.json, FileFormat.File) is
encoded below as data and checked with a small validator written for the parts of JSON
Schema it uses (type, required, enum, const, properties, items, oneOf by 'type'). It
records a real workload with the built scry twice (CPU, and with --memory so the bytes
profiles are there too) and validates both files; it also checks what the schema cannot
say: frame indices in range, samples and weights of equal length, weights summing to the
profile's span.

usage: test_speedscope.py SCRY [PYTHON]
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import scrytest as st  # noqa: E402
WORKLOAD = os.path.join(HERE, "shares_workload.py")

UNITS = ["none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"]
NUMBER = {"type": "number"}
FRAME = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string"}, "file": {"type": "string"},
                   "line": NUMBER, "col": NUMBER},
}


def profile_schema(kind, arrays):
    """A profile of KIND: the fields every profile has, and ARRAYS ({name: item schema})."""
    props = {"type": {"const": kind}, "name": {"type": "string"}, "unit": {"enum": UNITS},
             "startValue": NUMBER, "endValue": NUMBER}
    props.update((k, {"type": "array", "items": v}) for k, v in arrays.items())
    return {"type": "object", "required": ["type", "name", "unit", "startValue", "endValue"]
            + sorted(arrays), "properties": props}


SAMPLED = profile_schema("sampled", {"samples": {"type": "array", "items": NUMBER},
                                     "weights": NUMBER})
EVENTED = profile_schema("evented", {"events": {
    "type": "object", "required": ["type", "at", "frame"],
    "properties": {"type": {"enum": ["O", "C"]}, "at": NUMBER, "frame": NUMBER}}})

FILE = {
    "type": "object",
    "required": ["$schema", "shared", "profiles"],
    "properties": {
        "$schema": {"const": "https://www.speedscope.app/file-format-schema.json"},
        "shared": {"type": "object", "required": ["frames"],
                   "properties": {"frames": {"type": "array", "items": FRAME}}},
        "profiles": {"type": "array", "items": {"oneOf": [SAMPLED, EVENTED]}},
        "name": {"type": "string"},
        "activeProfileIndex": NUMBER,
        "exporter": {"type": "string"},
    },
}

TYPES = {"object": dict, "array": list, "string": str}


def validate(value, schema, path, errors):
    if "oneOf" in schema:
        matches = []
        for alt in schema["oneOf"]:
            sub = []
            validate(value, alt, path, sub)
            if not sub:
                matches.append(alt)
        if len(matches) != 1:
            errors.append("%s: matches %d of the oneOf alternatives" % (path, len(matches)))
        return
    t = schema.get("type")
    if t == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errors.append("%s: not a number" % path)
            return
    elif t and not isinstance(value, TYPES[t]):
        errors.append("%s: not %s" % (path, t))
        return
    if "const" in schema and value != schema["const"]:
        errors.append("%s: %r is not %r" % (path, value, schema["const"]))
    if "enum" in schema and value not in schema["enum"]:
        errors.append("%s: %r not in %r" % (path, value, schema["enum"]))
    for key in schema.get("required", []):
        if key not in value:
            errors.append("%s: missing %s" % (path, key))
    for key, sub in schema.get("properties", {}).items():
        if isinstance(value, dict) and key in value:
            validate(value[key], sub, path + "." + key, errors)
    if "items" in schema and isinstance(value, list):
        for i, item in enumerate(value):
            validate(item, schema["items"], "%s[%d]" % (path, i), errors)
            if len(errors) > 20:
                return


# Allocates and copies enough for memory samples, calling hot_a too.
MEM_WORKLOAD = ("import sys; sys.path.insert(0, %r); import shares_workload as w\n"
                "keep = []\n"
                "for i in range(64):\n"
                "    keep.append(bytearray(1 << 20)); w.hot_a(20000)\n"
                "    b = bytes(keep[-1])\n")


def record(c, out, extra):
    staged = c.stage(WORKLOAD)  # the target's path (inside a rooted interpreter's root)
    prog = [staged, "2"] if not extra else ["-c", MEM_WORKLOAD % os.path.dirname(staged)]
    cmd = ["record", "-q", "-f", "speedscope", "-o", out, "-r", "200"] + extra + ["--"]
    r = c.scry(cmd + c.interp.argv(*prog), timeout=120)
    return r.rc, r.err


def check_file(check, path, what, want_bytes):
    with open(path) as f:
        doc = json.load(f)
    errors = []
    validate(doc, FILE, "$", errors)
    check(not errors, "%s: valid against the speedscope schema %s" % (what, errors[:5]))
    frames = doc["shared"]["frames"]
    units = set()
    for prof in doc["profiles"]:
        units.add(prof["unit"])
        if prof["type"] != "sampled":
            continue
        ok_idx = all(0 <= i < len(frames) for s in prof["samples"] for i in s)
        check(ok_idx, "%s: %s: frame indices in range" % (what, prof["name"]))
        check(len(prof["samples"]) == len(prof["weights"]),
              "%s: %s: one weight per sample" % (what, prof["name"]))
        span = prof["endValue"] - prof["startValue"]
        check(abs(sum(prof["weights"]) - span) <= max(1.0, 1e-6 * span),
              "%s: %s: weights add up to the span" % (what, prof["name"]))
    names = [f["name"] for f in frames]
    check(any("hot_a" in n for n in names), "%s: the workload's hot function is a frame" % what)
    if want_bytes:
        check("bytes" in units, "%s: memory profiles in bytes (units %s)" % (what, sorted(units)))


def run(c):
    check = c.expect
    out = c.path("cpu.speedscope.json")
    rc, err = record(c, out, [])
    check(rc == 0, "record (cpu) exits 0 %s" % err.strip()[-200:])
    if rc == 0:
        check_file(check, out, "cpu", False)
    out = c.path("mem.speedscope.json")
    rc, err = record(c, out, ["--memory"])
    check(rc == 0, "record (memory) exits 0 %s" % err.strip()[-200:])
    if rc == 0:
        check_file(check, out, "memory", True)
    return "cpu and --memory profiles valid against the schema"


def main():
    scry, python, _ = st.positional(__doc__)
    tests = st.Tests()
    tests.add("speedscope", run)
    return st.run_on(tests.select(), scry, python, "speedscope", "scry-consumers")


if __name__ == "__main__":
    sys.exit(main())
