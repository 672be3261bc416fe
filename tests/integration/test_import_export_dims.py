"""Dimension names through mmfs-import and mmfs-export (docs/import-export.md,
"Dimension names" and "A whole tree"): HDF5 dimension scales and labels become
user.mmfs.dims, netCDF-4's placeholder dimensions and structure attributes are
not imported, and `mmfs-export DIR FILE.h5` writes the tree back with the
scales attached, checked with h5py's own view of them (ds.dims)."""
import json

import h5py
import numpy as np
import pytest

from h5_support import check_array, getfattr, mmfs_export, mmfs_import, user_xattrs, write_h5
from h5_support import d, vol  # noqa: F401,F811 (fixtures, requested by name)
import os

from mmfs_mount import random_array

PLACEHOLDER = "This is a netCDF dimension but not a netCDF variable."


def dims_of(path):
    return getfattr(path, "user.mmfs.dims").split(",")


def scale_names(f, name):
    """Per dimension of FILE[name], the names of the datasets attached as its scales."""
    return [[s.name.rsplit("/", 1)[-1] for s in dim.values()] for dim in f[name].dims]


def netcdf_like(path, rng):
    """What netCDF-4 writes: coordinate variables as scales, a dimension without a
    variable as a placeholder scale, the library's bookkeeping attributes."""
    t = random_array(rng, (4, 5, 6), "float32")
    q = random_array(rng, (7,), "int16")
    lat = np.linspace(-10, 10, 5)
    with h5py.File(path, "w") as f:
        f.attrs["_NCProperties"] = "version=2,netcdf=4.9.2"
        f.attrs["title"] = "netCDF-like"
        f["lat"] = lat
        f["lat"].make_scale("lat")
        f["lat"].attrs["_Netcdf4Dimid"] = np.int32(1)
        f["lat"].attrs["units"] = "degrees_north"
        for name, n in (("time", 4), ("lon", 6), ("x", 7)):
            f.create_dataset(name, (n,), "f4")
            f[name].make_scale(f"{PLACEHOLDER}{n:10d}")
        f["T"] = t
        f["Q"] = q
        for i, dim in enumerate(("time", "lat", "lon")):
            f["T"].dims[i].attach_scale(f[dim])
        f["Q"].dims[0].attach_scale(f["x"])
        f["T"].attrs["_Netcdf4Coordinates"] = np.array([0, 1, 2], dtype="i4")
        f["T"].attrs["units"] = "K"
        f["T"].attrs["CLASS"] = "not structure here"  # only a scale's CLASS is structure
    return {"T": t, "Q": q, "lat": lat}


def test_netcdf_dimensions_become_dims(d, tmp_path):
    rng = np.random.default_rng(54)
    src = tmp_path / "nc.h5"
    data = netcdf_like(src, rng)
    res = mmfs_import(src, d / "run").ok()
    # The placeholders are not arrays; the import says so and succeeds.
    for name in ("time", "lon", "x"):
        assert f"skipped /{name}: a netCDF dimension without a variable" in res.out, res
        assert not (d / "run" / name).exists()
    assert sorted(p.name for p in (d / "run").iterdir()) == ["Q", "T", "lat"]
    assert dims_of(d / "run" / "T") == ["time", "lat", "lon"]
    assert dims_of(d / "run" / "Q") == ["x"]
    assert dims_of(d / "run" / "lat") == ["lat"]
    for name, arr in data.items():
        check_array(d / "run" / name, arr)
    # Structure attributes are gone; the user's stay.
    t_attrs = user_xattrs(d / "run" / "T")
    assert "user._Netcdf4Coordinates" not in t_attrs and "user.DIMENSION_LIST" not in t_attrs
    assert t_attrs["user.units"] == b"K" and t_attrs["user.CLASS"] == b"not structure here"
    lat_attrs = user_xattrs(d / "run" / "lat")
    assert set(lat_attrs) == {"user.units", "user.hdf5.types"}, lat_attrs
    root = user_xattrs(d / "run")
    assert "user._NCProperties" not in root and root["user.title"] == b"netCDF-like"


def test_labels_and_partly_named(d, tmp_path):
    rng = np.random.default_rng(55)
    a = random_array(rng, (3, 4, 2), "float64")
    src = tmp_path / "labels.h5"
    with h5py.File(src, "w") as f:
        f["a"] = a
        f["a"].dims[0].label = "row"
        f["a"].dims[2].label = "band"
        f["plain"] = a[0]
    mmfs_import(src, d / "l").ok()
    assert dims_of(d / "l" / "a") == ["row", "dim_1", "band"]
    # Nothing named: the array keeps the default names (dims never set).
    assert dims_of(d / "l" / "plain") == ["dim_0", "dim_1"]


def test_names_that_are_not_identifiers(d, tmp_path):
    """Names user.mmfs.dims refuses (not identifiers) are kept in user.hdf5.dims and
    written back as labels and scales; names two alike lose the names with a
    warning, not the array."""
    rng = np.random.default_rng(56)
    a = random_array(rng, (3, 4), "int32")
    src = tmp_path / "bad.h5"
    with h5py.File(src, "w") as f:
        f["a"] = a
        f["a"].dims[0].label = "not an identifier"
        f["twice"] = a
        f["twice"].dims[0].label = "x"
        f["twice"].dims[1].label = "x"
    res = mmfs_import(src, d / "b").ok()
    assert "not an identifier" not in res.err, res
    assert "dimension names x,x" in res.err, res
    check_array(d / "b" / "a", a)
    check_array(d / "b" / "twice", a)
    assert dims_of(d / "b" / "a") == ["dim_0", "dim_1"]
    assert json.loads(getfattr(d / "b" / "a", "user.hdf5.dims")) == ["not an identifier", "dim_1"]
    assert "user.hdf5.dims" not in user_xattrs(d / "b" / "twice")
    out = tmp_path / "back.h5"
    mmfs_export(d / "b", out).ok()
    with h5py.File(out, "r") as f:
        assert scale_names(f, "a") == [["not an identifier"], ["dim_1"]]
        assert "hdf5.dims" not in f["a"].attrs


def test_tree_export_round_trip(d, tmp_path):
    rng = np.random.default_rng(57)
    src = tmp_path / "nc.h5"
    data = netcdf_like(src, rng)
    mmfs_import(src, d / "run").ok()
    (d / "run" / "sub").mkdir()
    os.setxattr(d / "run" / "sub", "user.note", b"a group")
    b = random_array(rng, (2, 3), "uint8")
    write_h5(tmp_path / "b.h5", {"b": b})
    mmfs_import(f"{tmp_path / 'b.h5'}:/b", d / "run" / "sub" / "b").ok()
    os.setxattr(d / "run" / "sub" / "b", "user.mmfs.dims", b"u,v")
    (d / "run" / "README").write_text("not an array")

    out = tmp_path / "out.h5"
    res = mmfs_export(d / "run", out).ok()
    assert "README: warning: not an array file: not exported" in res.err, res
    with h5py.File(out, "r") as f:
        assert sorted(f) == ["Q", "T", "lat", "lon", "sub", "time", "x"]
        np.testing.assert_array_equal(f["T"][()], data["T"])
        np.testing.assert_array_equal(f["Q"][()], data["Q"])
        np.testing.assert_array_equal(f["lat"][()], data["lat"])
        assert scale_names(f, "T") == [["time"], ["lat"], ["lon"]]
        # CLASS is written fixed-length, as HDF5's conventions have it: HDF5 1.10's H5DSattach_scale
        # compares a variable-length one by its pointer's bytes and then fails 1 time in 16.
        assert f["T"].attrs["CLASS"] in ("not structure here", b"not structure here")
        assert not f["T"].attrs.get_id("CLASS").get_type().is_variable_str()
        assert scale_names(f, "Q") == [["x"]]
        assert f["lat"].is_scale and f["lat"].attrs["units"] == "degrees_north"
        for name, n in (("time", 4), ("lon", 6), ("x", 7)):
            assert f[name].is_scale and f[name].shape == (n,)
            assert f[name].attrs["NAME"].decode() == f"{PLACEHOLDER}{n:10d}"
        assert f.attrs["title"] == "netCDF-like"
        assert f["sub"].attrs["note"] == "a group"
        np.testing.assert_array_equal(f["sub/b"][()], b)
        assert scale_names(f, "sub/b") == [["u"], ["v"]]
    # Imported again, the names are the same.
    mmfs_import(out, d / "again").ok()
    assert dims_of(d / "again" / "T") == ["time", "lat", "lon"]
    assert dims_of(d / "again" / "sub" / "b") == ["u", "v"]


def test_tree_export_into_a_group_and_errors(d, tmp_path):
    rng = np.random.default_rng(58)
    a = random_array(rng, (4, 3), "float32")
    write_h5(tmp_path / "a.h5", {"a": a})
    mmfs_import(tmp_path / "a.h5", d / "t").ok()
    out = tmp_path / "out.h5"
    mmfs_export(d / "t", f"{out}:/g/h").ok()
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(f["g/h/a"][()], a)
    # The dataset exists: refused without --force, the file keeps it; replaced with it.
    mmfs_export(d / "t", f"{out}:/g/h").failed("exists")
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(f["g/h/a"][()], a)
    mmfs_export("--force", d / "t", f"{out}:/g/h").ok()
    # A directory that does not exist, a file where a group should be.
    mmfs_export(d / "missing", tmp_path / "x.h5").failed("No such file")
    assert not (tmp_path / "x.h5").exists()
    mmfs_export(d / "t", f"{out}:/g/h/a").failed("not a group")
    # An HDF5 file that cannot be created leaves nothing behind.
    mmfs_export(d / "t", tmp_path / "no" / "such" / "dir.h5").failed()


def test_tree_export_scopes_dimensions_as_netcdf(d, tmp_path):
    """A group's array naming a dimension of an enclosing group gets that group's
    scale (netCDF-4 dimensions are visible in the groups below theirs), not a
    placeholder of its own; a name no enclosing group has gets one in its group,
    and an enclosing dataset of another length is not taken."""
    rng = np.random.default_rng(59)
    root = d / "scoped"
    root.mkdir()
    x = np.arange(5, dtype="float64")
    c = random_array(rng, (5, 3), "float32")
    e = random_array(rng, (4,), "int16")
    w = random_array(rng, (5,), "int32")
    for path, arr, dims in ((root / "x", x, "x"), (root / "w", w, "t"), (root / "sub" / "c", c, "x,y"),
                            (root / "sub" / "deeper" / "e", e, "t")):
        path.parent.mkdir(parents=True, exist_ok=True)
        src = tmp_path / f"{path.name}.h5"
        write_h5(src, {"a": arr})
        mmfs_import(f"{src}:/a", path).ok()
        os.setxattr(path, "user.mmfs.dims", dims.encode())
    out = tmp_path / "scoped.h5"
    mmfs_export(root, out).ok()
    with h5py.File(out, "r") as f:
        assert sorted(f) == ["sub", "t", "w", "x"]
        assert sorted(f["sub"]) == ["c", "deeper", "y"], "x is the root's, y the group's own"
        assert [[s.name for s in dim.values()] for dim in f["sub/c"].dims] == [["/x"], ["/sub/y"]]
        np.testing.assert_array_equal(f["sub/c"][()], c)
        # t is 5 long at the root, 4 in sub/deeper: the root's is not taken
        assert [[s.name for s in dim.values()] for dim in f["sub/deeper/e"].dims] == [["/sub/deeper/t"]]
        assert f["sub/deeper/t"].shape == (4,) and f["t"].shape == (5,)
    # h5netcdf (as netCDF-4 readers do) finds the root's x from the group
    h5netcdf = pytest.importorskip("h5netcdf")
    with h5netcdf.File(out, "r") as f:
        assert f["sub/c"].dimensions == ("x", "y")
        assert "x" not in f["sub"].dimensions and f["sub"].dimensions["y"].size == 3
        assert f.dimensions["x"].size == 5
