"""The kernel caches an array's stable view nodes (directories, data views,
Zarr chunks) and every change that could make them wrong invalidates them
(docs/daemon.md, "View nodes in the kernel's cache"):

* a second walk of the same view path asks the daemon nothing (the
  `views.lookups` / `views.getattrs` counters of /.mmfs/stats stand still);
* a schema change (a relayout to another cell, so another natural Zarr
  chunk), an attribute (zarr.json), a chmod, a rename, an unlink and a
  replacement of the array each show at once through paths the kernel holds;
* a Zarr chunk file is read around the page cache (direct I/O).

Permissions through cached nodes (chmod/chown seen by another user at once)
are tested in test_view_permissions.py, which runs with default_permissions.
"""
import errno
import json
import os

import numpy as np
import pytest

from mmfs_mount import cached_pages, expect_errno, make_array, read_bytes, setx


def stats(vol):
    with open(vol.mnt / ".mmfs" / "stats") as f:
        return json.load(f)["views"]


def asked(vol, fn):
    """What fn() made the daemon look up or stat among view nodes."""
    before = stats(vol)
    fn()
    after = stats(vol)
    return after["lookups"] - before["lookups"], after["getattrs"] - before["getattrs"]


def chunk_file(a, *index):
    return f"{a}@/zarr/c/" + "/".join(map(str, index))


def test_a_second_walk_asks_the_daemon_nothing(volume):
    data = np.arange(16 * 12, dtype="float64").reshape(16, 12)
    a = make_array(volume.mnt / "a", data.shape, "float64", "naive", data, attrs={"cell": "4,4"})
    chunk = chunk_file(a, 1, 2)
    slice_ = f"{a}@/slice/0/3"
    expected = data[4:8, 8:12].tobytes()

    def walk():
        assert os.stat(chunk).st_size == len(expected)
        assert read_bytes(chunk) == expected
        assert read_bytes(slice_) == data[3].tobytes()

    def stat_walk():
        for path in (chunk, slice_, f"{a}@/zarr", f"{a}@"):
            os.stat(path)

    lookups, _ = asked(volume, walk)
    assert lookups >= 6  # a@, zarr, c, 1, 2 and slice/0/3 the first time
    lookups, getattrs = asked(volume, walk)
    # A read marks the file's atime stale in the kernel: the stat or fstat
    # after it asks for the attributes once, nothing else does.
    assert lookups == 0 and getattrs <= 2
    stat_walk()
    assert asked(volume, stat_walk) == (0, 0)
    # Text views are generated at every open: never cached.
    lookups, _ = asked(volume, lambda: read_bytes(f"{a}@/info"))
    assert lookups == 1  # info itself; a@ is cached
    info = f"{a}@/info"
    before = stats(volume)["getattrs"]
    for _ in range(3):
        os.stat(info)
    assert stats(volume)["getattrs"] - before >= 3


def test_a_relayout_resizes_the_zarr_chunks_the_kernel_holds(volume):
    data = np.random.default_rng(3).standard_normal((16, 16))
    a = make_array(volume.mnt / "a", data.shape, "float64", "naive", data, attrs={"cell": "4,4"})
    chunk = chunk_file(a, 0, 0)
    assert os.stat(chunk).st_size == 4 * 4 * 8
    assert read_bytes(chunk) == data[:4, :4].tobytes()
    setx(a, "user.mmfs.cell", "8,8")  # a relayout: the natural chunk is now 8x8
    assert os.stat(chunk).st_size == 8 * 8 * 8
    assert read_bytes(chunk) == data[:8, :8].tobytes()
    expect_errno(errno.ERANGE, os.stat, chunk_file(a, 0, 3))  # the grid is 2x2 now
    with open(f"{a}@/zarr/zarr.json") as f:
        assert json.load(f)["chunk_grid"]["configuration"]["chunk_shape"] == [8, 8]


def test_an_attribute_and_a_chmod_show_at_once(volume):
    data = np.ones((8, 8))
    a = make_array(volume.mnt / "a", data.shape, "float64", "naive", data)
    chunk = chunk_file(a, 0, 0)
    os.stat(chunk)
    setx(a, "user.units", '"K"')
    with open(f"{a}@/zarr/zarr.json") as f:
        assert json.load(f)["attributes"]["units"] == "K"
    os.chmod(a, 0o600)
    assert os.stat(chunk).st_mode & 0o777 == 0o400
    assert os.stat(f"{a}@/zarr").st_mode & 0o777 == 0o500
    os.chmod(a, 0o644)
    assert os.stat(chunk).st_mode & 0o777 == 0o444


def test_rename_unlink_and_replace_show_at_once(volume):
    rng = np.random.default_rng(8)
    first, second = rng.standard_normal((8, 8)), rng.standard_normal((8, 8))
    a = make_array(volume.mnt / "a", first.shape, "float64", "naive", first, attrs={"cell": "4,4"})
    chunk = chunk_file(a, 1, 1)
    assert read_bytes(chunk) == first[4:, 4:].tobytes()
    b = volume.mnt / "b"
    os.rename(a, b)
    # The kernel held a@/zarr/c/1/1: the old name's views are gone at once.
    expect_errno(errno.ENOENT, os.stat, chunk)
    expect_errno(errno.ENOENT, read_bytes, chunk)
    assert read_bytes(chunk_file(b, 1, 1)) == first[4:, 4:].tobytes()
    # A new array under the old name shows its own bytes.
    make_array(a, second.shape, "float64", "naive", second, attrs={"cell": "4,4"})
    assert read_bytes(chunk) == second[4:, 4:].tobytes()
    # A hard link keeps its views when the other name goes.
    link = volume.mnt / "link"
    os.link(b, link)
    assert read_bytes(chunk_file(link, 0, 1)) == first[:4, 4:].tobytes()
    os.stat(chunk_file(b, 0, 1))
    os.unlink(b)
    expect_errno(errno.ENOENT, os.stat, chunk_file(b, 0, 1))
    assert read_bytes(chunk_file(link, 0, 1)) == first[:4, 4:].tobytes()
    # Renaming over a name drops the replaced array's views.
    os.rename(link, a)
    assert read_bytes(chunk) == first[4:, 4:].tobytes()
    expect_errno(errno.ENOENT, os.stat, chunk_file(link, 0, 1))


def test_a_zarr_chunk_is_read_around_the_page_cache(volume):
    data = np.random.default_rng(4).standard_normal((64, 64))
    a = make_array(volume.mnt / "a", data.shape, "float64", "naive", data, attrs={"cell": "32,32"})
    for path, expected, direct in ((chunk_file(a, 1, 0), data[32:, :32], True),
                                   (f"{a}@/box/32:64,0:32", data[32:, :32], False)):
        fd = os.open(path, os.O_RDONLY)
        try:
            got = os.pread(fd, 1 << 20, 0)
            pages = cached_pages(fd)
        finally:
            os.close(fd)
        assert got == expected.tobytes()
        if pages is None:
            pytest.skip("no cachestat(2) on this kernel")
        # A box view keeps the page cache (it may be mapped); a chunk file does not.
        assert (pages == 0) == direct, path
