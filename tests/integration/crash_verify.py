"""Checks of the crash campaign (test_crash_campaign.py), run on the volume
remounted after a crash: every object a worker's journal calls durable is
there, whole, and consistent in every view of it; the one operation in doubt
per worker left one of the states docs/reference.md allows, which is then adopted as
the model the next round starts from.

* A plain file reads back its bytes exactly.
* An array file: its size, its schema xattrs, its bytes, a slice view, its
  `A@/info` (layout, order, index, shape, dtype agree with the xattrs) and
  query counts (`A@/query/COND/count`, from its index or a scan) equal numpy.
* In doubt: a rename or unlink shows the state before or after it, never
  both names or neither; a relayout or index change shows the old or the new
  attribute with the data unchanged (nothing half-relayouted); truncating an
  array to 0 zeroes all of it or none; a write leaves every byte old or new
  (plain files: a size between the two); a creation leaves nothing, an empty
  plain file (removed here), or the array with its schema and every byte
  zero or written; converting a plain file into an array leaves the plain
  file (a prefix of its bytes, removed here) or the whole array, never an
  array of other bytes; a file unlinked while open and then written is
  there as it was, or gone.
"""
import collections
import errno
import os

import numpy as np

import crash_model as cm
from mmfs_mount import getx, read_bytes, read_json, shape_str, view

# Query conditions per dtype kind: (COND as in the path, numpy predicate).
CONDITIONS = {
    "iu": [(">=20", lambda d: d >= 20), ("in[5,12]", lambda d: (d >= 5) & (d <= 12)),
           ("<3|==33", lambda d: (d < 3) | (d == 33))],
    "f": [(">=1.5", lambda d: d >= 1.5), ("in[-2.25,3]", lambda d: (d >= -2.25) & (d <= 3))],
}


class Tally:
    """What the checks covered."""

    def __init__(self):
        self.plain = self.arrays = self.views = self.queries = 0
        self.in_doubt = collections.Counter()  # (kind, outcome) -> count

    def outcome(self, op, what):
        self.in_doubt[(op["kind"], what)] += 1


class Failure(AssertionError):
    pass


def expect(cond, message):
    if not cond:
        raise Failure(message)


# --- objects in a known state ---------------------------------------------------------------

def check_plain(path, data: bytes, tally):
    got = read_bytes(path)
    expect(got == data, f"{path}: {len(got)} bytes read, expected the {len(data)} bytes written"
                        f"{first_difference(got, data)}")
    expect(os.stat(path).st_size == len(data), f"{path}: st_size {os.stat(path).st_size}, expected {len(data)}")
    tally.plain += 1


def first_difference(got: bytes, want: bytes) -> str:
    n = min(len(got), len(want))
    diff = np.flatnonzero(np.frombuffer(got[:n], np.uint8) != np.frombuffer(want[:n], np.uint8))
    return f" (first difference at byte {int(diff[0])} of {n} compared)" if len(diff) else ""


def check_array(path, a: cm.ArrayObj, tally, seed):
    """Every way of reading the array agrees with the model."""
    d = a.data
    expect(os.stat(path).st_size == d.nbytes, f"{path}: st_size {os.stat(path).st_size}, expected {d.nbytes}")
    attrs = {n: getx(path, n) for n in ("shape", "dtype", "layout", "order", "index", "copies")}
    want = {"shape": shape_str(d.shape), "dtype": d.dtype.name, "layout": a.layout, "order": a.order,
            "index": a.index, "copies": a.copies}
    expect(attrs == want, f"{path}: schema xattrs {attrs}, expected {want}")
    got = read_bytes(path)
    expect(got == d.tobytes(),
           f"{path}: the array's bytes differ from those written{first_difference(got, d.tobytes())}")
    info = read_json(view(path, "info"))
    seen = {"shape": shape_str(info["shape"]), "dtype": info["dtype"], "layout": info["layout"],
            "order": shape_str(info["order"]), "index": info["index"],
            "copies": ";".join(c["spec"] for c in info.get("copies", [])) or "none"}
    expect(seen == want, f"{path}@/info shows {seen}, the xattrs {want}: a half-changed placement, index or copies")
    expect(info["bytes"] == d.nbytes, f"{path}@/info: bytes {info['bytes']}, expected {d.nbytes}")
    rng = np.random.default_rng(seed)
    dim = int(rng.integers(d.ndim))
    idx = int(rng.integers(d.shape[dim]))
    got = read_bytes(view(path, "slice", dim, idx))
    expect(got == np.ascontiguousarray(np.take(d, idx, axis=dim)).tobytes(),
           f"{path}@/slice/{dim}/{idx} differs from numpy")
    tally.views += 1
    # Every copy holds the bytes (reading one catches it up first, from the record of cells behind).
    for k in range(1, len(info.get("copies", [])) + 1):
        got = read_bytes(view(path, "copy", k))
        expect(got == d.tobytes(), f"{path}@/copy/{k} differs from the array{first_difference(got, d.tobytes())}")
        tally.views += 1
    for cond, pred in CONDITIONS["f" if d.dtype.kind == "f" else "iu"]:
        text = (view(path, "query", cond, "count")).read_text()
        want_count = int(np.count_nonzero(pred(d.astype(np.float64) if d.dtype.kind == "f" else d)))
        expect(text == f"{want_count}\n",
               f"{path}@/query/{cond}/count answered {text!r}, numpy counts {want_count} (index {a.index})")
        tally.queries += 1
    tally.arrays += 1


def check_object(root, name, space, tally, seed):
    path = os.path.join(root, name)
    if name in space.plain:
        check_plain(path, space.plain[name], tally)
    else:
        check_array(path, space.arrays[name], tally, seed)


def check_space(root, space, op, tally, seed):
    """Checks every name of `space` except those the in-doubt `op` may have changed."""
    doubt = set(cm.names_of(op)) if op and op["kind"] != "read" else set()
    found = set(os.listdir(root))
    expected = space.names()
    extra, missing = (found - expected) - doubt, (expected - found) - doubt
    expect(not extra and not missing, f"{root}: names {sorted(extra)} appeared and {sorted(missing)} vanished")
    for i, name in enumerate(sorted(expected - doubt)):
        check_object(root, name, space, tally, seed + i)
    if doubt:
        resolve(root, space, op, tally, seed)


# --- the operation in doubt -------------------------------------------------------------------

def load_array(path):
    """The array as stored (xattrs and bytes), or None for a plain file."""
    try:
        shape = getx(path, "shape")
    except OSError as e:
        if e.errno != errno.ENODATA:
            raise
        return None
    shape = tuple(int(s) for s in shape.split(","))
    dtype = np.dtype(getx(path, "dtype"))
    data = np.frombuffer(read_bytes(path), dtype).copy()
    expect(data.size == int(np.prod(shape)), f"{path}: {data.nbytes} bytes read for shape {shape} {dtype}")
    return cm.ArrayObj(data.reshape(shape), getx(path, "layout"), getx(path, "order"), getx(path, "index"),
                       getx(path, "copies"))


def old_or_new(found: bytes, old: bytes, new: bytes, path, sizes=True):
    """Every byte of `found` is the old or the new byte at its offset, and its
    length lies between the two. Returns which it is: old, new or mixed."""
    lo, hi = sorted((len(old), len(new)))
    if sizes:
        expect(lo <= len(found) <= hi, f"{path}: {len(found)} bytes after the crash, expected {lo} to {hi}")
    f = np.frombuffer(found, np.uint8)
    ok = np.zeros(len(f), bool)
    for ref in (old, new):
        r = np.frombuffer(ref, np.uint8)
        n = min(len(f), len(r))
        ok[:n] |= f[:n] == r[:n]
    bad = np.flatnonzero(~ok)
    expect(not len(bad), f"{path}: {len(bad)} bytes after the crash are neither the old nor the new ones, the first "
                         f"at offset {int(bad[0]) if len(bad) else 0} (old {len(old)} bytes, new {len(new)})")
    return "old" if found == old else "new" if found == new else "mixed"


def resolve(root, space, op, tally, seed):
    """Checks the state the in-doubt `op` left and adopts it into `space`."""
    kind = op["kind"]
    after = space.copy()
    cm.apply(after, op)
    if kind in ("prename", "arename", "punlink", "aunlink", "porphan"):
        problems = []
        for state, label in ((space, "old"), (after, "new")):
            try:
                check_names(root, cm.names_of(op), state, tally, seed)
            except (Failure, OSError) as e:
                problems.append(f"{label}: {e}")
                continue
            if label == "new":
                space.plain, space.arrays = after.plain, after.arrays
            tally.outcome(op, label)
            return
        raise Failure(f"{root}: {op} was cut by the crash and left neither the state before nor after it: "
                      + "; ".join(problems))
    path = os.path.join(root, op["name"])
    exists = os.path.lexists(path)
    if kind in ("pcreate", "pwrite", "pappend", "ptruncate"):
        if not exists:
            expect(kind == "pcreate", f"{path} vanished in a crash during {op}")
            tally.outcome(op, "old")
            return
        found = read_bytes(path)
        tally.outcome(op, old_or_new(found, space.plain.get(op["name"], b""), after.plain[op["name"]], path))
        space.plain[op["name"]] = found
        check_plain(path, found, tally)
        return
    if kind in ("acreate", "aconvert"):
        if not exists:
            tally.outcome(op, "old")
            return
        want = after.arrays[op["name"]]
        a = load_array(path)
        if a is None:  # its shape not set yet: a plain file (empty, or being written for aconvert)
            found = read_bytes(path)
            expect(want.data.tobytes().startswith(found) if kind == "aconvert" else found == b"",
                   f"{path}: a plain file of {len(found)} bytes that are not the start of the array's, after {op}")
            os.unlink(path)
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            tally.outcome(op, "plain file")
            return
        got = (shape_str(a.data.shape), a.data.dtype, a.layout, a.order, a.index, a.copies)
        expect(got == (shape_str(want.data.shape), want.data.dtype, want.layout, want.order, want.index, want.copies),
               f"{path}: the array made by {op} has the schema {got}")
        if kind == "acreate":  # written after the shape was set: each byte zero or written
            tally.outcome(op, old_or_new(a.data.tobytes(), bytes(want.data.nbytes), want.data.tobytes(), path))
        else:  # converted in one commit: the file's bytes, all of them
            diff = first_difference(a.data.tobytes(), want.data.tobytes())
            expect(a.data.tobytes() == want.data.tobytes(),
                   f"{path}: a conversion cut by the crash left other bytes than the file's{diff}")
            tally.outcome(op, "new")
        space.arrays[op["name"]] = a
        check_array(path, a, tally, seed)
        return
    a = load_array(path)
    expect(a is not None, f"{path} is no longer an array after a crash during {op}")
    old, new = space.arrays[op["name"]], after.arrays[op["name"]]
    if kind == "awrite":
        expect((a.layout, a.order, a.index, a.copies) == (old.layout, old.order, old.index, old.copies),
               f"{path}: schema changed by {op}")
        tally.outcome(op, old_or_new(a.data.tobytes(), old.data.tobytes(), new.data.tobytes(), path))
    elif kind in ("arelayout", "aindex", "acopies"):
        expect(a.data.tobytes() == old.data.tobytes(), f"{path}: the data changed in a crash during {op}")
        states = {(x.layout, x.order, x.index, x.copies): label for x, label in ((old, "old"), (new, "new"))}
        got = (a.layout, a.order, a.index, a.copies)
        expect(got in states, f"{path}: (layout, order, index) {got} after a crash during {op}, "
                              f"expected one of {list(states)}")
        tally.outcome(op, states[got])
    elif kind == "azero":
        expect(a.data.tobytes() in (old.data.tobytes(), new.data.tobytes()),
               f"{path}: a truncate to 0 cut by a crash left part of the array zeroed")
        tally.outcome(op, "old" if a.data.tobytes() == old.data.tobytes() else "new")
    space.arrays[op["name"]] = a
    check_array(path, a, tally, seed)


def check_names(root, names, state, tally, seed):
    for i, name in enumerate(names):
        path = os.path.join(root, name)
        if name not in state.names():
            expect(not os.path.lexists(path), f"{path} exists")
        else:
            check_object(root, name, state, tally, seed + i)
