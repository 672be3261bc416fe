"""mmfs.Array indexing (python/mmfs/_indexing.py) against numpy on the same data.

An oracle of thousands of random basic-indexing keys (ints, negative ints,
slices with random bounds and negative steps, Ellipsis, None) on 1-D to 5-D
arrays of every dtype, over the layouts of docs/reference.md §4: `a[key]`
must equal `np.asarray(a)[key]` in type, shape, dtype and value, and be
served by exactly one view read of exactly the selected bytes (zero for an
empty result). Keys numpy refuses raise numpy's own exception."""
import pickle
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import python_support  # noqa: F401  (puts python/ on sys.path)
import mmfs
from mmfs_mount import DTYPES, LAYOUTS, make_array, plod, random_array, read_json, view
from python_support import view_reads

# One array per dtype, 1-D to 5-D in turn, over every layout.
SHAPES = [(53,), (7, 11), (5, 6, 7), (3, 4, 5, 6), (2, 3, 4, 3, 5)]
CASES = [(dtype, SHAPES[i % 5], LAYOUTS[i % len(LAYOUTS)]) for i, dtype in enumerate(DTYPES)]
KEYS_PER_ARRAY = 1000


@pytest.fixture(scope="module")
def arrays(module_volume):
    """{dtype: (mmfs.Array, numpy array)}."""
    root = module_volume.mnt / "idx"
    root.mkdir()
    out = {}
    for i, (dtype, shape, layout) in enumerate(CASES):
        data = random_array(np.random.default_rng(100 + i), shape, dtype)
        path = make_array(root / f"{dtype}-{layout}", shape, dtype, layout, data)
        out[dtype] = (mmfs.open(path), data)
    return out


def random_slice(rng, n):
    def bound():
        kind = rng.integers(0, 5)
        if kind == 0:
            return None
        if kind == 1:
            return int(rng.integers(-n - 3, 0))       # negative, sometimes past the start
        return int(rng.integers(0, n + 4))            # sometimes past the end
    step = [None, 1, 1, 2, 3, -1, -1, -2, -3, int(rng.integers(4, n + 6)), -int(rng.integers(4, n + 6))][
        rng.integers(0, 11)]
    return slice(bound(), bound(), step)


def random_key(rng, shape):
    ndim = len(shape)
    n_items = int(rng.integers(0, ndim + 1))          # fewer items than dimensions: the rest are whole
    use_ellipsis = rng.random() < 0.3
    at = int(rng.integers(0, n_items + 1)) if use_ellipsis else n_items  # where the Ellipsis goes
    items = []
    for d in range(n_items):
        n = shape[d] if d < at else shape[ndim - n_items + d]   # items after `...` index the last dimensions
        if rng.integers(0, 3) == 0:
            items.append(int(rng.integers(-n, n)))
        else:
            items.append(random_slice(rng, n))
    if use_ellipsis:
        items.insert(at, Ellipsis)
    for _ in range(int(rng.choice([0, 0, 1, 2]))):
        items.insert(int(rng.integers(0, len(items) + 1)), None)
    if len(items) == 1 and rng.random() < 0.5:
        return items[0]                               # a bare key, not a tuple
    if rng.random() < 0.05:                           # numpy integer types are integers too
        items = [np.int64(it) if isinstance(it, int) else it for it in items]
    return tuple(items)


def check_key(a, data, key):
    expected = data[key]
    with mmfs.trace() as t:
        got = a[key]
    what = f"{a.path}[{key!r}]"
    assert type(got) is type(expected), f"{what}: {type(got)} != numpy's {type(expected)}"
    assert np.shape(got) == np.shape(expected), f"{what}: shape {np.shape(got)} != {np.shape(expected)}"
    assert got.dtype == expected.dtype, what
    assert np.array_equal(got, expected), what
    if isinstance(got, np.ndarray):
        assert got.flags.writeable, what
    # One view read of exactly the selected elements; none for an empty result.
    if np.size(expected) == 0:
        assert t.reads == [], f"{what}: an empty result read {t.reads}"
    else:
        assert len(t.reads) == 1, f"{what}: {len(t.reads)} view reads: {t.reads}"
        path, nbytes = t.reads[0]
        assert nbytes == np.size(expected) * data.itemsize, f"{what}: read {nbytes} bytes of {path}"
    return t.reads


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_keys_equal_numpy(arrays, dtype):
    a, data = arrays[dtype]
    assert a.shape == data.shape and a.dtype == data.dtype and a.ndim == data.ndim
    assert a.size == data.size and a.nbytes == data.nbytes and len(a) == len(data)
    rng = np.random.default_rng(DTYPES.index(dtype))
    kinds = set()
    for _ in range(KEYS_PER_ARRAY):
        key = random_key(rng, data.shape)
        reads = check_key(a, data, key)
        if reads:
            kinds.add(reads[0][0].rsplit("@/", 1)[-1].split("/")[0] if "@/" in reads[0][0] else "file")
    assert {"box"} <= kinds, kinds


@pytest.mark.parametrize("dtype", ["float64", "int16", "uint8"])
def test_fixed_keys_and_the_views_they_read(arrays, dtype):
    a, data = arrays[dtype]
    shape = data.shape
    n = len(shape)
    cases = [
        ((), "file"), ((Ellipsis,), "file"), ((slice(None),), "file"), ((slice(None, None, -1),), "file"),
        ((0,), "slice/0/0"), ((-1,), f"slice/0/{shape[0] - 1}"),
        ((Ellipsis, -1), f"slice/{n - 1}/{shape[-1] - 1}"),
        (tuple(0 for _ in shape), "box/" + ",".join("0" for _ in shape)),
        (tuple(-1 for _ in shape) + (Ellipsis,), "box/" + ",".join(str(s - 1) for s in shape)),
        ((slice(None, None, -2),), "box/" + ",".join([f"{(shape[0] - 1) % 2}:{shape[0]}:2"] + [":"] * (n - 1))),
        ((None, slice(1, None)), "box/" + ",".join([f"1:{shape[0]}"] + [":"] * (n - 1))),
    ]
    for key, expected_view in cases:
        reads = check_key(a, data, key)
        path = reads[0][0]
        if expected_view == "file":
            assert path == a.path, (key, path)
        else:
            assert path == f"{a.path}@/{expected_view}", (key, path)


def test_bad_keys_raise_like_numpy(arrays):
    a, data = arrays["float64"]          # 5-D
    n = data.ndim
    bad = [
        (0,) * (n + 1), data.shape[0], -data.shape[0] - 1, (0, data.shape[1]), 1.5, "x", (Ellipsis, Ellipsis),
        slice(0, 1.5), slice("a", None), (slice(None), 0.0), {}, slice(None, None, 0), np.float64(1),
        (None, 0, 0, 0, 0, 0, 0),
    ]
    for key in bad:
        with pytest.raises(Exception) as np_exc:
            data[key]
        with mmfs.trace() as t:
            with pytest.raises(type(np_exc.value)) as our_exc:
                a[key]
        assert type(our_exc.value) is type(np_exc.value), key
        assert str(our_exc.value) == str(np_exc.value), key
        assert isinstance(our_exc.value, (IndexError, TypeError, ValueError)), key
        assert t.reads == [], key
    # Advanced indexing numpy accepts is not basic indexing: a TypeError, nothing read.
    for key in ([0, 1], np.array([1, 0]), data > 0, (0, [1, 2]), True, (np.bool_(False),)):
        data[key]
        with mmfs.trace() as t:
            with pytest.raises(TypeError, match="basic indexing"):
                a[key]
        assert t.reads == []


def test_asarray_and_array_protocol_read_the_whole_file(arrays):
    a, data = arrays["int32"]
    with mmfs.trace() as t:
        whole = np.asarray(a)
    assert t.paths == [a.path] and t.reads[0][1] == data.nbytes
    assert whole.dtype == data.dtype and np.array_equal(whole, data)
    assert np.array_equal(np.asarray(a, dtype=np.float64), data.astype(np.float64))
    assert np.array_equal(np.array(a), data)
    assert np.array_equal(a.read(), data)
    rows = list(a)
    assert len(rows) == len(data) and all(np.array_equal(r, d) for r, d in zip(rows, data))


def test_plod_copies_index_like_numpy(arrays):
    for dtype in ("float64", "int32", "uint16"):
        a, data = arrays[dtype]
        for k in sorted({1, data.itemsize // 2 or 1, data.itemsize}):
            p = a.plod(k)
            reduced = plod(data, k)
            assert p.shape == a.shape and p.dtype == a.dtype and p.plod_bytes == k
            with mmfs.trace() as t:
                assert np.array_equal(np.asarray(p), reduced)
            assert t.paths == [f"{a.path}@/plod/{k}"]
            rng = np.random.default_rng(k)
            for _ in range(20):
                key = random_key(rng, data.shape)
                expected = reduced[key]
                with mmfs.trace() as t:
                    got = p[key]
                assert type(got) is type(expected) and np.array_equal(got, expected), (dtype, k, key)
                assert all(path.startswith(f"{a.path}@/plod/{k}") for path in t.paths), t.paths
    a, _ = arrays["float64"]
    with pytest.raises(ValueError):
        a.plod(9)
    with pytest.raises(ValueError):
        a.plod(2).plod(1)


def test_metadata(arrays, module_volume):
    a, data = arrays["float32"]
    info = a.info
    assert info["shape"] == list(data.shape) and info["dtype"] == "float32"
    assert a.layout == info["layout"] == CASES[DTYPES.index("float32")][2]
    assert a.info == read_json(view(a.path, "info"))
    assert len(a.dims) == data.ndim
    brick = a.brick
    assert len(brick) == data.ndim and all(1 <= b <= s for b, s in zip(brick, data.shape))
    assert a.chunks == mmfs.array.preferred_chunks(brick, data.shape, data.itemsize)
    plan = a.plan((0, slice(None)))
    assert plan["bytes_useful"] == data[0].nbytes and plan["requests"] >= 1
    assert a.plan() == read_json(view(a.path, "plan", "box", ",".join(":" for _ in data.shape)))
    assert "float32" in repr(a)
    with pytest.raises(mmfs.Error) as e:
        mmfs.open(module_volume.mnt / "idx")
    assert e.value.errno == 21  # EISDIR
    with pytest.raises(mmfs.Error) as e:
        mmfs.open(module_volume.mnt / "idx" / "missing")
    assert e.value.errno == 2 and isinstance(e.value, OSError)
    plain = module_volume.mnt / "idx" / "plain"
    plain.write_bytes(b"not an array")
    with pytest.raises(mmfs.Error) as e:
        mmfs.open(plain)
    assert e.value.errno == 61 and "user.mmfs.shape" in str(e.value)  # ENODATA


def info_brick(info, shape):
    """The natural brick as A@/info states it: MLOC's chunk, else the cell,
    clipped to the shape."""
    brick = info["chunk"] if info["layout"] == "mloc" else info["cell"]
    return tuple(max(1, min(int(b), s)) for b, s in zip(brick, shape))


def test_schema_is_read_once_from_xattrs(arrays, monkeypatch):
    """mmfs.open reads user.mmfs.shape and dtype; dims (user.hdf5.dims too
    without user.mmfs.dims), layout, brick and chunks read their xattrs on
    first use, once each, and never A@/info; the
    brick so read is A@/info's for every layout and dtype."""
    import os
    calls = []
    real = os.getxattr

    def counting(path, name, *args, **kwargs):
        calls.append(name)
        return real(path, name, *args, **kwargs)

    seen_layouts = set()
    for dtype, (opened, data) in arrays.items():
        layout = CASES[DTYPES.index(dtype)][2]
        monkeypatch.setattr(os, "getxattr", counting)
        calls.clear()
        with mmfs.trace() as t:
            a = mmfs.open(opened.path)
            assert calls == ["user.mmfs.shape", "user.mmfs.dtype"]
            for _ in range(2):
                dims, brick, chunks, got_layout = a.dims, a.brick, a.chunks, a.layout
            b = pickle.loads(pickle.dumps(a))   # the pickle carries what was read
            assert (b.dims, b.brick, b.chunks, b.layout) == (dims, brick, chunks, got_layout)
            p = a.plod(1)                       # so does a PLoD copy
            assert (p.dims, p.brick, p.chunks, p.layout) == (dims, brick, chunks, got_layout)
        monkeypatch.setattr(os, "getxattr", real)
        assert t.paths == []  # no A@/info
        expected = ["user.mmfs.shape", "user.mmfs.dtype", "user.mmfs.dims", "user.mmfs.layout"]
        expected += ["user.mmfs.chunk"] if layout == "mloc" else ["user.mmfs.cell"]
        if dims == tuple(f"dim_{i}" for i in range(a.ndim)):  # no user.mmfs.dims: user.hdf5.dims is looked for
            expected += ["user.hdf5.dims"]
        assert sorted(calls) == sorted(expected), (dtype, layout, calls)
        info = a.info
        assert got_layout == info["layout"] == layout
        assert brick == info_brick(info, data.shape), (dtype, layout, brick, info)
        assert chunks == mmfs.array.preferred_chunks(brick, data.shape, data.itemsize)
        assert dims == tuple(info["dims"])
        seen_layouts.add(layout)
    assert seen_layouts == set(LAYOUTS)


def test_brick_of_every_layout_equals_info(module_volume):
    """user.mmfs.cell (and MLOC's user.mmfs.chunk) show the effective values,
    defaults included: the brick read from them is A@/info's, for every
    layout with and without a cell or chunk given, and for the volume's
    default layout."""
    root = module_volume.mnt / "bricks"
    root.mkdir()
    cases = [(layout, shape, extra) for layout in LAYOUTS for shape in ((40, 30, 20), (300,), (33, 17))
             for extra in ({}, {"chunk" if layout == "mloc" else "cell": tuple(min(4, s) for s in shape)})
             if not (layout == "multimap" and len(shape) == 1 and extra)]
    cases += [(None, (64, 64, 32), {}), (None, (500, 7), {})]
    for i, (layout, shape, extra) in enumerate(cases):
        a = mmfs.create(root / f"b{i}", shape, "float32", layout=layout, **extra)
        info = a.info
        assert a.brick == info_brick(info, shape), (layout, shape, extra, a.brick, info)
        if extra:
            assert a.brick == tuple(extra.values())[0]


def test_preferred_chunks_rule():
    """Array.chunks: the brick doubled in rounds (last dimension first),
    clipped to the shape, until 16 MiB or the whole array."""
    pc = mmfs.array.preferred_chunks
    assert mmfs.array.CHUNK_BYTES == 16 << 20
    assert pc((8, 8, 8), (1024, 1024, 256), 8) == (128, 128, 128)       # 16 MiB
    assert pc((8, 8, 8), (1024, 1024, 16), 8) == (256, 512, 16)         # the thin dimension spans first
    assert pc((16, 32, 16), (64, 64, 32), 8) == (64, 64, 32)            # 1 MiB: spans the array
    assert pc((4, 4, 2), (12, 10, 8), 8, 512) == (4, 4, 4)              # 512 B reached
    assert pc((4, 4, 2), (12, 10, 8), 8, 1024) == (4, 8, 4)
    assert pc((4096,), (10 ** 9,), 1) == (16 << 20,)
    assert pc((7, 5), (7, 5), 8) == (7, 5)
    rng = np.random.default_rng(3)
    for _ in range(2000):
        ndim = int(rng.integers(1, 5))
        shape = tuple(int(s) for s in rng.integers(1, 3000, ndim))
        brick = tuple(int(rng.integers(1, s + 1)) for s in shape)
        itemsize = int(rng.choice([1, 2, 4, 8]))
        target = int(rng.choice([1, 4096, 1 << 20, 16 << 20]))
        c = pc(brick, shape, itemsize, target)
        assert all(b <= x <= s for b, x, s in zip(brick, c, shape)), (brick, shape, c)
        # whole cells: each extent is the brick times a power of two, or the whole dimension
        for b, x, s in zip(brick, c, shape):
            q, r = divmod(x, b)
            assert x == s or (r == 0 and q & (q - 1) == 0), (brick, shape, c)
        size = itemsize * int(np.prod(c))
        assert size >= min(target, itemsize * int(np.prod(shape))), (brick, shape, c, target)
        # and no bigger than needed: each doubling was made while still short of the target
        assert c == brick or size < 2 * target, (brick, shape, c, target)


def test_relayout_forgets_the_schema(module_volume):
    root = module_volume.mnt / "relayout-cache"
    root.mkdir()
    a = mmfs.create(root / "r", (32, 32, 16), "float64", layout="naive", cell=(8, 8, 8))
    assert (a.layout, a.brick) == ("naive", (8, 8, 8))
    a.relayout("hilbert", cell=(4, 4, 4))
    assert (a.layout, a.brick) == ("hilbert", (4, 4, 4))
    a.relayout("mloc", chunk=(16, 8, 8))
    assert (a.layout, a.brick) == ("mloc", (16, 8, 8))
    # another Array's change is seen by a new open (the schema is read once per Array)
    b = mmfs.open(a.path)
    assert b.layout == "mloc"
    a.relayout("zorder", cell=(8, 8, 8))
    assert b.layout == "mloc" and mmfs.open(a.path).layout == "zorder"


def test_pickle_and_threads(arrays):
    a, data = arrays["uint64"]
    b = pickle.loads(pickle.dumps(a))
    assert b.path == a.path and b.shape == a.shape and b.dtype == a.dtype
    assert np.array_equal(b[1:, ::-1], data[1:, ::-1])
    p = pickle.loads(pickle.dumps(a.plod(3)))
    assert p.plod_bytes == 3 and np.array_equal(np.asarray(p), plod(data, 3))

    rng = np.random.default_rng(7)
    keys = [random_key(rng, data.shape) for _ in range(200)]
    barrier = threading.Barrier(4)

    def work(part):
        barrier.wait()
        for key in keys[part::4]:
            got, expected = a[key], data[key]
            assert type(got) is type(expected) and np.array_equal(got, expected), key
        return len(keys[part::4])

    with ThreadPoolExecutor(4) as pool:
        assert sum(pool.map(work, range(4))) == len(keys)


def test_daemon_counts_one_view_read_per_index(arrays, module_volume):
    a, data = arrays["int16"]
    rng = np.random.default_rng(11)
    for _ in range(20):
        key = random_key(rng, data.shape)
        expected = data[key]
        before = view_reads(module_volume)
        with mmfs.trace() as t:
            a[key]
        after = view_reads(module_volume)
        # a whole-array key reads the array file itself, not a view
        assert after - before == sum("@/" in p for p in t.paths) == (1 if np.size(expected) and
                                                                     "@/" in "".join(t.paths) else 0), key
