"""mmfs-export of arrays and views made through the mount (slices, boxes, PLoD): the
exported data, missing groups, --chunks (contiguous, given, auto), --gzip and
--shuffle, an existing dataset and --force, and the sources and destinations it
refuses."""
import numpy as np
import pytest

from h5_support import MiB, assert_exported, h5_has, mmfs_export, write_h5
from h5_support import d, vol  # noqa: F401,F811 (fixtures, requested by name)
from mmfs_mount import assert_array_bytes, make_array, plod, random_array, read_bytes, view


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


# (A directory is a tree to export: test_import_export_dims.py.)
@pytest.mark.parametrize("what", ["plain-file", "info", "plan", "lbn", "missing", "view-dir"])
def test_export_refuses_non_data_sources(sources, vol, tmp_path, what):
    path, arr = sources["f8"]
    plain = vol.mnt / "sources" / "plain.txt"
    if not plain.exists():
        plain.write_bytes(b"just some text\n" * 10)
    src = {"plain-file": plain, "info": view(path, "info"),
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
