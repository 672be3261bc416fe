"""The mloc layout through the daemon (docs/reference.md §4-§5, paper 004 §III): an mloc
array is a sealed image of (value bin, byte group, Hilbert-ordered chunk)
units in the order its priority names, optionally zstd-packed. Its first
write after a seal unpacks it into a naive staging placement; fsync, the last
close and unmount re-bin and encode a new image.

Every view of an mloc array equals numpy for every dtype and priority, with
and without compression; `A@/info` describes the image; bins, writes at any
offset, relayout in and out, truncate, `A@/lbn`, bad schema values and a
corrupted image behave as the contract says; PLoD reads fewer device bytes
and zstd shrinks smooth data."""
import errno
import os
import re
import time

import numpy as np
import pytest

from mmfs_mount import (DTYPES, ErrorLog, assert_array_bytes, expect_errno, getx, make_array, parse_ints,
                        plod, pread_all, pwrite_all, random_array, read_bytes, read_json, sel_string, setx, view)

PRIORITIES = ["V-M-S", "V-S-M", "M-V-S", "M-S-V", "S-V-M", "S-M-V"]
SHAPE = (13, 17, 9)   # with CHUNK: 4 x 3 x 3 chunks, clipped at every far edge
CHUNK = (4, 8, 4)
SEALED_TIMEOUT = 10.0  # seconds for the last close's seal (FUSE sends RELEASE asynchronously)


# --- helpers ----------------------------------------------------------------------------

@pytest.fixture
def d(module_volume, request):
    """A fresh directory of the module's volume, named after the test."""
    name = request.node.name
    for c in "[]/,:":
        name = name.replace(c, "_")
    path = module_volume.mnt / name
    path.mkdir()
    return path


def info_of(path):
    return read_json(view(path, "info"))


def mloc_of(path):
    info = info_of(path)
    assert info["layout"] == "mloc", f"{path.name}: layout {info['layout']}"
    assert "mloc" in info, f"{path.name}@/info has no mloc object: {info}"
    return info["mloc"]


def is_sealed(m):
    """A sealed image holding data: no `sealed: false`, and its levels shown."""
    return m.get("sealed", True) is not False and "byte_groups" in m and "bins" in m


def assert_sealed(path, what=""):
    m = mloc_of(path)
    assert is_sealed(m), f"{path.name} {what}: expected a sealed image, info says {m}"
    return m


def assert_staging(path, what=""):
    m = mloc_of(path)
    assert m.get("sealed") is False and m.get("staging") == "naive", \
        f"{path.name} {what}: expected the staging placement, info says {m}"


def wait_sealed(path, what="after the last close"):
    """The last close seals (the daemon's RELEASE, which the kernel sends
    without waiting): polls A@/info until it shows a sealed image."""
    deadline = time.monotonic() + SEALED_TIMEOUT
    while True:
        m = mloc_of(path)
        if is_sealed(m):
            return m
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} {what}: not sealed {SEALED_TIMEOUT:.0f} s later: {m}")
        time.sleep(0.05)


def check(path, expected, what):
    expected = np.ascontiguousarray(expected)
    assert os.stat(path).st_size == expected.nbytes, f"{what}: st_size"
    assert_array_bytes(read_bytes(path), expected, what)


def group_sizes(dtype):
    """MLOC's byte groups (layouts/mloc.h, paper Fig. 3): float64's two most
    significant bytes together, then one byte a group; other dtypes one byte a group."""
    dtype = np.dtype(dtype)
    return [2] + [1] * 6 if dtype == np.float64 else [1] * dtype.itemsize


def random_selection(rng, shape):
    """A box with a step in at least one dimension; sometimes a fixed index."""
    while True:
        sel, stepped = [], False
        for s in shape:
            kind = int(rng.integers(0, 4))
            if kind == 0:
                sel.append(int(rng.integers(0, s)))
            elif kind == 1:
                sel.append(slice(None))
            else:
                a = int(rng.integers(0, s - 1))
                b = int(rng.integers(a + 1, s + 1))
                step = int(rng.integers(2, 5))
                sel.append(slice(a, b, step))
                stepped = True
        if stepped:
            return tuple(sel)


def stats_bytes_read(vol):
    stats = read_json(vol.mnt / ".mmfs" / "stats")
    return stats["sectors_read"] * stats["sector_size"]


def with_nans(arr, rng, count=7):
    arr = arr.copy()
    flat = arr.reshape(-1)
    flat[rng.choice(flat.size, size=count, replace=False)] = np.nan
    return arr


# --- 1. every dtype and priority, with and without zstd: every view equals numpy ----------

CASES = ([(dtype, "V-M-S") for dtype in DTYPES] +
         [(dtype, priority) for priority in PRIORITIES[1:] for dtype in ("float64", "int16")])


@pytest.mark.parametrize("compress", ["none", "zstd"])
@pytest.mark.parametrize("dtype,priority", CASES, ids=[f"{dt}-{p}" for dt, p in CASES])
def test_views_equal_numpy(d, dtype, priority, compress):
    seed = DTYPES.index(dtype) * 100 + PRIORITIES.index(priority) * 10 + (compress == "zstd")
    rng = np.random.default_rng(seed)
    arr = random_array(rng, SHAPE, dtype)
    p = make_array(d / "a", SHAPE, dtype, "mloc", arr,
                   attrs={"priority": priority, "chunk": ",".join(map(str, CHUNK)), "compress": compress})

    # The schema echoed, and the image described.
    assert getx(p, "layout") == "mloc" and getx(p, "priority") == priority
    assert getx(p, "compress") == compress and parse_ints(getx(p, "chunk")) == list(CHUNK)
    info = info_of(p)
    assert info["layout"] == "mloc" and info["priority"] == priority and info["compress"] == compress
    assert info["dtype"] == np.dtype(dtype).name and list(info["shape"]) == list(SHAPE)
    assert parse_ints(info["chunk"]) == list(CHUNK)
    assert info["bytes"] == arr.nbytes
    m = info["mloc"]
    assert is_sealed(m), f"an mloc array created with data is sealed: {m}"
    assert parse_ints(m["chunk"]) == list(CHUNK)
    chunks = int(np.prod([-(-s // c) for s, c in zip(SHAPE, CHUNK)]))
    assert m["chunks"] == chunks
    groups = m["byte_groups"]
    assert [g["bytes"] for g in groups] == group_sizes(dtype), groups
    assert [g["first_byte"] for g in groups] == list(np.cumsum([0] + group_sizes(dtype))[:-1])
    assert sum(g["raw"] for g in groups) == arr.nbytes, "every element byte is in exactly one group"
    for g in groups:
        assert g["raw"] == arr.size * g["bytes"]
        if compress == "none":
            assert g["stored"] == g["raw"], f"uncompressed: stored == raw ({g})"
        else:
            assert g["stored"] <= g["raw"], f"zstd only where it shrinks ({g})"
    assert m["zstd_level"] == (0 if compress == "none" else 3)
    assert m["units"] == m["bins"] * len(groups) * chunks
    if arr.dtype.kind == "f":  # the default 100 equal-frequency value bins, and the NaN bin
        assert str(info["bins"]) == "100" and m["bins"] == 100 + 1, f"bins {info['bins']}: {m['bins']}"
    assert m["image_bytes"] >= sum(g["stored"] for g in groups) + m["positions"]["stored"]
    assert info["device_bytes"]["data"] >= m["image_bytes"]

    # The file, a slice per dimension, boxes with steps.
    check(p, arr, "the whole file")
    for dim in range(arr.ndim):
        idx = int(rng.integers(0, SHAPE[dim])) if dim != 1 else SHAPE[dim] - 1  # one clipped edge chunk
        check(view(p, "slice", dim, idx), np.take(arr, idx, axis=dim), f"slice/{dim}/{idx}")
    sels = [random_selection(rng, SHAPE) for _ in range(3)]
    for sel in sels:
        check(view(p, "box", sel_string(sel)), arr[sel], f"box/{sel_string(sel)}")

    # PLoD: every K, then a box and a slice of a PLoD copy.
    item = arr.dtype.itemsize
    for k in range(1, item + 1):
        check(view(p, "plod", k), plod(arr, k), f"plod/{k}")
    k = max(1, item // 2)
    sel = sels[0]
    check(view(p, "plod", f"{k}@", "box", sel_string(sel)), plod(arr, k)[sel], f"plod/{k}@/box/{sel_string(sel)}")
    check(view(p, "plod", f"{k}@", "slice", 2, 8), plod(arr, k)[:, :, 8], f"plod/{k}@/slice/2/8")


# --- 2. bins ------------------------------------------------------------------------------

def edges_for(arr):
    """Six edges (seven value bins) at the data's quantiles."""
    vals = arr[~np.isnan(arr)] if arr.dtype.kind == "f" else arr
    q = np.quantile(vals.astype(np.float64), [i / 7 for i in range(1, 7)])
    if arr.dtype.kind in "iu":
        q = np.round(q).astype(np.int64)
        assert len(set(q.tolist())) == 6
        return "edges:" + ",".join(str(int(x)) for x in q)
    return "edges:" + ",".join(f"{x:.6g}" for x in q)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "int64", "float32", "float64"])
@pytest.mark.parametrize("kind", ["count", "edges"])
def test_bins(d, dtype, kind):
    rng = np.random.default_rng(200 + DTYPES.index(dtype))
    arr = random_array(rng, SHAPE, dtype)
    if arr.dtype.kind == "f":
        arr = with_nans(arr, rng)  # the NaN bin holds them
    spec = "7" if kind == "count" else edges_for(arr)
    p = make_array(d / "a", SHAPE, dtype, "mloc", arr, attrs={"bins": spec, "chunk": ",".join(map(str, CHUNK))})
    assert getx(p, "bins") == spec
    info = info_of(p)
    assert str(info["bins"]) == spec
    m = info["mloc"]
    assert is_sealed(m), m
    # Seven value bins; float dtypes have one more, for NaN (indexes/binning.h).
    nan_bin = 1 if arr.dtype.kind == "f" else 0
    assert m["bins"] == 7 + nan_bin, f"bins {spec} of {dtype}: info says {m['bins']} bins"
    assert m["units"] == m["bins"] * len(m["byte_groups"]) * m["chunks"]
    check(p, arr, f"bins {spec}: the whole file")
    check(view(p, "slice", 0, 5), arr[5], f"bins {spec}: slice/0/5")
    check(view(p, "box", "1:12:3,:,2:9:2"), arr[1:12:3, :, 2:9:2], f"bins {spec}: a box")
    check(view(p, "plod", 1), plod(arr, 1), f"bins {spec}: plod/1")
    # Re-binning an array that holds data keeps its data.
    setx(p, "bins", "3")
    m = assert_sealed(p, "after bins 3")
    assert m["bins"] == 3 + nan_bin
    check(p, arr, "after re-binning to 3")


def test_default_bins_of_an_integer_mloc_array_are_what_is_reported(d):
    rng = np.random.default_rng(210)
    arr = random_array(rng, SHAPE, "uint8")
    p = make_array(d / "a", SHAPE, "uint8", "mloc", arr, attrs={"chunk": ",".join(map(str, CHUNK))})
    reported = getx(p, "bins")
    assert str(info_of(p)["bins"]) == reported
    bins = assert_sealed(p)["bins"]
    # Setting the effective value that getfattr shows changes nothing.
    setx(p, "bins", reported)
    assert assert_sealed(p, f"after setting bins to {reported!r}")["bins"] == bins, \
        f"user.mmfs.bins said {reported!r} with {bins} bins; setting {reported!r} gives another binning"
    if reported == "exact":
        assert bins == len(np.unique(arr)), f"'exact' bins of {len(np.unique(arr))} distinct values: {bins}"
    check(p, arr, "the whole file")


# --- 3. writes at any offset: staging, then sealed again ----------------------------------

@pytest.mark.parametrize("dtype,compress", [("float64", "zstd"), ("int16", "none"), ("uint32", "none")])
def test_writes_unseal_and_close_seals(volume, dtype, compress):
    rng = np.random.default_rng(300 + DTYPES.index(dtype))
    arr = random_array(rng, SHAPE, dtype)
    p = make_array(volume.mnt / "a", SHAPE, dtype, "mloc", arr,
                   attrs={"chunk": ",".join(map(str, CHUNK)), "compress": compress})
    first = assert_sealed(p, "after creation")
    expected = bytearray(arr.tobytes())
    new = random_array(rng, SHAPE, dtype).tobytes()
    item = arr.dtype.itemsize
    fd = os.open(p, os.O_RDWR)
    try:
        # Random pieces, most cutting elements (odd offsets and lengths).
        for i in range(40):
            off = int(rng.integers(0, len(expected) - 1))
            n = int(rng.integers(1, min(3 * 4096, len(expected) - off) + 1))
            if i % 3 == 0:
                n = min(n, 2 * item + 1)
            pwrite_all(fd, new[off:off + n], off)
            expected[off:off + n] = new[off:off + n]
            if i == 0:
                assert_staging(p, "after the first write")
            if i % 10 == 9:
                exp = np.frombuffer(bytes(expected), dtype=arr.dtype).reshape(SHAPE)
                check(p, exp, f"staging, after {i + 1} writes (another descriptor)")
                assert pread_all(fd, len(expected), 0) == bytes(expected), "the writer's descriptor reads its writes"
                check(view(p, "slice", 2, 3), exp[:, :, 3], "staging: slice/2/3")
                check(view(p, "plod", 1), plod(exp, 1), "staging: plod/1")
                assert_staging(p, f"after {i + 1} writes (the descriptor is open)")
        # The last byte and the first: the ends of the array.
        for off in (0, len(expected) - 1):
            pwrite_all(fd, b"\x5a", off)
            expected[off] = 0x5A
        # fsync seals while the file is still open; the next write unseals.
        os.fsync(fd)
        exp = np.frombuffer(bytes(expected), dtype=arr.dtype).reshape(SHAPE)
        assert_sealed(p, "after fsync")
        check(p, exp, "after fsync")
        pwrite_all(fd, new[100:203], 100)
        expected[100:203] = new[100:203]
        assert_staging(p, "after a write that followed fsync")
    finally:
        os.close(fd)
    exp = np.frombuffer(bytes(expected), dtype=arr.dtype).reshape(SHAPE)
    m = wait_sealed(p)
    assert sum(g["raw"] for g in m["byte_groups"]) == arr.nbytes
    assert m["zstd_level"] == first["zstd_level"] and parse_ints(m["chunk"]) == list(CHUNK)
    check(p, exp, "sealed after the last close")
    check(view(p, "box", "2:13:5,1:17:3,:"), exp[2:13:5, 1:17:3, :], "sealed: a box")
    check(view(p, "plod", 2), plod(exp, 2), "sealed: plod/2")
    volume.remount()
    assert_sealed(p, "after the remount")
    check(p, exp, "after the remount")
    check(view(p, "slice", 0, 12), exp[12], "after the remount: slice/0/12")


def test_unfsynced_writes_survive_a_remount(volume):
    """Writes that were never fsynced: the last close seals, unmount makes it durable."""
    rng = np.random.default_rng(330)
    arr = random_array(rng, SHAPE, "float32")
    p = make_array(volume.mnt / "a", SHAPE, "float32", "mloc", arr, attrs={"chunk": ",".join(map(str, CHUNK))})
    patch = random_array(rng, (5, 17, 9), "float32")
    fd = os.open(p, os.O_WRONLY)
    try:
        pwrite_all(fd, patch.tobytes()[3:-3], 4 * 17 * 9 * 4 + 3)
    finally:
        os.close(fd)
    raw = bytearray(arr.tobytes())
    raw[4 * 17 * 9 * 4 + 3:4 * 17 * 9 * 4 + 3 + patch.nbytes - 6] = patch.tobytes()[3:-3]
    exp = np.frombuffer(bytes(raw), dtype=np.float32).reshape(SHAPE)
    volume.remount()
    assert_sealed(p, "after the remount")
    check(p, exp, "after the remount")


# --- 4. PLoD reads fewer device bytes ----------------------------------------------------

PLOD_SHAPE = (256, 256, 64)


# Large enough that a bin's byte groups span several chunks: the groups a
# PLoD skips are then far apart on the device, not merged into one read (a
# 64^3 array is one chunk, whose skipped groups are read through).
@pytest.mark.parametrize("priority", ["V-M-S", "M-V-S"])
def test_plod_reads_less(volume, priority):
    rng = np.random.default_rng(400)
    arr = random_array(rng, PLOD_SHAPE, "float64")
    p = make_array(volume.mnt / "a", PLOD_SHAPE, "float64", "mloc", arr, attrs={"priority": priority})
    m = assert_sealed(p)
    groups = m["byte_groups"]
    # plod/3 needs the position lists and the first two groups (3 bytes of 8).
    needed = m["positions"]["stored"] + groups[0]["stored"] + groups[1]["stored"]
    assert groups[0]["bytes"] + groups[1]["bytes"] == 3

    # The plans: PLoD reads less than the whole array, and a PLoD slice less
    # than the slice.
    whole_plan = read_json(view(p, "plan", "box", ":,:,:"))
    plod3_plan = read_json(view(p, "plan", "plod", 3))
    plod1_plan = read_json(view(p, "plan", "plod", 1))
    plod8_plan = read_json(view(p, "plan", "plod", 8))
    slice_plan = read_json(view(p, "plan", "slice", 0, 5))
    plod3_slice_plan = read_json(view(p, "plan", "plod", "3@", "slice", 0, 5))
    assert plod1_plan["bytes_read"] <= plod3_plan["bytes_read"] <= plod8_plan["bytes_read"]
    assert plod8_plan["bytes_read"] == whole_plan["bytes_read"]
    assert plod3_plan["bytes_useful"] == whole_plan["bytes_useful"] == arr.nbytes
    assert plod3_plan["bytes_read"] < whole_plan["bytes_read"]
    assert whole_plan["bytes_read"] >= arr.nbytes
    assert slice_plan["bytes_useful"] == arr[5].nbytes and slice_plan["bytes_read"] <= whole_plan["bytes_read"]
    assert plod3_slice_plan["bytes_read"] < slice_plan["bytes_read"] < whole_plan["bytes_read"]
    assert plod3_slice_plan["bytes_read"] < plod3_plan["bytes_read"]

    # What the device really reads, from a fresh daemon (no cache) each time;
    # the array is looked up (its image directory loaded) before counting.
    volume.remount()
    os.stat(p)
    os.stat(view(p, "plod", 3))
    before = stats_bytes_read(volume)
    got = read_bytes(view(p, "plod", 3))
    plod_bytes = stats_bytes_read(volume) - before
    assert_array_bytes(got, plod(arr, 3), "plod/3")
    volume.remount()
    os.stat(p)
    before = stats_bytes_read(volume)
    got = read_bytes(p)
    full_bytes = stats_bytes_read(volume) - before
    assert_array_bytes(got, arr, "the whole file")

    assert full_bytes >= arr.nbytes, f"the whole array read {full_bytes} device bytes, less than its size"
    assert plod_bytes <= needed * 1.05 + (64 << 10), (
        f"{priority}: plod/3 read {plod_bytes} device bytes; it needs {needed} (positions and 3 of 8 bytes); "
        f"the whole array read {full_bytes}")
    assert plod_bytes <= 0.55 * full_bytes, (
        f"{priority}: plod/3 read {plod_bytes} device bytes, {plod_bytes / full_bytes:.1%} of the "
        f"{full_bytes} of the whole array")
    assert plod3_plan["bytes_read"] <= needed * 1.05 + (64 << 10)


# --- 5. zstd shrinks smooth data ---------------------------------------------------------

def smooth_field(shape=(64, 64, 64)):
    g = [np.linspace(0.0, 4.0 * np.pi, s) for s in shape]
    return (np.sin(g[0])[:, None, None] + np.cos(g[1])[None, :, None] * np.sin(0.5 * g[2])[None, None, :]) * 1000.0


def test_zstd_shrinks_smooth_data(d):
    arr = smooth_field()
    plain = make_array(d / "plain", arr.shape, "float64", "mloc", arr)
    packed = make_array(d / "packed", arr.shape, "float64", "mloc", arr, attrs={"compress": "zstd"})
    mp, mz = assert_sealed(plain), assert_sealed(packed)
    assert mz["zstd_level"] == 3 and mp["zstd_level"] == 0
    gz = mz["byte_groups"]
    assert sum(g["raw"] for g in gz) == arr.nbytes
    assert gz[0]["stored"] < gz[0]["raw"], f"the most significant bytes of a smooth field compress: {gz[0]}"
    assert gz[0]["stored"] < 0.5 * gz[0]["raw"], gz[0]
    assert sum(g["stored"] for g in gz) < sum(g["raw"] for g in gz)
    assert all(g["stored"] <= g["raw"] for g in gz)
    assert mz["positions"]["stored"] <= mz["positions"]["raw"]
    dz = info_of(packed)["device_bytes"]["data"]
    dp = info_of(plain)["device_bytes"]["data"]
    assert dz < arr.nbytes * 1.05, f"zstd: {dz} device bytes for {arr.nbytes} bytes of smooth data"
    assert dz < dp, f"zstd: {dz} device bytes, uncompressed {dp}"
    assert mz["image_bytes"] < mp["image_bytes"]
    check(packed, arr, "zstd: the whole file")
    check(view(packed, "slice", 1, 40), arr[:, 40, :], "zstd: slice/1/40")
    check(view(packed, "plod", 2), plod(arr, 2), "zstd: plod/2")
    # zstd plod/3 plans fewer bytes than the uncompressed one.
    assert read_json(view(packed, "plan", "plod", 3))["bytes_read"] < \
        read_json(view(plain, "plan", "plod", 3))["bytes_read"]


# --- 6. relayout --------------------------------------------------------------------------

def test_relayout_in_and_out_of_mloc(volume):
    rng = np.random.default_rng(600)
    shape = (20, 30, 16)
    arr = random_array(rng, shape, "float32")
    p = make_array(volume.mnt / "a", shape, "float32", "multimap", arr)
    check(p, arr, "multimap")

    setx(p, "layout", "mloc")
    assert getx(p, "layout") == "mloc"
    m = assert_sealed(p, "multimap -> mloc")
    assert sum(g["raw"] for g in m["byte_groups"]) == arr.nbytes
    check(p, arr, "multimap -> mloc")
    check(view(p, "box", "3:20:4,:,5"), arr[3:20:4, :, 5], "multimap -> mloc: a box")

    setx(p, "layout", "naive")
    info = info_of(p)
    assert info["layout"] == "naive" and "mloc" not in info, info
    check(p, arr, "mloc -> naive")
    check(view(p, "slice", 1, 29), arr[:, 29, :], "mloc -> naive: slice/1/29")

    setx(p, "layout", "mloc")
    assert_sealed(p, "naive -> mloc")
    check(p, arr, "naive -> mloc")
    for name, value in [("priority", "S-V-M"), ("chunk", "8,8,8"), ("compress", "zstd:5"), ("priority", "M-S-V"),
                        ("chunk", "5,7,16"), ("compress", "none")]:
        setx(p, name, value)
        assert getx(p, name) == value
        info = info_of(p)
        m = info["mloc"]
        assert is_sealed(m), f"after {name}={value}: {m}"
        if name == "chunk":
            assert parse_ints(info["chunk"]) == parse_ints(value) == parse_ints(m["chunk"])
        elif name == "priority":
            assert info["priority"] == value
        else:
            assert info["compress"] == value and m["zstd_level"] == (5 if value == "zstd:5" else 0)
        check(p, arr, f"after {name}={value}")
        check(view(p, "plod", 3), plod(arr, 3), f"after {name}={value}: plod/3")
    assert mloc_of(p)["chunks"] == 4 * 5 * 1

    volume.remount()
    info = info_of(p)
    assert info["layout"] == "mloc" and info["priority"] == "M-S-V" and info["compress"] == "none"
    assert parse_ints(info["chunk"]) == [5, 7, 16]
    assert is_sealed(info["mloc"])
    check(p, arr, "after the remount")
    check(view(p, "slice", 2, 15), arr[:, :, 15], "after the remount: slice/2/15")

    # And out again, after the remount.
    setx(p, "layout", "hilbert")
    check(p, arr, "mloc -> hilbert")
    volume.remount()
    assert info_of(p)["layout"] == "hilbert"
    check(p, arr, "hilbert, after a remount")


# --- 7. truncate to 0 ----------------------------------------------------------------------

def test_truncate_a_sealed_mloc_array(volume):
    rng = np.random.default_rng(700)
    arr = random_array(rng, SHAPE, "int32")
    p = make_array(volume.mnt / "a", SHAPE, "int32", "mloc", arr,
                   attrs={"chunk": ",".join(map(str, CHUNK)), "compress": "zstd"})
    assert_sealed(p)
    used = info_of(p)["device_bytes"]["data"]
    assert used > 0
    os.truncate(p, 0)
    assert os.stat(p).st_size == arr.nbytes
    assert read_bytes(p) == bytes(arr.nbytes)
    assert read_bytes(view(p, "slice", 0, 3)) == bytes(arr[3].nbytes)
    assert read_bytes(view(p, "plod", 2)) == bytes(arr.nbytes)
    assert getx(p, "shape") == ",".join(map(str, SHAPE)) and getx(p, "layout") == "mloc"
    assert info_of(p)["device_bytes"]["data"] < used, "the image's space is given back"
    volume.remount()
    assert os.stat(p).st_size == arr.nbytes
    assert read_bytes(p) == bytes(arr.nbytes), "zeros after a remount"

    new = random_array(rng, SHAPE, "int32")
    fd = os.open(p, os.O_WRONLY)
    try:
        pwrite_all(fd, new.tobytes()[:1001], 0)
        pwrite_all(fd, new.tobytes()[1001:], 1001)
    finally:
        os.close(fd)
    wait_sealed(p)
    check(p, new, "written again after the truncate")
    check(view(p, "box", "::3,2:17:5,8"), new[::3, 2:17:5, 8], "written again: a box")
    volume.remount()
    check(p, new, "written again, after a remount")


def test_truncate_a_sealed_mloc_array_with_an_index(volume):
    """The empty image and the index of zeros are one commit: the index never
    answers for the data a truncate removed (live or after a remount)."""
    rng = np.random.default_rng(710)
    arr = (rng.integers(0, 50, size=SHAPE)).astype("int32")
    p = make_array(volume.mnt / "a", SHAPE, "int32", "mloc", arr,
                   attrs={"chunk": ",".join(map(str, CHUNK)), "index": "bn", "order": "0,2,1"})
    assert_sealed(p)
    assert info_of(p)["order"] == [0, 2, 1], "A@/info shows the order attribute, as getfattr does"

    def count(cond):
        return int(read_bytes(view(p, "query", cond, "count")))

    assert count(">=20") == int(np.count_nonzero(arr >= 20)) > 0
    os.truncate(p, 0)
    assert read_bytes(p) == bytes(arr.nbytes)
    assert count(">=20") == 0 and count("==0") == arr.size
    volume.remount()
    assert count(">=20") == 0 and count("==0") == arr.size, "after a remount"


# --- 8. A@/lbn ---------------------------------------------------------------------------

def test_lbn_of_compressed_and_uncompressed_mloc(module_volume, d):
    rng = np.random.default_rng(800)
    arr = random_array(rng, SHAPE, "float64")
    packed = make_array(d / "packed", SHAPE, "float64", "mloc", arr,
                        attrs={"chunk": ",".join(map(str, CHUNK)), "compress": "zstd:1"})
    plain = make_array(d / "plain", SHAPE, "float64", "mloc", arr, attrs={"chunk": ",".join(map(str, CHUNK))})
    with ErrorLog(module_volume, "packed@/lbn"):
        expect_errno(errno.ENOTSUP, read_bytes, view(packed, "lbn", "1,2,3"))
    sector = read_json(module_volume.mnt / ".mmfs" / "geometry")["sector_size"]
    places = set()
    for idx in [(0, 0, 0), (1, 2, 3), (12, 16, 8), (5, 9, 4)]:
        text = read_bytes(view(plain, "lbn", ",".join(map(str, idx)))).decode()
        match = re.fullmatch(r"(\d+) (\d+)\n", text)
        assert match, f"plain@/lbn/{idx}: {text!r} is not 'LBN OFFSET\\n'"
        assert 0 <= int(match.group(2)) < sector
        places.add((int(match.group(1)), int(match.group(2))))
    assert len(places) == 4, "four elements, four places"
    # While staging, the elements have their naive cells' sectors.
    fd = os.open(plain, os.O_WRONLY)
    try:
        pwrite_all(fd, arr[0, 0, :1].tobytes(), 0)
        assert_staging(plain)
        assert re.fullmatch(rb"\d+ \d+\n", read_bytes(view(plain, "lbn", "1,2,3")))
    finally:
        os.close(fd)
    wait_sealed(plain)
    # An out-of-range index is ERANGE, as for every layout.
    expect_errno(errno.ERANGE, read_bytes, view(plain, "lbn", "13,0,0"))


# --- 9. bad input changes nothing --------------------------------------------------------

@pytest.mark.parametrize("name,value", [("priority", "V-V-S"), ("priority", "V-M"), ("priority", "v-m-s"),
                                        ("compress", "zstd:99"), ("compress", "zstd:0"), ("compress", "lz4"),
                                        ("chunk", "4,8"), ("chunk", "0,8,4"), ("bins", "edges:3,1")])
def test_bad_values_change_nothing(module_volume, d, name, value):
    rng = np.random.default_rng(900)
    arr = random_array(rng, SHAPE, "int16")
    p = make_array(d / "a", SHAPE, "int16", "mloc", arr,
                   attrs={"chunk": ",".join(map(str, CHUNK)), "compress": "zstd", "priority": "M-V-S"})
    before_info = info_of(p)
    before_attr = getx(p, name)
    with ErrorLog(module_volume, name):
        expect_errno(errno.EINVAL, setx, p, name, value)
    assert getx(p, name) == before_attr
    after_info = info_of(p)
    assert after_info == before_info, "a refused value changes nothing"
    check(p, arr, f"after {name}={value!r} was refused")
    check(view(p, "plod", 1), plod(arr, 1), f"after {name}={value!r} was refused: plod/1")


# --- 10. a corrupted image is EIO, never wrong bytes --------------------------------------

DAMAGED = (1, 2, 3)  # in the chunk of rows 0..3, columns 0..7, planes 0..3


def damage_msb(volume, path, arr, idx=DAMAGED):
    """Unmounts, flips the most significant byte of element idx in the image
    (where A@/lbn says it is), mounts again."""
    text = read_bytes(view(path, "lbn", ",".join(map(str, idx)))).decode()
    match = re.fullmatch(r"(\d+) (\d+)\n", text)
    assert match, f"{path.name}@/lbn: {text!r}"
    sector = read_json(volume.mnt / ".mmfs" / "geometry")["sector_size"]
    at = int(match.group(1)) * sector + int(match.group(2))
    msb = arr[idx].tobytes()[-1]
    volume.unmount()
    with open(volume.image, "r+b") as f:
        f.seek(at)
        assert f.read(1)[0] == msb, "A@/lbn names the element's most significant byte"
        f.seek(at)
        f.write(bytes([msb ^ 0xFF]))
        f.flush()
        os.fsync(f.fileno())
    volume.mount()


def damaged_array(volume, seed):
    arr = random_array(np.random.default_rng(seed), SHAPE, "float64")
    p = make_array(volume.mnt / "a", SHAPE, "float64", "mloc", arr, attrs={"chunk": ",".join(map(str, CHUNK))})
    assert_sealed(p)
    damage_msb(volume, p, arr)
    return p, arr


def test_corrupted_unit_is_eio(volume):
    p, arr = damaged_array(volume, 1000)
    with ErrorLog(volume, "checksum"):
        expect_errno(errno.EIO, read_bytes, p)
    with ErrorLog(volume, "checksum"):
        expect_errno(errno.EIO, read_bytes, view(p, "slice", 0, 1))
    with ErrorLog(volume, "checksum"):
        expect_errno(errno.EIO, read_bytes, view(p, "box", "0:4,0:8,0:4"))
    with ErrorLog(volume, "checksum"):
        expect_errno(errno.EIO, read_bytes, view(p, "plod", 1))
    # What does not touch that chunk still reads, and right.
    check(view(p, "slice", 0, 12), arr[12], "slice/0/12 (another chunk)")
    check(view(p, "box", "4:13,:,:"), arr[4:13], "box/4:13,:,: (other chunks)")
    check(view(p, "box", "0:4,8:17,:"), arr[0:4, 8:17], "box/0:4,8:17,: (other chunks)")
    check(view(p, "box", "0:4,0:8,4:9"), arr[0:4, 0:8, 4:9], "box/0:4,0:8,4:9 (the next chunk along dim 2)")
    check(view(p, "plod", "2@", "slice", 0, 7), plod(arr, 2)[7], "plod/2@/slice/0/7 (another chunk)")
    # Still damaged after a remount (nothing cached the good bytes) ...
    volume.remount()
    with ErrorLog(volume, "checksum"):
        expect_errno(errno.EIO, read_bytes, view(p, "slice", 1, 2))
    # ... until truncate to 0 drops the image; then the array is written anew.
    os.truncate(p, 0)
    assert read_bytes(p) == bytes(arr.nbytes)
    fd = os.open(p, os.O_WRONLY)
    try:
        pwrite_all(fd, arr.tobytes(), 0)
    finally:
        os.close(fd)
    wait_sealed(p, "after rewriting the truncated array")
    check(p, arr, "rewritten after the truncate")


@pytest.mark.xfail(strict=True, reason="once one unit of an mloc image fails its checksum, every write to the "
                                       "array fails with EIO, even one that rewrites all its elements or touches "
                                       "only undamaged chunks: the first write after a seal copies the whole image "
                                       "into the staging placement (ArrayFile::unseal_locked(copy=true)), and that "
                                       "copy reads the damaged unit; only truncate to 0 recovers")
@pytest.mark.parametrize("what", ["whole-array", "another-chunk"])
def test_writes_to_a_damaged_mloc_array(volume, what):
    p, arr = damaged_array(volume, 1010)
    fd = os.open(p, os.O_WRONLY)
    try:
        if what == "whole-array":
            new = random_array(np.random.default_rng(1011), SHAPE, "float64")
            pwrite_all(fd, new.tobytes(), 0)
        else:
            new = arr.copy()
            new[12] = 1.5
            pwrite_all(fd, new[12].tobytes(), 12 * 17 * 9 * 8)
    finally:
        os.close(fd)
    wait_sealed(p, "after the write")
    if what == "whole-array":
        check(p, new, "the whole array rewritten over the damage")
    else:
        check(view(p, "slice", 0, 12), new[12], "a row of another chunk written")
