"""Read-only views of array files (docs/reference.md §5): every view equals numpy on the same
data, for every layout. `A@/plod/K` is the whole PLoD copy; `A@/plod/K@/...`
is a view of it (a FUSE path component cannot be both a file and a directory)."""
import os

import numpy as np
import pytest

from mmfs_mount import (LAYOUTS, assert_array_bytes, make_array, parse_ints, plod, pwrite_all, random_array,
                        read_bytes, read_json, sel_string, view)

CASES = {
    "f8-3d": ("float64", (6, 5, 4)),
    "i2-1d": ("int16", (37,)),
    "u1-4d": ("uint8", (3, 1, 4, 5)),
    "f4-5d": ("float32", (2, 3, 1, 4, 5)),
    "i8-1x1x1": ("int64", (1, 1, 1)),
    "i4-3x1x17": ("int32", (3, 1, 17)),
    "u2-2d": ("uint16", (9, 70)),
}
PARAMS = [(layout, case) for layout in LAYOUTS for case in CASES]
IDS = [f"{layout}-{case}" for layout, case in PARAMS]


@pytest.fixture(scope="module")
def vol(module_volume):
    return module_volume


@pytest.fixture(scope="module")
def arrays(vol):
    """get(layout, case) -> (path, numpy array); each array is created once per module."""
    made = {}
    root = vol.mnt / "views"
    root.mkdir()

    def get(layout, case):
        if (layout, case) not in made:
            dtype, shape = CASES[case]
            seed = LAYOUTS.index(layout) * 100 + list(CASES).index(case)
            arr = random_array(np.random.default_rng(seed), shape, dtype)
            path = make_array(root / f"{layout}-{case}", shape, dtype, layout, arr)
            made[(layout, case)] = (path, arr)
        return made[(layout, case)]

    return get


def check_view(path, expected, what):
    expected = np.ascontiguousarray(expected)
    assert os.stat(path).st_size == expected.nbytes, f"{what}: st_size"
    assert_array_bytes(read_bytes(path), expected, what)


def some_indices(n):
    return sorted({0, n // 2, n - 1})


def random_selections(rng, shape, count):
    sels = [tuple(slice(None) for _ in shape)]
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
                step = int(rng.integers(2, max(3, s))) if kind == 3 else None
                sel.append(slice(a, b, step))
        sels.append(tuple(sel))
    return sels


@pytest.mark.parametrize("layout,case", PARAMS, ids=IDS)
def test_slices(arrays, layout, case):
    path, arr = arrays(layout, case)
    for dim in range(arr.ndim):
        for idx in some_indices(arr.shape[dim]):
            check_view(view(path, "slice", dim, idx), np.take(arr, idx, axis=dim), f"slice/{dim}/{idx}")


@pytest.mark.parametrize("layout,case", PARAMS, ids=IDS)
def test_boxes(arrays, layout, case):
    path, arr = arrays(layout, case)
    rng = np.random.default_rng(PARAMS.index((layout, case)))
    for sel in random_selections(rng, arr.shape, 8):
        spec = sel_string(sel)
        check_view(view(path, "box", spec), arr[sel], f"box/{spec}")


@pytest.mark.parametrize("layout,case", PARAMS, ids=IDS)
def test_plod(arrays, layout, case):
    path, arr = arrays(layout, case)
    item = arr.dtype.itemsize
    for k in range(1, item + 1):
        reduced = plod(arr, k)
        check_view(view(path, "plod", k), reduced, f"plod/{k}")
    for k in sorted({1, (item + 1) // 2, item}):
        reduced = plod(arr, k)
        for dim in range(arr.ndim):
            idx = arr.shape[dim] - 1
            check_view(view(path, "plod", f"{k}@", "slice", dim, idx), np.take(reduced, idx, axis=dim),
                       f"plod/{k}@/slice/{dim}/{idx}")
        sel = tuple(slice(0, s, 2) if i % 2 == 0 else s // 2 for i, s in enumerate(arr.shape))
        check_view(view(path, "plod", f"{k}@", "box", sel_string(sel)), reduced[sel],
                   f"plod/{k}@/box/{sel_string(sel)}")


def test_plod_fills_float64_as_mloc(arrays):
    path, arr = arrays("multimap", "f8-3d")
    got = np.frombuffer(read_bytes(view(path, "plod", 3)), dtype=np.uint8).reshape(-1, 8)
    original = arr.reshape(-1).view(np.uint8).reshape(-1, 8)
    assert (got[:, 5:] == original[:, 5:]).all(), "the 3 most significant bytes are kept"
    assert (got[:, 4] == 0x7F).all() and (got[:, :4] == 0xFF).all(), "dropped bytes: 0x7F, then 0xFF"
    got = np.frombuffer(read_bytes(view(path, "plod", 2)), dtype=np.float64)
    rel = np.abs(got - arr.reshape(-1)) / np.abs(arr.reshape(-1))
    assert (rel < 2.0 ** -3).all(), "PLoD 2 of float64 keeps about 4 bits of the mantissa"


@pytest.mark.parametrize("layout,case", PARAMS, ids=IDS)
def test_listings(vol, arrays, layout, case):
    path, arr = arrays(layout, case)
    at = view(path)
    assert os.path.isdir(at)
    assert path.name + "@" not in os.listdir(path.parent), "A@ is not listed by readdir"
    assert path.name in os.listdir(path.parent)
    assert set(os.listdir(at)) == {"info", "slice", "box", "plod", "query", "lbn", "plan", "zarr"}
    assert sorted(os.listdir(view(path, "slice")), key=int) == [str(d) for d in range(arr.ndim)]
    for dim in range(arr.ndim):
        assert sorted(os.listdir(view(path, "slice", dim)), key=int) == [str(i) for i in range(arr.shape[dim])]


@pytest.mark.parametrize("layout,case", PARAMS, ids=IDS)
def test_info(arrays, layout, case):
    path, arr = arrays(layout, case)
    info = read_json(view(path, "info"))
    for key in ("shape", "dtype", "itemsize", "layout", "order", "cell", "priority", "chunk", "compress", "index",
                "bins", "bytes", "device_bytes", "extents", "geometry"):
        assert key in info, f"info lacks {key}: {info}"
    assert list(info["shape"]) == list(arr.shape)
    assert info["dtype"] == arr.dtype.name
    assert info["itemsize"] == arr.dtype.itemsize
    assert info["layout"] == layout
    assert parse_ints(info["order"]) == list(range(arr.ndim - 1, -1, -1))
    cell = parse_ints(info["cell"])
    assert len(cell) == arr.ndim and all(c >= 1 for c in cell)
    if layout == "multimap":
        cube = parse_ints(info["basic_cube"])
        assert len(cube) == arr.ndim and all(k >= 1 for k in cube)
    assert info["priority"] == "V-M-S"
    assert info["compress"] == "none" and info["index"] == "none"
    # mloc bins equal-frequency (100) whatever the dtype; an index bins integers exactly by default.
    assert str(info["bins"]) == ("100" if arr.dtype.kind == "f" or layout == "mloc" else "exact")
    assert info["bytes"] == arr.nbytes
    dev = info["device_bytes"]
    assert isinstance(dev, dict) and {"data", "index"} <= set(dev)
    assert dev["data"] >= arr.nbytes and dev["data"] % 512 == 0
    assert dev["index"] == 0
    assert isinstance(info["extents"], int) and info["extents"] >= 1
    assert info["geometry"] == "atlas10k3"


def check_plan(vol, path, spec, useful):
    sector = read_json(vol.mnt / ".mmfs" / "geometry")["sector_size"]
    plan = read_json(view(path, "plan", *spec.split("/")))
    for key in ("batches", "requests", "bytes_read", "bytes_useful", "modeled_ms"):
        assert key in plan, f"plan/{spec} lacks {key}"
    batches = plan["batches"]
    assert isinstance(batches, list) and batches
    requests = [tuple(r) for batch in batches for r in batch]
    assert all(len(r) == 2 and r[1] >= 1 for r in requests)
    assert plan["requests"] == len(requests)
    assert plan["bytes_read"] == sum(r[1] for r in requests) * sector
    assert plan["bytes_useful"] == useful
    assert plan["bytes_read"] >= plan["bytes_useful"]
    assert plan["modeled_ms"] > 0
    return requests


@pytest.mark.parametrize("layout", LAYOUTS)
def test_plan_covers_the_sectors_of_the_selection(vol, arrays, layout):
    path, arr = arrays(layout, "f8-3d")
    requests = check_plan(vol, path, "slice/1/2", arr[:, 2, :].nbytes)
    for idx in np.ndindex(arr[:, 2, :].shape):
        element = (idx[0], 2, idx[1])
        lbn = int(read_bytes(view(path, "lbn", ",".join(map(str, element)))).split()[0])
        assert any(start <= lbn < start + n for start, n in requests), f"plan misses element {element} (LBN {lbn})"
    check_plan(vol, path, "box/0:6:2,:,3", arr[0:6:2, :, 3].nbytes)
    path, arr = arrays(layout, "u2-2d")
    check_plan(vol, path, "slice/0/4", arr[4].nbytes)
    check_plan(vol, path, "box/:,10:60:7", arr[:, 10:60:7].nbytes)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_views_follow_writes(vol, layout):
    arr = random_array(np.random.default_rng(77), (10, 12, 14), "float64")
    path = make_array(vol.mnt / "views" / f"written-{layout}", arr.shape, arr.dtype, layout, arr)
    check_view(view(path, "slice", 2, 5), arr[:, :, 5], "before")
    arr[3:7, :, 5] = -1.5
    fd = os.open(path, os.O_WRONLY)
    try:
        for i in range(3, 7):
            for j in range(12):
                pwrite_all(fd, arr[i, j, 5:6].tobytes(), ((i * 12 + j) * 14 + 5) * 8)
    finally:
        os.close(fd)
    check_view(view(path, "slice", 2, 5), arr[:, :, 5], "slice after a write")
    check_view(view(path, "box", "3:8,:,4:6"), arr[3:8, :, 4:6], "box after a write")
    check_view(view(path, "plod", 8), arr, "plod/8 after a write")
