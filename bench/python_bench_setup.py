"""The setup of bench/python_bench.py (`mmfs-bench python`): PyBench, the
benchmark's state, builds (or with --reuse takes up) the data in --dir:

* an mmfs image (mkfs.mmfs -g --geometry), mounted with the daemon in the
  foreground, holding one float64 array `a` made by `mmfs.create(..., data=)`
  (--layout, default the volume's own);
* `a.h5`: the same data as a netCDF4/HDF5 file written with h5netcdf (dims
  dim_0, dim_1, dim_2 as dimension scales), chunked --chunk per dim;
* `zarr-C0xC1xC2.zarr`: for every chunk shape of the benchmark, a zarr v3
  group written by zarr-python holding the array `a` in those chunks, no
  compressors, no filters (the mmfs zarr view is uncompressed too);
* `a.raw`: the bytes of the array in C order (numpy.memmap reads it);
* `mmfs-zarr.zarr`: made at every mount, a local zarr group whose member
  `a` is a symlink to `MOUNT/a@/zarr/C0,C1,C2` (xr.open_zarr opens groups
  only; the view `A@/zarr/...` is an array).

PyBench reuses the machinery of `mmfs-bench real` (mmfs_bench_real_run.Bench):
its common state (init_state), check_binaries, copy_binaries, try_reuse,
reuse_or_build, make_image, write_manifest, mount, remount, force_unmount,
mmfs_errors and cleanup are inherited; this class sets the attributes they
read and answers the hooks kept_data_lacks and kept_files."""
import os
import shutil
import sys
import time

import numpy as np

from bench_daemon_util import GiB, MiB, BenchError, fmt_bytes, log, read_json_file, write_all
from mmfs_bench_real_run import Bench as RealBench
from mmfs_bench_real_run import mem_available
from mmfs_bench_real_targets import is_mounted
from mmfs_bench_real_workloads import data_slabs

MANIFEST_VERSION = 1
SLAB_BYTES = 64 * MiB       # how much of the reference one write of a baseline takes
ARRAY = "a"                 # the array's name: the file on the mount, the variable in every store


def dim_names(n):
    return [f"dim_{d}" for d in range(n)]


def chunk_label(chunks):
    return "x".join(map(str, chunks))


def zarr_chunk_shapes(shape, edge):
    """The chunk shapes of section 2: edge^n (clipped), (1, S1, S2) and (S0, S1, 1)
    (for a (1024,1024,256) array: 64³, (1,1024,256), (1024,1024,1)); duplicates dropped."""
    out = []
    for c in (tuple(min(edge, s) for s in shape), (1,) + tuple(shape[1:]), tuple(shape[:-1]) + (1,)):
        if c not in out:
            out.append(c)
    return out


def aligned_slabs(shape, chunks, itemsize=8, slab_bytes=SLAB_BYTES):
    """Index tuples (of slices) covering the array in slabs aligned to `chunks`, so
    that no chunk is written twice: along dim 0 when its chunk is shorter than
    the dim, else along the last dim whose chunk is; each slab a multiple of
    that chunk edge, about `slab_bytes` (at least one chunk edge)."""
    n = len(shape)
    split = [d for d in range(n) if chunks[d] < shape[d]]
    if not split:
        return [tuple(slice(0, s) for s in shape)]
    d = 0 if 0 in split else split[-1]
    edge_bytes = itemsize * chunks[d] * int(np.prod([s for i, s in enumerate(shape) if i != d], dtype=np.int64))
    step = chunks[d] * max(1, slab_bytes // max(1, edge_bytes))
    out = []
    for a in range(0, shape[d], step):
        idx = [slice(0, s) for s in shape]
        idx[d] = slice(a, min(shape[d], a + step))
        out.append(tuple(idx))
    return out


class PyBench(RealBench):
    def __init__(self, a):  # noqa: super().__init__ is not called: it builds real's workloads
        self.init_state(a)  # self.chunks: the HDF5 file's and zarr's 64³
        self.zarr_chunks = zarr_chunk_shapes(self.shape, a.chunk)
        self.info = None
        self.brick = None
        self.preferred = None
        self.preferred_chunks = None
        self.zarr_plans = {}
        self.ref_mean = None
        d = a.dir
        self.image = os.path.join(d, "mmfs-python.img")
        self.h5 = os.path.join(d, "a.h5")
        self.raw = os.path.join(d, "a.raw")
        self.zarr_stores = {c: os.path.join(d, f"zarr-{chunk_label(c)}.zarr") for c in self.zarr_chunks}
        self.view_group = os.path.join(d, "mmfs-zarr.zarr")
        self.remount_s = []

    # paths ------------------------------------------------------------
    @property
    def array(self):
        """The mmfs array file."""
        return os.path.join(self.mnt, ARRAY)

    def view(self, view):
        return f"{self.array}@/{view}"

    def zarr_view(self, chunks):
        """The mmfs zarr view of the array in `chunks` (a directory path)."""
        return f"{self.array}@/zarr/{','.join(map(str, chunks))}/"

    # checks -----------------------------------------------------------
    def check_tools(self):
        import importlib
        missing = []
        for mod in ("h5py", "h5netcdf", "zarr", "xarray", "dask"):
            try:
                importlib.import_module(mod)
            except ImportError:
                missing.append(mod)
        if missing:
            raise BenchError("missing Python packages: " + ", ".join(missing) + " (pip install them)")
        import zarr
        if int(zarr.__version__.split(".")[0]) < 3:
            raise BenchError(f"zarr {zarr.__version__} is installed; zarr >= 3 is needed")
        import mmfs
        import xarray as xr
        if "mmfs" not in xr.backends.list_engines():
            raise BenchError("xarray has no engine 'mmfs': pip install ./python (it registers the engine)")
        self.setup["mmfs_package"] = os.path.dirname(mmfs.__file__)
        if os.geteuid() != 0:
            log("WARNING: not root: dropping caches will fail and the daemon may not mount")
        self.check_binaries()

    def image_size(self):
        # multimap pads basic cubes: 1.6x plus room for metadata is plenty (a sparse file)
        size = max(int(self.nbytes * 1.6 * (1 + self.n_copies)) + 512 * MiB, GiB)
        return (size + 64 * MiB - 1) // (64 * MiB) * (64 * MiB)

    @property
    def n_copies(self):
        return len([c for c in self.a.copies.split(";") if c.strip()]) if self.a.copies else 0

    def check_space(self):
        need = self.nbytes * (2.05 + self.n_copies + len(self.zarr_chunks) * 1.05 + 1.4) + 128 * MiB
        free = shutil.disk_usage(self.a.dir).free
        if free < need:
            raise BenchError(f"{self.a.dir}: {fmt_bytes(free)} free, about {fmt_bytes(int(need))} needed")

    # the reference ----------------------------------------------------
    def build_reference(self):
        """The data in memory (every read is compared with it): float64 standard
        normals from numpy.random.default_rng(--seed), slab by slab along dim 0."""
        if self.nbytes > mem_available() // 3:
            raise BenchError(f"the array ({fmt_bytes(self.nbytes)}) does not fit in a third of the available "
                             f"memory ({fmt_bytes(mem_available())}) for the reference; use a smaller --shape")
        log(f"generating the reference ({fmt_bytes(self.nbytes)}, seed {self.a.seed}) in memory")
        self.ref = np.empty(self.shape, dtype="<f8")
        for r0, slab in data_slabs(self.shape, self.chunks[0], self.a.seed):
            self.ref[r0:r0 + slab.shape[0]] = slab
        self.ref_mean = float(np.mean(self.ref))

    # setup ------------------------------------------------------------
    def manifest_wanted(self):
        return {"version": MANIFEST_VERSION, "shape": list(self.shape), "seed": self.a.seed,
                "geometry": self.a.geometry, "layout": self.a.layout, "cell": self.a.cell, "copies": self.a.copies,
                "chunk": self.a.chunk,
                "zarr_chunks": [list(c) for c in self.zarr_chunks]}

    def kept_data_lacks(self, m):
        return None  # manifest_wanted names all the data

    def kept_files(self):
        return [self.image, self.h5, self.raw] + list(self.zarr_stores.values())

    def remove_data(self):
        for p in [self.manifest, self.image, self.h5, self.raw, self.view_group] + list(self.zarr_stores.values()):
            if os.path.islink(p) or os.path.isfile(p):
                os.unlink(p)
            elif os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)

    def mount(self):
        super().mount()
        self.make_view_group()

    def remount(self):
        t0 = time.perf_counter()
        super().remount()
        self.remount_s.append(time.perf_counter() - t0)

    def make_view_group(self):
        """--dir/mmfs-zarr.zarr: a zarr v3 group whose member `a` is the mmfs zarr
        view in --chunk chunks (the mount point stays the same across remounts)."""
        import zarr
        shutil.rmtree(self.view_group, ignore_errors=True)
        zarr.open_group(self.view_group, mode="w", zarr_format=3)
        os.symlink(self.zarr_view(self.chunks).rstrip("/"), os.path.join(self.view_group, ARRAY))

    def build_data(self):
        """Formats and mounts the image, creates the mmfs array and writes every
        baseline from the reference; the ingest times go to setup."""
        import h5netcdf
        import mmfs
        import zarr
        a = self.a
        self.remove_data()
        ingest = {}
        size = self.make_image()
        log(f"writing {fmt_bytes(self.nbytes)} into mmfs, HDF5, {len(self.zarr_chunks)} zarr store(s) and a raw file")
        t0 = time.perf_counter()
        try:
            cell = tuple(int(c) for c in a.cell.split(",")) if a.cell else None
            mmfs.create(self.array, self.shape, "float64", data=self.ref, layout=a.layout or None, cell=cell)
        except OSError as e:
            raise BenchError(f"mmfs.create({self.array}) failed: {e}; .mmfs/errors: {self.mmfs_errors()}")
        ingest["mmfs"] = time.perf_counter() - t0
        if a.copies:
            # built from the data, durable when setxattr returns (docs/reference.md, Copies)
            t0 = time.perf_counter()
            try:
                os.setxattr(self.array, "user.mmfs.copies", a.copies.encode())
            except OSError as e:
                raise BenchError(f"setting user.mmfs.copies={a.copies} failed: {e}; .mmfs/errors: "
                                 f"{self.mmfs_errors()}")
            ingest["mmfs-copies"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        dims = dim_names(self.n)
        with h5netcdf.File(self.h5, "w") as f:
            f.dimensions = dict(zip(dims, self.shape))
            v = f.create_variable(ARRAY, tuple(dims), "<f8", chunks=self.chunks)
            for idx in aligned_slabs(self.shape, self.chunks):
                v[idx] = self.ref[idx]
        self.fsync(self.h5)
        ingest["h5netcdf"] = time.perf_counter() - t0

        for c, store in self.zarr_stores.items():
            t0 = time.perf_counter()
            g = zarr.open_group(store, mode="w", zarr_format=3)
            z = g.create_array(ARRAY, shape=self.shape, chunks=c, dtype="<f8", dimension_names=dims,
                               compressors=None, filters=None, fill_value=0.0)
            for idx in aligned_slabs(self.shape, c):
                z[idx] = self.ref[idx]
            os.sync()  # one file per chunk
            ingest[f"zarr-{chunk_label(c)}"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        flat = self.ref.reshape(-1).view(np.uint8)
        fd = os.open(self.raw, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for off in range(0, flat.size, SLAB_BYTES):
                write_all(fd, flat[off:off + SLAB_BYTES], off)
            os.fsync(fd)
        finally:
            os.close(fd)
        ingest["raw"] = time.perf_counter() - t0
        self.setup["ingest_s"] = ingest
        log("written: " + ", ".join(f"{k} {v:.1f} s" for k, v in ingest.items()))
        if a.keep:
            self.write_manifest(ingest_s=ingest, image_bytes=size)

    @staticmethod
    def fsync(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def read_info(self):
        """A@/info of the mmfs array (layout, cell, ...), and a check of its size."""
        info, err = read_json_file(self.view("info"))
        if info is None:
            raise BenchError(f"{self.view('info')}: {err}; .mmfs/errors: {self.mmfs_errors()}")
        self.info = info
        st = os.stat(self.array)
        if st.st_size != self.nbytes:
            raise BenchError(f"{self.array}: st_size {st.st_size}, expected {self.nbytes}")
        # The layout's brick (mmfs.Array.brick) and the natural dask chunk, mmfs.Array.chunks
        # (the brick grown to >= 16 MiB), which the xarray backend gives as preferred_chunks.
        import mmfs
        import xarray as xr
        arr = mmfs.open(self.array)
        self.brick = tuple(int(c) for c in arr.brick)
        self.preferred = tuple(int(c) for c in arr.chunks)
        with xr.open_dataset(self.array, engine="mmfs") as ds:
            pc = dict(ds[ARRAY].encoding.get("preferred_chunks") or {})
        self.preferred_chunks = pc
        if tuple(pc.get(d) for d in dim_names(self.n)) != self.preferred:
            log(f"WARNING: preferred_chunks {pc} is not mmfs.Array.chunks {self.preferred}")
        # What one chunk of each zarr view costs the device (untimed): A@/plan/zarr/C/c/0/0/0.
        self.zarr_plans = {}
        for c in self.zarr_chunks:
            path = self.view(f"plan/zarr/{','.join(map(str, c))}/c/" + "/".join("0" * self.n))
            plan, err = read_json_file(path)
            self.zarr_plans[c] = ({k: plan.get(k) for k in ("bytes_read", "bytes_useful", "requests", "cells",
                                                            "served_by")}
                                  if plan is not None else {"error": err})

    def cleanup(self):
        # A signal during a (re)mount leaves a daemon that is still mounting: let its mount
        # appear, else the inherited unmount sees nothing to unmount and waits 120 s for it.
        d = self.daemon
        if d is not None and d.proc is not None and self.mnt:
            deadline = time.monotonic() + 10.0
            while not is_mounted(self.mnt) and d.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        super().cleanup()
        # the view group points into the mount: never keep it
        if os.path.lexists(self.view_group):
            shutil.rmtree(self.view_group, ignore_errors=True)
        if self.made_dir and not self.a.keep:
            try:
                os.rmdir(self.a.dir)
            except OSError:
                pass


def python_versions():
    """Versions of the Python packages the benchmark compares."""
    out = {"python": sys.version.split()[0]}
    for mod in ("numpy", "xarray", "zarr", "h5py", "h5netcdf", "dask"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # informational only
            out[mod] = None
    try:
        import h5py
        out["hdf5"] = h5py.version.hdf5_version
    except Exception:
        pass
    return out
