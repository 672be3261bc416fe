"""`mmfs-bench python` (bench/python_bench.py): its command line and its pure
parts, without a mount (the benchmark itself is run by hand, as root).

* --help lists the options, bad arguments exit 2 and create nothing;
* `mmfs-bench python --help` reaches the script (when mmfs-bench is built);
* the views are the three middle slices, three beams and the 5 % box;
* the zarr chunk shapes scale with the shape, and the slabs that write a
  store cover the array exactly once, each aligned to the chunks."""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO_ROOT, build_dir

SCRIPT = REPO_ROOT / "bench" / "python_bench.py"
sys.path.insert(0, str(REPO_ROOT / "bench"))


def run_script(*args, timeout=60):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_help_and_bad_arguments():
    proc = run_script("--help")
    assert proc.returncode == 0, proc.stderr
    for word in ("--shape", "--runs", "--dir", "--build", "--geometry", "--layout", "--dask-chunks", "--sections",
                 "--keep", "--reuse", "--no-remount", "--out", "drop_caches", "engine=\"mmfs\""):
        assert word in proc.stdout, word
    for bad in (["--shape", "64,64"], ["--shape", "0,4,4"], ["--runs", "0"], ["--sections", "views,hdf5"],
                ["--view-readers", "netcdf4"], ["--dask-chunks", "8x8"], ["--dask-max-chunks", "-1"]):
        proc = run_script(*bad, "--dir", "/nonexistent/never-created")
        assert proc.returncode == 2, (bad, proc.stderr)
        assert not os.path.exists("/nonexistent/never-created")


def test_mmfs_bench_python_runs_the_script():
    bench = build_dir() / "bench" / "mmfs-bench"
    if not os.access(bench, os.X_OK):
        pytest.skip(f"{bench} is not built")
    proc = subprocess.run([str(bench), "python", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "python_bench.py" in proc.stdout and "--dask-chunks" in proc.stdout


def test_dask_chunk_entries(monkeypatch):
    """--dask-chunks: natural is mmfs.Array.chunks (the xarray preferred_chunks),
    brick the layout's brick, CxCxC as given; a bad entry exits 2."""
    from python_bench_measure import resolve_dask_chunks
    got = resolve_dask_chunks(["natural", "brick", "4x5x6"], None, (128, 128, 128), (8, 8, 8))
    assert got == [("natural", (128, 128, 128)), ("brick", (8, 8, 8)), ("4x5x6", (4, 5, 6))]
    proc = run_script("--dask-chunks", "natural,auto,brick,2x2x2", "--help")
    assert proc.returncode == 0, proc.stderr
    proc = run_script("--dask-chunks", "cells", "--dir", "/nonexistent/never-created")
    assert proc.returncode == 2 and "brick" in proc.stderr


def test_views():
    from python_bench_measure import isel_of, make_views
    shape = (1024, 1024, 256)
    views = make_views(shape, 6)
    assert [v["id"] for v in views] == ["slice0", "slice1", "slice2", "beam2", "beam1", "beam0", "cube5"]
    by = {v["id"]: v for v in views}
    assert by["slice0"]["sel"] == (512, None, None) and by["slice0"]["view"] == "slice/0/512"
    assert by["slice2"]["sel"] == (None, None, 128) and by["slice2"]["bytes"] == 1024 * 1024 * 8
    for d in range(3):
        sel = by[f"beam{d}"]["sel"]
        assert sel[d] is None and all(isinstance(x, int) for i, x in enumerate(sel) if i != d)
        assert by[f"beam{d}"]["view"].startswith("box/") and by[f"beam{d}"]["bytes"] == shape[d] * 8
    box = by["cube5"]["sel"]
    assert [b - a for a, b in box] == [51, 51, 13]
    assert all(0 <= a and b <= s for (a, b), s in zip(box, shape))
    assert make_views(shape, 6) == views  # seeded
    assert isel_of((3, None, (4, 9))) == {"dim_0": 3, "dim_2": slice(4, 9)}


def test_zarr_chunk_shapes_and_aligned_slabs():
    from python_bench_setup import aligned_slabs, zarr_chunk_shapes
    assert zarr_chunk_shapes((1024, 1024, 256), 64) == [(64, 64, 64), (1, 1024, 256), (1024, 1024, 1)]
    assert zarr_chunk_shapes((128, 128, 64), 64) == [(64, 64, 64), (1, 128, 64), (128, 128, 1)]
    assert zarr_chunk_shapes((64, 64, 64), 64) == [(64, 64, 64), (1, 64, 64), (64, 64, 1)]
    for shape, chunks in (((128, 128, 64), (64, 64, 64)), ((128, 128, 64), (1, 128, 64)),
                          ((128, 128, 64), (128, 128, 1)), ((100, 30, 7), (64, 30, 7)), ((5, 6, 7), (5, 6, 7)),
                          ((1024, 1024, 256), (1024, 1024, 1))):
        seen = np.zeros(shape, dtype=np.int8)
        for idx in aligned_slabs(shape, chunks, slab_bytes=1 << 16):
            seen[idx] += 1
            for sl, c, s in zip(idx, chunks, shape):
                assert sl.start % c == 0 and (sl.stop % c == 0 or sl.stop == s), (shape, chunks, idx)
        assert (seen == 1).all(), (shape, chunks)


def test_a_wrong_result_is_an_error_row_not_a_number():
    from types import SimpleNamespace

    from python_bench_measure import Measure
    from python_bench_report import results
    shape = (16, 16, 8)
    ref = np.random.default_rng(1).standard_normal(shape)
    a = SimpleNamespace(seed=6, remount=False, sections=["views"], view_readers=["raw", "xr-mmfs"], runs=1)
    b = SimpleNamespace(a=a, shape=shape, ref=ref, failures=[], drop=lambda: True, mnt=None, daemon=None,
                        zarr_chunks=[], zarr_plans={})
    m = Measure(b)
    v = m.views[0]
    exp = ref[v["sel"][0]]
    m.one(("views", v["id"], "raw"), False, lambda: (0.002, exp.copy()), lambda got: m.check(got, v["sel"]))
    bad = exp.copy()
    bad[1, 2] += 1e-12
    m.one(("views", v["id"], "xr-mmfs"), False, lambda: (0.001, bad), lambda got: m.check(got, v["sel"]))
    m.one(("views", m.views[1]["id"], "raw"), False, lambda: (_ for _ in ()).throw(OSError(5, "Input/output error")),
          lambda got: None)
    assert m.times == {("views", v["id"], "raw"): [0.002]}
    assert "WRONG RESULT: 1 of" in m.errors[("views", v["id"], "xr-mmfs")]
    assert "EIO" in m.errors[("views", m.views[1]["id"], "raw")]
    assert len(b.failures) == 2
    row = results(b, m)["views"][0]
    cell = row["readers"]["xr-mmfs"]
    assert cell["ms"] is None and not cell["verified"] and cell["error"].startswith("WRONG")
    assert row["overhead"] is None and row["overhead_target"] is None  # no ratio from a wrong result
