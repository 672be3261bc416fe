"""Ingest writes each cell once: a sequential writer whose cells span more C-order
bytes than fit between two dirty-limit write-backs keeps the cells it has not
finished in memory instead of writing them and reading them back."""
import os

import numpy as np
import pytest

from mmfs_mount import cached_pages, make_array, read_bytes, read_json


def stats(vol):
    return read_json(vol.mnt / ".mmfs" / "stats")


def ingest_sequentially(vol, path, arr):
    """Writes arr's C-order bytes in 1 MiB pwrites then fsyncs; the device
    bytes read and written meanwhile."""
    before = stats(vol)
    fd = os.open(path, os.O_WRONLY)
    try:
        data = memoryview(arr.tobytes())
        step = 1 << 20
        for off in range(0, len(data), step):
            os.pwrite(fd, data[off:off + step], off)
        os.fsync(fd)
    finally:
        os.close(fd)
    after = stats(vol)
    ss = after["sector_size"]
    return ((after["sectors_read"] - before["sectors_read"]) * ss,
            (after["sectors_written"] - before["sectors_written"]) * ss,
            after["flushes"] - before["flushes"])


def test_a_sequential_ingest_reads_nothing_back_and_writes_each_cell_once(volume_factory):
    vol = volume_factory(size="2G", geometry="ssd")
    # A band of cells along dim 0 (24 rows, 9 MiB of C-order bytes) is 3072
    # one-sector cells, 12 MiB dirty: the 64 MiB dirty limit is reached when a
    # sixth band has just been touched, so a band is half written at every
    # write-back.
    shape = (240, 384, 128)
    arr = np.random.default_rng(8).standard_normal(shape)
    a = make_array(vol.mnt / "a", shape, "float64", "naive", None, attrs={"cell": "24,8,2"})
    read, written, _ = ingest_sequentially(vol, a, arr)
    assert read == 0, "cells were read back during a sequential ingest"
    cells = (240 // 24) * (384 // 8) * (128 // 2)
    assert written == cells * 4096  # each 3 KiB cell's sector written once
    assert read_bytes(a) == arr.tobytes()


def test_random_partial_writes_still_merge_with_the_stored_bytes(volume_factory):
    vol = volume_factory(size="1G", geometry="ssd")
    shape = (240, 384, 128)
    rng = np.random.default_rng(9)
    arr = rng.standard_normal(shape)
    a = make_array(vol.mnt / "a", shape, "float64", "naive", arr, attrs={"cell": "24,8,2"})
    fd = os.open(a, os.O_WRONLY)
    try:
        for _ in range(200):  # scattered small writes, several dirty-limit write-backs' worth
            i = int(rng.integers(0, arr.size - 4096))
            n = int(rng.integers(1, 4096))
            patch = rng.standard_normal(n)
            arr.reshape(-1)[i:i + n] = patch
            os.pwrite(fd, patch.tobytes(), i * 8)
        big = rng.standard_normal(arr.size // 2)  # then 64+ MiB in one go, half cells partly covered
        start = arr.size // 5 + 3
        arr.reshape(-1)[start:start + big.size] = big
        os.pwrite(fd, big.tobytes(), start * 8)
    finally:
        os.close(fd)
    assert read_bytes(a) == arr.tobytes()
    vol.remount()
    assert read_bytes(a) == arr.tobytes()


def test_a_band_of_cells_as_large_as_half_the_dirty_limit_is_still_written_once(volume_factory):
    # The default flash cell (16x16x4 float64, 8 KiB) across a 1024x256 face:
    # a band of cells is 16 rows, 32 MiB of C-order bytes and 4096 cells, 32
    # MiB dirty: exactly half the 64 MiB limit. A writer starting a band is
    # then at the limit with a whole band unfinished; those cells must stay
    # in memory, not be written and read back (ingest ran at 115 MB/s so).
    vol = volume_factory(size="2G", geometry="ssd")
    shape = (48, 1024, 256)
    arr = np.random.default_rng(10).standard_normal(shape)
    a = make_array(vol.mnt / "a", shape, "float64", "hilbert", None, attrs={"cell": "16,16,4"})
    read, written, _ = ingest_sequentially(vol, a, arr)
    assert read == 0, "cells were read back during a sequential ingest"
    assert written == arr.nbytes  # every 8 KiB cell written once
    assert read_bytes(a) == arr.tobytes()


def test_unfinished_cells_beyond_the_dirty_limit_wait_for_a_full_batch_of_finished_ones(volume_factory):
    # 32x16x4 float64 cells (16 KiB) across a 1024x256 face: a slab of cells
    # is 64 MiB, all of it dirty from the slab's first row on. The dirty
    # limit is then reached with no cell finished; each write after it must
    # not write back the few cells it finished (a device flush and a commit
    # each time) but wait until finished cells fill a write-back.
    vol = volume_factory(size="2G", geometry="ssd")
    shape = (64, 1024, 256)
    arr = np.random.default_rng(11).standard_normal(shape)
    a = make_array(vol.mnt / "a", shape, "float64", "hilbert", None, attrs={"cell": "32,16,4"})
    read, written, flushes = ingest_sequentially(vol, a, arr)
    print(f"device flushes during the ingest: {flushes}")
    assert read == 0
    assert written == arr.nbytes
    assert flushes <= 4, f"{flushes} device flushes for a 128 MiB ingest"
    assert read_bytes(a) == arr.tobytes()


def test_a_write_only_open_sends_its_bytes_around_the_page_cache(volume_factory):
    vol = volume_factory(size="256M", geometry="ssd")
    data = np.random.default_rng(12).standard_normal((16, 64, 64))
    make_array(vol.mnt / "a", data.shape)
    make_array(vol.mnt / "b", data.shape)
    for name, flags in (("a", os.O_WRONLY), ("b", os.O_RDWR)):
        fd = os.open(vol.mnt / name, flags)
        try:
            os.pwrite(fd, data.tobytes(), 0)
            pages = cached_pages(fd)
        finally:
            os.close(fd)
        if pages is None:
            pytest.skip("no cachestat(2) on this kernel")
        if flags == os.O_WRONLY:
            assert pages == 0  # direct: nothing was copied into the cache
        else:
            assert pages == data.nbytes // 4096  # a reader-writer still writes through the cache
        assert read_bytes(vol.mnt / name) == data.tobytes()


def test_a_write_only_open_writes_around_the_page_cache_and_readers_see_its_bytes(volume_factory):
    """A write-only open of an array is direct I/O (daemon/fuse_ops.cc): its
    bytes skip the page cache, so a reader's cached pages of the range must be
    dropped, and a shared map must still work on a reader's open."""
    vol = volume_factory(size="256M", geometry="ssd")
    rng = np.random.default_rng(11)
    before = rng.standard_normal((32, 64, 16))
    after = before.copy()
    after[5:20] = rng.standard_normal((15, 64, 16))
    path = vol.mnt / "a"
    make_array(path, before.shape, data=before)
    reader = os.open(path, os.O_RDONLY)
    try:
        assert os.pread(reader, before.nbytes, 0) == before.tobytes()  # now cached
        mapped = np.memmap(path, dtype="<f8", mode="r", shape=before.shape)  # MAP_SHARED of a read-only open
        np.testing.assert_array_equal(mapped, before)
        # The array's bytes through page-cache pages are 4 KiB-aligned; write
        # rows 5..19 (not page aligned: 8 KiB rows from byte 40960) with
        # unaligned pieces.
        writer = os.open(path, os.O_WRONLY)
        try:
            data = after.tobytes()
            lo, hi = before[0].nbytes * 5, before[0].nbytes * 20
            at = lo
            for n in (1000, 4096, 70001):
                os.pwrite(writer, data[at:at + n], at)
                at += n
            os.pwrite(writer, data[at:hi], at)
            os.fsync(writer)
        finally:
            os.close(writer)
        assert os.pread(reader, before.nbytes, 0) == after.tobytes()
        np.testing.assert_array_equal(np.memmap(path, dtype="<f8", mode="r", shape=before.shape), after)
        del mapped
    finally:
        os.close(reader)
    assert read_bytes(path) == after.tobytes()
