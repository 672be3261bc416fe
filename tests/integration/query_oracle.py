"""The numpy oracle of bitmap-index queries (docs/reference.md §5), shared by
tests/integration/test_daemon_query*.py.

* Data with duplicates, extremes and (floats) NaN, -0.0, +-inf, subnormals;
  float values are dyadic (k / 2^m), so every constant written in a condition
  is either exactly such a value or not the double nearest to any element,
  and "compared with the constant as written" means the same whether the
  daemon keeps the decimal or its double.
* Conditions: random trees rendered in the grammar of docs/reference.md §5 (with random
  redundant parentheses and double negations), evaluated in numpy: float32 is
  widened to float64, integers are compared exactly (Fraction), NaN matches
  only `!=`, -0.0 == 0.0, `in [a, b]` is closed.
* The CRoaring portable serialization decoded by hand (and by pyroaring when
  it is installed), and check_query(), which reads count/coords/values/mask of
  a query view and compares each with numpy.
"""
import math
import os
import re
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np

from mmfs_mount import assert_array_bytes, read_bytes

OPS = ["==", "!=", "<", "<=", ">", ">="]
OUTPUTS = ("count", "coords", "values", "mask")


# --- data ----------------------------------------------------------------------------------

def float_specials(dtype):
    fi = np.finfo(dtype)
    sub = float(np.nextafter(np.array(0, dtype), np.array(1, dtype)))
    return [0.0, -0.0, np.nan, np.inf, -np.inf, float(fi.max), float(fi.min), float(fi.tiny), -float(fi.tiny), sub,
            1.0, -1.0, 0.5, 2.0, -0.25]


def int_specials(dtype):
    ii = np.iinfo(dtype)
    vals = {ii.min, ii.max, ii.min + 1, ii.max - 1, 0, 1, 2, 100, ii.max // 2}
    if ii.min < 0:
        vals |= {-1, -2, -100}
    return sorted(v for v in vals if ii.min <= v <= ii.max)


def query_data(rng, shape, dtype):
    """Random data: about half drawn from a small pool (duplicates), the rest spread
    over the dtype's range; extremes always present."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype.kind == "f":
        pool = np.concatenate([rng.integers(-2 ** 16, 2 ** 16, 40) / 256.0, float_specials(dtype)])
        spread = rng.integers(-2 ** 22, 2 ** 22, n) / 1024.0
    else:
        ii = np.iinfo(dtype)
        pool = np.array(int_specials(dtype) + [int(v) for v in rng.integers(ii.min, ii.max, 30, dtype=dtype,
                                                                             endpoint=True)], dtype=object)
        spread = rng.integers(ii.min, ii.max, n, dtype=dtype, endpoint=True)
    pick = rng.integers(0, len(pool), n)
    from_pool = rng.random(n) < 0.5
    out = np.array(spread, dtype=dtype)
    out[from_pool] = np.array([pool[i] for i in pick[from_pool]], dtype=dtype)
    specials = float_specials(dtype) if dtype.kind == "f" else int_specials(dtype)
    places = rng.choice(n, size=min(n, len(specials)), replace=False)
    out[places] = np.array(specials[:len(places)], dtype=dtype)
    return out.reshape(shape)


# --- constants -------------------------------------------------------------------------------

def exact_text(x):
    """The exact decimal text of a number (an int, or a float given as a Python
    float or numpy scalar), or None when it would be long."""
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    s = str(Decimal(x))
    return s if len(s) <= 30 else None


def constants(rng, arr, count=40):
    """Condition constants (texts) for the values of `arr`: elements, values between
    elements, extremes beyond the dtype's range, other spellings."""
    flat = arr.reshape(-1)
    out = []
    picks = flat[rng.integers(0, flat.size, count)]
    if arr.dtype.kind == "f":
        for v in picks:
            t = exact_text(v)
            if t is not None:
                out.append(t)
        finite = np.unique(flat[np.isfinite(flat)].astype(np.float64))
        for i in rng.integers(0, len(finite) - 1, count // 4):
            t = exact_text((finite[i] + finite[i + 1]) / 2)
            if t is not None:
                out.append(t)
        out += ["0", "-0", "-0.0", "0.0", "inf", "-inf", "1e3", "-2.5e2", "0.1", "123.456", "1E-3", "3.5e+5",
                "-1", "1"]
    else:
        ii = np.iinfo(arr.dtype)
        for v in picks:
            v = int(v)
            out.append(str(v))
            out.append(str(Decimal(v) + Decimal("0.5")))
            out.append(str(Decimal(v) - Decimal("0.25")))
        out += [str(ii.min), str(ii.max), str(ii.min - 1), str(ii.max + 1), str(ii.max + 10 ** 20),
                str(ii.min - 10 ** 20), "0", "-0", "0.0", "inf", "-inf", "1e2", "-2.5e1", "1.8e19", "-1", "1"]
    return out


# --- condition trees -------------------------------------------------------------------------
# ("cmp", name, op, text) | ("in", name, lo, hi) | ("not", t) | ("and", [t...]) | ("or", [t...])

def random_atom(rng, consts, names=("",)):
    name = names[int(rng.integers(0, len(names)))]
    cs = consts[name] if isinstance(consts, dict) else consts
    if rng.random() < 0.2:
        a, b = cs[int(rng.integers(0, len(cs)))], cs[int(rng.integers(0, len(cs)))]
        if rng.random() < 0.85 and Fraction_or_inf(a) > Fraction_or_inf(b):
            a, b = b, a
        return ("in", name, a, b)
    return ("cmp", name, OPS[int(rng.integers(0, len(OPS)))], cs[int(rng.integers(0, len(cs)))])


def random_tree(rng, consts, depth=3, names=("",)):
    r = rng.random()
    if depth <= 0 or r < 0.3:
        return random_atom(rng, consts, names)
    if r < 0.45:
        return ("not", random_tree(rng, consts, depth - 1, names))
    kind = "and" if rng.random() < 0.5 else "or"
    return (kind, [random_tree(rng, consts, depth - 1, names) for _ in range(int(rng.integers(2, 4)))])


def render(t, rng=None):
    """The condition text of a tree (one path component)."""
    kind = t[0]
    if kind == "cmp":
        s = f"{t[1]}{t[2]}{t[3]}"
    elif kind == "in":
        # A NAME is a run of non-operator characters, so a named interval needs a
        # blank between the name and `in`.
        s = f"{t[1]} in[{t[2]},{t[3]}]" if t[1] else f"in[{t[2]},{t[3]}]"
    elif kind == "not":
        child = render(t[1], rng)
        if t[1][0] in ("and", "or") or child.startswith("="):
            child = f"({child})"
        s = "!" + child
    elif kind == "and":
        s = "&".join(f"({render(c, rng)})" if c[0] == "or" else render(c, rng) for c in t[1])
    else:
        s = "|".join(render(c, rng) for c in t[1])
    if rng is not None and rng.random() < 0.08:
        s = f"({s})"
    return s


def random_condition(rng, consts, names=("",), max_len=250, depth=3):
    while True:
        t = random_tree(rng, consts, depth, names)
        text = render(t, rng)
        if len(text.encode()) <= max_len:
            return t, text


def Fraction_or_inf(text):
    t = text.strip().lower()
    if t in ("inf", "+inf"):
        return math.inf
    if t == "-inf":
        return -math.inf
    return Fraction(text)


def _int_cmp(arr, op, bound):
    """arr OP bound for an integer array and a Python int bound (exact, any size)."""
    ii = np.iinfo(arr.dtype)
    if op == "==":
        return arr == arr.dtype.type(bound) if ii.min <= bound <= ii.max else np.zeros(arr.shape, bool)
    if op == "<=":
        if bound < ii.min:
            return np.zeros(arr.shape, bool)
        if bound >= ii.max:
            return np.ones(arr.shape, bool)
        return arr <= arr.dtype.type(bound)
    if op == ">=":
        if bound > ii.max:
            return np.zeros(arr.shape, bool)
        if bound <= ii.min:
            return np.ones(arr.shape, bool)
        return arr >= arr.dtype.type(bound)
    raise AssertionError(op)


def compare(arr, op, text):
    """numpy oracle of `arr OP text` (docs/reference.md §5)."""
    if arr.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            x = arr.astype(np.float64)  # a signalling NaN (written bytes) warns
            c = float(text)
            return {"==": x == c, "!=": x != c, "<": x < c, "<=": x <= c, ">": x > c, ">=": x >= c}[op]
    c = Fraction_or_inf(text)
    if op == "!=":
        return ~compare(arr, "==", text)
    if isinstance(c, float):  # +-inf
        every = (op in ("<", "<=")) == (c > 0)
        return np.full(arr.shape, every if op != "==" else False)
    if op == "==":
        return _int_cmp(arr, "==", int(c)) if c.denominator == 1 else np.zeros(arr.shape, bool)
    if op == "<":
        return _int_cmp(arr, "<=", math.ceil(c) - 1)
    if op == "<=":
        return _int_cmp(arr, "<=", math.floor(c))
    if op == ">":
        return _int_cmp(arr, ">=", math.floor(c) + 1)
    return _int_cmp(arr, ">=", math.ceil(c))


def evaluate(t, env):
    """The boolean mask of a tree; env maps names ("" = the queried array) to arrays."""
    kind = t[0]
    if kind == "cmp":
        return compare(env[t[1]], t[2], t[3])
    if kind == "in":
        x = env[t[1]]
        return compare(x, ">=", t[2]) & compare(x, "<=", t[3])
    if kind == "not":
        return ~evaluate(t[1], env)
    masks = [evaluate(c, env) for c in t[1]]
    out = masks[0].copy()
    for m in masks[1:]:
        out = (out & m) if kind == "and" else (out | m)
    return out


# --- a reference parser ------------------------------------------------------------------------
# Strict: no blanks except before a named `in`, NAMEs of letters, digits, '_' and '.'
# not starting like a number. It accepts a subset of what the daemon may; a text it
# accepts has one reading in the grammar, so the daemon's answer can be checked.

_NUMBER = re.compile(r"[+-]?(\d+(\.\d+)?|\.\d+)([eE][+-]?\d+)?(?![\w.])|[+-]?(inf|nan)(?![\w.])", re.I)
_NAME = re.compile(r"(?!in\b|in\[|inf\b|nan\b)[A-Za-z_][\w.]*")
_OPS = ["==", "!=", "<=", ">=", "<", ">"]


def parse_condition(text):
    """The tree of a condition text, or None when this strict parser refuses it."""
    pos = 0

    class Bad(Exception):
        pass

    def number():
        nonlocal pos
        m = _NUMBER.match(text, pos)
        if not m:
            raise Bad
        pos = m.end()
        return m.group(0)

    def atom():
        nonlocal pos
        name = ""
        m = _NAME.match(text, pos)
        if m:
            name = m.group(0)
            pos = m.end()
            if text.startswith(" in[", pos):
                pos += 1
        if text.startswith("in[", pos):
            pos += 3
            lo = number()
            if not text.startswith(",", pos):
                raise Bad
            pos += 1
            hi = number()
            if not text.startswith("]", pos):
                raise Bad
            pos += 1
            return ("in", name, lo, hi)
        for op in _OPS:
            if text.startswith(op, pos) and not text.startswith(op + "=", pos) and \
                    not (op in ("<", ">") and text.startswith(("<", ">", "!"), pos + 1)):
                pos += len(op)
                return ("cmp", name, op, number())
        raise Bad

    def term(depth):
        nonlocal pos
        if depth > 200:
            raise Bad
        if text.startswith("!", pos) and not text.startswith("!=", pos):
            pos += 1
            return ("not", term(depth + 1))
        if text.startswith("(", pos):
            pos += 1
            c = cond(depth + 1)
            if not text.startswith(")", pos):
                raise Bad
            pos += 1
            return c
        return atom()

    def joined(sep, part, kind, depth):
        nonlocal pos
        parts = [part(depth)]
        while text.startswith(sep, pos):
            pos += 1
            parts.append(part(depth))
        return parts[0] if len(parts) == 1 else (kind, parts)

    def cond(depth):
        return joined("|", lambda d: joined("&", term, "and", d), "or", depth)

    try:
        tree = cond(0)
    except Bad:
        return None
    return tree if pos == len(text) else None


def tree_names(t, out=None):
    out = set() if out is None else out
    if t[0] in ("cmp", "in"):
        out.add(t[1])
    elif t[0] == "not":
        tree_names(t[1], out)
    else:
        for c in t[1]:
            tree_names(c, out)
    return out


# --- CRoaring portable format ------------------------------------------------------------------

SERIAL_COOKIE_NO_RUNCONTAINER = 12346
SERIAL_COOKIE = 12347


def decode_roaring(buf: bytes) -> np.ndarray:
    """Decodes a 32-bit CRoaring portable serialization (RoaringFormatSpec) by hand;
    every byte must be used. Returns the sorted values (uint64)."""
    pos = 0

    def take(n):
        nonlocal pos
        assert pos + n <= len(buf), f"mask: truncated at byte {pos} (needs {n} more of {len(buf)})"
        out = buf[pos:pos + n]
        pos += n
        return out

    cookie = int.from_bytes(take(4), "little")
    if cookie & 0xFFFF == SERIAL_COOKIE:
        size = (cookie >> 16) + 1
        runs = take((size + 7) // 8)
        is_run = [bool(runs[i // 8] >> (i % 8) & 1) for i in range(size)]
        has_offsets = size >= 4
    else:
        assert cookie == SERIAL_COOKIE_NO_RUNCONTAINER, f"mask: bad cookie {cookie:#x}"
        size = int.from_bytes(take(4), "little")
        is_run = [False] * size
        has_offsets = True
    assert size <= 65536, f"mask: {size} containers"
    header = np.frombuffer(take(4 * size), dtype="<u2").reshape(size, 2)
    keys, cards = header[:, 0].astype(np.int64), header[:, 1].astype(np.int64) + 1
    assert (np.diff(keys) > 0).all(), "mask: container keys ascending"
    if has_offsets:
        take(4 * size)
    parts = []
    for i in range(size):
        base = int(keys[i]) << 16
        if is_run[i]:
            n = int.from_bytes(take(2), "little")
            rl = np.frombuffer(take(4 * n), dtype="<u2").reshape(n, 2).astype(np.int64)
            vals = np.concatenate([np.arange(s, s + l + 1) for s, l in rl]) if n else np.zeros(0, np.int64)
        elif cards[i] <= 4096:
            vals = np.frombuffer(take(2 * int(cards[i])), dtype="<u2").astype(np.int64)
        else:
            bits = np.unpackbits(np.frombuffer(take(8192), dtype=np.uint8), bitorder="little")
            vals = np.flatnonzero(bits)
        assert len(vals) == cards[i], f"mask: container {i} holds {len(vals)} values, header says {cards[i]}"
        assert (np.diff(vals) > 0).all(), f"mask: container {i} not strictly ascending"
        parts.append(vals + base)
    assert pos == len(buf), f"mask: {len(buf) - pos} bytes after the bitmap"
    return (np.concatenate(parts) if parts else np.zeros(0, np.int64)).astype(np.uint64)


_pyroaring = []


def pyroaring():
    """The pyroaring module, installed with pip on first use when missing; None
    when it cannot be had (the hand decoder still checks every mask)."""
    if not _pyroaring:
        try:
            import pyroaring as mod
        except ImportError:
            env = dict(os.environ, PIP_BREAK_SYSTEM_PACKAGES="1")
            try:
                subprocess.run([sys.executable, "-m", "pip", "install", "-q", "pyroaring"], env=env,
                               capture_output=True, timeout=180)
                import pyroaring as mod
            except Exception:  # noqa: BLE001 - no network, no wheel: the hand decoder is enough
                mod = None
        _pyroaring.append(mod)
    return _pyroaring[0]


# --- reading a query view ----------------------------------------------------------------------

def check_output(path, output, expected_mask, values_of, what):
    """Reads one output of a query view and compares it with the mask (a flat bool
    array over A's linear indices) and the flat elements `values_of`."""
    idx = np.flatnonzero(expected_mask).astype(np.uint64)
    size = os.stat(path).st_size
    data = read_bytes(path)
    assert size == len(data), f"{what}/{output}: st_size {size}, read {len(data)} bytes"
    if output == "count":
        assert data == f"{len(idx)}\n".encode(), f"{what}/count: {data[:50]!r}, expected {len(idx)}"
    elif output == "coords":
        assert_array_bytes(data, idx.astype("<u8"), f"{what}/coords")
    elif output == "values":
        assert_array_bytes(data, values_of[idx.astype(np.int64)], f"{what}/values")
    else:
        got = decode_roaring(data)
        if not np.array_equal(got, idx):
            extra = np.setdiff1d(got, idx)[:5]
            missing = np.setdiff1d(idx, got)[:5]
            raise AssertionError(f"{what}/mask: {len(got)} indices, expected {len(idx)}; extra {extra}, "
                                 f"missing {missing}")
        mod = pyroaring()
        if mod is not None:
            assert list(mod.BitMap.deserialize(data)) == idx.tolist(), f"{what}/mask: pyroaring disagrees"


def check_query(base, cond, expected_mask, values_of, outputs=OUTPUTS, what=None):
    """base: the view directory holding query/ (A@, A@/box/SEL@, D@ ...)."""
    expected_mask = np.asarray(expected_mask).reshape(-1)
    for output in outputs:
        check_output(base / "query" / cond / output, output, expected_mask, values_of, what or f"{base}/query/{cond}")
