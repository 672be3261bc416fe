"""The FUSE transport: busy polling of /dev/fuse (daemon/request_poller.h),
the mount's read-ahead window (daemon/mount_readahead.h), the daemon's code
kept in memory (daemon/code_residency.h) and when the kernel checks
permissions (default_permissions)."""
import errno
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from mmfs_mount import (build_dir, daemon_status_kib, expect_errno, is_mounted, is_sanitized, make_array, mkfs,
                        random_array, read_bytes, read_json, unmount, view)


def fuse_stats(vol):
    return read_json(vol.mnt / ".mmfs" / "stats").get("fuse")


def mount_options(mnt):
    """The options /proc/self/mountinfo shows for the FUSE mount at `mnt` (super options included)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == str(mnt):
                sep = fields.index("-")
                return set(fields[5].split(",")) | set(fields[sep + 3].split(","))
    raise AssertionError(f"{mnt} is not in /proc/self/mountinfo")


# The READ of /.mmfs/stats is itself owed a reply while the daemon writes the
# numbers, when polling found it: one reply owed is the reader's own.
OWN_READ = 1


def wait_for_settled_replies(vol, timeout=10.0):
    """Asynchronous requests (RELEASE, FORGET) may still be in flight just after a loop."""
    deadline = time.monotonic() + timeout
    while True:
        stats = fuse_stats(vol)
        if stats["replies_owed_on_clone"] <= OWN_READ or time.monotonic() > deadline:
            return stats
        time.sleep(0.05)


def create_files(directory, n):
    os.mkdir(directory)
    for i in range(n):
        os.close(os.open(directory / f"f{i:05d}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))


def test_polling_is_on_by_default(volume_factory):
    vol = volume_factory()
    stats = fuse_stats(vol)
    assert stats is not None, "busy polling is on by default; /.mmfs/stats must show its counters"
    create_files(vol.mnt / "some", 50)
    assert fuse_stats(vol)["requests_polled"] + fuse_stats(vol)["requests_slept"] > 150


def test_a_create_loop_is_served_by_polling(volume_factory):
    # A 100 ms window: on a loaded machine a caller may take longer than the
    # default 200 us between requests, and this test is about the mechanism.
    vol = volume_factory(options=("busy_poll=100000",))
    before = fuse_stats(vol)
    create_files(vol.mnt / "many", 400)
    for i in range(400):
        os.stat(vol.mnt / "many" / f"f{i:05d}")
    assert sorted(os.listdir(vol.mnt / "many")) == [f"f{i:05d}" for i in range(400)]
    after = wait_for_settled_replies(vol)
    # Every request of a synchronous loop arrives within the window of the
    # one before it: most must have been found by polling, not by a sleeper.
    polled = after["requests_polled"] - before["requests_polled"]
    slept = after["requests_slept"] - before["requests_slept"]
    assert polled >= 800 and polled > 2 * slept, (polled, slept)
    assert after["replies_owed_on_clone"] <= OWN_READ, after


def test_busy_poll_zero_turns_polling_off(volume_factory):
    vol = volume_factory(options=("busy_poll=0",))
    assert fuse_stats(vol) is None
    create_files(vol.mnt / "few", 50)
    assert len(os.listdir(vol.mnt / "few")) == 50


# More than half the memory: the pool is touched before the mount.
OVER_HALF_THE_MEMORY = str(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2 + (2 << 20))
BAD_VALUES = [("busy_poll", v) for v in ["abc", "-1", "100001", "", "5x", "1e3"]] + \
             [("read_ahead_kb", v) for v in ["abc", "-1", "65537", "", "1M"]] + \
             [("io_buffers", v) for v in ["abc", "-1", "", "64X", "65G", "M", OVER_HALF_THE_MEMORY]]


@pytest.mark.parametrize("option,value", BAD_VALUES)
def test_a_bad_option_value_is_refused(tmp_path, option, value):
    image, mnt = tmp_path / "vol.img", tmp_path / "mnt"
    mkfs(image, "64M")
    mnt.mkdir()
    try:
        proc = subprocess.run([str(build_dir() / "daemon" / "mmfs"), "-f", "-o", f"{option}={value}", str(image),
                               str(mnt)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1
        assert option in proc.stderr and repr(value) in proc.stderr.replace('"', "'"), proc.stderr
        assert not is_mounted(mnt)
    finally:
        unmount(mnt)


def read_ahead_kb(mnt):
    """The kernel's read-ahead window of the mount at `mnt` (its backing device's, in sysfs)."""
    dev = os.stat(mnt).st_dev
    with open(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb") as f:
        return int(f.read())


def read_sizes_of_a_full_read(vol, arr):
    """READ requests and bytes the daemon saw for one cold read of `arr`."""
    subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=True)
    before = fuse_stats(vol)["long_requests"]
    with open(arr, "rb", buffering=0) as f:
        n = 0
        while chunk := f.read(8 << 20):
            n += len(chunk)
    return fuse_stats(vol)["long_requests"] - before, n


@pytest.mark.skipif(os.geteuid() != 0, reason="setting a mount's read-ahead window needs root")
def test_the_read_ahead_window_is_max_read_by_default(volume_factory):
    vol = volume_factory()
    assert read_ahead_kb(vol.mnt) == 1024
    data = random_array(np.random.default_rng(3), (64, 128, 128), "float64")  # 8 MiB
    arr = vol.mnt / "a"
    make_array(arr, data.shape, data=data)
    reads, n = read_sizes_of_a_full_read(vol, arr)
    assert n == data.nbytes
    # About one READ per MiB (the stats file's own reads and a few partial
    # windows aside); with the kernel's 128 KiB window it would be 64.
    assert reads <= 2 * (data.nbytes >> 20) + 4, reads
    np.testing.assert_array_equal(np.frombuffer(read_bytes(arr), "<f8").reshape(data.shape), data)


def test_read_ahead_kb_zero_leaves_the_kernels_window(volume_factory):
    vol = volume_factory(options=("read_ahead_kb=0",))
    assert read_ahead_kb(vol.mnt) == 128


def locked_kib(vol):
    """VmLck of the daemon serving `vol`, in KiB."""
    return daemon_status_kib(vol, "VmLck")


@pytest.mark.skipif(os.geteuid() != 0, reason="locking more than RLIMIT_MEMLOCK needs root")
def test_the_daemons_code_is_locked_in_memory(volume_factory):
    vol = volume_factory()
    daemon = read_json(vol.mnt / ".mmfs" / "stats")["daemon"]
    # Its own binary alone has megabytes of code; nothing was refused.
    assert daemon["code_locked_kib"] >= 1024 and daemon["code_unlocked_kib"] == 0, daemon
    if not is_sanitized(build_dir() / "daemon" / "mmfs"):  # ASan's mlock does nothing
        assert locked_kib(vol) >= daemon["code_locked_kib"]
    # Still served after the page cache is dropped (locked pages stay).
    subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=True)
    data = random_array(np.random.default_rng(5), (16, 16, 8), "float64")
    make_array(vol.mnt / "a", data.shape, data=data)
    np.testing.assert_array_equal(np.frombuffer(read_bytes(view(vol.mnt / "a", "slice/1/3")), "<f8"),
                                  data[:, 3, :].ravel())


def test_nolock_code_leaves_the_code_evictable(volume_factory):
    vol = volume_factory(options=("nolock_code",))
    daemon = read_json(vol.mnt / ".mmfs" / "stats")["daemon"]
    assert daemon == {"code_locked_kib": 0, "code_unlocked_kib": 0}
    assert locked_kib(vol) == 0


# A relayout under `simulate` (every device request takes the modelled disk's
# time) is a SETXATTR that takes seconds, and its caller is signalled again
# and again. A signal makes the kernel send an INTERRUPT for the request in
# flight; libfuse matches it with the SETXATTR, or answers EAGAIN on the
# device the SETXATTR came from. A misrouted reply would leave the caller
# waiting for ever (the timeout below) or the daemon owing replies.
RELAYOUT = r"""
import os, signal, sys
signal.signal(signal.SIGUSR1, lambda *_: None)
print("ready", flush=True)
os.setxattr(sys.argv[1], "user.mmfs.layout", b"zorder")
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # none may land once the handler is gone at exit
print("done", flush=True)
"""


def test_interrupted_requests_are_answered_and_nothing_is_owed(volume_factory):
    vol = volume_factory()
    arr = random_array(np.random.default_rng(11), (96, 96, 96), "float64")
    path = make_array(vol.mnt / "slow", arr.shape, arr.dtype, "naive", arr)
    vol.remount(("simulate",))
    before = fuse_stats(vol)
    proc = subprocess.Popen([sys.executable, "-c", RELAYOUT, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        signals = 0
        while proc.poll() is None and signals < 50000:
            proc.send_signal(signal.SIGUSR1)
            signals += 1
            time.sleep(0.002)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and out.strip() == "done"
    after = wait_for_settled_replies(vol)
    assert after["interrupts"] > before["interrupts"], (signals, before, after)
    assert after["replies_owed_on_clone"] <= OWN_READ, after
    assert os.getxattr(path, "user.mmfs.layout") == b"zorder"
    assert read_bytes(view(path, "slice", 2, 7)) == np.ascontiguousarray(arr[:, :, 7]).tobytes()
    vol.remount(())
    assert read_bytes(path) == arr.tobytes()


# --- default_permissions --------------------------------------------------------------


@pytest.mark.parametrize("options, kernel_checks", [
    ((), False),
    (("default_permissions",), True),
    (("allow_other",), True),
])
def test_when_the_kernel_checks_permissions(volume_factory, options, kernel_checks):
    if os.geteuid() != 0:
        pytest.skip("the policy differs only for mounts made by root")
    vol = volume_factory(options=options)
    assert ("default_permissions" in mount_options(vol.mnt)) == kernel_checks, mount_options(vol.mnt)
    # Root gets what root gets on any local filesystem, either way.
    secret = vol.mnt / "secret"
    secret.write_bytes(b"s")
    os.chmod(secret, 0o000)
    assert read_bytes(secret) == b"s"
    script = vol.mnt / "script"
    script.write_text("#!/bin/sh\necho ran\n")
    os.chmod(script, 0o644)
    expect_errno(errno.EACCES, subprocess.run, [str(script)])
    os.chmod(script, 0o744)
    assert subprocess.run([str(script)], capture_output=True, text=True).stdout == "ran\n"
