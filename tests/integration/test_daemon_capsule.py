"""The capsule layout on a MEMS volume (MEMS paper §5.2): a 2-D array
with user.mmfs.layout=capsule keeps its columns as attributes. Every view
equals numpy, a record (row) is one parallel access of one equivalence class
(`A@/plan`, `/.mmfs/equivalent`), a column streams whole tracks, relayout to
and from capsule keeps the bytes, and volumes or cells capsules cannot serve
are refused with a clear errno."""
import errno
import os

import numpy as np
import pytest

from mmfs_mount import (ErrorLog, assert_array_bytes, expect_errno, make_array, random_array, read_bytes,
                        read_json, setx, view)


def lbn_of(path, idx):
    text = read_bytes(view(path, "lbn", ",".join(str(i) for i in idx))).decode().split()
    return int(text[0])


def equivalence_class(vol, lbn):
    return {int(x) for x in read_bytes(vol.mnt / ".mmfs" / "equivalent" / str(lbn)).split()}


@pytest.mark.parametrize("dtype,shape", [("float64", (5000, 6)), ("int16", (3001, 9)), ("uint8", (70000,)),
                                         ("float32", (700, 4, 3))])
def test_capsule_arrays_equal_numpy_on_every_view(mems, dtype, shape):
    rng = np.random.default_rng(hash((dtype, shape)) % 2**32)
    arr = random_array(rng, shape, dtype)
    path = make_array(mems.mnt / f"cap-{dtype}-{len(shape)}", shape, dtype, "capsule", arr)
    info = read_json(view(path, "info"))
    assert info["layout"] == "capsule"
    itemsize = arr.dtype.itemsize
    assert info["cell"] == [min(shape[0], 512 // itemsize)] + [1] * (len(shape) - 1)
    attributes = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    assert info["capsule"]["attributes"] == attributes
    assert info["capsule"]["sectors"] == attributes
    assert_array_bytes(read_bytes(path), arr, "whole file")
    for d in range(len(shape)):
        for i in {0, shape[d] // 2, shape[d] - 1}:
            assert_array_bytes(read_bytes(view(path, "slice", str(d), str(i))), arr.take(i, axis=d), f"slice {d}/{i}")
    sel = tuple(slice(1, s - 1, 2) if s > 3 else slice(None) for s in shape)
    text = ",".join(f"{s.start}:{s.stop}:{s.step}" if s.start is not None else ":" for s in sel)
    assert_array_bytes(read_bytes(view(path, "box", text)), arr[sel], "box")
    mems.remount()
    assert_array_bytes(read_bytes(path), arr, "after remount")


def test_a_record_is_one_parallel_access_and_a_column_whole_tracks(mems):
    shape = (270 * 64 * 3, 8)  # three bands of 270 capsules, 8 float64 columns
    arr = random_array(np.random.default_rng(5), shape, "float64")
    path = make_array(mems.mnt / "matrix", shape, "float64", "capsule", arr)
    geometry = read_json(mems.mnt / ".mmfs" / "geometry")
    p, T = geometry["parallelism"], geometry["sectors_per_track"]
    for row in (0, 12345, shape[0] - 1):
        lbns = [lbn_of(path, (row, c)) for c in range(shape[1])]
        assert len(set(lbns)) == shape[1]
        # The record's sectors lie in one equivalence class, unless its band
        # crosses into the next cylinder (a split capsule, two classes).
        cls = equivalence_class(mems, lbns[0])
        inside = sum(lbn in cls for lbn in lbns)
        info = read_json(view(path, "info"))
        assert inside == shape[1] or info["capsule"]["split_capsules"] > 0
        plan = read_json(view(path, "plan", "slice", "0", str(row)))
        assert plan["requests"] == shape[1] and len(plan["batches"]) == 1
        assert plan["bytes_read"] == shape[1] * 512
        # The sled reads the record in one pass when it is whole: positioning plus about one row time.
        row_ms = 512 * p / (geometry["bandwidth_mb_s"] * 1e6) * 1e3
        if inside == shape[1]:
            assert plan["modeled_ms"] < 2.0 + 1.5 * row_ms
    # A column: one request per band, whole tracks, nothing read but the column.
    plan = read_json(view(path, "plan", "slice", "1", "3"))
    assert plan["requests"] == 3
    assert all(r[1] == T for b in plan["batches"] for r in b)
    assert plan["bytes_read"] == plan["bytes_useful"]
    whole = read_json(view(path, "plan", "box", ":,:"))
    assert plan["modeled_ms"] < whole["modeled_ms"] / 6


def test_relayout_to_and_from_capsule_keeps_the_bytes(mems):
    shape = (4000, 5)
    arr = random_array(np.random.default_rng(9), shape, "int32")
    path = make_array(mems.mnt / "moves", shape, "int32", "hilbert", arr)
    for layout in ("capsule", "naive", "capsule", "multimap"):
        setx(path, "layout", layout)
        assert read_json(view(path, "info"))["layout"] == layout
        assert_array_bytes(read_bytes(path), arr, f"after relayout to {layout}")
    # Writes at odd offsets into a capsule array land where numpy says.
    setx(path, "layout", "capsule")
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, np.arange(7, dtype=np.int32).tobytes(), 4 * 1234 + 2 * 4)
        os.fsync(fd)
    finally:
        os.close(fd)
    flat = arr.reshape(-1).copy()
    flat[1236:1243] = np.arange(7, dtype=np.int32)
    assert_array_bytes(read_bytes(path), flat.reshape(shape), "after a write")


def test_capsules_refuse_cells_larger_than_a_sector(mems):
    path = mems.mnt / "toolarge"
    path.write_bytes(b"")
    with ErrorLog(mems, "cell"):
        setx(path, "cell", "128,1")
        setx(path, "layout", "capsule")
        expect_errno(errno.EINVAL, setx, path, "shape", "1000,4")


def test_capsules_need_a_mems_volume(volume):
    path = volume.mnt / "disk-capsule"
    path.write_bytes(b"")
    with ErrorLog(volume, "MEMS"):
        setx(path, "layout", "capsule")
        expect_errno(errno.ENOTSUP, setx, path, "shape", "1000,4")
    assert path.stat().st_size == 0
