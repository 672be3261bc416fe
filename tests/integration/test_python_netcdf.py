"""netCDF-4 files written by xarray itself through mmfs and back (docs/python.md, docs/import-export.md): for each
Dataset below, written with ``to_netcdf(engine="h5netcdf")``,

    A = xr.open_dataset(FILE, engine="h5netcdf")
    B = xr.open_dataset(DIR, engine="mmfs")         after `mmfs-import FILE DIR`
    C = xr.open_dataset(OUT, engine="h5netcdf")     after `mmfs-export DIR OUT`

are xr.testing.assert_identical (values, dims, coordinates, attrs of every type, the CF
decoding of _FillValue, scale_factor/add_offset, time units and calendar, timedelta
units, the coordinates attribute), also per group (``group="sub/deep"`` on every side).

The round trips need mmfs-import to name dimensions from HDF5 dimension scales
(user.mmfs.dims), to leave netCDF's placeholder scales and structural attributes out,
and mmfs-export DIR FILE.h5 to write dimension scales back (docs/import-export.md).

The first tests need no tool: they check the xarray backend's CF decoding, groups and
attributes against h5netcdf on the xattrs that contract makes mmfs-import write
(written here by mmfs.create and mmfs.attrs, as `import_as_the_contract_says` does)
and against xr.decode_cf."""
import json
import os
import pickle

import h5py
import numpy as np
import pytest

import python_support  # noqa: F401  (puts python/ on sys.path)
import mmfs
from h5_support import d, mmfs_export, mmfs_import, vol  # noqa: F401,F811 (fixtures, requested by name)

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
pytest.importorskip("h5netcdf")
from mmfs.xarray_backend import MmfsBackendEntrypoint  # noqa: E402

ENGINE = MmfsBackendEntrypoint  # the class works without the installed entry point
NOT_A_VARIABLE = "This is a netCDF dimension but not a netCDF variable"
# HDF5 and netCDF-4 structure, which mmfs-import must not copy as xattrs
STRUCTURAL = {"CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST", "DIMENSION_LABELS", "_Netcdf4Dimid",
              "_Netcdf4Coordinates", "_NCProperties", "_nc3_strict"}


# --- the Datasets ----------------------------------------------------------------------

def every_attr_type(tag):
    """Attributes of every type xarray writes: str (non-ASCII, empty), Python and numpy
    ints and floats, numpy int/float arrays, lists of str (one element too)."""
    return {
        "title": f"{tag}: température",
        "empty": "",
        "count": 3,
        "big": 2 ** 40 + 1,
        "ratio": 0.1,
        "tenth": np.float32(0.1),
        "small": np.int16(-7),
        "byte": np.uint8(255),
        "levels": np.array([1, 2, 3], dtype="int32"),
        "weights": np.array([0.25, 0.5, 1e-300]),
        "limits": np.array([-1.5, 2.5], dtype="float32"),
        "flags": np.array([1, 2, 4, 8], dtype="uint8"),
        "names": ["north", "south", "east"],
        "one_name": ["only"],
        "one_value": np.array([42], dtype="int64"),
    }


def climate():
    """T(time,lat,lon) float32 with NaNs, P(lat,lon) float64, and on the unshared dimension
    station, which has no coordinate variable: counts int16, ids int64, lag (timedelta),
    flags uint8 and level int32 on (lat, lon); a time coordinate in days since 2000-01-01."""
    rng = np.random.default_rng(54)
    T = rng.normal(280, 10, (6, 4, 5)).astype("float32")
    T[1, 2, 3] = T[5, 0, 0] = np.nan
    ds = xr.Dataset(
        {
            "T": (("time", "lat", "lon"), T, {"units": "K", "long_name": "temperature", **every_attr_type("T")}),
            "P": (("lat", "lon"), rng.normal(1e5, 1e3, (4, 5)), {"units": "Pa", "scale": 2.5, "n": 7}),
            "counts": (("station",), rng.integers(-100, 100, 7).astype("int16"), {"note": "no coordinate"}),
            "ids": (("station",), rng.integers(0, 2 ** 40, 7).astype("int64")),
            "lag": (("station",), (np.arange(7) * np.timedelta64(3, "h")).astype("timedelta64[ns]")),
            "flags": (("lat", "lon"), rng.integers(0, 255, (4, 5)).astype("uint8"), {"flag_values": np.array(
                [1, 2], dtype="uint8"), "flag_meanings": "wet dry"}),
            "level": (("lat", "lon"), rng.integers(-2 ** 31, 2 ** 31 - 1, (4, 5)).astype("int32")),
        },
        coords={
            "time": ("time", pd.date_range("2000-01-01", periods=6, freq="D"), {"standard_name": "time"}),
            "lat": ("lat", np.linspace(-30, 30, 4), {"units": "degrees_north"}),
            "lon": ("lon", np.arange(5, dtype="int32") * 10, {"units": "degrees_east"}),
        },
        attrs=every_attr_type("dataset"),
    )
    ds.time.encoding.update(units="days since 2000-01-01", calendar="standard")
    return ds


def filled():
    """CF masking and packing: float64 with NaN and _FillValue -9999; an int16 with
    _FillValue -999 (decoded to float with NaN); float64 packed into int16 with
    scale_factor and add_offset; a float32 with no _FillValue at all; uint8 with a
    missing_value; an auxiliary coordinate elev(y, x) (the `coordinates` attribute)."""
    rng = np.random.default_rng(55)
    a = rng.normal(0, 1, (3, 8))
    a[0, 1] = a[2, 7] = np.nan
    b = rng.integers(-500, 500, (3, 8)).astype("float32")
    b[1, 1] = np.nan
    packed = rng.integers(0, 400, (3, 8)) * 0.25  # exact in the int16 packing below
    packed[2, 2] = np.nan
    ds = xr.Dataset(
        {
            "a": (("y", "x"), a, {"what": "NaN and _FillValue -9999"}),
            "b": (("y", "x"), b),
            "packed": (("y", "x"), packed, {"units": "%"}),
            "plain": (("x",), rng.normal(0, 1, 8).astype("float32")),
            "mask": (("y", "x"), rng.integers(0, 3, (3, 8)).astype("uint8"), {"missing_value": np.uint8(2)}),
        },
        coords={"x": np.arange(8.0), "elev": (("y", "x"), rng.uniform(0, 9, (3, 8)))},
        attrs={"history": "made by test_python_netcdf.py", "version": 2},
    )
    ds.a.encoding["_FillValue"] = -9999.0
    ds.b.encoding.update(dtype="int16", _FillValue=np.int16(-999))
    ds.packed.encoding.update(dtype="int16", scale_factor=0.25, add_offset=50.0, _FillValue=np.int16(-32767))
    ds.plain.encoding["_FillValue"] = None
    return ds


def non_coord():
    """A variable named as a dimension it does not run along: x(y) while v runs along x
    (netCDF-4 stores it as _nc4_non_coord_x, and x as a placeholder scale)."""
    return xr.Dataset({"x": ("y", np.arange(3.0)), "v": ("x", np.arange(4, dtype="int32"))},
                      attrs={"title": "non-coordinate x"})


def odd_names():
    """Names that are not identifiers, as netCDF-4 allows: a variable, a dimension
    without a variable and a coordinate (user.mmfs.dims takes identifiers only:
    mmfs-import keeps such names in user.hdf5.dims)."""
    return xr.Dataset({"T (K)": (("time (UTC)", "lat-deg"), np.arange(6.0).reshape(2, 3), {"units": "K"})},
                      coords={"lat-deg": ("lat-deg", np.array([-1.5, 0.0, 1.5]))}, attrs={"title": "odd names"})


DATASETS = {"climate": climate, "filled": filled, "non_coord": non_coord, "odd_names": odd_names}


# --- describing what differs -----------------------------------------------------------

def describe_dir(root):
    """Every array file under root: shape, dtype, user.mmfs.dims, user.* attribute names."""
    lines = []
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        names = sorted(n[5:] for n in os.listxattr(dirpath) if n.startswith("user.") and not n.startswith("user.mmfs."))
        lines.append(f"  {rel}/: attrs {names}")
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            xattrs = os.listxattr(path)
            if "user.mmfs.shape" not in xattrs:
                continue
            get = lambda n: os.getxattr(path, n).decode() if n in xattrs else None  # noqa: E731
            attrs = sorted(n[5:] for n in xattrs if n.startswith("user.") and not n.startswith("user.mmfs."))
            lines.append(f"  {os.path.join(rel, name)}: shape {get('user.mmfs.shape')} {get('user.mmfs.dtype')}, "
                         f"dims {get('user.mmfs.dims') or '(no user.mmfs.dims)'}, attrs {attrs}")
    return "\n".join(lines)


def describe_h5(path):
    """Every dataset of an HDF5 file: shape, dtype, the scales attached to each dimension,
    whether it is a scale (its NAME), its attribute names."""
    lines = []
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            attrs = sorted(obj.attrs)
            if isinstance(obj, h5py.Group):
                lines.append(f"  /{name}/: attrs {attrs}")
                return
            scales = [[s.name for s in obj.dims[i].values()] for i in range(obj.ndim)]
            scale = obj.attrs.get("NAME") if h5py.h5ds.is_scale(obj.id) else None
            lines.append(f"  /{name}: {obj.shape} {obj.dtype}, scales {scales}"
                         f"{f', is the scale {scale!r}' if scale is not None else ''}, attrs {attrs}")
        lines.append(f"  /: attrs {sorted(f.attrs)}")
        f.visititems(visit)
    return "\n".join(lines)


def _attr_type(value):
    if isinstance(value, np.ndarray):
        return "array", value.dtype.str
    if isinstance(value, (int, float, np.generic)) and not isinstance(value, (bool, np.bool_)):
        return "scalar", np.asarray(value).dtype.str  # a Python float is a float64
    return type(value).__name__, None


def attr_type_differences(expected, got):
    """Attributes whose kind (str, list, numpy array, number) or numpy dtype differ
    (assert_identical compares values only: it takes np.int16(3) for np.int64(3) and
    [1, 2] for array([1, 2]))."""
    out = []
    pairs = [("the Dataset", expected.attrs, got.attrs)]
    pairs += [(name, expected[name].attrs, got[name].attrs) for name in expected.variables if name in got.variables]
    for where, a, b in pairs:
        for key in a.keys() & b.keys():
            if _attr_type(a[key]) != _attr_type(b[key]):
                out.append(f"{where} attr {key!r}: {a[key]!r} vs {b[key]!r}")
    return out


def assert_same(expected, got, what, context):
    """xr.testing.assert_identical, and attributes of the same types."""
    try:
        xr.testing.assert_identical(expected, got)
    except AssertionError as exc:
        raise AssertionError(f"{what}\n{exc}\n{context}") from None
    differences = attr_type_differences(expected, got)
    assert not differences, f"{what}: attribute types differ\n" + "\n".join(differences) + f"\n{context}"


def opened(what, context, fn):
    try:
        return fn()
    except Exception as exc:  # the message says what was opened and what the tools made
        raise AssertionError(f"{what} failed: {type(exc).__name__}: {exc}\n{context}") from exc


# --- the backend on the xattrs of the contract (no tool involved) ----------------------

def _h5_value(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray) and value.dtype.kind in "OS":
        return np.array([v.decode() if isinstance(v, bytes) else v for v in value.flat]).reshape(value.shape)
    return value


def import_as_the_contract_says(h5file, dest):
    """What mmfs-import FILE DEST makes of a netCDF-4 file, done with h5py and the Python
    client: dims from the attached scales' basenames (a scale's own: its name), no
    placeholder scales, no structural attributes, every other attribute through
    mmfs.attrs (which encodes as mmfs-import does, types in user.hdf5.types)."""
    os.makedirs(dest, exist_ok=True)
    with h5py.File(h5file, "r") as f:
        def copy(group, directory):
            attrs = mmfs.attrs.Attrs(directory)
            for key in group.attrs:
                if key not in STRUCTURAL:
                    attrs[key] = _h5_value(group.attrs[key])
            for name, obj in group.items():
                path = os.path.join(directory, name)
                if isinstance(obj, h5py.Group):
                    os.mkdir(path)
                    copy(obj, path)
                    continue
                if NOT_A_VARIABLE.encode() in bytes(obj.attrs.get("NAME", b"")):
                    continue
                if h5py.h5ds.is_scale(obj.id):
                    dims = (name,)
                else:
                    dims = tuple(obj.dims[i].values()[-1].name.rsplit("/", 1)[-1] for i in range(obj.ndim))
                mmfs.create(path, data=obj[()].astype(obj.dtype.newbyteorder("<")), dims=dims,
                            attrs={k: _h5_value(obj.attrs[k]) for k in obj.attrs if k not in STRUCTURAL})
        copy(f, dest)


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_backend_decodes_as_h5netcdf(d, tmp_path, name):
    nc = tmp_path / f"{name}.nc"
    DATASETS[name]().to_netcdf(nc, engine="h5netcdf")
    import_as_the_contract_says(nc, d / name)
    A = xr.open_dataset(nc, engine="h5netcdf").load()
    B = xr.open_dataset(d / name, engine=ENGINE)
    assert_same(A, B.load(), "engine=mmfs on the contract's xattrs differs from h5netcdf on the file",
                describe_dir(d / name))
    # the same with every decoding option off
    raw = dict(mask_and_scale=False, decode_times=False, decode_timedelta=False, decode_coords=False)
    assert_same(xr.open_dataset(nc, engine="h5netcdf", **raw).load(),
                xr.open_dataset(d / name, engine=ENGINE, **raw).load(), "undecoded", describe_dir(d / name))


def test_decoding_options_and_laziness(d):
    """_FillValue, scale_factor/add_offset, time units and the coordinates attribute on
    arrays made with mmfs.create equal xr.decode_cf of the raw Dataset, option by option;
    a selection still reads one view."""
    rng = np.random.default_rng(7)
    t_raw = np.arange(4, dtype="int64") * 2
    v_raw = rng.integers(-5, 5, (4, 6)).astype("int16")
    v_raw[1, 2] = -999
    w_raw = rng.normal(0, 1, (4, 6))
    w_raw[3, 5] = -1e30
    mmfs.create(d / "time", data=t_raw, dims=("time",), attrs={"units": "days since 2000-01-01",
                                                             "calendar": "proleptic_gregorian"})
    mmfs.create(d / "v", data=v_raw, dims=("time", "x"), attrs={
        "_FillValue": np.int16(-999), "scale_factor": 0.5, "add_offset": np.float32(1), "coordinates": "aux"})
    mmfs.create(d / "w", data=w_raw, dims=("time", "x"), attrs={"_FillValue": [-1e30]})
    mmfs.create(d / "aux", data=np.arange(6, dtype="float32"), dims=("x",))
    raw = xr.Dataset(
        {"v": (("time", "x"), v_raw, {"_FillValue": np.int16(-999), "scale_factor": 0.5,
                                      "add_offset": np.float32(1), "coordinates": "aux"}),
         "w": (("time", "x"), w_raw, {"_FillValue": -1e30}),
         "aux": ("x", np.arange(6, dtype="float32"))},
        coords={"time": ("time", t_raw, {"units": "days since 2000-01-01", "calendar": "proleptic_gregorian"})})
    options = [{}, {"mask_and_scale": False}, {"decode_times": False}, {"decode_coords": False},
               {"use_cftime": True} if _has_cftime() else {"decode_times": True}]
    for opts in options:
        got = xr.open_dataset(d, engine=ENGINE, **opts)
        want = xr.decode_cf(raw, **opts)
        assert_same(want, got.load(), f"open_dataset(engine=mmfs, {opts}) differs from xr.decode_cf", describe_dir(d))
    ds = xr.open_dataset(d, engine=ENGINE)  # (reading .values caches the whole variable: views first)
    with mmfs.trace() as t:
        row = ds.v.isel(time=1).values
    assert t.paths == [f"{d}/v@/slice/0/1"], t.paths
    assert np.array_equal(row, np.where(v_raw[1] == -999, np.nan, v_raw[1] * 0.5 + 1), equal_nan=True)
    with mmfs.trace() as t:
        box = ds.w[2:4, 4:6].values
    assert t.paths == [f"{d}/w@/box/2:4,4:6"], t.paths
    assert np.isnan(box[1, 1]) and box[0, 0] == w_raw[2, 4]
    assert "aux" in ds.coords and np.isnan(ds.v.values[1, 2]) and ds.v.dtype == np.float64  # float64 scale_factor
    assert ds.v.encoding["_FillValue"] == -999 and ds.v.encoding["scale_factor"] == 0.5
    assert list(xr.open_dataset(d, engine=ENGINE, drop_variables=["w", "aux"]).data_vars) == ["v"]
    # decoded lazily under dask (chunks on the bricks) and after pickling
    want = xr.decode_cf(raw)
    chunked = xr.open_dataset(d, engine=ENGINE, chunks={})
    assert chunked.v.chunks is not None
    assert float(chunked.v.mean().compute(scheduler="threads")) == pytest.approx(float(want.v.mean()), rel=1e-12)
    again = pickle.loads(pickle.dumps(xr.open_dataset(d, engine=ENGINE)))
    assert_same(want, again.load(), "a pickled Dataset differs from xr.decode_cf", describe_dir(d))


def _has_cftime():
    try:
        import cftime  # noqa: F401
    except ImportError:
        return False
    return True


def test_groups_and_attributes(d):
    """group= opens a subdirectory (as h5netcdf's group opens an HDF5 group); attributes
    come back as h5netcdf gives them: one element as a scalar, string arrays as lists."""
    mmfs.create(d / "top", data=np.arange(3.0), dims=("n",))
    (d / "sub" / "deep").mkdir(parents=True)
    mmfs.create(d / "sub" / "s", data=np.arange(4, dtype="int16"), dims=("m",), attrs={"_FillValue": [np.int16(3)]})
    mmfs.create(d / "sub" / "deep" / "z", data=np.ones((2, 2), "float32"), dims=("a", "b"))
    mmfs.attrs.Attrs(d / "sub")["names"] = ["p", "q"]
    mmfs.attrs.Attrs(d / "sub")["one"] = ["r"]
    mmfs.attrs.Attrs(d / "sub")["level"] = np.array([1], dtype="int32")
    mmfs.attrs.Attrs(d / "sub")["levels"] = np.array([1, 2], dtype="int32")
    top = xr.open_dataset(d, engine=ENGINE)
    assert list(top.data_vars) == ["top"]
    for group in ("sub", "/sub", "sub/"):
        sub = xr.open_dataset(d, engine=ENGINE, group=group)
        assert list(sub.data_vars) == ["s"] and sub.s.dtype == np.float32 and np.isnan(sub.s.values[3])
        assert sub.attrs["names"] == ["p", "q"] and sub.attrs["one"] == "r"
        assert sub.attrs["level"] == 1 and type(sub.attrs["level"]) is np.int32
        assert isinstance(sub.attrs["levels"], np.ndarray) and sub.attrs["levels"].tolist() == [1, 2]
    deep = xr.open_dataset(d, engine=ENGINE, group="sub/deep")
    assert deep.z.dims == ("a", "b") and deep.z.encoding["source"] == str(d / "sub" / "deep" / "z")
    with pytest.raises(OSError, match="not found"):
        xr.open_dataset(d, engine=ENGINE, group="nope")
    with pytest.raises(ValueError, match="outside"):
        xr.open_dataset(d / "sub", engine=ENGINE, group="../sub")
    with pytest.raises(ValueError, match="needs a directory"):
        xr.open_dataset(d / "top", engine=ENGINE, group="sub")


def test_non_coord_prefix_and_the_function(d):
    """_nc4_non_coord_x is the variable x (as h5netcdf shows it); open_mmfs_dataset gives
    the same Dataset as open_dataset, with indexes on its dimension coordinates."""
    mmfs.create(d / "_nc4_non_coord_x", data=np.arange(3.0), dims=("y",))
    mmfs.create(d / "v", data=np.arange(4, dtype="int32"), dims=("x",))
    mmfs.create(d / "y", data=np.arange(3, dtype="int64") * 5, dims=("y",))
    ds = xr.open_dataset(d, engine=ENGINE)
    assert set(ds.variables) == {"x", "v", "y"} and ds.x.dims == ("y",) and ds.v.dims == ("x",)
    direct = mmfs.xarray_backend.open_mmfs_dataset(d)
    xr.testing.assert_identical(ds, direct)
    assert "y" in direct.xindexes and float(direct.x.sel(y=10)) == 2.0


# --- the round trips through mmfs-import and mmfs-export -------------------------------

def round_trip(d, tmp_path, nc, name):
    """mmfs-import NC d/name; mmfs-export d/name OUT: (DIR, OUT, context for messages)."""
    directory, out = d / name, tmp_path / f"{name}-exported.h5"
    imported = mmfs_import(nc, directory)
    context = f"--- the file, {nc}:\n{describe_h5(nc)}"
    imported.ok()
    context += f"\n--- what mmfs-import made, {directory}:\n{describe_dir(directory)}"
    exported = mmfs_export(directory, out)
    exported.ok()
    context += f"\n--- what mmfs-export made, {out}:\n{describe_h5(out)}"
    return directory, out, context


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_round_trip(d, tmp_path, name):
    ds = DATASETS[name]()
    nc = tmp_path / f"{name}.nc"
    ds.to_netcdf(nc, engine="h5netcdf")
    A = xr.open_dataset(nc, engine="h5netcdf").load()
    directory, out, context = round_trip(d, tmp_path, nc, name)
    B = opened("open_dataset(DIR, engine='mmfs')", context,
               lambda: xr.open_dataset(directory, engine=ENGINE).load())
    assert_same(A, B, "B (engine=mmfs on the import) differs from A (h5netcdf on the file)", context)
    C = opened("open_dataset(exported, engine='h5netcdf')", context,
               lambda: xr.open_dataset(out, engine="h5netcdf").load())
    assert_same(A, C, "C (h5netcdf on the export) differs from A (h5netcdf on the file)", context)


def test_import_leaves_netcdf_structure_out(d, tmp_path):
    """No array for a dimension without a variable (station), no structural attribute;
    user.mmfs.dims names every dimension; what h5netcdf writes in the export."""
    nc = tmp_path / "climate.nc"
    climate().to_netcdf(nc, engine="h5netcdf")
    directory, out, context = round_trip(d, tmp_path, nc, "climate")
    arrays = sorted(n for n in os.listdir(directory) if "user.mmfs.shape" in os.listxattr(directory / n))
    assert arrays == sorted(["T", "P", "counts", "ids", "lag", "flags", "level", "time", "lat", "lon"]), \
        f"arrays {arrays}\n{context}"
    want_dims = {"T": "time,lat,lon", "P": "lat,lon", "counts": "station", "ids": "station", "lag": "station",
                 "flags": "lat,lon", "level": "lat,lon", "time": "time", "lat": "lat", "lon": "lon"}
    for name, dims in want_dims.items():
        xattrs = os.listxattr(directory / name)
        got = os.getxattr(directory / name, "user.mmfs.dims").decode() if "user.mmfs.dims" in xattrs else None
        assert got == dims, f"{name}: user.mmfs.dims {got!r}, expected {dims!r}\n{context}"
    for path in [directory] + [directory / n for n in arrays]:
        copied = {n[5:] for n in os.listxattr(path) if n.startswith("user.")} & STRUCTURAL
        assert not copied, f"{path}: structural attributes copied as xattrs: {sorted(copied)}\n{context}"
    fill = mmfs.attrs.Attrs(directory / "T")["_FillValue"]  # as h5netcdf wrote it: float32, shape [1]
    assert isinstance(fill, np.ndarray) and fill.dtype == np.float32 and fill.shape == (1,) and np.isnan(fill[0]), \
        f"T's _FillValue {fill!r}\n{context}"
    with h5py.File(out, "r") as f:
        station = f["station"]
        assert h5py.h5ds.is_scale(station.id) and station.shape == (7,), context
        assert station.attrs["NAME"] == f"{NOT_A_VARIABLE}.{7:10d}".encode(), context
        assert [s.name for s in f["counts"].dims[0].values()] == ["/station"], context
        assert [[s.name for s in f["T"].dims[i].values()] for i in range(3)] == [["/time"], ["/lat"], ["/lon"]]
        assert h5py.h5ds.is_scale(f["lat"].id) and NOT_A_VARIABLE.encode() not in f["lat"].attrs["NAME"], context


def test_round_trip_groups(d, tmp_path):
    """Nested groups written with to_netcdf(group=..., mode="a"): sub/Q uses the root's lat
    (h5netcdf attaches /lat), sub/deep a dimension of its own; each group opened with
    group= on every side."""
    rng = np.random.default_rng(56)
    root = xr.Dataset({"P": (("lat", "lon"), rng.normal(0, 1, (3, 5)))},
                      coords={"lat": [1.0, 2.0, 3.0], "lon": np.arange(5.0)}, attrs={"title": "root"})
    sub = xr.Dataset({"Q": (("lat", "z"), rng.normal(0, 1, (3, 2)).astype("float32"), {"units": "m"})},
                     coords={"z": ("z", [10, 20], {"positive": "up"})},
                     attrs={"title": "sub", "levels": np.array([1, 2], "int16")})
    deep = xr.Dataset({"R": (("lat", "k"), rng.integers(0, 9, (3, 4)).astype("int32")),
                       "day": ("k", pd.date_range("2001-02-03", periods=4))},
                      attrs={"level": 2, "names": ["a", "b"]})
    nc = tmp_path / "groups.nc"
    root.to_netcdf(nc, engine="h5netcdf")
    sub.to_netcdf(nc, engine="h5netcdf", group="sub", mode="a")
    deep.to_netcdf(nc, engine="h5netcdf", group="sub/deep", mode="a")
    directory, out, context = round_trip(d, tmp_path, nc, "groups")
    for group, written in ((None, root), ("sub", sub), ("sub/deep", deep)):
        A = xr.open_dataset(nc, engine="h5netcdf", group=group).load()
        # a group's variables without the parent's coordinates (h5netcdf opens one group)
        xr.testing.assert_identical(written.drop_vars([v for v in written.coords if v not in A.variables]), A)
        B = opened(f"open_dataset(DIR, engine='mmfs', group={group!r})", context,
                   lambda: xr.open_dataset(directory, engine=ENGINE, group=group).load())
        assert_same(A, B, f"group {group}: B (engine=mmfs on the import) differs from A (h5netcdf)", context)
        C = opened(f"open_dataset(exported, engine='h5netcdf', group={group!r})", context,
                   lambda: xr.open_dataset(out, engine="h5netcdf", group=group).load())
        assert_same(A, C, f"group {group}: C (h5netcdf on the export) differs from A", context)


def test_names_that_are_not_identifiers(d, tmp_path):
    """mmfs-import keeps them in user.hdf5.dims (not an attribute); the Zarr view names
    its dimensions with them; names two alike are still refused by mmfs.create."""
    nc = tmp_path / "odd.nc"
    odd_names().to_netcdf(nc, engine="h5netcdf")
    directory, out, context = round_trip(d, tmp_path, nc, "odd")
    t = directory / "T (K)"
    assert os.getxattr(t, "user.mmfs.dims") == b"dim_0,dim_1", context  # not set: the defaults
    assert json.loads(os.getxattr(t, "user.hdf5.dims")) == ["time (UTC)", "lat-deg"], context
    assert mmfs.open(t).dims == ("time (UTC)", "lat-deg")
    assert "hdf5.dims" not in mmfs.attrs.Attrs(t).to_dict()
    with open(f"{t}@/zarr/zarr.json") as f:
        meta = json.load(f)
    assert meta["dimension_names"] == ["time (UTC)", "lat-deg"] and "hdf5.dims" not in meta["attributes"], meta
    with pytest.raises(ValueError):
        mmfs.create(d / "twice", (2, 2), "int8", dims=("a b", "a b"))
    with pytest.raises(KeyError):
        mmfs.attrs.Attrs(t)["hdf5.dims"] = "x"
