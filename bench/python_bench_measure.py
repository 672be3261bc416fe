"""The measurements of bench/python_bench.py (`mmfs-bench python`): the views,
the timed readers of each section, and Measure, which times every (row,
reader) pair cold, checks every result against the reference and keeps the
times, errors and wrong results.

Every reader returns (seconds, result) and its time covers what a user's call
does: opening the dataset, store, array or file, the read, the close."""
import errno
import statistics
import time
import warnings

import numpy as np

from bench_daemon_util import log
from mmfs_bench_real_targets import read_mmfs
from mmfs_bench_real_workloads import make_workloads, np_index, result_shape
from python_bench_setup import ARRAY, chunk_label, dim_names

# The signal that stops the run (python_bench.main's handler sets it, then raises
# SystemExit): a library may swallow that exception (a task's failure caught
# as BaseException), so every read checks it again.
STOP = {"signal": None}


def check_stop():
    if STOP["signal"] is not None:
        raise SystemExit(128 + STOP["signal"])


# --------------------------------------------------------------------------
# the views


def make_views(shape, seed):
    """The seven views of sections 1 and 2: the three middle slices, three beams at
    seeded random positions (a[i,j,:], a[i,:,k], a[:,j,k]) and a 5 % box (edge
    max(1, round(0.05 * S_d)) per dim, seeded corner: `mmfs-bench real`'s cube5).
    Each: id, what (numpy spelling), sel (None / int / (a, b) per dim), view
    (below A@), bytes."""
    ws = {w["id"]: w for w in make_workloads(shape, 1, [5.0], 2, ["beam", "slice", "cube"], seed)}
    order = ["slice0", "slice1", "slice2", "beam2", "beam1", "beam0", "cube5"]
    out = []
    for vid in order:
        w = ws[vid]
        out.append(dict(id=vid, kind=w["kind"], what=w["numpy"][0], sel=w["sels"][0], view=w["mmfs"][0],
                        bytes=w["bytes"], elements=w["elements"]))
    return out


def isel_of(sel):
    """The selection as xarray isel keywords (dims dim_0, dim_1, ...)."""
    return {name: (x if isinstance(x, int) else slice(*x))
            for name, x in zip(dim_names(len(sel)), sel) if x is not None}


# --------------------------------------------------------------------------
# timed readers: each returns (seconds, ndarray)


def read_xr_mmfs(path, sel):
    import xarray as xr
    t0 = time.perf_counter()
    ds = xr.open_dataset(path, engine="mmfs")
    try:
        v = ds[ARRAY].isel(isel_of(sel)).values
    finally:
        ds.close()
    return time.perf_counter() - t0, v


class _RawViewArray:
    """xarray's floor: a BackendArray that knows its shape and dtype without
    asking the mount, and reads a selection as the `raw` reader reads its
    view file (the same view path mmfs's package computes, no xattr)."""

    def __init__(self, path, shape):
        from xarray.backends import BackendArray
        from xarray.core import indexing

        outer = self

        class Array(BackendArray):
            def __init__(self):
                self.shape = tuple(shape)
                self.dtype = np.dtype("<f8")

            def __getitem__(self, key):
                return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC,
                                                          outer.raw)

        self.path, self.shape, self.array = path, tuple(shape), Array()

    def raw(self, key):
        from mmfs._indexing import resolve
        sel = resolve(key, self.shape)
        _, got = read_mmfs(f"{self.path}@/{sel.view()}", int(np.prod(sel.view_shape)) * 8)
        return np.asarray(sel.finish(got.reshape(sel.view_shape)))


def _floor_backend():
    from xarray.backends import BackendEntrypoint
    from xarray.core import indexing
    import xarray as xr

    class FloorBackend(BackendEntrypoint):
        def open_dataset(self, filename_or_obj, *, drop_variables=None, shape=None):
            arr = _RawViewArray(filename_or_obj, shape)
            var = xr.Variable(dim_names(len(shape)), indexing.LazilyIndexedArray(arr.array))
            return xr.Dataset({ARRAY: var})

    return FloorBackend


def read_xr_floor(path, shape, sel):
    """xr.open_dataset + isel + values over the cheapest backend possible (no
    FUSE call at open): what xarray itself costs around a raw view read."""
    import xarray as xr
    backend = _floor_backend()
    t0 = time.perf_counter()
    ds = xr.open_dataset(path, engine=backend, shape=shape)
    try:
        v = ds[ARRAY].isel(isel_of(sel)).values
    finally:
        ds.close()
    return time.perf_counter() - t0, v


def read_raw(path, nbytes, shape):
    """`mmfs-bench real`'s read of a view file (8 MiB readv calls into one buffer)."""
    dt, got = read_mmfs(path, nbytes)
    return dt, got.reshape(shape)


def read_pkg(path, sel):
    import mmfs
    t0 = time.perf_counter()
    v = mmfs.open(path)[np_index(sel)]
    return time.perf_counter() - t0, np.asarray(v)


def read_xr_h5netcdf(path, sel):
    import xarray as xr
    t0 = time.perf_counter()
    ds = xr.open_dataset(path, engine="h5netcdf")
    try:
        v = ds[ARRAY].isel(isel_of(sel)).values
    finally:
        ds.close()
    return time.perf_counter() - t0, v


def read_xr_zarr(store, sel):
    import xarray as xr
    t0 = time.perf_counter()
    ds = xr.open_zarr(store, consolidated=False)
    try:
        v = ds[ARRAY].isel(isel_of(sel)).values
    finally:
        ds.close()
    return time.perf_counter() - t0, v


def read_zarr_array(store, sel):
    import zarr
    t0 = time.perf_counter()
    z = zarr.open_array(store, mode="r")
    v = np.asarray(z[np_index(sel)])
    return time.perf_counter() - t0, v


def dask_mean_mmfs(path, chunks):
    import dask.array as da
    import mmfs
    t0 = time.perf_counter()
    x = da.from_array(mmfs.open(path), chunks=chunks)
    m = x.mean().compute(scheduler="threads")
    return time.perf_counter() - t0, float(m)


def dask_mean_memmap(path, shape, chunks):
    import dask.array as da
    t0 = time.perf_counter()
    mm = np.memmap(path, dtype="<f8", mode="r", shape=shape)
    x = da.from_array(mm, chunks=chunks)
    m = x.mean().compute(scheduler="threads")
    del x, mm
    return time.perf_counter() - t0, float(m)


# --------------------------------------------------------------------------
# the readers of each section: name -> (description, on mmfs?)

VIEW_READERS = {
    "xr-mmfs": ("xr.open_dataset(A, engine=\"mmfs\") + .isel(...).values", True),
    "raw": ("open + read of the view file A@/slice/... or A@/box/... into a numpy buffer", True),
    "mmfs.open": ("mmfs.open(A)[key]", True),
    "xr-floor": ("xr.open_dataset(A, engine=<a backend that knows the shape and reads the raw view file>) + "
                 ".isel(...).values: xarray's own cost around a raw read", True),
    "xr-h5netcdf": ("xr.open_dataset(a.h5, engine=\"h5netcdf\") + .isel(...).values, HDF5 chunked {c}", False),
    "xr-zarr": ("xr.open_zarr(store, consolidated=False) + .isel(...).values, zarr v3 chunked {c}", False),
    "xr-zarr-view": ("xr.open_zarr(group, consolidated=False) + .isel(...).values, the group's `a` a symlink to "
                     "A@/zarr/{cc}", True),
}
ZARR_READERS = {
    "zarr-real": ("zarr.open_array(store)[key], a zarr v3 store on the local disk", False),
    "zarr-mmfs": ("zarr.open_array(\"A@/zarr/C0,C1,C2/\")[key], the mmfs zarr view", True),
}
DASK_READERS = {
    "dask-mmfs": ("dask.array.from_array(mmfs.open(A), chunks).mean().compute(scheduler=\"threads\")", True),
    "dask-memmap": ("dask.array.from_array(np.memmap(a.raw), chunks).mean().compute(scheduler=\"threads\")",
                    False),
}


def resolve_dask_chunks(specs, path, preferred, brick):
    """--dask-chunks entries as chunk tuples: 'natural' (the chunk the array
    prefers, mmfs.Array.chunks, its xarray preferred_chunks), 'auto' (dask's
    choice for the mmfs array: multiples of mmfs.Array.chunks), 'brick' (the
    layout's brick, mmfs.Array.brick) or C0xC1x... ; a list of (label, tuple)."""
    import dask.array as da
    import mmfs
    out = []
    for s in specs:
        if s == "natural":
            c = tuple(preferred)
        elif s == "brick":
            c = tuple(brick)
        elif s == "auto":
            c = tuple(int(x) for x in da.from_array(mmfs.open(path), chunks="auto").chunksize)
        else:
            c = tuple(int(x) for x in s.split("x"))
        out.append((s, c))
    return out


def n_chunks(shape, chunks):
    return int(np.prod([-(-s // c) for s, c in zip(shape, chunks)], dtype=np.int64))


class Measure:
    """Times the (row, reader) pairs of the sections; b is the PyBench."""

    def __init__(self, b):
        self.b = b
        self.a = b.a
        self.views = make_views(b.shape, b.a.seed)
        self.times = {}      # (section, row, reader) -> [seconds per run]
        self.errors = {}     # (section, row, reader) -> message
        self.wrong = set()   # (section, row, reader) with a wrong result
        self.values = {}     # (section, row, reader) -> [dask mean per run]
        self.dask_chunks = []
        self.skipped = {}    # dask row -> why it was not measured (--dask-max-chunks)

    # one cold read ------------------------------------------------------
    def cold(self, on_mmfs):
        if on_mmfs and self.a.remount:
            self.b.remount()
        self.b.drop()

    def check(self, got, sel):
        exp = self.b.ref[np_index(sel)]
        got = np.asarray(got)
        if got.shape != np.shape(exp) or got.dtype != np.float64:
            return f"shape {got.shape} {got.dtype}, expected {np.shape(exp)} float64"
        if not np.array_equal(np.ascontiguousarray(got).view("<u8"), np.ascontiguousarray(exp).view("<u8")):
            bad = int(np.count_nonzero(np.ascontiguousarray(got).view("<u8") != np.ascontiguousarray(exp).view("<u8")))
            return f"{bad} of {exp.size} elements differ from the reference"
        return None

    def one(self, key, on_mmfs, fn, check):
        """Runs fn cold; records its time, or the error / wrong result."""
        check_stop()
        if key in self.errors:
            return
        try:
            self.cold(on_mmfs)
            dt, got = fn()
        except Exception as e:  # any reader's failure is an error row, not the end of the run
            check_stop()
            if isinstance(e, OSError) and e.errno is not None:
                msg = f"{type(e).__name__}: {e.strerror or e} ({errno.errorcode.get(e.errno, e.errno)}): {e}"
            else:
                msg = f"{type(e).__name__}: {e}"
            if on_mmfs and self.b.mnt:
                msg += f"; .mmfs/errors: {self.b.mmfs_errors()}"
            self.fail(key, msg)
            d = self.b.daemon
            if on_mmfs and d is not None and d.proc is not None and d.proc.poll() is not None:
                log("the daemon died; mounting again")
                self.b.remount()
            return
        check_stop()
        bad = check(got)
        if bad:
            self.wrong.add(key)
            self.fail(key, "WRONG RESULT: " + bad)
            return
        self.times.setdefault(key, []).append(dt)
        if isinstance(got, float):
            self.values.setdefault(key, []).append(got)
        log(f"{key[0]:>6} {key[1]:>18} {key[2]:>12}: {dt * 1e3:10.2f} ms")

    def fail(self, key, msg):
        self.errors[key] = msg
        self.b.failures.append(f"{key[0]} {key[1]} {key[2]}: {msg}")
        log("ERROR: " + self.b.failures[-1])

    # the sections -------------------------------------------------------
    def view_tasks(self):
        b = self.b
        tasks = []
        for v in self.views:
            sel = v["sel"]
            fns = {
                "xr-mmfs": lambda sel=sel: read_xr_mmfs(b.array, sel),
                "raw": lambda v=v: read_raw(b.view(v["view"]), v["bytes"], result_shape(v["sel"], b.shape)),
                "mmfs.open": lambda sel=sel: read_pkg(b.array, sel),
                "xr-floor": lambda sel=sel: read_xr_floor(b.array, b.shape, sel),
                "xr-h5netcdf": lambda sel=sel: read_xr_h5netcdf(b.h5, sel),
                "xr-zarr": lambda sel=sel: read_xr_zarr(b.zarr_stores[b.chunks], sel),
                "xr-zarr-view": lambda sel=sel: read_xr_zarr(b.view_group, sel),
            }
            for r, fn in fns.items():
                if r in self.a.view_readers:
                    tasks.append((("views", v["id"], r), VIEW_READERS[r][1], fn,
                                  lambda got, sel=sel: self.check(got, sel)))
        return tasks

    def zarr_tasks(self):
        b = self.b
        tasks = []
        for c in b.zarr_chunks:
            for v in self.views:
                sel = v["sel"]
                row = f"{chunk_label(c)}:{v['id']}"
                chk = (lambda got, sel=sel: self.check(got, sel))
                tasks.append((("zarr", row, "zarr-real"), False,
                              lambda c=c, sel=sel: read_zarr_array(f"{b.zarr_stores[c]}/{ARRAY}", sel), chk))
                tasks.append((("zarr", row, "zarr-mmfs"), True,
                              lambda c=c, sel=sel: read_zarr_array(b.zarr_view(c), sel), chk))
        return tasks

    def dask_tasks(self):
        b = self.b
        tasks = []
        for label, c in self.dask_chunks:
            row = f"{label}:{chunk_label(c)}"
            if row in self.skipped:
                continue
            chk = self.check_mean
            tasks.append((("dask", row, "dask-mmfs"), True, lambda c=c: dask_mean_mmfs(b.array, c), chk))
            tasks.append((("dask", row, "dask-memmap"), False, lambda c=c: dask_mean_memmap(b.raw, b.shape, c), chk))
        return tasks

    def check_mean(self, got):
        exp = self.b.ref_mean
        if not np.isfinite(got) or abs(got - exp) > 1e-9 * max(abs(exp), 1e-300):
            return f"mean {got!r}, numpy's {exp!r} (relative difference {abs(got - exp) / max(abs(exp), 1e-300):.3g})"
        return None

    def warm_up(self):
        """One untimed read per reader of a small view, so that imports, xarray's
        engine discovery and dask's first use are not in the first timed read."""
        import dask.array as da
        da.ones(8, chunks=4).mean().compute(scheduler="threads")
        small = next((v for v in self.views if v["id"] == "beam2"), self.views[0])
        b = self.b
        for fn in (lambda: read_xr_mmfs(b.array, small["sel"]), lambda: read_pkg(b.array, small["sel"]),
                   lambda: read_xr_floor(b.array, b.shape, small["sel"]),
                   lambda: read_xr_h5netcdf(b.h5, small["sel"]),
                   lambda: read_xr_zarr(b.zarr_stores[b.chunks], small["sel"]),
                   lambda: read_xr_zarr(b.view_group, small["sel"]),
                   lambda: read_zarr_array(b.zarr_view(b.chunks), small["sel"])):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fn()
            except Exception as e:  # the timed reads will report it
                log(f"warm-up: {type(e).__name__}: {e}")

    def run(self):
        a = self.a
        if "dask" in a.sections:
            self.dask_chunks = resolve_dask_chunks(a.dask_chunks, self.b.array, self.b.preferred, self.b.brick)
            for label, c in self.dask_chunks:
                n = n_chunks(self.b.shape, c)
                log(f"dask chunks {label}: {c} ({n} chunks)")
                if a.dask_max_chunks and n > a.dask_max_chunks:
                    row = f"{label}:{chunk_label(c)}"
                    self.skipped[row] = (f"not measured: {n} chunks, more than --dask-max-chunks "
                                         f"{a.dask_max_chunks} (dask takes about 1 ms per chunk here)")
                    log(f"dask chunks {label}: " + self.skipped[row])
        self.warm_up()
        sections = [("views", self.view_tasks), ("zarr", self.zarr_tasks), ("dask", self.dask_tasks)]
        for run in range(a.runs):
            log(f"--- run {run + 1}/{a.runs}")
            for name, make in sections:
                if name not in a.sections:
                    continue
                tasks = make()
                # rotate the readers of each row from run to run, so no reader always follows the same one
                rows = {}
                for t in tasks:
                    rows.setdefault(t[0][1], []).append(t)
                for row_tasks in rows.values():
                    k = run % len(row_tasks)
                    for key, on_mmfs, fn, check in row_tasks[k:] + row_tasks[:k]:
                        self.one(key, on_mmfs, fn, check)

    def median_ms(self, key):
        s = self.times.get(key)
        if not s or key in self.errors:
            return None
        return statistics.median(s) * 1e3

