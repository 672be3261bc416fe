"""A worker of the crash campaign (test_crash_campaign.py): runs random
operations of crash_model.py on its own directory of the mounted volume until
the daemon is killed under it, journalling each one.

Journal (a JSON line per record, outside the mount, fsync'd before the worker
goes on): {"phase": "begin", "op": ...} before the operation touches the
volume, {"phase": "done", "op": ...} after its durability point returned
(fsync of the file and of its directory, or a setxattr, which returns when
the change is durable), {"phase": "fail", ...} for anything that must not
happen on a live mount. So after a crash every "done" operation must be on
the volume, and at most the one "begin" without a "done" is in doubt.

When the daemon dies the worker's calls fail with ENOTCONN or ECONNABORTED:
that is the end of its round, not a failure; it exits with status 0.
"""
import errno
import json
import os
import random
import time
import traceback

import numpy as np

import crash_model as cm
from mmfs_mount import fsync_dir, pwrite_all, setx, shape_str, view

# What a call answers once the daemon is gone (ENOTCONN for new requests,
# ECONNABORTED for the ones in flight when the connection was aborted).
DISCONNECTED = {errno.ENOTCONN, errno.ECONNABORTED}


def write_file(path, flags, data, offset=None, truncate=None):
    """Opens, writes `data` (at `offset`, or appending), or truncates, then fsyncs."""
    fd = os.open(path, flags, 0o644)
    try:
        if truncate is not None:
            os.ftruncate(fd, truncate)
        elif offset is None:
            view_ = memoryview(data)
            while view_:
                view_ = view_[os.write(fd, view_):]
        else:
            pwrite_all(fd, data, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def create_array(path, op):
    shape, dtype = cm.ARRAY_KINDS[op["array_kind"]]
    with open(path, "xb"):
        pass
    setx(path, "dtype", dtype)
    setx(path, "layout", op["layout"])
    if op["index"] != "none":
        setx(path, "index", op["index"])
    if op.get("copies", "none") != "none":
        setx(path, "copies", op["copies"])
    setx(path, "shape", shape_str(shape))
    data = cm.array_values(op["seed"], shape, dtype).tobytes()
    # Written in one go or in pieces out of order (several write-backs).
    step = -(-len(data) // op["pieces"])
    spans = [(o, data[o:o + step]) for o in range(0, len(data), step)]
    random.Random(op["seed"]).shuffle(spans)
    fd = os.open(path, os.O_WRONLY)
    try:
        for off, piece in spans:
            pwrite_all(fd, piece, off)
        os.fsync(fd)
    finally:
        os.close(fd)


def execute(root, space, op):
    """Runs `op` on the mount, up to its durability point."""
    kind = op["kind"]
    path = lambda name: os.path.join(root, name)  # noqa: E731
    if kind == "pcreate":
        write_file(path(op["name"]), os.O_WRONLY | os.O_CREAT | os.O_EXCL, cm.plain_bytes(op["seed"], op["size"]))
        fsync_dir(root)
    elif kind == "pwrite":
        write_file(path(op["name"]), os.O_WRONLY, cm.plain_bytes(op["seed"], op["len"]), offset=op["off"])
    elif kind == "pappend":
        write_file(path(op["name"]), os.O_WRONLY | os.O_APPEND, cm.plain_bytes(op["seed"], op["len"]))
    elif kind == "ptruncate":
        write_file(path(op["name"]), os.O_WRONLY, None, truncate=op["size"])
    elif kind in ("prename", "arename"):
        os.rename(path(op["src"]), path(op["dst"]))
        fsync_dir(root)
    elif kind in ("punlink", "aunlink"):
        os.unlink(path(op["name"]))
        fsync_dir(root)
    elif kind == "porphan":
        fd = os.open(path(op["name"]), os.O_RDWR)
        try:
            os.unlink(path(op["name"]))
            fsync_dir(root)
            pwrite_all(fd, cm.plain_bytes(op["seed"], op["len"]), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
    elif kind == "aconvert":
        shape, dtype = cm.ARRAY_KINDS[op["array_kind"]]
        data = cm.array_values(op["seed"], shape, dtype).tobytes()
        write_file(path(op["name"]), os.O_WRONLY | os.O_CREAT | os.O_EXCL, data)
        setx(path(op["name"]), "dtype", dtype)
        setx(path(op["name"]), "layout", op["layout"])
        setx(path(op["name"]), "shape", shape_str(shape))  # returns when the array is durable
        fsync_dir(root)
    elif kind == "acreate":
        create_array(path(op["name"]), op)
        fsync_dir(root)
    elif kind == "awrite":
        a = space.arrays[op["name"]]
        write_file(path(op["name"]), os.O_WRONLY, cm.write_span(op, a.data), offset=op["off"])
    elif kind == "arelayout":
        setx(path(op["name"]), op["attr"], op["value"])  # returns when the new placement is durable
    elif kind == "aindex":
        setx(path(op["name"]), "index", op["index"])  # returns when the index is durable
    elif kind == "acopies":
        setx(path(op["name"]), "copies", op["copies"])  # returns when the copies are durable
    elif kind == "azero":
        write_file(path(op["name"]), os.O_WRONLY, None, truncate=0)
    elif kind == "read":
        check_live(path(op["name"]), space, op["name"])
    else:
        raise ValueError(f"unknown operation {kind!r}")


class Mismatch(Exception):
    """A read on the live mount that disagrees with the model."""


def check_live(path, space, name):
    with open(path, "rb") as f:
        got = f.read()
    if name in space.plain:
        if got != space.plain[name]:
            raise Mismatch(f"{path}: {len(got)} bytes read differ from the {len(space.plain[name])} written")
        return
    a = space.arrays[name]
    if got != a.data.tobytes():
        raise Mismatch(f"{path}: the array's bytes differ from those written")
    for dim in {0, a.data.ndim - 1}:  # with copies, the two may be served by different placements
        idx = a.data.shape[dim] // 2
        with open(view(path, "slice", dim, idx), "rb") as f:
            if f.read() != np.ascontiguousarray(np.take(a.data, idx, axis=dim)).tobytes():
                raise Mismatch(f"{path}@/slice/{dim}/{idx} differs from the array written")


def errors_tail(root):
    try:
        with open(os.path.join(os.path.dirname(root), ".mmfs", "errors")) as f:
            return f.read()[-600:]
    except OSError as e:
        return repr(e)


def mount_alive(root) -> bool:
    try:
        os.stat(root)
        return True
    except OSError:
        return False


def run(root, space, journal_path, seed, max_seconds):
    """The worker process: operations until the mount goes away (or max_seconds)."""
    rng = random.Random(seed)
    with open(journal_path, "a") as journal:
        def log(**record):
            journal.write(json.dumps(record) + "\n")
            journal.flush()
            os.fsync(journal.fileno())

        deadline = time.monotonic() + max_seconds
        while time.monotonic() < deadline:
            op = cm.choose(rng, space)
            if op is None:
                continue
            log(phase="begin", op=op)
            try:
                execute(root, space, op)
            except OSError as e:
                if e.errno in DISCONNECTED or not mount_alive(root):
                    return 0  # the daemon was killed: the end of this round
                log(phase="fail", op=op, error=f"{e!r}; .mmfs/errors ends: {errors_tail(root)}")
                return 1
            except Exception as e:  # noqa: BLE001 (a Mismatch, or a bug of the worker: both fail the test)
                log(phase="fail", op=op, error=f"{e!r}\n{traceback.format_exc()}")
                return 1
            cm.apply(space, op)
            log(phase="done", op=op)
        log(phase="fail", op=None, error=f"the daemon was not killed within {max_seconds} s")
        return 1


def main(root, space, journal_path, seed, max_seconds):
    """multiprocessing target: exits with run()'s status."""
    os._exit(run(root, space, journal_path, seed, max_seconds))
