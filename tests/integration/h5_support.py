"""Helpers of the mmfs-import / mmfs-export tests (test_import_export_*.py): running the
tools (Result asserts success or an explained failure), writing and reading HDF5 files,
checking an imported array through numpy.fromfile and its views, listing what a
directory holds, the fixtures `vol` (a volume per test module) and `d` (a fresh
directory in it per test), and smooth_planes (compressible data for large imports)."""
import itertools
import os
import re
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import build_dir
from mmfs_mount import assert_array_bytes, getx, read_bytes, shape_str, view

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


# --- data -----------------------------------------------------------------------------

def smooth_planes(start, stop, rows=1024, cols=256):
    r = (np.arange(rows, dtype=np.float32) // 64)[:, None]
    c = (np.arange(cols, dtype=np.float32) // 64)[None, :]
    return np.stack([r * 0.5 + c + np.float32(p) * 0.25 for p in range(start, stop)]).astype(np.float32)
