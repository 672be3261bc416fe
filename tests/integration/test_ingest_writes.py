"""Ingest writes each cell once: a sequential writer whose cells span more C-order
bytes than fit between two dirty-limit write-backs keeps the cells it has not
finished in memory instead of writing them and reading them back (issue 18)."""
import os

import numpy as np

from mmfs_mount import make_array, read_bytes, read_json


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
