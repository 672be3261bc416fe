"""The Atropos quadrangle layout (docs/reference.md §4 `user.mmfs.layout=quadrangle`;
layouts/quadrangle_array.h, docs/layouts.md "quadrangle") on a single-device
atlas10k3 volume: every view equals numpy, `A@/info` shows the quadrangle
parameters, a row along the primary dimension is the data sectors of one
track and a column one batch per quadrangle, relayout keeps the bytes, and a
MEMS volume refuses the layout with ENOTSUP, changing nothing. The same on a
RAID 0 volume of two atlas10k3 images (StripedGeometry): a row is one track
of each member, the two consecutive volume tracks of one member track."""
import errno
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from mmfs_mount import (SCRATCH, ErrorLog, assert_array_bytes, expect_errno, getx, is_mounted, make_array, mkfs_path,
                        mounted, random_array, read_bytes, read_json, run_tool, sel_string, setx, view)

# Atlas 10K III outer zone: N = 686, H = 139; any cell up to 26 sectors gives
# d = 5 and b = 26 (Eq. 3-4), w = 26 blocks a track, R = 10 residual sectors.
ATLAS = {"p": 1, "N": 686, "H": 139, "d": 5, "b": 26, "w": 26, "R": 10, "zone": 0, "stripe_unit_sectors": 686,
         "stripe_unit_blocks": 26, "stripe_tracks": 5}

CASES = {
    "f8-2d": ("float64", (40, 1000), None),
    "i2-3d": ("int16", (6, 8, 700), None),
    "u1-2d": ("uint8", (300, 2000), None),
    "f4-4d": ("float32", (5, 6, 7, 90), None),
    "i8-3d-cube": ("int64", (7, 9, 300), {"basic_cube": "2,2,1", "cell": "1,1,64"}),
    "u4-order": ("uint32", (120, 50), {"order": "0,1"}),
}


@pytest.fixture(scope="module")
def vol(module_volume):
    return module_volume


def some_indices(n):
    return sorted({0, 1, n // 2, n - 1})


def selections(rng, shape, count):
    sels = [tuple(slice(None) for _ in shape), tuple(slice(1, s, 2) if s > 2 else slice(None) for s in shape)]
    for _ in range(count):
        sel = []
        for s in shape:
            kind = rng.integers(0, 4)
            if kind == 0:
                sel.append(int(rng.integers(0, s)))
            elif kind == 1:
                sel.append(slice(None))
            else:
                a = int(rng.integers(0, s))
                b = int(rng.integers(a + 1, s + 1))
                sel.append(slice(a, b, int(rng.integers(2, max(3, s)))) if kind == 3 else slice(a, b))
        sels.append(tuple(sel))
    return sels


def boundaries(vol, lbn):
    low, high = read_bytes(vol.mnt / ".mmfs" / "boundaries" / str(lbn)).split()
    return int(low), int(high)


@pytest.mark.parametrize("case", list(CASES))
def test_quadrangle_arrays_equal_numpy_on_every_view(vol, case):
    dtype, shape, attrs = CASES[case]
    rng = np.random.default_rng(list(CASES).index(case) + 40)
    arr = random_array(rng, shape, dtype)
    path = make_array(vol.mnt / f"quad-{case}", shape, dtype, "quadrangle", arr, attrs=attrs)
    assert getx(path, "layout") == "quadrangle"
    info = read_json(view(path, "info"))
    assert info["layout"] == "quadrangle"
    q = info["quadrangle"]
    for key, value in ATLAS.items():
        assert q[key] == value, f"info.quadrangle.{key} = {q[key]}, expected {value}: {q}"
    assert q["stripes"] >= 1 and len(q["cube"]) == arr.ndim
    if attrs and "basic_cube" in attrs:
        assert q["cube"][:2] == [2, 2]
    assert info["device_bytes"]["data"] == q["stripes"] * 5 * 686 * 512
    # The raw file, numpy's view of it, slices along every dimension, boxes.
    assert_array_bytes(read_bytes(path), arr, "whole file")
    np.testing.assert_array_equal(np.fromfile(str(path), dtype=dtype).reshape(shape), arr)
    for d in range(arr.ndim):
        for i in some_indices(shape[d]):
            assert_array_bytes(read_bytes(view(path, "slice", d, i)), np.take(arr, i, axis=d), f"slice/{d}/{i}")
    for sel in selections(rng, shape, 6):
        assert_array_bytes(read_bytes(view(path, "box", sel_string(sel))), arr[sel], f"box/{sel_string(sel)}")
    # Reads at odd offsets.
    fd = os.open(path, os.O_RDONLY)
    try:
        data = arr.tobytes()
        for _ in range(5):
            off = int(rng.integers(0, len(data)))
            n = int(rng.integers(1, len(data) - off + 1))
            assert os.pread(fd, n, off) == data[off:off + n]
    finally:
        os.close(fd)


def test_cells_avoid_residuals_a_row_is_one_track_a_column_one_batch_per_quadrangle(vol):
    # 4 KiB cells (1 x 512 float64, 8 sectors): k = 3 a block, a row L = w*k = 78 cells.
    shape = (10, 78 * 512)
    arr = random_array(np.random.default_rng(3), shape, "float64")
    path = make_array(vol.mnt / "rows", shape, "float64", "quadrangle", arr, attrs={"cell": "1,512"})
    q = read_json(view(path, "info"))["quadrangle"]
    assert q["cells_per_block"] == 3 and q["row_cells"] == 78 and q["cube"] == [5, 78]
    # Every cell's first sector is in the first w*b = 676 sectors of its track.
    for i in (0, 4, 9):
        for j in range(0, shape[1], 512 * 7):
            lbn = int(read_bytes(view(path, "lbn", f"{i},{j}")).split()[0])
            low, high = boundaries(vol, lbn)
            assert high - low + 1 == 686 and lbn - low < 676, (i, j, lbn, low)
    # A row (slice along dimension 0): the data sectors of one track.
    plan = read_json(view(path, "plan", "slice", "0", "7"))
    requests = [r for b in plan["batches"] for r in b]
    tracks = {boundaries(vol, lbn)[0] for lbn, _ in requests}
    assert len(tracks) == 1, plan
    low = tracks.pop()
    assert all(low <= lbn and lbn + n <= low + 676 for lbn, n in requests), plan
    assert plan["bytes_useful"] == arr[7].nbytes
    # A column (slice along dimension 1): one batch per quadrangle, K = 5 cells each.
    plan = read_json(view(path, "plan", "slice", "1", "1000"))
    assert len(plan["batches"]) == 2, plan
    for b in plan["batches"]:
        assert sum(n for _, n in b) >= 5 * 8
        assert len({boundaries(vol, lbn)[0] for lbn, _ in b}) <= 5
    assert_array_bytes(read_bytes(view(path, "slice", 1, 1000)), arr[:, 1000], "column")


def test_relayout_to_and_from_quadrangle_keeps_the_bytes(vol):
    shape = (50, 60, 7)
    arr = random_array(np.random.default_rng(11), shape, "int32")
    path = make_array(vol.mnt / "moves", shape, "int32", "multimap", arr)
    for layout in ("quadrangle", "naive", "quadrangle", "hilbert", "quadrangle"):
        setx(path, "layout", layout)
        assert read_json(view(path, "info"))["layout"] == layout
        assert_array_bytes(read_bytes(path), arr, f"after relayout to {layout}")
    # Writes at odd offsets into the quadrangle array land where numpy says.
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, np.arange(9, dtype=np.int32).tobytes(), 4 * 4321 + 2 * 4)
        os.fsync(fd)
    finally:
        os.close(fd)
    flat = arr.reshape(-1).copy()
    flat[4323:4332] = np.arange(9, dtype=np.int32)
    assert_array_bytes(read_bytes(path), flat.reshape(shape), "after a write")
    vol.remount()
    assert_array_bytes(read_bytes(path), flat.reshape(shape), "after remount")
    assert read_json(view(path, "info"))["quadrangle"]["d"] == 5


def test_a_depth_split_no_zone_can_take_is_einval(vol):
    path = vol.mnt / "deep"
    path.write_bytes(b"")
    with ErrorLog(vol, "quadrangle"):
        setx(path, "layout", "quadrangle")
        setx(path, "basic_cube", "3,2,1")  # 6 rows, d = 5
        expect_errno(errno.EINVAL, setx, path, "shape", "6,6,100")
    assert path.stat().st_size == 0


def test_quadrangles_need_a_disk_volume(volume_factory):
    mems = volume_factory(geometry="mems-g2")
    shape = (300, 40)
    arr = random_array(np.random.default_rng(8), shape, "float64")
    path = make_array(mems.mnt / "cells", shape, "float64", "naive", arr)
    with ErrorLog(mems, "disk"):
        expect_errno(errno.ENOTSUP, setx, path, "layout", "quadrangle")
    assert getx(path, "layout") == "naive"
    assert read_json(view(path, "info"))["layout"] == "naive"
    assert_array_bytes(read_bytes(path), arr, "after the refused relayout")
    empty = mems.mnt / "empty"
    empty.write_bytes(b"")
    with ErrorLog(mems, "disk"):
        setx(empty, "layout", "quadrangle")
        expect_errno(errno.ENOTSUP, setx, empty, "shape", "100,4")
    assert empty.stat().st_size == 0


# --- two devices, striped track by track ------------------------------------------------

@pytest.fixture(scope="module")
def raid0():
    """A RAID 0 volume of two 256 MiB atlas10k3 images, mounted for the module."""
    root = Path(tempfile.mkdtemp(dir=SCRATCH, prefix="mmfs-quad-raid-"))
    mnt = root / "mnt"
    try:
        images = [root / "m0.img", root / "m1.img"]
        rc, out, err = run_tool(mkfs_path(), "-q", "-f", "-s", "256M", "-g", "atlas10k3", "--raid", "0", *images)
        assert rc == 0, f"mkfs.mmfs --raid 0: exit {rc}\n{out}{err}"
        with mounted(",".join(str(i) for i in images), mnt) as m:
            yield m
    finally:
        if not is_mounted(mnt):
            shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("case", ["f8-2d", "i2-3d", "u4-order", "i8-3d-cube"])
def test_quadrangle_arrays_on_two_striped_disks_equal_numpy(raid0, case):
    dtype, shape, attrs = CASES[case]
    rng = np.random.default_rng(list(CASES).index(case) + 90)
    arr = random_array(rng, shape, dtype)
    path = make_array(raid0.mnt / f"quad-{case}", shape, dtype, "quadrangle", arr, attrs=attrs)
    q = read_json(view(path, "info"))["quadrangle"]
    for key, value in dict(ATLAS, p=2, stripe_tracks=10).items():
        assert q[key] == value, f"info.quadrangle.{key} = {q[key]}, expected {value}: {q}"
    assert_array_bytes(read_bytes(path), arr, "whole file")
    for d in range(arr.ndim):
        for i in some_indices(shape[d]):
            assert_array_bytes(read_bytes(view(path, "slice", d, i)), np.take(arr, i, axis=d), f"slice/{d}/{i}")
    for sel in selections(rng, shape, 4):
        assert_array_bytes(read_bytes(view(path, "box", sel_string(sel))), arr[sel], f"box/{sel_string(sel)}")


def test_a_row_on_two_striped_disks_is_one_track_of_each(raid0):
    # 4 KiB cells, k = 3: a row is w*p*k = 156 cells, 78 on a track of each member.
    shape = (10, 156 * 512)
    arr = random_array(np.random.default_rng(4), shape, "float64")
    path = make_array(raid0.mnt / "rows", shape, "float64", "quadrangle", arr, attrs={"cell": "1,512"})
    assert read_json(view(path, "info"))["quadrangle"]["row_cells"] == 156
    geometry = read_json(raid0.mnt / ".mmfs" / "geometry")
    assert geometry.get("members") == 2, geometry
    for i in (0, 6, 9):
        tracks = set()
        for j in range(0, shape[1], 512):
            lbn = int(read_bytes(view(path, "lbn", f"{i},{j}")).split()[0])
            low, high = boundaries(raid0, lbn)
            assert high - low + 1 == 686 and lbn - low < 676, (i, j, lbn, low)
            tracks.add(low)
        # Two consecutive volume tracks, the first at an even track: one member track of each member.
        assert len(tracks) == 2, (i, sorted(tracks))
        first, second = sorted(tracks)
        assert second == first + 686 and (first // 686) % 2 == 0, (i, first, second)
    assert_array_bytes(read_bytes(view(path, "slice", 0, 6)), arr[6], "row 6")
    assert_array_bytes(read_bytes(path), arr, "whole file")
