"""mmfs-import --list, and what mmfs-import refuses, leaving nothing behind: missing
files and datasets, unsupported dataset types and dataspaces (a whole file imports
the rest), a full volume, and a SIGINT / SIGTERM part way through."""
import os
import re
import signal
import subprocess
import time

import h5py
import numpy as np
import pytest

from h5_support import MiB, check_array, entries, mmfs_import, smooth_planes, tool_path, tree, visible, write_h5
from h5_support import d, vol  # noqa: F401,F811 (fixtures, requested by name)
from mmfs_mount import random_array


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
    clean (the fixture runs mmfsck -n). The signal is sent as soon as the array exists. One
    that lands after the array is complete and durable (the tool's last check is after its
    fsync) lets the import finish: exit 0 and the whole array, never a part of it; then the
    import is tried again (a fast machine wrote 128 MiB within 0.2 s). Each signal must
    interrupt one of three tries."""
    planes = 128  # 128 MiB of compressible float32
    src = tmp_path / "big.h5"
    with h5py.File(src, "w") as f:
        ds = f.create_dataset("/big", shape=(planes, 1024, 256), dtype="f4", chunks=(4, 256, 256),
                              compression="gzip", compression_opts=1)
        for p in range(0, planes, 16):
            ds[p:p + 16] = smooth_planes(p, p + 16)
    vol = volume_factory(size="512M")
    interrupted = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        for attempt in range(3):
            dest = vol.mnt / f"big-{sig.name}-{attempt}"
            proc = subprocess.Popen([str(tool_path("mmfs-import")), "--buffer", "4", "-q", f"{src}:/big", str(dest)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                deadline = time.monotonic() + 30
                while not dest.exists() and proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.002)
                if proc.poll() is None:
                    proc.send_signal(sig)  # our own child, by its pid
                out, err = proc.communicate(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            if proc.returncode == 0:
                # finished before the signal was looked at again: the array is whole
                with h5py.File(src, "r") as f:
                    check_array(dest, f["/big"][...])
                os.remove(dest)
                continue
            interrupted.append(sig.name)
            assert err.decode(errors="replace").startswith("mmfs-import: "), err
            assert visible(vol.mnt) == [], f"{sig.name}: the partly imported array is left behind"
            break
    assert interrupted == ["SIGINT", "SIGTERM"], f"interrupted by {interrupted} only"
