#!/usr/bin/env python3
"""mmfs-bench python: the mmfs Python package (`mmfs.open`, the xarray engine
"mmfs", dask over `mmfs.Array`) and the read-only Zarr v3 view (`A@/zarr/`)
on the real clock with cold caches, beside h5netcdf, zarr-python and
numpy.memmap reading the same data on the same disk (docs/python.md).

Setup (in --dir; bench/python_bench_setup.py): an image formatted by
mkfs.mmfs (--geometry, default atlas10k3 as `mmfs-bench real`), mounted with
the daemon in the foreground, holding the array `a` made by `mmfs.create`
(--layout, default the volume's own); the same data as a netCDF4/HDF5 file
chunked --chunk³ written with h5netcdf, one zarr v3 store per chunk shape of
section 2 and a raw C-order file. The data: float64 standard normals from
numpy.random.default_rng(--seed), held in memory as the reference. --keep
leaves it all (with a manifest); --reuse takes it up when shape, seed,
geometry, layout and chunks match.

What is measured, all in one run:

1. views -- the three middle slices a[m,:,:], a[:,m,:], a[:,:,m], three
   beams a[i,j,:], a[i,:,k], a[:,j,k] at seeded random positions and a 5 %
   box (edge max(1, round(0.05 S_d)), seeded corner: `mmfs-bench real`'s
   cube5), each read by
     xr-mmfs       xr.open_dataset(A, engine="mmfs").a.isel(...).values
     raw           open + read of the view file A@/slice/... or A@/box/...
     mmfs.open     mmfs.open(A)[key]
     xr-h5netcdf   xr.open_dataset(a.h5, engine="h5netcdf")...
     xr-zarr       xr.open_zarr(store 64³, consolidated=False)...
     xr-zarr-view  xr.open_zarr of a local group whose `a` is a symlink to
                   A@/zarr/64,64,64 (xr.open_zarr opens groups, not arrays)
   Targets: xr-mmfs ÷ raw ≤ 1.05 (or ≤ 1 ms more); xr-mmfs ≥ 2× faster than
   xr-h5netcdf and than xr-zarr on every view.
2. zarr -- for chunk shapes 64³, (1, S1, S2) and (S0, S1, 1): the same views
   by zarr.open_array(store)[key] on a real store and on A@/zarr/C0,C1,C2/.
   Target: mmfs ≤ 1.5× the real store.
3. dask -- dask.array.from_array(X, chunks).mean().compute(scheduler=
   "threads") with X = mmfs.open(A) and X = np.memmap(a.raw), for every
   --dask-chunks entry (natural: the chunk the array prefers,
   mmfs.Array.chunks, its xarray preferred_chunks: the layout's brick grown
   to >= 16 MiB; auto: dask's choice on the mmfs array, multiples of it;
   brick: the layout's brick itself); both means checked against numpy's to
   1e-9 relative. Target: mmfs ≤ 1.0× memmap.

Every time covers the user's whole call (open_dataset / open_zarr /
mmfs.open / open included). Cold caches: before every timed read `sync;
echo 3 > /proc/sys/vm/drop_caches`, and before every read on mmfs the daemon
is unmounted and mounted again (--no-remount keeps it up). Medians of --runs.
Every result is compared with the reference; a mismatch or an error is an
error row (and exit status 1), never a number. Targets are reported, not
enforced.

Output: PREFIX.md and PREFIX.json. Always unmounts, and removes what it made
unless --keep, also on errors and SIGTERM/SIGINT.

Usage (as root, from the repository root, after `meson compile -C build`):

  python3 bench/python_bench.py                    # 1024x1024x256, 3 runs -> docs/benchmarks/python-bench
  python3 bench/python_bench.py --shape 128,128,64 --runs 1 --out /tmp/pybench-small
  mmfs-bench python ARGS                            # the same, through mmfs-bench

The code, beside this file: python_bench_setup.py (PyBench: data, stores,
mount; it extends mmfs_bench_real_run.Bench), python_bench_measure.py (views,
readers, cold timed reads, checks) and python_bench_report.py (rows, targets,
JSON, markdown). Helpers come from bench_daemon*.py and mmfs_bench_real*.py.
"""
import argparse
import os
import signal
import statistics
import sys
import textwrap
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "python"))  # this checkout's mmfs package, before an installed one

from bench_daemon import log  # noqa: E402
from mmfs_bench_real import (HelpFormatter, list_option, machine_at_start, parse_shape, run_guarded,  # noqa: E402
                             write_outputs)

SECTIONS = ["views", "zarr", "dask"]
VIEW_READER_NAMES = ["xr-mmfs", "raw", "mmfs.open", "xr-floor", "xr-h5netcdf", "xr-zarr", "xr-zarr-view"]

EPILOG = """\
sections (all by default; --sections to pick):
  views   7 views (3 middle slices, 3 beams, a 5 % box) by xr engine="mmfs",
          the raw view file, mmfs.open()[key], xr h5netcdf (HDF5 64³),
          xr.open_zarr (zarr 64³) and xr.open_zarr through A@/zarr/64,64,64
  zarr    the same views by zarr.open_array on real stores and on
          A@/zarr/C0,C1,C2/ for C = 64³, (1,S1,S2), (S0,S1,1)
  dask    from_array(...).mean() over mmfs.open(A) and over np.memmap

cold caches: drop_caches before every timed read, a fresh mount before every
read on mmfs. Times include opening (open_dataset, open_zarr, mmfs.open).

run time at 1024x1024x256 (2 cores): the natural dask chunk (mmfs.Array.chunks)
is the brick grown to >= 16 MiB (8x8x8 cells: 128x128x128, 128 chunks). The
--dask-chunks entry `brick` (not in the default) is the layout's cell itself:
with 8x8x8 cells (4 KiB) that is 524288 dask chunks, about 1-1.5 ms and 12 KB
of memory each, so 10-15 minutes per read (--dask-max-chunks N leaves such
rows out). The zarr views in chunks (S0,S1,1) and (1,S1,S2) read every 8x8x8
cell once per chunk that
needs it (8x the chunk's bytes): about 16 GiB from the device for a view
that touches every chunk.

output: PREFIX.md, PREFIX.json. exit status: 0 every result correct (targets
are reported, not enforced), 1 error or wrong result, 2 bad arguments.

examples (as root, from the repository root):
  python3 bench/python_bench.py --shape 128,128,64 --runs 1 --out /tmp/pybench-small
  python3 bench/python_bench.py --keep ...; then --reuse ... (skips the setup)
"""


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog=os.environ.get("MMFS_BENCH_PYTHON_PROG") or None,
        description=textwrap.fill(
            "Cold-cache benchmark of the mmfs Python package (xarray engine \"mmfs\", mmfs.open, dask) and of "
            "the Zarr v3 view A@/zarr/ beside h5netcdf, zarr-python and numpy.memmap on the same disk. Run as "
            "root (drop_caches, FUSE). Writes PREFIX.md and PREFIX.json.", 79),
        epilog=EPILOG, formatter_class=HelpFormatter)
    ap.add_argument("--dir", default="/var/tmp/mmfs-python-bench",
                    help="working directory on the disk under test (image, HDF5 file, zarr stores, raw file, "
                         "mountpoint)")
    ap.add_argument("--build", default=os.environ.get("MMFS_BUILD") or os.path.join(REPO, "build"),
                    help="meson build directory holding daemon/mmfs and mkfs/mkfs.mmfs ($MMFS_BUILD)")
    ap.add_argument("--shape", default="1024,1024,256", help="array shape S0,S1,S2")
    ap.add_argument("--geometry", default="atlas10k3", help="mkfs.mmfs -g PROFILE|FILE.json|measure")
    ap.add_argument("--layout", default="", help="the array's layout (mmfs.create layout=); empty: the volume's "
                                                 "default layout")
    ap.add_argument("--cell", default="", help="the layout's cell C0,C1,C2 (mmfs.create cell=); empty: the "
                                               "layout's own choice")
    ap.add_argument("--copies", default="",
                    help="user.mmfs.copies of the array, set after its data (e.g. "
                         "'naive:cell=1,1024,256;naive:cell=1024,1024,1': a copy in whole chunks of each thin zarr "
                         "chunk shape); empty: none")
    ap.add_argument("--mount-options", default="", help="daemon -o OPTS")
    ap.add_argument("--runs", type=int, default=3, help="repetitions of everything; medians reported")
    ap.add_argument("--chunk", type=int, default=64, help="chunk edge of the HDF5 file and of the first zarr "
                                                          "store (clipped to the dims)")
    ap.add_argument("--dask-chunks", default="natural,auto",
                    help="comma-separated dask chunkings of section 3: natural (mmfs.Array.chunks, the xarray "
                         "preferred_chunks: the brick grown to >= 16 MiB), auto (dask's choice on the mmfs array: "
                         "multiples of natural), brick (the layout's brick, mmfs.Array.brick), or C0xC1xC2")
    ap.add_argument("--dask-max-chunks", type=int, default=0,
                    help="skip a dask chunking of more chunks than this (0: no limit); the brick of an 8x8x8 "
                         "cell makes 524288 chunks of a 1024x1024x256 array, and dask takes about 1 ms and 12 KB "
                         "per chunk")
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated among " + ", ".join(SECTIONS))
    ap.add_argument("--view-readers", default=",".join(VIEW_READER_NAMES),
                    help="comma-separated readers of section 1 among " + ", ".join(VIEW_READER_NAMES))
    ap.add_argument("--seed", type=int, default=6, help="seed of the data and of the beam and box positions")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "benchmarks", "python-bench"),
                    help="output prefix: PREFIX.md and PREFIX.json")
    ap.add_argument("--keep", action="store_true", help="keep the image, the stores and a manifest in --dir")
    ap.add_argument("--reuse", action="store_true",
                    help="take up the data of an earlier --keep run when shape, seed, geometry, layout, cell, copies and chunks "
                         "match (else build it again)")
    ap.add_argument("--no-remount", dest="remount", action="store_false",
                    help="do not remount the daemon before every read on mmfs (its caches may then be warm)")
    a = ap.parse_args(argv)
    a.shape = parse_shape(ap, a.shape, "S0,S1,S2")
    if len(a.shape) != 3 or min(a.shape) < 1:
        ap.error("--shape: three positive dims")
    if a.runs < 1 or a.chunk < 1:
        ap.error("--runs and --chunk must be positive")
    if a.dask_max_chunks < 0:
        ap.error("--dask-max-chunks: 0 (no limit) or a positive count")
    a.sections = list_option(ap, "sections", a.sections, SECTIONS)
    a.view_readers = list_option(ap, "view-readers", a.view_readers, VIEW_READER_NAMES)
    a.dask_chunks = list_option(ap, "dask-chunks", a.dask_chunks, None)
    for c in a.dask_chunks:
        if c not in ("natural", "auto", "brick"):
            try:
                t = tuple(int(x) for x in c.split("x"))
            except ValueError:
                t = ()
            if len(t) != 3 or min(t) < 1:
                ap.error(f"--dask-chunks: {c!r} is not natural, auto, brick or C0xC1xC2")
    if not a.sections:
        ap.error("--sections: empty")
    if "dask" in a.sections and not a.dask_chunks:
        ap.error("--dask-chunks: empty")
    a.dir = os.path.abspath(a.dir)
    a.out = os.path.abspath(a.out)
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    # imported after parsing, so that --help works without them
    from python_bench_measure import STOP, Measure
    from python_bench_report import report, results, to_json
    from python_bench_setup import PyBench, python_versions

    def stop(signum, _frame):
        STOP["signal"] = signum
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    # zarr-python and xarray warn about zarr v3 specifications and consolidated metadata; not our concern here
    warnings.filterwarnings("ignore", category=UserWarning, module=r"zarr\..*")
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"xarray\..*")
    b = PyBench(a)
    m = None
    t_start = time.perf_counter()

    def steps():
        nonlocal m
        b.check_tools()
        os.makedirs(a.dir, exist_ok=True)
        machine = machine_at_start(a, packages=python_versions())
        b.copy_binaries()
        b.build_reference()
        if b.reuse_or_build():
            b.mount()
        b.read_info()
        m = Measure(b)
        t0 = time.perf_counter()
        m.run()
        b.setup["measure_s"] = time.perf_counter() - t0
        return machine

    status, machine = run_guarded(b, "mmfs-bench python", steps, t_start)
    if machine is not None:  # measured
        if b.remount_s:
            b.setup["remount_ms_median"] = statistics.median(b.remount_s) * 1e3
            b.setup["remounts"] = len(b.remount_s)
        rows = results(b, m)
        res = to_json(b, m, machine, rows)
        md = report(b, m, res)
        os.makedirs(os.path.dirname(a.out), exist_ok=True)
        write_outputs(a.out, md, res)
        log(f"wrote {a.out}.md and {a.out}.json in {time.perf_counter() - t_start:.0f} s")
        if b.failures:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
