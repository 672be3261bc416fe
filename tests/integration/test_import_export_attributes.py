"""Whole HDF5 files through mmfs-import and back: the tree of groups, attributes as
user.* xattrs with their types in user.hdf5.types, group and root attributes,
mmfs-export restoring the attribute types (strings for xattrs it has no type of),
the attributes that are skipped, and links followed once."""
import json

import h5py
import numpy as np
import pytest

from h5_support import assert_exported, check_array, mmfs_export, mmfs_import, tree, user_xattrs, write_h5
from h5_support import d, vol  # noqa: F401,F811 (fixtures, requested by name)
from mmfs_mount import getx, make_array, random_array, read_json, setx, view


# --- whole files: groups and attributes --------------------------------------------

ROOT_ATTRS = {"title": "a test file", "version": np.int64(3)}
GROUP_ATTRS = {"desc": "first group", "ids": np.array([1, 2, 3], dtype="u2")}
DATA_ATTRS = {
    "units": "m/s",                                               # vlen UTF-8 string
    "label": "température",                                       # non-ASCII
    "empty": "",
    "kelvin": np.array(b"kelvin", dtype="S10"),                   # fixed length, NUL padded
    "count": np.int32(-3),
    "scale": 2.5,                                                 # float64
    "tenth": np.float32(0.1),
    "big": np.uint64(2 ** 64 - 1),
    "small": np.int8(-128),
    "origin": np.array([1.0, 2.5, -3.0]),                         # float64 [3]
    "grid": np.arange(6, dtype="i4").reshape(2, 3),               # int32 [2, 3]
    "one": np.array([7], dtype="i8"),                             # shape [1], not a scalar
    "be": np.array([1, -2, 300], dtype=">i4"),                    # big-endian: int32
    "names": np.array(["x", "yy", "zzz"], dtype=h5py.string_dtype()),  # vlen string array
    "codes": np.array([b"ab", b"cde"], dtype="S4"),               # fixed string array
}
# The JSON of user.hdf5.types: attribute -> (type, shape).
DATA_TYPES = {
    "units": ("string", []), "label": ("string", []), "empty": ("string", []), "kelvin": ("string", []),
    "count": ("int32", []), "scale": ("float64", []), "tenth": ("float32", []), "big": ("uint64", []),
    "small": ("int8", []), "origin": ("float64", [3]), "grid": ("int32", [2, 3]), "one": ("int64", [1]),
    "be": ("int32", [3]), "names": ("string", [3]), "codes": ("string", [2]),
}
# The xattr value: bytes, or the decoded JSON.
DATA_XATTRS = {
    "units": b"m/s", "label": "température".encode(), "empty": b"", "kelvin": b"kelvin",
    "count": -3, "scale": 2.5, "tenth": None, "big": 2 ** 64 - 1, "small": -128,
    "origin": [1.0, 2.5, -3.0], "grid": [[0, 1, 2], [3, 4, 5]], "one": [7], "be": [1, -2, 300],
    "names": ["x", "yy", "zzz"], "codes": ["ab", "cde"],
}


@pytest.fixture(scope="module")
def whole(vol, tmp_path_factory):
    """An HDF5 file with nested groups and attributes, imported whole: (h5 path, DEST, result, arrays)."""
    tmp = tmp_path_factory.mktemp("whole")
    rng = np.random.default_rng(40)
    arrays = {
        "/top": random_array(rng, (5, 4), "float64"),
        "/g1/a": random_array(rng, (3, 7), "int32"),
        "/g1/g2/b": (random_array(rng, (9,), "uint8"), {"chunks": (4,), "compression": "gzip"}),
        "/g1/g2/g3/deep": random_array(rng, (2, 2, 2), "float32").astype(">f4"),
        "/other/c": random_array(rng, (4, 1, 3), "uint64"),
    }
    src = tmp / "whole.h5"
    write_h5(src, arrays, {"/": ROOT_ATTRS, "/g1": GROUP_ATTRS, "/g1/a": DATA_ATTRS,
                           "/top": {"note": "top level", "factor": np.float64(-0.5)}})
    with h5py.File(src, "a") as f:
        f.create_group("/empty")
    root = vol.mnt / "whole"
    root.mkdir()
    dest = root / "imported"  # created by the import
    res = mmfs_import(src, dest)
    plain = {k: (v[0] if isinstance(v, tuple) else v) for k, v in arrays.items()}
    return src, dest, res, plain


def test_whole_file_tree(whole):
    src, dest, res, arrays = whole
    res.ok()
    assert tree(dest) == {"top": "file", "g1": "dir", "g1/a": "file", "g1/g2": "dir", "g1/g2/b": "file",
                          "g1/g2/g3": "dir", "g1/g2/g3/deep": "file", "other": "dir", "other/c": "file",
                          "empty": "dir"}
    for name, arr in arrays.items():
        check_array(dest / name.lstrip("/"), arr)
    lines = res.out.splitlines()
    assert len(lines) == len(arrays), f"one line per dataset\n{res}"
    for name in arrays:
        assert any(line.startswith(f"imported {name} -> {dest}{name}:") for line in lines), f"no line for {name}\n{res}"


def test_whole_file_attribute_encoding(whole):
    src, dest, res, arrays = whole
    res.ok()
    a = dest / "g1" / "a"
    got = user_xattrs(a)
    assert set(got) == {f"user.{k}" for k in DATA_ATTRS} | {"user.hdf5.types"}, sorted(got)
    for name, want in DATA_XATTRS.items():
        raw = got[f"user.{name}"]
        if isinstance(want, bytes):
            assert raw == want, f"user.{name} = {raw!r}, expected {want!r}"
        elif want is None:  # float32 0.1: JSON text that reads back as the same float32
            assert np.float32(json.loads(raw)) == np.float32(0.1), f"user.{name} = {raw!r}"
        else:
            assert json.loads(raw) == want, f"user.{name} = {raw!r}, expected JSON {want!r}"
    assert got["user.count"] == b"-3" and got["user.scale"] == b"2.5", "numbers are JSON text: 2.5, -3"
    types = json.loads(got["user.hdf5.types"])
    assert set(types) == set(DATA_TYPES), types
    for name, (typ, shape) in DATA_TYPES.items():
        assert types[name]["type"] == typ and list(types[name]["shape"]) == shape, f"{name}: {types[name]}"
    top = user_xattrs(dest / "top")
    assert top["user.note"] == b"top level" and json.loads(top["user.factor"]) == -0.5
    assert {k: (v["type"], list(v["shape"])) for k, v in json.loads(top["user.hdf5.types"]).items()} == \
        {"note": ("string", []), "factor": ("float64", [])}
    # Arrays without attributes get none.
    assert user_xattrs(dest / "other" / "c") in ({}, {"user.hdf5.types": b"{}"})


def test_whole_file_group_and_root_attributes(whole):
    src, dest, res, arrays = whole
    res.ok()
    root = user_xattrs(dest)
    assert root["user.title"] == b"a test file" and json.loads(root["user.version"]) == 3
    types = json.loads(root["user.hdf5.types"])
    assert (types["title"]["type"], list(types["title"]["shape"])) == ("string", [])
    assert (types["version"]["type"], list(types["version"]["shape"])) == ("int64", [])
    g1 = user_xattrs(dest / "g1")
    assert g1["user.desc"] == b"first group" and json.loads(g1["user.ids"]) == [1, 2, 3]
    types = json.loads(g1["user.hdf5.types"])
    assert (types["ids"]["type"], list(types["ids"]["shape"])) == ("uint16", [3])


def test_export_restores_attribute_types(whole, tmp_path):
    src, dest, res, arrays = whole
    res.ok()
    a = dest / "g1" / "a"
    out = tmp_path / "out.h5"
    mmfs_export(a, f"{out}:/a").ok()
    props = assert_exported(out, "/a", arrays["/g1/a"], "export with attributes")
    attrs, attr_types = props["attrs"], props["attr_types"]
    assert set(attrs) == set(DATA_ATTRS), f"exported attributes: {sorted(attrs)}"
    with h5py.File(src, "r") as f:
        original = {k: f["/g1/a"].attrs[k] for k in f["/g1/a"].attrs}

    def as_text(v):
        return v.decode() if isinstance(v, bytes) else str(v)

    for name, (typ, shape) in DATA_TYPES.items():
        got, want = attrs[name], original[name]
        t = attr_types[name]
        if typ == "string":
            assert isinstance(t, h5py.h5t.TypeStringID) and t.is_variable_str(), f"{name}: not a vlen string"
            assert t.get_cset() == h5py.h5t.CSET_UTF8, f"{name}: not UTF-8"
            if shape:
                assert np.shape(got) == tuple(shape), f"{name}: shape {np.shape(got)}"
                assert [as_text(v) for v in np.asarray(got).ravel()] == \
                    [as_text(v).rstrip("\0") for v in np.asarray(want).ravel()], name
            else:
                assert np.shape(got) == (), f"{name}: shape {np.shape(got)}"
                assert as_text(got) == as_text(want).rstrip("\0"), f"{name}: {got!r} != {want!r}"
        else:
            got = np.asarray(got)
            assert got.dtype.str == np.dtype(typ).str, f"{name}: exported as {got.dtype.str}, expected {typ}"
            assert got.shape == tuple(shape), f"{name}: shape {got.shape}"
            np.testing.assert_array_equal(got, np.asarray(want).astype(typ), err_msg=name)
    assert int(attrs["big"]) == 2 ** 64 - 1


def test_export_of_unlisted_xattrs_gives_strings(d, tmp_path):
    arr = np.arange(6, dtype="f4").reshape(2, 3)
    make_array(d / "a", arr.shape, arr.dtype, data=arr)
    setx(d / "a", "user.note", b"hello")
    setx(d / "a", "user.answer", b"42")  # no user.hdf5.types: a string, not a number
    out = tmp_path / "out.h5"
    mmfs_export(d / "a", f"{out}:/a").ok()
    props = assert_exported(out, "/a", arr)
    assert set(props["attrs"]) == {"note", "answer"}, props["attrs"]
    for name, want in (("note", "hello"), ("answer", "42")):
        t = props["attr_types"][name]
        assert isinstance(t, h5py.h5t.TypeStringID) and t.is_variable_str(), name
        value = props["attrs"][name]
        assert (value.decode() if isinstance(value, bytes) else value) == want


def test_attributes_that_are_skipped(d, tmp_path):
    arr = np.arange(8, dtype="i2")
    src = write_h5(tmp_path / "in.h5", {"/v": arr})
    with h5py.File(src, "a") as f:
        attrs = f["/v"].attrs
        attrs["kept"] = "yes"
        attrs["mmfs.shape"] = "2,4"          # would redefine the schema
        attrs["mmfs.layout"] = "naive"
        attrs["hdf5.types"] = "{}"
        attrs["huge"] = "x" * (70 * 1024)     # over 64 KiB
        attrs["pair"] = np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")])  # compound
        attrs["flag"] = np.bool_(True)        # an enum in HDF5
    res = mmfs_import(f"{src}:/v", d / "a").ok()
    for name in ("mmfs.shape", "mmfs.layout", "hdf5.types", "huge", "pair", "flag"):
        assert name in res.err, f"no warning about attribute {name}\n{res}"
    check_array(d / "a", arr)
    # The model chose the layout (it may well choose naive too): no attribute set it.
    assert read_json(view(d / "a", "info"))["layout_rule"].startswith("chosen by the volume's model"), \
        "an HDF5 attribute must not set the schema"
    got = user_xattrs(d / "a")
    assert set(got) == {"user.kept", "user.hdf5.types"}, sorted(got)
    assert set(json.loads(got["user.hdf5.types"])) == {"kept"}


def test_links_are_not_followed_twice(d, tmp_path):
    arr = random_array(np.random.default_rng(44), (6,), "int64")
    src = write_h5(tmp_path / "in.h5", {"/g/data": arr})
    with h5py.File(src, "a") as f:
        f["/g/alias"] = f["/g/data"]               # a hard link to the same dataset
        f["/g/loop"] = h5py.SoftLink("/")          # a cycle
        f["/soft"] = h5py.SoftLink("/g/data")
    mmfs_import(src, d / "w", timeout=60).ok()
    found = tree(d / "w")
    names = [p for p, kind in found.items() if kind == "file"]
    assert len(names) == 1, f"the dataset is imported once, not as {names}"
    check_array(d / "w" / names[0], arr)
    assert "g/loop" not in found or not list((d / "w" / "g" / "loop").iterdir())
