"""What bench/bench_daemon.py reads and how it times it (bench_volumes.py and
bench_transport.py reuse them): the deterministic data (slabs of standard
normals), the selections (middle slices, middle beams, a 5 % cube) as mmfs
view paths and numpy indexes, the timed reads (a whole file, a view, h5py)
and the metadata test (create, lookup, stat, readdir, unlink)."""
import mmap
import os
import time

import numpy as np

from bench_daemon_util import MiB, BenchError

try:
    import h5py
except ImportError:  # reported in main()
    h5py = None

SLAB_ROWS = 32            # rows along dim 0 generated at a time
READ_CHUNK = 8 * MiB      # os.read size of the full sequential read


def slabs(shape):
    """Deterministic data: (row0, ndarray) slabs of SLAB_ROWS rows along dim 0."""
    rng = np.random.default_rng(0)
    for r0 in range(0, shape[0], SLAB_ROWS):
        rows = min(SLAB_ROWS, shape[0] - r0)
        yield r0, rng.standard_normal((rows,) + tuple(shape[1:]))  # float64


# --------------------------------------------------------------------------
# selections: one description -> mmfs view path and numpy index


def views_for(shape):
    """The issue's selections, generalised to any 3-d shape: the middle slice
    of each dim, the middle beam along each dim, and a cube whose edges are
    5 % of each dim, centred (for 1024,1024,256: box/486:537,486:537,121:134)."""
    mid = [s // 2 for s in shape]
    out = []
    for d in range(3):
        sel = [None] * 3
        sel[d] = mid[d]
        out.append((f"slice{d}", f"slice/{d}/{mid[d]}", sel))
    for d in range(3):
        sel = list(mid)
        sel[d] = None
        out.append((f"beam{d}", "box/" + ",".join(":" if x is None else str(x) for x in sel), sel))
    edge = [max(1, round(0.05 * s)) for s in shape]
    start = [m - (e + 1) // 2 for m, e in zip(mid, edge)]
    sel = [(a, a + e) for a, e in zip(start, edge)]
    out.append(("cube5%", "box/" + ",".join(f"{a}:{b}" for a, b in sel), sel))
    return out


def sel_str(sel):
    """numpy spelling of a selection, e.g. 'ds[512,:,128]'."""
    parts = [":" if x is None else (f"{x[0]}:{x[1]}" if isinstance(x, tuple) else str(x)) for x in sel]
    return "ds[" + ",".join(parts) + "]"


def np_index(sel):
    idx = []
    for item in sel:
        if item is None:
            idx.append(slice(None))
        elif isinstance(item, tuple):
            idx.append(slice(*item))
        else:
            idx.append(item)
    return tuple(idx)


# --------------------------------------------------------------------------
# timed operations


def time_full_read(path, expect, direct=False):
    """Reads the whole file in READ_CHUNK pieces into one page-aligned buffer
    (as dd and fio do; a new bytes object per read would time the allocator)."""
    buf = mmap.mmap(-1, READ_CHUNK)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    try:
        if not direct:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        total = 0
        while True:
            n = os.readv(fd, [buf])
            if not n:
                break
            total += n
    finally:
        os.close(fd)
    dt = time.perf_counter() - t0
    if total != expect:
        raise BenchError(f"full read of {path} returned {total} bytes, expected {expect}")
    return dt


def time_view_read(path):
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        data = f.readall()
    arr = np.frombuffer(data, dtype="<f8")
    return time.perf_counter() - t0, arr


def time_h5_read(path, index):
    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        arr = f["a"][index]
    return time.perf_counter() - t0, np.asarray(arr)


def time_h5_full(path):
    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        arr = f["a"][...]
    dt = time.perf_counter() - t0
    return dt, arr.nbytes


def metadata_bench(directory, n, drop):
    """Create, look up missing names, stat, readdir and unlink n empty files in a
    fresh directory. drop() empties the caches and says whether it could."""
    os.mkdir(directory)
    names = [os.path.join(directory, f"f{i:07d}") for i in range(n)]
    res = {}
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
    t0 = time.perf_counter()
    for p in names:
        os.close(os.open(p, flags, 0o644))
    res["create"] = n / (time.perf_counter() - t0)

    # One LOOKUP round trip each: nothing by these names exists or is cached.
    t0 = time.perf_counter()
    for p in names:
        try:
            os.stat(p + "-missing")
        except FileNotFoundError:
            pass
    res["lookup (missing)"] = n / (time.perf_counter() - t0)

    t0 = time.perf_counter()
    for p in names:
        os.stat(p)
    res["stat (warm)"] = n / (time.perf_counter() - t0)

    cold = drop()
    t0 = time.perf_counter()
    for p in names:
        os.stat(p)
    res["stat (cold)" if cold else "stat (again)"] = n / (time.perf_counter() - t0)

    drop()
    t0 = time.perf_counter()
    listing = os.listdir(directory)
    dt = time.perf_counter() - t0
    if len(listing) != n:
        raise BenchError(f"readdir of {directory} listed {len(listing)} entries, expected {n}")
    res["readdir entries (cold)" if cold else "readdir entries"] = n / dt
    res["readdir listings (cold)" if cold else "readdir listings"] = 1 / dt

    t0 = time.perf_counter()
    listing = os.listdir(directory)
    dt = time.perf_counter() - t0
    res["readdir entries (warm)"] = n / dt
    res["readdir listings (warm)"] = 1 / dt

    t0 = time.perf_counter()
    for p in names:
        os.unlink(p)
    res["unlink"] = n / (time.perf_counter() - t0)
    os.rmdir(directory)
    return res
