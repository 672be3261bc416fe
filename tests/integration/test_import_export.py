"""mmfs-import and mmfs-export (docs/reference.md §8, docs/import-export.md): HDF5 datasets in
and out of a mounted mmfs. Round trips h5py -> mmfs-import -> (numpy.fromfile and
views through the mount) -> mmfs-export -> h5py for every dtype, byte order, odd
shapes, HDF5 storage and filters and every layout; whole files with groups and
attributes; exports of views; the CLI's errors (nothing left behind), progress
and quiet output; and the memory an import of a large dataset needs."""
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import build_dir
from mmfs_mount import (DTYPES, LAYOUTS, assert_array_bytes, getx, is_sanitized, make_array, parse_ints, plod,
                        pread_all, random_array, read_bytes, read_json, setx, shape_str, view)

MiB = 1 << 20


# --- running the tools ------------------------------------------------------------

def tool_path(name) -> Path:
    path = build_dir() / "tools" / name
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built: run scripts/build.sh (or set MMFS_BUILD)", pytrace=False)
    return path


class Result:
    """A finished run of a tool: .rc, .out, .err; .ok() and .failed(...) assert."""

    def __init__(self, name, cmd, rc, out, err):
        self.name, self.cmd, self.rc, self.out, self.err = name, cmd, rc, out, err

    def __str__(self):
        return f"$ {' '.join(self.cmd)}\nexit {self.rc}\n--- stdout\n{self.out}--- stderr\n{self.err}"

    def ok(self):
        assert self.rc == 0, f"expected success\n{self}"
        return self

    def failed(self, *patterns, rc=1):
        """Exit status `rc` (None: any non-zero), an `NAME: ...` message on stderr, and every
        pattern (a case-insensitive regex) found in stderr."""
        if rc is None:
            assert self.rc != 0, f"expected a failure\n{self}"
        else:
            assert self.rc == rc, f"expected exit status {rc}\n{self}"
        assert self.err.strip(), f"no message on stderr\n{self}"
        if rc == 1:
            assert re.search(rf"^{re.escape(self.name)}: ", self.err, re.M), \
                f"no '{self.name}: WHAT: reason' message\n{self}"
        for pattern in patterns:
            assert re.search(pattern, self.err, re.I), f"stderr does not match {pattern!r}\n{self}"
        return self


def run(name, *args, timeout=120, cwd=None):
    cmd = [str(tool_path(name)), *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, encoding="utf-8", errors="replace", timeout=timeout,
                          stdin=subprocess.DEVNULL, cwd=cwd)
    return Result(name, cmd, proc.returncode, proc.stdout, proc.stderr)


def mmfs_import(*args, **kwargs) -> Result:
    return run("mmfs-import", *args, **kwargs)


def mmfs_export(*args, **kwargs) -> Result:
    return run("mmfs-export", *args, **kwargs)


def getfattr(path, name) -> str:
    proc = subprocess.run(["getfattr", "-n", name, "--only-values", "--absolute-names", str(path)],
                          capture_output=True, timeout=30)
    assert proc.returncode == 0, f"getfattr -n {name} {path}: {proc.stderr.decode(errors='replace')}"
    return proc.stdout.decode()


# --- HDF5 files -----------------------------------------------------------------------

def write_h5(path, datasets=None, attrs=None, mode="a"):
    """datasets: {"/g/ds": array | (array, create_dataset kwargs)}; attrs: {"/g/ds": {name: value}}."""
    with h5py.File(path, mode) as f:
        for name, spec in (datasets or {}).items():
            data, kwargs = spec if isinstance(spec, tuple) else (spec, {})
            f.create_dataset(name, data=data, **kwargs)
        for obj, values in (attrs or {}).items():
            for key, value in values.items():
                f[obj].attrs[key] = value
    return Path(path)


def native(arr) -> np.ndarray:
    """The array as mmfs holds it: the same dtype, little-endian."""
    arr = np.asarray(arr)
    return np.array(arr, dtype=np.dtype(arr.dtype.name), order="C")  # (ascontiguousarray makes 0-d 1-d)


def read_h5(path, name):
    """(data, h5py dataset properties) of FILE.h5:NAME."""
    with h5py.File(path, "r") as f:
        assert name in f, f"{path} has no {name}: {list(f)}"
        ds = f[name]
        props = {"shape": ds.shape, "dtype": ds.dtype, "chunks": ds.chunks, "compression": ds.compression,
                 "compression_opts": ds.compression_opts, "shuffle": ds.shuffle,
                 "order": ds.id.get_type().get_order(), "attrs": {k: ds.attrs[k] for k in ds.attrs},
                 "attr_types": {k: ds.attrs.get_id(k).get_type() for k in ds.attrs}}
        return ds[()], props


def h5_has(path, name) -> bool:
    if not os.path.exists(path):
        return False
    with h5py.File(path, "r") as f:
        return name in f


def assert_exported(path, name, expected, what=""):
    """FILE.h5:NAME equals `expected` (values, shape, little-endian dtype); returns its properties."""
    expected = native(expected)
    data, props = read_h5(path, name)
    assert props["shape"] == expected.shape, f"{what}: exported shape {props['shape']}, expected {expected.shape}"
    assert props["dtype"].str == expected.dtype.str, f"{what}: exported dtype {props['dtype'].str}"
    if expected.dtype.itemsize > 1:
        assert props["order"] == h5py.h5t.ORDER_LE, f"{what}: the exported dataset is not little-endian"
    assert_array_bytes(np.ascontiguousarray(data).tobytes(), expected, f"{what}: exported data")
    return props


# --- arrays in the mount --------------------------------------------------------------

def check_view(path, expected, what):
    expected = np.ascontiguousarray(expected)
    assert os.stat(path).st_size == expected.nbytes, f"{what}: st_size"
    assert_array_bytes(read_bytes(path), expected, what)


def check_array(path, expected, layout=None):
    """An imported array: its schema, its bytes through numpy.fromfile, and views equal numpy's."""
    expected = native(expected)
    path = Path(path)
    assert getx(path, "shape") == shape_str(expected.shape), f"{path}: user.mmfs.shape"
    assert np.dtype(getx(path, "dtype")) == expected.dtype, f"{path}: user.mmfs.dtype"
    if layout is not None:
        assert getfattr(path, "user.mmfs.layout") == layout
    assert os.stat(path).st_size == expected.nbytes
    got = np.fromfile(str(path), dtype=expected.dtype)
    assert got.size == expected.size, f"{path}: numpy.fromfile read {got.size} elements"
    assert_array_bytes(got.tobytes(), expected, f"{path} through numpy.fromfile")
    for dim in range(expected.ndim):
        for idx in sorted({0, expected.shape[dim] // 2, expected.shape[dim] - 1}):
            check_view(view(path, "slice", dim, idx), np.take(expected, idx, axis=dim), f"{path}@/slice/{dim}/{idx}")
    sel = tuple(slice(0, s, 2) if i % 2 == 0 else s // 2 for i, s in enumerate(expected.shape))
    spec = ",".join(f"0:{s}:2" if i % 2 == 0 else str(s // 2) for i, s in enumerate(expected.shape))
    check_view(view(path, "box", spec), expected[sel], f"{path}@/box/{spec}")


def entries(directory):
    return sorted(os.listdir(directory))


def visible(mnt):
    return [n for n in entries(mnt) if n != ".mmfs"]


def tree(root):
    """{relative path: "dir" | "file"} under root."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        for name in dirnames:
            out[str(rel / name)] = "dir"
        for name in filenames:
            out[str(rel / name)] = "file"
    return out


def user_xattrs(path):
    """user.* xattrs other than the schema's."""
    return {n: os.getxattr(path, n) for n in os.listxattr(path)
            if n.startswith("user.") and not n.startswith("user.mmfs.")}


# --- fixtures -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def vol(module_volume):
    return module_volume


_serial = itertools.count()


@pytest.fixture
def d(vol, request):
    """A fresh directory in the module's volume for one test."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:100]
    path = vol.mnt / f"{next(_serial)}-{name}"
    path.mkdir()
    return path


# --- round trips: every dtype, byte order, shape, storage, layout -----------------

DTYPE_CASES = [(dt, "<") for dt in DTYPES] + [(dt, ">") for dt in DTYPES if np.dtype(dt).itemsize > 1]


@pytest.mark.parametrize("dtype,byteorder", DTYPE_CASES,
                         ids=[f"{dt}-{'le' if bo == '<' else 'be'}" for dt, bo in DTYPE_CASES])
def test_roundtrip_every_dtype_and_byte_order(d, tmp_path, dtype, byteorder):
    seed = DTYPE_CASES.index((dtype, byteorder))
    arr = random_array(np.random.default_rng(seed), (7, 13, 5), dtype)
    stored = arr.astype(np.dtype(dtype).newbyteorder(byteorder))
    src = write_h5(tmp_path / "in.h5", {"/grp/data": stored})
    with h5py.File(src, "r") as f:  # h5py keeps the byte order of the numpy array
        want = h5py.h5t.ORDER_BE if byteorder == ">" else h5py.h5t.ORDER_LE
        assert arr.dtype.itemsize == 1 or f["/grp/data"].id.get_type().get_order() == want
    mmfs_import(f"{src}:/grp/data", d / "a").ok()
    check_array(d / "a", arr)
    out = tmp_path / "out.h5"
    mmfs_export(d / "a", f"{out}:/back").ok()
    assert_exported(out, "/back", arr, f"{dtype} {byteorder}")


SHAPES = [(1,), (37,), (1, 1, 1), (7, 13, 5), (3, 1, 17), (2, 3, 1, 4, 5), (300, 7), (1,) * 13 + (2, 3, 2)]
STORAGE = {
    "contiguous": lambda shape: {},
    "chunked": lambda shape: {"chunks": tuple(max(1, (s + 1) // 2) for s in shape)},  # partial edge chunks
    "gzip": lambda shape: {"chunks": tuple(max(1, (s + 2) // 3) for s in shape), "compression": "gzip",
                           "compression_opts": 6},
    "shuffle-gzip": lambda shape: {"chunks": tuple(min(s, 4) for s in shape), "compression": "gzip",
                                   "compression_opts": 2, "shuffle": True},
}


@pytest.mark.parametrize("storage", list(STORAGE))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_roundtrip_shapes_and_storage(d, tmp_path, shape, storage):
    dtype = DTYPES[(SHAPES.index(shape) * 3 + list(STORAGE).index(storage)) % len(DTYPES)]
    arr = random_array(np.random.default_rng(SHAPES.index(shape) * 10 + list(STORAGE).index(storage)), shape, dtype)
    src = write_h5(tmp_path / "in.h5", {"/x": (arr, STORAGE[storage](shape))})
    mmfs_import(f"{src}:/x", d / "a").ok()
    check_array(d / "a", arr)
    out = tmp_path / "out.h5"
    mmfs_export(d / "a", f"{out}:/x").ok()
    assert_exported(out, "/x", arr, f"{shape} {storage}")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_roundtrip_every_layout(d, tmp_path, layout):
    arr = random_array(np.random.default_rng(300 + LAYOUTS.index(layout)), (6, 10, 12), "int16")
    src = write_h5(tmp_path / "in.h5", {"/v": (arr, {"chunks": (3, 5, 12)})})
    mmfs_import("--layout", layout, f"{src}:/v", d / "a").ok()
    check_array(d / "a", arr, layout=layout)
    assert read_json(view(d / "a", "info"))["layout"] == layout
    out = tmp_path / "out.h5"
    mmfs_export(d / "a", f"{out}:/v").ok()
    assert_exported(out, "/v", arr, layout)


def test_default_layout_is_the_volumes(d, tmp_path):
    arr = random_array(np.random.default_rng(5), (4, 9), "float32")
    src = write_h5(tmp_path / "in.h5", {"/v": arr})
    mmfs_import(f"{src}:/v", d / "a").ok()
    assert getfattr(d / "a", "user.mmfs.layout") == "multimap"
    check_array(d / "a", arr)


@pytest.mark.parametrize("layout,order,cell,cube", [("zorder", "0,1,2", "2,4,8", None),
                                                    ("naive", "1,2,0", "1,2,16", None),
                                                    ("multimap", "0,2,1", None, None),
                                                    ("multimap", None, None, "1,2,1")])
def test_schema_options_are_passed_through(d, tmp_path, layout, order, cell, cube):
    arr = random_array(np.random.default_rng(17), (8, 16, 32), "float32")
    src = write_h5(tmp_path / "in.h5", {"/v": arr})
    args = ["--layout", layout]
    for option, value in (("--order", order), ("--cell", cell), ("--basic-cube", cube)):
        if value:
            args += [option, value]
    mmfs_import(*args, f"{src}:/v", d / "a").ok()
    assert getfattr(d / "a", "user.mmfs.layout") == layout
    info = read_json(view(d / "a", "info"))
    for name, value in (("order", order), ("cell", cell), ("basic_cube", cube)):
        if value:
            assert parse_ints(getfattr(d / "a", f"user.mmfs.{name}")) == parse_ints(value), name
            assert parse_ints(info[name]) == parse_ints(value), f"{name} in {info}"
    check_array(d / "a", arr)


@pytest.mark.parametrize("args", [("--order", "0,0,1"), ("--layout", "no-such-layout"), ("--cell", "0,1,1"),
                                  ("--layout", "multimap", "--basic-cube", "4,2,1")],
                         ids=["order", "layout", "cell", "basic-cube"])
def test_schema_refused_by_the_daemon(vol, d, tmp_path, args):
    arr = random_array(np.random.default_rng(2), (4, 5, 6), "uint8")
    src = write_h5(tmp_path / "in.h5", {"/v": arr})
    before = vol.errors().splitlines()
    res = mmfs_import(*args, f"{src}:/v", d / "a").failed()
    added = [line for line in vol.errors().splitlines() if line not in before]
    assert added, f"the daemon logged no explanation\n{res}"
    # The daemon's explanation ("EINVAL /path: user.mmfs.X: why") is shown.
    why = added[-1].split(": ", 2)[-1]
    assert why[:40] in res.err, f"the daemon's explanation {why!r} is not shown\n{res}"
    assert entries(d) == [], "a refused import leaves nothing behind"


def test_storage_compact_resizable_fill_value_fletcher32(d, tmp_path):
    rng = np.random.default_rng(12)
    compact = random_array(rng, (9, 11), "int32")
    grown = random_array(rng, (13, 5), "float64")
    sparse = np.full((40, 30), 7, dtype="u2")  # chunks never written read as the fill value
    sparse[5:15, 3:9] = random_array(rng, (10, 6), "uint16")
    checked = random_array(rng, (6, 50), "int16")
    src = tmp_path / "in.h5"
    with h5py.File(src, "w") as f:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        dsid = h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_I32LE, h5py.h5s.create_simple(compact.shape),
                               dcpl=dcpl)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, compact)
        ds = f.create_dataset("grown", shape=(4, 5), maxshape=(None, None), chunks=(16, 16), dtype="f8")
        ds.resize((13, 5))  # chunks larger than the current dimensions
        ds[...] = grown
        ds = f.create_dataset("sparse", shape=(40, 30), chunks=(8, 8), dtype="u2", fillvalue=7)
        ds[5:15, 3:9] = sparse[5:15, 3:9]
        f.create_dataset("checked", data=checked, chunks=(4, 16), fletcher32=True, compression="gzip")
    with h5py.File(src, "r") as f:
        assert f["compact"].id.get_create_plist().get_layout() == h5py.h5d.COMPACT
    mmfs_import(src, d / "w").ok()
    for name, arr in (("compact", compact), ("grown", grown), ("sparse", sparse), ("checked", checked)):
        check_array(d / "w" / name, arr)


def test_buffer_smaller_than_a_chunk(d, tmp_path):
    """Chunks (and chunk rows) larger than --buffer: the boxes must still cover the dataset exactly."""
    arr = random_array(np.random.default_rng(8), (10, 400, 300), "float64")  # 9.2 MiB
    src = write_h5(tmp_path / "in.h5", {"/big": (arr, {"chunks": (3, 200, 300), "compression": "gzip",
                                                        "compression_opts": 1})})  # 1.4 MiB chunks
    mmfs_import("--buffer", "1", "-q", f"{src}:/big", d / "a").ok()
    check_array(d / "a", arr)
    out = tmp_path / "out.h5"
    mmfs_export("--buffer", "1", "--chunks", "3,200,300", "-q", d / "a", f"{out}:/big").ok()
    props = assert_exported(out, "/big", arr, "--buffer 1")
    assert props["chunks"] == (3, 200, 300)
    # Contiguous, moved in C-order slabs; and odd chunks that cut the rows.
    odd = random_array(np.random.default_rng(11), (7, 333, 301), "float32")
    src = write_h5(tmp_path / "more.h5", {"/flat": arr, "/odd": (odd, {"chunks": (2, 100, 77), "shuffle": True,
                                                                        "compression": "gzip"})})
    mmfs_import("--buffer", "1", "-q", f"{src}:/flat", d / "flat").ok()
    check_array(d / "flat", arr)
    mmfs_import("--buffer", "1", "-q", f"{src}:/odd", d / "odd").ok()
    check_array(d / "odd", odd)
    mmfs_export("--buffer", "1", "--chunks", "contiguous", "-q", d / "odd", f"{out}:/odd").ok()
    assert_exported(out, "/odd", odd, "contiguous export with --buffer 1")
    mmfs_export("--buffer", "1", "--chunks", "2,50,100", "-q", view(d / "odd", "box", "1:7:2,:,5:300"),
                f"{out}:/oddbox").ok()
    assert_exported(out, "/oddbox", odd[1:7:2, :, 5:300], "a box exported with --buffer 1")


@pytest.mark.parametrize("value", ["0", "4097", "-1", "lots"])
def test_buffer_out_of_range(d, tmp_path, value):
    src = write_h5(tmp_path / "in.h5", {"/v": np.arange(10, dtype="i4")})
    mmfs_import("--buffer", value, f"{src}:/v", d / "a").failed(rc=None)
    assert entries(d) == []
    make_array(d / "b", (10,), "int32", data=np.arange(10, dtype="i4"))
    out = tmp_path / "out.h5"
    mmfs_export("--buffer", value, d / "b", f"{out}:/v").failed(rc=None)
    assert not h5_has(out, "/v")


# --- where things go --------------------------------------------------------------------

def test_output_line_per_dataset(d, tmp_path):
    arr = random_array(np.random.default_rng(3), (100, 200), "float32")
    src = write_h5(tmp_path / "in.h5", {"/g/ds": arr})
    res = mmfs_import(f"{src}:/g/ds", d / "a").ok()
    lines = res.out.splitlines()
    assert len(lines) == 1, res
    m = re.fullmatch(r"imported (\S+) -> (.+): (\S+) (\w+), [\d.]+ ?[kKMGT]?i?B in [\d.]+ ?s "
                     r"\([\d.]+ ?[kKMGT]?i?B/s\)", lines[0])
    assert m, f"unexpected output line {lines[0]!r}"
    assert m.group(1) == "/g/ds" and m.group(2) == str(d / "a")
    assert m.group(3) == "100x200" and m.group(4) == "float32"
    assert res.err == "", f"no progress bar when stderr is not a terminal\n{res}"


def test_into_an_existing_directory_under_the_datasets_name(d, tmp_path):
    arr = random_array(np.random.default_rng(4), (5, 6), "uint16")
    src = write_h5(tmp_path / "in.h5", {"/g/temperature": arr})
    (d / "sub").mkdir()
    mmfs_import(f"{src}:/g/temperature", d / "sub").ok()
    assert entries(d / "sub") == ["temperature"]
    check_array(d / "sub" / "temperature", arr)


def test_file_names_with_colons(d, tmp_path):
    arr = random_array(np.random.default_rng(6), (3, 4), "int32")
    weird = tmp_path / "run:2024:/"  # a directory whose name holds ':' (the split is at the last ':' + '/')
    weird.mkdir()
    src = write_h5(weird / "a:b.h5", {"/ds": arr, "/g/e": arr[::-1]})
    mmfs_import(f"{src}:/ds", d / "one").ok()
    check_array(d / "one", arr)
    mmfs_import(src, d / "whole").ok()  # the whole argument names a file: it is the file
    check_array(d / "whole" / "ds", arr)
    check_array(d / "whole" / "g" / "e", arr[::-1])


def test_odd_dataset_names(d, tmp_path):
    a, b = np.arange(5, dtype="i8"), np.arange(6, dtype="f4").reshape(2, 3)
    src = write_h5(tmp_path / "in.h5", {"/with space": a, "/grüße/ünï ✓": b, "/x.h5:/y": a * 3})
    mmfs_import(src, d / "w").ok()
    assert tree(d / "w") == {"with space": "file", "grüße": "dir", "grüße/ünï ✓": "file", "x.h5:": "dir",
                             "x.h5:/y": "file"}
    check_array(d / "w" / "with space", a)
    check_array(d / "w" / "grüße" / "ünï ✓", b)
    check_array(d / "w" / "x.h5:" / "y", a * 3)
    mmfs_import(f"{src}:/grüße/ünï ✓", d / "one").ok()
    check_array(d / "one", b)


def test_empty_file(d, tmp_path):
    src = tmp_path / "empty.h5"
    with h5py.File(src, "w") as f:
        f.attrs["title"] = "nothing here"
    res = mmfs_import(src, d / "w").ok()
    assert res.out == ""
    assert entries(d / "w") == []
    assert os.getxattr(d / "w", "user.title") == b"nothing here"


def test_external_links_are_followed(d, tmp_path):
    data = random_array(np.random.default_rng(45), (4, 6), "uint32")
    other = write_h5(tmp_path / "other.h5", {"/deep/data": data})
    src = write_h5(tmp_path / "main.h5", {"/own": np.arange(3, dtype="i2")})
    with h5py.File(src, "a") as f:
        f["/ext"] = h5py.ExternalLink(str(other), "/deep/data")
    mmfs_import(src, d / "w").ok()
    assert tree(d / "w") == {"own": "file", "ext": "file"}
    check_array(d / "w" / "ext", data)
    check_array(d / "w" / "own", np.arange(3, dtype="i2"))
    mmfs_import(f"{src}:/ext", d / "one").ok()
    check_array(d / "one", data)


def test_destination_exists(d, tmp_path):
    old = random_array(np.random.default_rng(9), (4, 4), "float64")
    make_array(d / "a", old.shape, old.dtype, "naive", old)
    new = random_array(np.random.default_rng(10), (3, 5, 2), "int8")
    src = write_h5(tmp_path / "in.h5", {"/v": new})
    mmfs_import(f"{src}:/v", d / "a").failed(r"exist")
    check_array(d / "a", old, layout="naive")
    assert entries(d) == ["a"]
    mmfs_import("--force", f"{src}:/v", d / "a").ok()
    check_array(d / "a", new)
    assert entries(d) == ["a"]


def test_destination_plain_file_exists(d, tmp_path):
    (d / "plain").write_bytes(b"keep me\n")
    src = write_h5(tmp_path / "in.h5", {"/v": np.arange(6, dtype="u1")})
    mmfs_import(f"{src}:/v", d / "plain").failed(r"exist")
    assert (d / "plain").read_bytes() == b"keep me\n"
    mmfs_import(src, d / "plain").failed()  # a whole file needs a directory
    assert (d / "plain").read_bytes() == b"keep me\n"
    mmfs_import("--force", f"{src}:/v", d / "plain").ok()
    check_array(d / "plain", np.arange(6, dtype="u1"))


def test_destination_in_a_missing_directory(d, tmp_path):
    src = write_h5(tmp_path / "in.h5", {"/v": np.arange(4.0)})
    mmfs_import(src, d / "no" / "such" / "dir").failed()
    mmfs_import(f"{src}:/v", d / "no" / "such" / "a").failed()
    assert entries(d) == []


def test_whole_file_again_needs_force(d, tmp_path):
    a, b = np.arange(12, dtype="i2").reshape(3, 4), np.linspace(0, 1, 9)
    src = write_h5(tmp_path / "in.h5", {"/a": a, "/g/b": b})
    mmfs_import(src, d / "w").ok()
    src2 = write_h5(tmp_path / "in2.h5", {"/a": a * 2, "/g/b": b * 3})
    mmfs_import(src2, d / "w").failed(r"exist")
    check_array(d / "w" / "a", a)
    check_array(d / "w" / "g" / "b", b)
    mmfs_import("--force", src2, d / "w").ok()
    check_array(d / "w" / "a", a * 2)
    check_array(d / "w" / "g" / "b", b * 3)


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
    assert getx(d / "a", "layout") == "multimap", "an HDF5 attribute must not set the schema"
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


# --- --list -------------------------------------------------------------------------

def shape_pattern(shape):
    return r"(?<![\d.])" + r"\s*[x×,]\s*".join(map(str, shape)) + r"(?![\d.])"


def test_list(d, tmp_path):
    src = tmp_path / "mixed.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("/plain", data=np.zeros((3, 4), "f4"))
        f.create_dataset("/g/packed", data=np.zeros((123, 45), ">i2"), chunks=(10, 45), compression="gzip")
        f.create_dataset("/table", data=np.zeros(5, dtype=[("a", "<i4"), ("b", "<f8")]))
        f.create_dataset("/fixed", data=np.array([b"ab", b"cd"], dtype="S4"))
        f.create_dataset("/text", data=["ab", "cde"], dtype=h5py.string_dtype())
        f.create_dataset("/half", data=np.zeros(4, "f2"))
        f.create_dataset("/flags", data=np.array([True, False]))
        f.create_dataset("/scalar", data=np.float64(1.5))
    res = mmfs_import("--list", src).ok()

    def line(name):
        found = [ln for ln in res.out.splitlines() if re.search(rf"(^|\s){re.escape(name)}($|[\s:,])", ln)]
        assert len(found) == 1, f"expected one line naming {name}\n{res}"
        return found[0]

    assert re.search(shape_pattern((3, 4)), line("/plain")) and "float32" in line("/plain")
    packed = line("/g/packed")
    assert re.search(shape_pattern((123, 45)), packed) and "int16" in packed
    assert re.search(r"gzip|deflate", packed, re.I), f"filters are listed: {packed}"
    for name in ("/plain", "/g/packed"):
        assert not re.search(r"unsupported|not importable", line(name), re.I), line(name)
    for name, why in (("/table", r"compound"), ("/fixed", r"string"), ("/text", r"string"),
                      ("/half", r"float16|16-bit|half"), ("/flags", r"enum|bool"), ("/scalar", r"scalar")):
        assert re.search(why, line(name), re.I), f"{name}: the reason ({why}) is not given: {line(name)}"
    # With a DEST, --list imports nothing.
    mmfs_import("--list", src, d / "w").ok()
    assert entries(d) == []


# --- errors --------------------------------------------------------------------------

def test_missing_file(d, tmp_path):
    missing = tmp_path / "nope.h5"
    mmfs_import(f"{missing}:/x", d / "a").failed(re.escape(missing.name))
    mmfs_import(missing, d / "w").failed(re.escape(missing.name))
    garbage = tmp_path / "garbage.h5"
    garbage.write_bytes(b"this is not HDF5\n" * 100)
    mmfs_import(f"{garbage}:/x", d / "a").failed(re.escape(garbage.name))
    mmfs_import(garbage, d / "w").failed(re.escape(garbage.name))
    mmfs_import("--list", garbage).failed(re.escape(garbage.name))
    assert entries(d) == []


def test_missing_dataset(d, tmp_path):
    src = write_h5(tmp_path / "in.h5", {"/g/x": np.arange(3.0)})
    mmfs_import(f"{src}:/g/nothere", d / "a").failed(r"/g/nothere")
    assert entries(d) == []


def _unsupported(f, kind):
    if kind == "compound":
        f.create_dataset("weird", data=np.zeros(4, dtype=[("a", "<i4"), ("b", "<f8")]))
    elif kind == "fixed-string":
        f.create_dataset("weird", data=np.array([b"ab", b"cd"], dtype="S4"))
    elif kind == "vlen-string":
        f.create_dataset("weird", data=["ab", "cde"], dtype=h5py.string_dtype())
    elif kind == "bool":
        f.create_dataset("weird", data=np.array([True, False, True]))
    elif kind == "enum":
        f.create_dataset("weird", data=np.array([0, 1, 2], "u1"),
                         dtype=h5py.enum_dtype({"RED": 0, "GREEN": 1, "BLUE": 2}, basetype="u1"))
    elif kind == "float16":
        f.create_dataset("weird", data=np.arange(4, dtype="f2"))
    elif kind == "array":
        f.create_dataset("weird", shape=(4,), dtype=np.dtype(("<f4", (3,))))
    elif kind == "vlen-int":
        ds = f.create_dataset("weird", shape=(2,), dtype=h5py.vlen_dtype(np.int32))
        ds[0], ds[1] = np.arange(3, dtype="i4"), np.arange(5, dtype="i4")
    elif kind == "opaque":
        f.create_dataset("weird", data=np.zeros(3, dtype="V8"))
    elif kind == "reference":
        ds = f.create_dataset("weird", shape=(1,), dtype=h5py.ref_dtype)
        ds[0] = f.ref
    elif kind == "long-double":
        f.create_dataset("weird", data=np.arange(3, dtype=np.longdouble))
    else:
        raise ValueError(kind)


UNSUPPORTED = {
    "compound": r"compound", "fixed-string": r"string", "vlen-string": r"string", "bool": r"enum|bool",
    "enum": r"enum", "float16": r"float16|16-bit|half", "array": r"array", "vlen-int": r"variable.length|vlen",
    "opaque": r"opaque", "reference": r"reference",
    "long-double": r"long double|float128|float96|float80|128-bit|80-bit|16-byte",
}


@pytest.mark.parametrize("kind", list(UNSUPPORTED))
def test_unsupported_dataset_type(d, tmp_path, kind):
    src = tmp_path / "in.h5"
    with h5py.File(src, "w") as f:
        _unsupported(f, kind)
    if kind == "array":
        with h5py.File(src, "r") as f:
            assert f["weird"].id.get_type().get_class() == h5py.h5t.ARRAY
    res = mmfs_import(f"{src}:/weird", d / "a").failed(UNSUPPORTED[kind], r"/weird")
    assert entries(d) == [], f"nothing is left behind\n{res}"


@pytest.mark.parametrize("kind", ["scalar", "null", "zero-length", "17-dims"])
def test_unsupported_dataspace(d, tmp_path, kind):
    src = tmp_path / "in.h5"
    with h5py.File(src, "w") as f:
        if kind == "scalar":
            f.create_dataset("weird", data=np.float64(2.5))
        elif kind == "null":
            f.create_dataset("weird", data=h5py.Empty("f8"))
        elif kind == "zero-length":
            f.create_dataset("weird", shape=(4, 0, 3), dtype="f4")
        else:
            f.create_dataset("weird", shape=(1,) * 17, dtype="i4")
    why = {"scalar": r"scalar", "null": r"null|empty", "zero-length": r"\b0\b|zero|empty", "17-dims": r"16|17"}
    mmfs_import(f"{src}:/weird", d / "a").failed(why[kind], r"/weird")
    assert entries(d) == []


def test_whole_file_with_unsupported_datasets(d, tmp_path):
    src = tmp_path / "mix.h5"
    good = {"/a": random_array(np.random.default_rng(60), (4, 5), "float32"),
            "/g/b": random_array(np.random.default_rng(61), (7,), "int64")}
    with h5py.File(src, "w") as f:
        for name, arr in good.items():
            f.create_dataset(name, data=arr)
        f.create_dataset("/g/table", data=np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]))
        f.create_dataset("/words", data=["x"], dtype=h5py.string_dtype())
        f.create_dataset("/half", data=np.zeros(2, "f2"))
    res = mmfs_import(src, d / "w").failed(r"/g/table", r"compound", r"/words", r"string", r"/half")
    assert tree(d / "w") == {"a": "file", "g": "dir", "g/b": "file"}
    for name, arr in good.items():
        check_array(d / "w" / name.lstrip("/"), arr)
    assert len(res.out.splitlines()) == 2, f"one line per imported dataset\n{res}"


def test_full_volume(volume_factory, tmp_path):
    vol = volume_factory(size="64M")
    free = os.statvfs(vol.mnt).f_bfree * os.statvfs(vol.mnt).f_frsize
    rows = (free + 8 * MiB) // 8192 + 1  # more than the free space, in float64 rows of 1024
    src = tmp_path / "huge.h5"
    with h5py.File(src, "w") as f:
        ds = f.create_dataset("/huge", shape=(rows, 1024), dtype="f8", chunks=(64, 1024), compression="gzip",
                              compression_opts=1)
        for start in range(0, rows, 1024):
            stop = min(rows, start + 1024)
            ds[start:stop] = np.repeat(np.arange(start, stop, dtype="f8")[:, None], 1024, axis=1)
        f.create_dataset("/small", data=random_array(np.random.default_rng(62), (128, 1024), "float64"))
        small = f["/small"][()]
    assert os.path.getsize(src) < free, "the HDF5 file itself is small (compressed)"
    before = os.statvfs(vol.mnt).f_bfree
    mmfs_import(f"{src}:/huge", vol.mnt / "huge").failed(r"space")
    assert visible(vol.mnt) == [], "a failed import leaves nothing behind"
    assert os.statvfs(vol.mnt).f_bfree == before, "a failed import gives its space back"
    # A whole file: what fits is imported, the rest skipped; exit status 1.
    res = mmfs_import(src, vol.mnt / "w").failed(r"space", r"/huge")
    assert tree(vol.mnt / "w") == {"small": "file"}, res
    check_array(vol.mnt / "w" / "small", small)
    # The volume stays usable; the fixture runs mmfsck -n at the end.
    os.remove(vol.mnt / "w" / "small")
    mmfs_import(f"{src}:/small", vol.mnt / "again").ok()
    check_array(vol.mnt / "again", small)


def test_interrupted_import_leaves_nothing_behind(volume_factory, tmp_path):
    """SIGINT / SIGTERM part way: the partly written array is removed, and the volume stays
    clean (the fixture runs mmfsck -n)."""
    planes = 128  # 128 MiB of compressible float32
    src = tmp_path / "big.h5"
    with h5py.File(src, "w") as f:
        ds = f.create_dataset("/big", shape=(planes, 1024, 256), dtype="f4", chunks=(4, 256, 256),
                              compression="gzip", compression_opts=1)
        for p in range(0, planes, 16):
            ds[p:p + 16] = smooth_planes(p, p + 16)
    vol = volume_factory(size="512M")
    for sig in (signal.SIGINT, signal.SIGTERM):
        dest = vol.mnt / f"big-{sig.name}"
        proc = subprocess.Popen([str(tool_path("mmfs-import")), "--buffer", "4", "-q", f"{src}:/big", str(dest)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30
            while not dest.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(0.2)  # some data written
            assert proc.poll() is None, "the import finished before it could be interrupted"
            proc.send_signal(sig)  # our own child, by its pid
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode != 0, f"{sig.name}: exit {proc.returncode}"
        assert err.decode(errors="replace").startswith("mmfs-import: "), err
        assert visible(vol.mnt) == [], f"{sig.name}: the partly imported array is left behind"


# --- mmfs-export of views ---------------------------------------------------------

@pytest.fixture(scope="module")
def sources(vol):
    """Arrays made through the mount (not by mmfs-import) to export views of."""
    root = vol.mnt / "sources"
    root.mkdir()
    f8 = random_array(np.random.default_rng(70), (6, 7, 5), "float64")
    i4 = random_array(np.random.default_rng(71), (9, 4, 6), "int32")
    u2 = random_array(np.random.default_rng(72), (33, 17), "uint16")
    return {"f8": (make_array(root / "f8", f8.shape, f8.dtype, "multimap", f8), f8),
            "i4": (make_array(root / "i4", i4.shape, i4.dtype, "hilbert", i4), i4),
            "u2": (make_array(root / "u2", u2.shape, u2.dtype, "zorder", u2), u2)}


VIEWS = [
    ("f8", ("slice", 0, 0), lambda a: a[0]),
    ("f8", ("slice", 1, 3), lambda a: a[:, 3, :]),
    ("f8", ("slice", 2, 4), lambda a: a[:, :, 4]),
    ("f8", ("box", "1:5:2,2,:"), lambda a: a[1:5:2, 2, :]),
    ("f8", ("box", ":,0:7:3,1:4"), lambda a: a[:, 0:7:3, 1:4]),
    ("f8", ("box", "5,:,2"), lambda a: a[5, :, 2]),
    ("f8", ("box", "1,2,3"), lambda a: a[1, 2, 3]),  # every dim fixed: a scalar dataset
    ("f8", ("plod", 3), lambda a: plod(a, 3)),
    ("f8", ("plod", 1), lambda a: plod(a, 1)),
    ("f8", ("plod", "3@", "slice", 1, 6), lambda a: plod(a, 3)[:, 6, :]),
    ("f8", ("plod", "5@", "box", "0:6:2,3,:"), lambda a: plod(a, 5)[0:6:2, 3, :]),
    ("i4", ("plod", 2), lambda a: plod(a, 2)),
    ("i4", ("plod", "2@", "slice", 2, 5), lambda a: plod(a, 2)[:, :, 5]),
    ("i4", ("box", "8,3,5"), lambda a: a[8, 3, 5]),
    ("i4", ("box", "0:9:4,:,0:6:5"), lambda a: a[0:9:4, :, 0:6:5]),
    ("u2", ("slice", 0, 32), lambda a: a[32]),
    ("u2", ("box", "3:30:9,1:17:4"), lambda a: a[3:30:9, 1:17:4]),
]


@pytest.mark.parametrize("case", range(len(VIEWS)), ids=[f"{s}@{'/'.join(map(str, p))}" for s, p, _ in VIEWS])
def test_export_view(sources, tmp_path, case):
    name, parts, expect = VIEWS[case]
    path, arr = sources[name]
    src = view(path, *parts)
    expected = np.asarray(expect(arr))
    assert_array_bytes(read_bytes(src), np.ascontiguousarray(expected), f"{src} through the mount")
    out = tmp_path / "out.h5"
    mmfs_export("-q", src, f"{out}:/view").ok()
    props = assert_exported(out, "/view", expected, str(src))
    if expected.ndim == 0:
        assert props["shape"] == (), "a box fixing every dim gives a scalar dataset"


def test_export_whole_array_and_missing_groups(sources, tmp_path):
    path, arr = sources["i4"]
    out = tmp_path / "out.h5"
    write_h5(out, {"/keep": np.arange(3, dtype="i2")})
    mmfs_export(path, f"{out}:/a/b/c/data").ok()
    assert_exported(out, "/a/b/c/data", arr)
    assert_exported(out, "/keep", np.arange(3, dtype="i2"), "an existing dataset of the file is kept")


def test_export_chunks(sources, tmp_path):
    path, arr = sources["f8"]
    out = tmp_path / "out.h5"
    mmfs_export("--chunks", "contiguous", path, f"{out}:/c").ok()
    props = assert_exported(out, "/c", arr)
    assert props["chunks"] is None and props["compression"] is None
    mmfs_export("--chunks", "4,3,5", path, f"{out}:/e").ok()
    assert assert_exported(out, "/e", arr)["chunks"] == (4, 3, 5)
    mmfs_export("--chunks", "2,7,2", "--gzip", "4", path, f"{out}:/z").ok()
    props = assert_exported(out, "/z", arr)
    assert props["chunks"] == (2, 7, 2) and props["compression"] == "gzip" and props["compression_opts"] == 4
    assert not props["shuffle"]
    mmfs_export("--gzip", "1", "--shuffle", path, f"{out}:/s").ok()
    props = assert_exported(out, "/s", arr)
    assert props["shuffle"] and props["compression"] == "gzip" and props["compression_opts"] == 1
    # auto on a small array: chunks no longer than the dimensions.
    mmfs_export(path, f"{out}:/auto").ok()
    props = assert_exported(out, "/auto", arr)
    assert props["chunks"] is not None and all(1 <= c <= s for c, s in zip(props["chunks"], arr.shape))


def test_export_auto_chunks_of_a_larger_array(d, tmp_path):
    big = np.arange(256 * 300 * 64, dtype="i2").reshape(256, 300, 64)  # 9.4 MiB
    path = make_array(d / "big-i2", big.shape, big.dtype, "naive", big)
    out = tmp_path / "out.h5"
    mmfs_export("--chunks", "auto", path, f"{out}:/big").ok()
    props = assert_exported(out, "/big", big)
    chunks = props["chunks"]
    assert chunks is not None and all(1 <= c <= s for c, s in zip(chunks, big.shape)), chunks
    nbytes = int(np.prod(chunks)) * 2
    assert MiB // 4 <= nbytes <= 4 * MiB, f"auto chunks {chunks}: {nbytes} bytes, expected about 1 MiB"
    mmfs_export(view(path, "slice", 2, 63), f"{out}:/plane").ok()
    chunks = assert_exported(out, "/plane", big[:, :, 63])["chunks"]
    assert chunks is not None and all(1 <= c <= s for c, s in zip(chunks, (256, 300))), chunks


def test_export_gzip_needs_chunks(sources, tmp_path):
    path, arr = sources["f8"]
    out = tmp_path / "out.h5"
    mmfs_export("--chunks", "contiguous", "--gzip", "3", path, f"{out}:/x").failed(rc=None)
    assert not h5_has(out, "/x")
    mmfs_export("--gzip", "10", path, f"{out}:/y").failed(rc=None)
    assert not h5_has(out, "/y")
    mmfs_export("--chunks", "2,2", path, f"{out}:/z").failed(rc=None)  # 3 dims, 2 chunk lengths
    assert not h5_has(out, "/z")
    mmfs_export("--chunks", "2,0,2", path, f"{out}:/z").failed(rc=None)
    assert not h5_has(out, "/z")


def test_export_existing_dataset_and_force(sources, tmp_path):
    path, arr = sources["f8"]
    out = tmp_path / "out.h5"
    old = np.arange(10, dtype="i1")
    write_h5(out, {"/g/ds": old, "/other": np.ones((2, 2))})
    mmfs_export(path, f"{out}:/g/ds").failed(r"exist")
    assert_exported(out, "/g/ds", old, "without --force the old dataset is unchanged")
    mmfs_export("--force", path, f"{out}:/g/ds").ok()
    assert_exported(out, "/g/ds", arr, "--force replaces the dataset")
    assert_exported(out, "/other", np.ones((2, 2)), "other datasets are kept")


@pytest.mark.parametrize("what", ["plain-file", "directory", "info", "plan", "lbn", "missing", "view-dir"])
def test_export_refuses_non_data_sources(sources, vol, tmp_path, what):
    path, arr = sources["f8"]
    plain = vol.mnt / "sources" / "plain.txt"
    if not plain.exists():
        plain.write_bytes(b"just some text\n" * 10)
    src = {"plain-file": plain, "directory": vol.mnt / "sources", "info": view(path, "info"),
           "plan": view(path, "plan", "slice", 0, 1), "lbn": view(path, "lbn", "0,0,0"),
           "missing": vol.mnt / "sources" / "nothing", "view-dir": view(path, "slice")}[what]
    out = tmp_path / "out.h5"
    write_h5(out, {"/keep": np.arange(4.0)})
    mmfs_export(src, f"{out}:/x").failed()
    assert not h5_has(out, "/x"), "a failed export leaves no dataset"
    assert_exported(out, "/keep", np.arange(4.0), "the file's other content")


def test_export_path_through_a_dataset(sources, tmp_path):
    path, arr = sources["f8"]
    out = tmp_path / "out.h5"
    write_h5(out, {"/keep": np.arange(4.0)})
    mmfs_export(path, f"{out}:/keep/x").failed()
    assert_exported(out, "/keep", np.arange(4.0), "the dataset in the way")
    mmfs_export("--force", path, f"{out}:/keep/x").failed()
    assert_exported(out, "/keep", np.arange(4.0), "the dataset in the way, --force")


def test_export_into_a_file_that_is_not_hdf5(sources, tmp_path):
    path, arr = sources["f8"]
    out = tmp_path / "notes.h5"
    out.write_bytes(b"not an HDF5 file\n")
    mmfs_export(path, f"{out}:/x").failed()
    assert out.read_bytes() == b"not an HDF5 file\n"


# --- progress and quiet ---------------------------------------------------------------

def test_progress_and_quiet(d, tmp_path):
    arr = np.linspace(0, 1, 4 * MiB // 4, dtype="f4").reshape(1024, 1024)
    src = write_h5(tmp_path / "in.h5", {"/p": (arr, {"chunks": (64, 1024)})})
    res = mmfs_import("--progress", f"{src}:/p", d / "a").ok()
    assert re.search(r"\d+(\.\d+)?\s?%", res.err), f"no progress bar on stderr with --progress\n{res}"
    assert "imported /p" in res.out
    res = mmfs_import("--force", "--no-progress", f"{src}:/p", d / "a").ok()
    assert res.err == "" and "imported /p" in res.out, res
    res = mmfs_import("--force", "-q", f"{src}:/p", d / "a").ok()
    assert res.out == "" and res.err == "", f"-q prints nothing but errors\n{res}"
    res = mmfs_import("--force", "--quiet", "--progress", f"{src}:/p", d / "a").ok()
    assert res.out == "" and res.err == "", f"--quiet wins over --progress\n{res}"
    check_array(d / "a", arr)
    mmfs_import("-q", f"{src}:/missing", d / "b").failed(r"/missing")
    out = tmp_path / "out.h5"
    res = mmfs_export("--progress", d / "a", f"{out}:/p").ok()
    assert re.search(r"\d+(\.\d+)?\s?%", res.err), f"no progress bar on stderr with --progress\n{res}"
    res = mmfs_export("-q", "--force", d / "a", f"{out}:/p").ok()
    assert res.out == "" and res.err == "", f"-q prints nothing but errors\n{res}"
    res = mmfs_export("--force", d / "a", f"{out}:/p").ok()
    assert res.err == "", f"no progress bar when stderr is not a terminal\n{res}"
    mmfs_export("-q", d / "nothing", f"{out}:/q").failed()
    assert_exported(out, "/p", arr)


# --- memory ---------------------------------------------------------------------------

# A small process that runs the tool and reports the tool's own peak RSS: measuring a child of
# the test process would count the pages it shares with this (large) process until its exec.
_RSS_WRAPPER = """
import os, sys
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run_measured(cmd, out_dir, timeout=300):
    """Runs cmd; returns (exit status, stdout, stderr, the tool's peak RSS in bytes)."""
    rss_file = out_dir / "maxrss"
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", _RSS_WRAPPER, str(rss_file), *map(str, cmd)],
                          capture_output=True, encoding="utf-8", errors="replace", timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert rss_file.exists(), f"the RSS wrapper failed: {proc.stderr}"
    return proc.returncode, proc.stdout, proc.stderr, int(rss_file.read_text()) * 1024


def smooth_planes(start, stop, rows=1024, cols=256):
    r = (np.arange(rows, dtype=np.float32) // 64)[:, None]
    c = (np.arange(cols, dtype=np.float32) // 64)[None, :]
    return np.stack([r * 0.5 + c + np.float32(p) * 0.25 for p in range(start, stop)]).astype(np.float32)


def test_memory_of_a_large_import(volume_factory, tmp_path):
    """A 400 MiB dataset (chunked, gzip 1) imported with --buffer 8: the tool's peak RSS stays
    far below the dataset's size, and every byte arrives."""
    planes, rows, cols = 400, 1024, 256
    src = tmp_path / "large.h5"
    with h5py.File(src, "w") as f:
        ds = f.create_dataset("/big", shape=(planes, rows, cols), dtype="f4", chunks=(4, 256, 256),
                              compression="gzip", compression_opts=1)
        for p in range(0, planes, 16):
            ds[p:p + 16] = smooth_planes(p, p + 16)
    assert os.path.getsize(src) < 64 * MiB, "the HDF5 file stays small"
    vol = volume_factory(size="1G")
    importer = tool_path("mmfs-import")
    rc, out, err, rss = run_measured([importer, "--buffer", "8", "-q", f"{src}:/big", vol.mnt / "big"], tmp_path)
    assert rc == 0, f"mmfs-import --buffer 8: exit {rc}\n{out}{err}"
    total = planes * rows * cols * 4
    assert os.stat(vol.mnt / "big").st_size == total
    if not is_sanitized(importer):
        assert rss < 100 * MiB, f"peak RSS {rss / MiB:.0f} MiB importing {total / MiB:.0f} MiB with --buffer 8"
    fd = os.open(vol.mnt / "big", os.O_RDONLY)
    try:
        step = 16
        for p in range(0, planes, step):
            want = smooth_planes(p, p + step)
            got = pread_all(fd, want.nbytes, p * rows * cols * 4)
            if got != want.tobytes():
                assert_array_bytes(got, want, f"planes {p}..{p + step} of the imported array")
    finally:
        os.close(fd)
