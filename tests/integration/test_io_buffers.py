"""The daemon's pool of large I/O buffers (fs/util/buffer_pool.h, `-o io_buffers`):
filled as the daemon starts, reused by view reads instead of fresh mappings,
bounded by its limit, and off with io_buffers=0."""
import time

import numpy as np

from mmfs_mount import daemon_status_kib, make_array, random_array, read_bytes, read_json, view

MiB = 1 << 20
FILL = 128 * MiB  # what the daemon fills of the pool at mount (BufferPool::kDefaultFill)


def pool_stats(vol):
    return read_json(vol.mnt / ".mmfs" / "stats")["io_buffers"]


def filled_pool(vol, timeout=30.0):
    """The pool's numbers once the daemon has filled it (it does so beside
    its loop, so a request may come first)."""
    deadline = time.monotonic() + timeout
    while True:
        s = pool_stats(vol)
        if s["idle_bytes"] >= min(s["limit_bytes"], FILL) or time.monotonic() > deadline:
            return s
        time.sleep(0.02)


def read_boxes(vol, data):
    """Four views of 8 MiB each, compared with numpy: their outputs stay in
    the array's chunk cache (buffers in use), their device reads come and go."""
    a = vol.mnt / "a"
    n0, n1, n2 = data.shape
    for k in range(4):
        lo, hi = k * n2 // 4, (k + 1) * n2 // 4
        got = np.frombuffer(read_bytes(view(a, f"box/:,:,{lo}:{hi}")), "<f8").reshape(n0, n1, hi - lo)
        np.testing.assert_array_equal(got, data[:, :, lo:hi])


def read_slices(vol, data):
    """Slices along the last dim, compared with numpy: each output is under
    the pool's 2 MiB, each device read over it (its cells hold many slices)."""
    a = vol.mnt / "a"
    assert read_json(view(a, "plan/slice/2/0"))["bytes_read"] >= 2 * MiB
    for i in range(0, data.shape[2], 7):
        np.testing.assert_array_equal(np.frombuffer(read_bytes(view(a, f"slice/2/{i}")), "<f8"),
                                      data[:, :, i].ravel())


def test_the_pool_is_filled_at_mount_and_reused_by_reads(volume_factory):
    vol = volume_factory(size="1G", geometry="ssd")
    start = filled_pool(vol)
    assert start["limit_bytes"] == 256 * MiB
    assert start["idle_bytes"] == FILL and start["in_use_bytes"] == 0, start
    # 128 MiB of the daemon's resident memory are the filled pool.
    assert daemon_status_kib(vol, "VmRSS") >= 128 * 1024

    data = random_array(np.random.default_rng(11), (256, 256, 64), "float64")  # 32 MiB
    make_array(vol.mnt / "a", data.shape, data=data)
    vol.remount()  # reads from the device, not the write's cache
    before = filled_pool(vol)
    read_slices(vol, data)
    after = pool_stats(vol)
    assert after["takes"] > before["takes"], (before, after)
    # Every buffer the reads took was a kept one: no page was mapped afresh.
    assert after["mapped"] == before["mapped"] == 0, after
    assert after["reused"] - before["reused"] == after["takes"] - before["takes"]
    assert after["in_use_bytes"] == 0 and after["idle_bytes"] <= after["limit_bytes"], after


def test_the_limit_bounds_what_is_kept(volume_factory):
    vol = volume_factory(size="1G", geometry="ssd", options=("io_buffers=6M",))
    data = random_array(np.random.default_rng(12), (256, 256, 64), "float64")
    make_array(vol.mnt / "a", data.shape, data=data)
    vol.remount()
    filled_pool(vol)
    read_boxes(vol, data)
    s = pool_stats(vol)
    assert s["limit_bytes"] == 6 * MiB
    assert 0 < s["idle_bytes"] <= 6 * MiB and s["in_use_bytes"] >= 4 * 8 * MiB, s  # the cached views
    # Buffers beyond the limit went back to the kernel.
    assert s["mapped"] > 0 and s["unmapped"] > 0, s


def test_io_buffers_zero_keeps_nothing(volume_factory):
    vol = volume_factory(size="1G", geometry="ssd", options=("io_buffers=0",))
    assert pool_stats(vol)["idle_bytes"] == 0
    data = random_array(np.random.default_rng(13), (256, 256, 64), "float64")
    make_array(vol.mnt / "a", data.shape, data=data)
    vol.remount()
    read_slices(vol, data)
    s = pool_stats(vol)
    assert s["limit_bytes"] == 0 and s["idle_bytes"] == 0 and s["in_use_bytes"] == 0, s
    assert s["takes"] > 0 and s["reused"] == 0 and s["unmapped"] == s["mapped"] == s["takes"], s
