"""Where mmfs-import puts things: its output line per dataset, an existing directory
under the dataset's name, file and dataset names with colons and odd characters, an
empty file, external links, and a destination that exists (--force) or whose
directory is missing."""
import os
import re

import h5py
import numpy as np

from h5_support import check_array, entries, mmfs_import, tree, write_h5
from h5_support import d, vol  # noqa: F401,F811 (fixtures, requested by name)
from mmfs_mount import make_array, random_array


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
