"""mmfs.create, attrs, relayout, set_index and errors (python/mmfs/_create.py,
attrs.py, _errors.py) on a real mount: data from numpy, an h5py dataset and a
dask array streamed in bounded C-order slabs; attributes that round-trip
through mmfs-export and mmfs-import; refusals raised as mmfs.Error with the
daemon's explanation from /.mmfs/errors, leaving no file behind."""
import errno
import json
import math
import os
import subprocess
import time

import numpy as np
import pytest

import python_support  # noqa: F401  (puts python/ on sys.path)
import mmfs
from mmfs._create import slabs
from mmfs_mount import build_dir, getx, random_array, read_array


@pytest.fixture(scope="module")
def root(module_volume):
    d = module_volume.mnt / "c"
    d.mkdir()
    return d


def xattrs(path, names=None):
    """The xattrs `names` of path (default: all but user.mmfs.*), as text. (Reading
    user.mmfs.basic_cube of an mloc array crashes the daemon today: a NULL
    dereference in ArrayFile::attr_text, fs/array/array_file_info.cc.)"""
    names = names or [n for n in os.listxattr(path) if not n.startswith("user.mmfs.")]
    return {n: os.getxattr(path, n).decode() for n in names}


@pytest.mark.parametrize("layout,cell,order", [
    (None, None, None), ("naive", None, "0,1,2"), ("zorder", (4, 4, 4), None), ("hilbert", (8, 4, 2), None),
    ("multimap", None, (1, 2, 0)), ("mloc", None, None),
])
def test_create_from_numpy(root, layout, cell, order):
    data = random_array(np.random.default_rng(1), (9, 17, 6), "float32")
    name = f"np-{layout}"
    a = mmfs.create(root / name, data.shape, data.dtype, layout=layout, cell=cell, order=order, data=data)
    assert isinstance(a, mmfs.Array) and a.shape == data.shape and a.dtype == data.dtype
    assert np.array_equal(np.asarray(a), data)
    assert np.array_equal(read_array(root / name, data.dtype, data.shape), data)
    x = xattrs(root / name, ["user.mmfs.dtype", "user.mmfs.shape", "user.mmfs.cell", "user.mmfs.order"])
    assert x["user.mmfs.dtype"] == "float32" and x["user.mmfs.shape"] == "9,17,6"
    if layout:
        assert a.layout == layout
    if cell:
        assert x["user.mmfs.cell"] == ",".join(map(str, cell))
    if order:
        assert x["user.mmfs.order"] == (order if isinstance(order, str) else ",".join(map(str, order)))


def test_create_infers_shape_and_dtype_and_zero_fills(root):
    a = mmfs.create(root / "infer", data=[[1, 2, 3], [4, 5, 6]])
    assert a.shape == (2, 3) and a.dtype == np.int64 and a[1, 2] == 6
    z = mmfs.create(root / "zeros", (4, 5), "uint16")
    assert np.array_equal(np.asarray(z), np.zeros((4, 5), np.uint16))
    with pytest.raises(ValueError):
        mmfs.create(root / "bad-shape", (3, 3), "float64", data=np.zeros((3, 4)))
    with pytest.raises(TypeError):
        mmfs.create(root / "bad-dtype", (3,), "complex128")
    with pytest.raises(TypeError):
        mmfs.create(root / "bad-cast", (3,), "int32", data=np.array([1.5, 2.5, 3.5]))
    assert not any((root / n).exists() for n in ("bad-shape", "bad-dtype", "bad-cast"))


def test_create_from_h5py_dataset(root, tmp_path):
    h5py = pytest.importorskip("h5py")
    data = random_array(np.random.default_rng(2), (30, 20, 10), "int16")
    with h5py.File(tmp_path / "src.h5", "w") as f:
        f.create_dataset("big", data=data.astype(">i2"), chunks=(7, 5, 3))  # big-endian, chunked
        a = mmfs.create(root / "h5", data=f["big"], layout="hilbert", slab_bytes=4096)
    assert a.dtype == np.dtype("int16")
    assert np.array_equal(np.asarray(a), data)


def test_create_from_dask_array(root):
    da = pytest.importorskip("dask.array")
    src = da.arange(25 * 14 * 11, dtype="float64", chunks=997).reshape((25, 14, 11), merge_chunks=False) / 7
    a = mmfs.create(root / "dask", data=src, layout="zorder", slab_bytes=8192)
    assert np.array_equal(np.asarray(a), src.compute())


class Source:
    """An array-like data source that records the slabs create() asks for."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.data = random_array(np.random.default_rng(3), shape, dtype)
        self.pieces = []

    def __getitem__(self, key):
        piece = self.data[key]
        self.pieces.append((key, piece.nbytes))
        return piece


@pytest.mark.parametrize("limit", [1, 100, 4096, 1 << 20])
def test_create_streams_bounded_c_order_slabs(root, limit):
    src = Source((6, 7, 33), "float64")
    a = mmfs.create(root / f"slabs-{limit}", data=src, slab_bytes=limit)
    assert np.array_equal(np.asarray(a), src.data)
    assert max(n for _, n in src.pieces) <= max(limit, 8)
    assert sum(n for _, n in src.pieces) == src.data.nbytes  # each element read once
    assert mmfs.SLAB_BYTES == 64 << 20


def test_slabs_cover_the_array_in_c_order():
    for shape, item, limit in [((5,), 8, 16), ((4, 6, 3), 4, 40), ((2, 3, 4, 5), 2, 1), ((7, 9), 1, 10 ** 6),
                               ((3, 1000), 8, 8000), ((3, 1001), 8, 8000)]:
        flat = np.arange(int(np.prod(shape))).reshape(shape)
        seen = []
        for key, offset in slabs(shape, item, limit):
            piece = flat[key]
            assert piece.size * item <= max(limit, item)
            assert piece.reshape(-1)[0] == offset
            assert np.array_equal(piece.reshape(-1), np.arange(offset, offset + piece.size))
            seen.append((offset, piece.size))
        assert [o for o, _ in seen] == sorted(o for o, _ in seen)
        assert sum(n for _, n in seen) == flat.size


def test_progress_bar(root, capsys):
    pytest.importorskip("tqdm")
    data = np.arange(5000, dtype="float64")
    mmfs.create(root / "progress", data=data, progress=True, slab_bytes=8000)
    err = capsys.readouterr().err
    assert "progress" in err and "100%" in err


ATTRS = {
    "units": "kelvin",
    "note": "ünïcödé, and \"quotes\"",
    "count": 42,
    "big": 2 ** 63 + 5,
    "scale": 2.5,
    "third": 1 / 3,
    "f32": np.float32(0.1),
    "i16": np.int16(-7),
    "nan": math.nan,
    "ninf": -math.inf,
    "origin": [1.5, math.nan, math.inf],
    "grid": np.arange(6, dtype="int32").reshape(2, 3),
    "names": ["x", "y", "zz"],
    "flag": True,
    "nothing": None,
    "meta": {"a": [1, 2], "b": "c"},
}


def same(got, expected):
    if isinstance(expected, float) and math.isnan(expected):
        return isinstance(got, (float, np.floating)) and math.isnan(got)
    if isinstance(expected, (np.ndarray, list)) and not isinstance(expected, dict):
        e = np.asarray(expected)
        g = np.asarray(got)
        if e.dtype.kind == "f":
            return g.shape == e.shape and np.array_equal(g, e, equal_nan=True)
        return g.shape == e.shape and (g == e).all()
    return got == expected and (type(got) is not bool or type(expected) is bool)


def test_attrs_round_trip(root):
    a = mmfs.create(root / "attrs", (3, 4), "float64", attrs=ATTRS)
    got = a.attrs.to_dict()
    assert set(got) == set(ATTRS) and set(a.attrs) == set(ATTRS) and len(a.attrs) == len(ATTRS)
    for k, v in ATTRS.items():
        assert same(got[k], v), (k, got[k], v)
        assert same(a.attrs[k], v), k
    raw = xattrs(root / "attrs")
    # the encoding of mmfs-import (docs/import-export.md, "Attributes")
    assert raw["user.units"] == "kelvin" and raw["user.count"] == "42" and raw["user.scale"] == "2.5"
    assert raw["user.f32"] == "0.1" and raw["user.nan"] == "NaN" and raw["user.ninf"] == "-Infinity"
    assert json.loads(raw["user.origin"]) == [1.5, "NaN", "Infinity"]
    assert json.loads(raw["user.grid"]) == [[0, 1, 2], [3, 4, 5]]
    types = json.loads(raw["user.hdf5.types"])
    assert types["units"] == {"type": "string", "shape": []}
    assert types["grid"] == {"type": "int32", "shape": [2, 3]}
    assert types["f32"] == {"type": "float32", "shape": []} and types["big"]["type"] == "uint64"
    assert "flag" not in types and "meta" not in types
    assert not any(k.startswith("mmfs.") for k in a.attrs)
    # changing, deleting, reserved names
    a.attrs["count"] = "now a string"
    assert a.attrs["count"] == "now a string"
    del a.attrs["grid"]
    assert "grid" not in a.attrs and "grid" not in json.loads(getx(root / "attrs", "user.hdf5.types"))
    with pytest.raises(KeyError):
        a.attrs["grid"]
    with pytest.raises(KeyError):
        del a.attrs["grid"]
    for reserved in ("mmfs.layout", "hdf5.types", ""):
        with pytest.raises(KeyError):
            a.attrs[reserved] = 1
    # an xattr set by hand, without a type record: JSON when it is JSON, else text
    os.setxattr(root / "attrs", "user.handmade", b"[1, 2]")
    os.setxattr(root / "attrs", "user.words", b"plain words")
    assert a.attrs["handmade"] == [1, 2] and a.attrs["words"] == "plain words"
    assert a.plod(2).attrs["units"] == "kelvin"


def test_attrs_interoperate_with_mmfs_export_and_import(root, tmp_path):
    h5py = pytest.importorskip("h5py")
    tools = build_dir() / "tools"
    a = mmfs.create(root / "exported", data=np.arange(12.0).reshape(3, 4),
                    attrs={"units": "m/s", "origin": np.array([0.5, -2.0]), "level": np.int16(3), "gain": 1.25})
    out = tmp_path / "out.h5"
    proc = subprocess.run([str(tools / "mmfs-export"), str(a.path), f"{out}:/v"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    with h5py.File(out, "r") as f:
        v = f["v"]
        assert np.array_equal(v[...], np.arange(12.0).reshape(3, 4))
        got = {k: v.attrs[k] for k in v.attrs}
    assert got["units"] in ("m/s", b"m/s") and got["gain"] == 1.25
    assert np.array_equal(got["origin"], [0.5, -2.0]) and got["origin"].dtype == np.float64
    assert got["level"] == 3 and got["level"].dtype == np.int16
    # and back: HDF5 attributes imported by mmfs-import read as they were written
    src = tmp_path / "in.h5"
    with h5py.File(src, "w") as f:
        d = f.create_dataset("w", data=np.ones((2, 2), "float32"))
        d.attrs["title"] = "imported"
        d.attrs["levels"] = np.array([[1, 2], [3, 4]], dtype="uint8")
        d.attrs["eps"] = np.float32(1e-7)
        d.attrs["bad"] = np.array([np.nan, 1.0])
    proc = subprocess.run([str(tools / "mmfs-import"), "-q", f"{src}:/w", str(root / "imported")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    b = mmfs.open(root / "imported")
    assert b.attrs["title"] == "imported"
    assert b.attrs["levels"].dtype == np.uint8 and np.array_equal(b.attrs["levels"], [[1, 2], [3, 4]])
    assert b.attrs["eps"] == np.float32(1e-7) and b.attrs["eps"].dtype == np.float32
    assert np.array_equal(b.attrs["bad"], [np.nan, 1.0], equal_nan=True)


def test_relayout_and_set_index(root):
    data = random_array(np.random.default_rng(4), (16, 16, 8), "float64")
    a = mmfs.create(root / "relayout", data=data, layout="naive")
    assert a.layout == "naive"
    assert a.relayout("hilbert", cell=(4, 4, 4)) is a
    assert a.layout == "hilbert" and a.info["cell"] == [4, 4, 4] and a.brick == (4, 4, 4)
    assert np.array_equal(np.asarray(a), data) and np.array_equal(a[3, ::-1, 2:5], data[3, ::-1, 2:5])
    a.relayout("mloc", chunk=(8, 16, 8))
    assert a.layout == "mloc" and a.brick == (8, 16, 8)
    assert np.array_equal(np.asarray(a), data)
    a.relayout("multimap")
    a.set_index("bn", bins=16)
    info = a.info
    assert info["index"] == "bn" and info["bins"] == "16"
    assert a.where("> 0").count() == np.count_nonzero(data > 0)
    a.set_index("e1", bins=[-1000.0, 0.0, 1000.0])
    assert a.info["bins"].startswith("edges:")
    assert a.where("> 0").count() == np.count_nonzero(data > 0)
    a.set_index("none")
    assert a.info["index"] == "none"
    with pytest.raises(ValueError):
        a.plod(2).relayout("naive")


def expect_error(err, errno_, *words):
    assert isinstance(err, mmfs.Error) and isinstance(err, OSError) and err.errno == errno_, err
    assert err.reason, f"no reason from the daemon: {err}"
    for w in words:
        assert w in err.reason, (w, err.reason)
    assert err.reason in str(err)


def test_refusals_are_errors_with_the_daemons_reason_and_leave_nothing(root, module_volume):
    cases = [
        (dict(shape=(4, 4), dtype="float64", layout="nosuch"), errno.EINVAL, ["user.mmfs.layout"]),
        (dict(shape=(4, 4), dtype="float64", layout="capsule"), errno.ENOTSUP, ["capsule"]),
        (dict(shape=(10 ** 6, 10 ** 6), dtype="float64"), (errno.ENOSPC, errno.EFBIG), []),
        (dict(shape=(4, 4), dtype="float64", cell=(3, 0)), errno.EINVAL, ["cell"]),
        (dict(shape=(4, 4), dtype="float64", index="bogus"), errno.EINVAL, ["index"]),
    ]
    for i, (kwargs, expected, words) in enumerate(cases):
        path = root / f"refused-{i}"
        with pytest.raises(mmfs.Error) as e:
            mmfs.create(path, **kwargs)
        errnos = expected if isinstance(expected, tuple) else (expected,)
        expect_error(e.value, e.value.errno, *words)
        assert e.value.errno in errnos, e.value
        assert e.value.filename == str(path)
        assert not path.exists(), f"{path} left behind"
    a = mmfs.create(root / "exists", (2,), "int8")
    with pytest.raises(mmfs.Error) as e:
        mmfs.create(root / "exists", (2,), "int8")
    assert e.value.errno == errno.EEXIST and a.shape == (2,)
    with pytest.raises(mmfs.Error) as e:
        a.relayout("quadrangle", cell=(0,))
    expect_error(e.value, errno.EINVAL, "cell")
    with pytest.raises(mmfs.Error) as e:
        a.set_index("e1", bins="precision:99")
    expect_error(e.value, errno.EINVAL, "bins")


def test_create_with_dims(root):
    a = mmfs.create(root / "named", (3, 4), "float32", dims=("y", "x"))
    assert a.dims == ("y", "x")
    assert getx(root / "named", "user.mmfs.dims") == "y,x"
    with pytest.raises(ValueError):
        mmfs.create(root / "named2", (3, 4), "float32", dims=("y",))
    for bad in (("y", "y"), ("y", "a/b"), ("y", "")):
        with pytest.raises(ValueError):
            mmfs.create(root / "named3", (3, 4), "float32", dims=bad)
    # Names that are not identifiers (netCDF-4 allows them): user.hdf5.dims, not user.mmfs.dims.
    odd = mmfs.create(root / "named4", (3, 4), "float32", dims=("y", "not an identifier"))
    assert odd.dims == ("y", "not an identifier") and mmfs.open(root / "named4").dims == odd.dims
    assert getx(root / "named4", "user.mmfs.dims") == "dim_0,dim_1"
    assert getx(root / "named4", "user.hdf5.dims") == '["y", "not an identifier"]'
    assert "hdf5.dims" not in odd.attrs


def test_dims_default_and_refused_by_the_daemon(root):
    # without user.mmfs.dims, the names default to dim_0, dim_1, ...
    assert mmfs.create(root / "unnamed", (3, 4), "float32").dims == ("dim_0", "dim_1")
    p = root / "raw"
    p.touch()
    os.setxattr(p, "user.mmfs.shape", b"3,4")
    for bad in (b"y,y", b"y", b"y,x,z", b"1y,x", b"y,x x"):
        with pytest.raises(OSError) as e:
            os.setxattr(p, "user.mmfs.dims", bad)
        assert e.value.errno == errno.EINVAL, bad
    assert mmfs.open(p).dims == ("dim_0", "dim_1")
    os.setxattr(p, "user.mmfs.dims", b"row,col")
    assert mmfs.open(p).dims == ("row", "col")

def test_create_with_copies_and_change_them(root):
    arr = random_array(np.random.default_rng(12), (30, 20, 10), "float64")
    a = mmfs.create(root / "with-copies", data=arr, layout="multimap", copies="naive;hilbert:cell=4,4,2")
    assert getx(a.path, "copies") == "naive;hilbert:cell=4,4,2"
    # The data is durable in the primary at the fsync; the copies catch up after it.
    for _ in range(200):
        if all(c["state"] == "current" for c in a.copies):
            break
        time.sleep(0.05)
    assert [c["layout"] for c in a.copies] == ["naive", "hilbert"]
    assert all(c["state"] == "current" for c in a.copies), a.copies
    for k in range(3):
        got = np.fromfile(f"{a.path}@/copy/{k}", dtype="float64").reshape(arr.shape)
        assert np.array_equal(got, arr), k
    assert np.array_equal(a[:, 3, :], arr[:, 3, :])
    a.set_copies(["zorder"])
    assert [c["layout"] for c in a.copies] == ["zorder"]
    a.set_copies(None)
    assert a.copies == []
    with pytest.raises(mmfs.Error) as e:
        a.set_copies("naive:cell=1,1")
    assert e.value.errno == errno.EINVAL and "user.mmfs.copies" in str(e.value)
