"""The xarray backend (python/mmfs/xarray_backend.py) and dask on a real
mount: open_dataset on an array file and on a directory, lazy indexing that
reads only the selected view (and nothing but xattrs on open),
preferred_chunks of whole bricks grown to 16 MiB (mmfs.Array.chunks), dask
means equal to numpy's, pickling."""
import pickle

import numpy as np
import pytest

import python_support  # noqa: F401  (puts python/ on sys.path)
import mmfs
from mmfs_mount import random_array
from python_support import xarray_engine

xr = pytest.importorskip("xarray")
da = pytest.importorskip("dask.array")
import dask  # noqa: E402
from mmfs.xarray_backend import MmfsBackendEntrypoint  # noqa: E402

ENGINE = MmfsBackendEntrypoint  # the class works without the installed entry point


@pytest.fixture(scope="module")
def files(module_volume):
    """A directory of arrays with default dimension names, and its numpy data."""
    d = module_volume.mnt / "xr"
    d.mkdir()
    rng = np.random.default_rng(21)
    t = random_array(rng, (12, 10, 8), "float64")
    u = random_array(rng, (12, 10, 8), "float32")
    dim0 = np.arange(12, dtype="int32") * 10
    mmfs.create(d / "t", data=t, layout="hilbert", cell=(4, 4, 2),
                attrs={"units": "K", "valid_range": [-5000.0, 5000.0], "long_name": "temperature"})
    mmfs.create(d / "u", data=u, layout="mloc", chunk=(6, 10, 8))
    mmfs.create(d / "dim_0", data=dim0)
    mmfs.attrs.Attrs(d)["title"] = "a test dataset"
    (d / "notes.txt").write_text("not an array")
    (d / "sub").mkdir()
    return d, {"t": t, "u": u, "dim_0": dim0}


def test_open_an_array_file(files):
    d, data = files
    ds = xr.open_dataset(d / "t", engine=ENGINE)
    assert list(ds.data_vars) == ["t"] and ds.t.dims == ("dim_0", "dim_1", "dim_2")
    assert ds.t.dtype == np.float64 and ds.t.shape == data["t"].shape
    assert ds.t.attrs["units"] == "K" and ds.t.attrs["long_name"] == "temperature"
    assert np.array_equal(ds.t.attrs["valid_range"], [-5000.0, 5000.0])
    # the hilbert cell 4x4x2 grown to 16 MiB or the whole array: the whole 12x10x8
    assert ds.t.encoding["preferred_chunks"] == {"dim_0": 12, "dim_1": 10, "dim_2": 8}
    assert ds.t.encoding["mmfs_layout"] == "hilbert"
    assert ds.t.encoding["source"] == str(d / "t")
    assert np.array_equal(ds.t.values, data["t"])


def test_the_registered_engine_name(files):
    d, data = files
    engine = xarray_engine()  # skips unless `pip install ./python` registered it
    ds = xr.open_dataset(d / "t", engine=engine)
    assert np.array_equal(ds.t[3].values, data["t"][3])
    assert MmfsBackendEntrypoint().guess_can_open(str(d / "t"))
    assert not MmfsBackendEntrypoint().guess_can_open(str(d / "notes.txt"))


def test_open_a_directory(files):
    d, data = files
    ds = xr.open_dataset(d, engine=ENGINE)
    assert set(ds.data_vars) == {"t", "u"}
    assert "dim_0" in ds.coords and np.array_equal(ds.dim_0.values, data["dim_0"])  # 1-D, named as its dim
    assert ds.attrs["title"] == "a test dataset"
    assert ds.u.encoding["preferred_chunks"] == {"dim_0": 12, "dim_1": 10, "dim_2": 8}  # the whole array
    assert np.array_equal(ds.u.values, data["u"])
    # label-based selection on the coordinate
    assert np.array_equal(ds.t.sel(dim_0=30).values, data["t"][3])
    ds2 = xr.open_dataset(d, engine=ENGINE, drop_variables=["u"])
    assert set(ds2.data_vars) == {"t"}


def test_opening_reads_only_xattrs(files, monkeypatch):
    """Opening an array file reads no file at all (no data, no A@/info) and
    each xattr it needs once: user.mmfs.shape, dtype, dims, layout, cell
    (chunk for MLOC), the listing, and the attributes that exist."""
    import os
    d, _ = files
    calls = []
    real_get, real_list, real_stat = os.getxattr, os.listxattr, os.stat

    def get(path, name, *args, **kwargs):
        calls.append(("getxattr", name))
        return real_get(path, name, *args, **kwargs)

    def listing(path, *args, **kwargs):
        calls.append(("listxattr", None))
        return real_list(path, *args, **kwargs)

    def stat(path, *args, **kwargs):
        calls.append(("stat", None))
        return real_stat(path, *args, **kwargs)

    for name, last in (("t", "user.mmfs.cell"), ("u", "user.mmfs.chunk"), ("dim_0", "user.mmfs.cell")):
        calls.clear()
        monkeypatch.setattr(os, "getxattr", get)
        monkeypatch.setattr(os, "listxattr", listing)
        monkeypatch.setattr(os, "stat", stat)
        with mmfs.trace() as t:
            ds = xr.open_dataset(d / name, engine=ENGINE)
        monkeypatch.undo()
        # a 1-D array named as its dimension is a coordinate: xarray reads it for its index
        assert t.paths == ([str(d / name)] if name == "dim_0" else []), t.paths
        expected = [("getxattr", "user.mmfs." + n) for n in ("shape", "dtype", "dims", "layout")]
        expected += [("getxattr", last), ("listxattr", None)]
        if name == "t":  # t has attributes: their types, then each one
            expected += [("getxattr", "user.hdf5.types")] + [("getxattr", "user." + k) for k in ds.t.attrs]
        assert sorted(calls, key=str) == sorted(expected, key=str), (name, calls)


def test_lazy_indexing_reads_only_the_view(files):
    d, data = files
    with mmfs.trace() as t:
        ds = xr.open_dataset(d / "t", engine=ENGINE)
    assert t.paths == []  # no data and no A@/info read on open
    cases = [
        (lambda v: v.isel(dim_0=5), f"{d}/t@/slice/0/5", data["t"][5]),
        (lambda v: v.isel(dim_2=-1), f"{d}/t@/slice/2/7", data["t"][:, :, -1]),
        (lambda v: v.isel(dim_0=slice(2, 9, 3), dim_1=4), f"{d}/t@/box/2:9:3,4,:", data["t"][2:9:3, 4]),
        (lambda v: v.isel(dim_1=slice(None, None, -1)), f"{d}/t", data["t"][:, ::-1]),
        (lambda v: v[1, 2, 3], f"{d}/t@/box/1,2,3", data["t"][1, 2, 3]),
        # an outer (array) indexer: one read of its bounding box, then numpy
        (lambda v: v.isel(dim_0=[1, 4, 2]), f"{d}/t@/box/1:5,:,:", data["t"][[1, 4, 2]]),
    ]
    for select, path, expected in cases:
        with mmfs.trace() as t:
            got = select(ds.t).values
        assert t.paths == [path], t.paths
        assert np.array_equal(got, expected)


def test_preferred_chunks_and_dask(files, monkeypatch):
    d, data = files
    ds = xr.open_dataset(d, engine=ENGINE, chunks={})
    # 16 MiB or the whole array: these small arrays are one chunk each
    assert ds.t.chunks == ((12,), (10,), (8,)) and ds.u.chunks == ((12,), (10,), (8,))
    assert np.array_equal(ds.t.values, data["t"])
    # with a smaller target the bricks grow by doubling, last dimension first
    monkeypatch.setattr(mmfs.array, "CHUNK_BYTES", 512)
    ds = xr.open_dataset(d, engine=ENGINE, chunks={})
    assert ds.t.encoding["preferred_chunks"] == {"dim_0": 4, "dim_1": 4, "dim_2": 4}  # cell 4x4x2, 512 B
    assert ds.t.chunks == ((4,) * 3, (4, 4, 2), (4, 4))
    assert ds.u.chunks == ((6, 6), (10,), (8,))  # the mloc chunk 6x10x8 float32: 1920 B already
    monkeypatch.setattr(mmfs.array, "CHUNK_BYTES", 2048)
    ds = xr.open_dataset(d, engine=ENGINE, chunks={})
    assert ds.t.chunks == ((8, 4), (8, 2), (4, 4))  # 4x4x2 -> 4x4x4 -> 4x8x4 -> 8x8x4 (2 KiB)
    assert float(ds.t.mean().compute()) == pytest.approx(float(data["t"].mean()), rel=1e-12)
    assert np.allclose(ds.t.sum(dim="dim_2").values, data["t"].sum(axis=2), rtol=1e-12, atol=0)
    with dask.config.set({"array.chunk-size": "4KiB"}):
        auto = xr.open_dataset(d, engine=ENGINE, chunks="auto")
    assert auto.t.chunks != ((12,), (10,), (8,))
    for c, preferred in zip(auto.t.chunks, (8, 8, 4)):  # multiples of the preferred chunks
        assert all(n % preferred == 0 for n in c[:-1]), auto.t.chunks
    assert np.array_equal(auto.t.values, data["t"])


def test_dask_from_array(files, monkeypatch):
    d, data = files
    a = mmfs.open(d / "t")
    assert a.chunks == (12, 10, 8) and da.from_array(a).chunks == ((12,), (10,), (8,))
    monkeypatch.setattr(mmfs.array, "CHUNK_BYTES", 1024)
    assert a.chunks == (4, 8, 4)
    assert da.from_array(a, chunks=a.chunks).chunks == ((4,) * 3, (8, 2), (4, 4))
    # dask's default (chunks="auto") takes multiples of a.chunks, as of h5py's
    with dask.config.set({"array.chunk-size": "4KiB"}):
        default = da.from_array(a)
    assert default.chunks != ((12,), (10,), (8,))
    assert all(n % c == 0 for cs, c in zip(default.chunks, a.chunks) for n in cs[:-1]), default.chunks
    assert np.array_equal(default.compute(scheduler="threads"), data["t"])
    x = da.from_array(a, chunks=(5, 3, 8))
    assert x.shape == a.shape and x.dtype == a.dtype
    assert float(x.mean().compute(scheduler="threads")) == pytest.approx(float(data["t"].mean()), rel=1e-12)
    assert np.array_equal(x[::-1, 2].compute(), data["t"][::-1, 2])
    auto = da.from_array(a, chunks="auto")
    assert all(n % b == 0 for c, b in zip(auto.chunks, a.brick) for n in c[:-1])
    assert float(auto.std().compute(scheduler="threads")) == pytest.approx(float(data["t"].std()), rel=1e-9)
    # the same array tokenizes the same; a different one does not
    from dask.base import tokenize
    assert tokenize(a) == tokenize(mmfs.open(d / "t")) != tokenize(mmfs.open(d / "u"))


def test_pickling(files):
    d, data = files
    ds = xr.open_dataset(d, engine=ENGINE)
    again = pickle.loads(pickle.dumps(ds))
    assert np.array_equal(again.t.isel(dim_1=3).values, data["t"][:, 3])
    chunked = pickle.loads(pickle.dumps(xr.open_dataset(d, engine=ENGINE, chunks={})))
    assert np.array_equal(chunked.u.values, data["u"])


def test_default_dimension_names_that_disagree(module_volume):
    d = module_volume.mnt / "xr-clash"
    d.mkdir()
    mmfs.create(d / "a", data=np.zeros((3, 4)))
    mmfs.create(d / "b", data=np.ones(5))
    with pytest.raises(ValueError, match="user.mmfs.dims"):
        xr.open_dataset(d, engine=ENGINE)
    ds = xr.open_dataset(d, engine=ENGINE, default_dims="per_variable")
    assert ds.a.dims == ("a_dim_0", "a_dim_1") and ds.b.dims == ("b_dim_0",)
    assert float(ds.b.sum()) == 5.0


def test_named_dimensions_and_coordinates(module_volume):
    d = module_volume.mnt / "xr-named"
    d.mkdir()
    y, x = np.linspace(-1, 1, 6), np.arange(9.0)
    field = np.add.outer(y, x)
    mmfs.create(d / "y", data=y, dims=("y",), attrs={"units": "m"})
    mmfs.create(d / "x", data=x, dims=("x",))
    mmfs.create(d / "field", data=field, dims=("y", "x"))
    ds = xr.open_dataset(d, engine=ENGINE)
    assert ds.field.dims == ("y", "x") and set(ds.coords) == {"y", "x"}
    assert ds.y.attrs["units"] == "m"
    assert np.array_equal(ds.field.sel(x=4.0).values, field[:, 4])
    with mmfs.trace() as t:
        ds.field.isel(y=2).values
    assert t.paths == [f"{d}/field@/slice/0/2"]
