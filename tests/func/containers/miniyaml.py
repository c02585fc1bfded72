"""The YAML subset of dist/kubernetes/*.yaml, read with the stdlib only: block mappings
(`key: value`, `key:` then a deeper block), block sequences (`- scalar`, `- key: value`
starting a mapping), comments on their own lines, double-quoted or plain scalars
(true/false become booleans; everything else stays a string). Anything else (flow
collections, anchors, multi-line scalars) raises ValueError: the manifests are kept
within this subset so that a test can read what they say.
"""


def _lines(text):
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        body = raw.strip()
        if not body or body.startswith("#") or body == "---":
            continue
        if "\t" in raw[:len(raw) - len(raw.lstrip())]:
            raise ValueError("line %d: a tab in the indentation" % n)
        out.append([len(raw) - len(raw.lstrip(" ")), body, n])
    return out


def _scalar(s, n):
    if s[:1] in "[{&*|>!'":
        raise ValueError("line %d: %r is outside the YAML subset" % (n, s))
    if s.startswith('"'):
        if len(s) < 2 or not s.endswith('"'):
            raise ValueError("line %d: unterminated string" % n)
        return s[1:-1]
    return {"true": True, "false": False}.get(s, s)


def _block(ls, i, indent):
    if ls[i][1].startswith("- ") or ls[i][1] == "-":
        return _seq(ls, i, indent)
    return _map(ls, i, indent)


def _seq(ls, i, indent):
    out = []
    while i < len(ls) and ls[i][0] == indent and (ls[i][1].startswith("- ") or ls[i][1] == "-"):
        item, n = ls[i][1][1:].strip(), ls[i][2]
        if not item:
            if i + 1 >= len(ls) or ls[i + 1][0] <= indent:
                raise ValueError("line %d: empty item" % n)
            v, i = _block(ls, i + 1, ls[i + 1][0])
        elif ":" in item and not item.startswith('"'):
            ls[i] = [indent + 2, item, n]  # "- key: v": a mapping at the item's column
            v, i = _map(ls, i, indent + 2)
        else:
            v, i = _scalar(item, n), i + 1
        out.append(v)
    return out, i


def _map(ls, i, indent):
    out = {}
    while i < len(ls) and ls[i][0] == indent and not ls[i][1].startswith("- "):
        key, sep, rest = ls[i][1].partition(":")
        n = ls[i][2]
        if not sep or not key or (rest and not rest.startswith(" ")):
            raise ValueError("line %d: not a `key: value` line" % n)
        rest = rest.strip()
        if rest:
            out[key], i = _scalar(rest, n), i + 1
        elif i + 1 < len(ls) and (ls[i + 1][0] > indent or (
                ls[i + 1][0] == indent and ls[i + 1][1].startswith("- "))):
            out[key], i = _block(ls, i + 1, ls[i + 1][0])
        else:
            out[key], i = None, i + 1
    return out, i


def load(text):
    """The document TEXT as dicts, lists and strings; ValueError outside the subset."""
    ls = _lines(text)
    if not ls:
        return None
    v, i = _block(ls, 0, ls[0][0])
    if i != len(ls):
        raise ValueError("line %d: unexpected indentation" % ls[i][2])
    return v


def load_file(path):
    with open(path) as f:
        return load(f.read())
