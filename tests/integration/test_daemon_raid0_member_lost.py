"""A RAID 0 volume (metadata on member sets) whose member dies while it is
mounted: the daemon records the member failed in the survivors' superblocks
and the metadata goes on with its copy on the other members
(docs/on-disk-format.md, "Metadata on member sets"). Before, no metadata
change could be made durable: every sync of the metadata failed with EIO
until a remount. Members are nbdkit exports, so a member can die under the
running daemon."""
import contextlib
import os
import time

import numpy as np
import pytest

from mmfs_mount import fsck, fsck_path, make_array, random_array, read_bytes, read_json, run_tool
from test_daemon_volume import (READ_TIMEOUT, alive, check_all_views, devices, errors_text, hang_is_known_bug,
                                joined, mkfs_members, nbd_servers, running, scratch_dir, stats, within)

__all__ = ["nbd_servers", "scratch_dir"]  # fixtures, used by name


def wait_current(path, timeout=60):
    """Until A@/info says every copy of `path` is current (caught up)."""
    deadline = time.monotonic() + timeout
    while True:
        copies = read_json(f"{path}@/info").get("copies", [])
        if copies and all(c["state"] == "current" for c in copies):
            return
        assert time.monotonic() < deadline, f"{path}: copies not current after {timeout} s: {copies}"
        time.sleep(0.05)


def write_row(path, arr, i, value):
    """arr[i] = value, in `arr` and through a pwrite and fsync of the array file."""
    arr[i] = value
    fd = os.open(path, os.O_WRONLY)
    try:
        assert os.pwrite(fd, arr[i].tobytes(), i * arr[i].nbytes) == arr[i].nbytes
        os.fsync(fd)
    finally:
        os.close(fd)


def write_row_through(fd, arr, row, value, fsync=True):
    """arr[row] = value, in `arr` and through a pwrite on the open
    descriptor `fd` (and its fsync)."""
    arr[row] = value
    assert os.pwrite(fd, arr[row].tobytes(), row * arr[row].nbytes) == arr[row].nbytes
    if fsync:
        os.fsync(fd)


def try_fsync(path):
    """0, or the errno of fsync(path)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def two_member_volume(scratch_dir, nbd_servers, seed, shape):
    """A 2-member RAID 0 volume over nbdkit (metadata on member sets): its
    servers, their URIs, the mount point, and random float64 data of `shape`
    for its array."""
    servers = [nbd_servers() for _ in range(2)]
    uris = [s.uri for s in servers]
    mkfs_members(uris, 0)
    arr = random_array(np.random.default_rng(seed), shape, "float64")
    return servers, uris, scratch_dir / "mnt", arr


def array_with_a_copy(mnt, arr):
    """`mnt/a` holding `arr` with a naive C-order copy, caught up; the member
    its primary lies on (the copy lies on the other) and the other."""
    make_array(mnt / "a", arr.shape, arr.dtype, "naive", arr, attrs={"copies": "naive:order=2,1,0"})
    wait_current(mnt / "a")
    info = read_json(f"{mnt}/a@/info")
    assert len(info["members"]) == 1 and info["copies"][0]["members"] != info["members"], info
    return info["members"][0], 1 - info["members"][0]


def make_changes(mnt, count):
    """`count` directories made, each a metadata commit (the first that meets
    a dead member records it failed), then two of them fsynced: the errnos."""
    for i in range(count):
        os.mkdir(mnt / f"d{i}")
    return [try_fsync(mnt / f"d{i}") for i in range(2)]


@hang_is_known_bug
def test_raid0_member_dies_while_mounted_metadata_goes_on(scratch_dir, nbd_servers):
    servers, uris, mnt, arr = two_member_volume(scratch_dir, nbd_servers, 1604, (64, 96, 80))
    with running(uris, mnt) as m:
        # The member of the array's primary dies; its copy lies on the other.
        lost, kept = array_with_a_copy(mnt, arr)
        (mnt / "before").write_bytes(b"x" * 4096)
        os.sync()
        servers[lost].kill()

        def changes():
            # Each one a metadata commit; the first write or sync that meets
            # the dead member records it failed.
            for i in range(40):
                os.mkdir(mnt / f"d{i}")
                os.rename(mnt / f"d{i}", mnt / f"e{i}")
                os.setxattr(mnt / f"e{i}", "user.note", str(i).encode())
            return [try_fsync(mnt / f"e{i}") for i in range(3)]

        fsyncs = within(READ_TIMEOUT, "metadata changes with a member dead", changes)
        alive(m)
        devs = devices(mnt)
        assert devs[lost]["state"] == "failed" and devs[lost]["target"] == uris[lost], devs
        assert devs[kept]["state"] == "ok", devs
        errors = errors_text(mnt)
        assert any(uris[lost] in line and "failed while the volume runs" in line for line in errors.splitlines()), \
            errors
        # Recorded lost, the member no longer fails a flush.
        assert fsyncs == [0, 0, 0], fsyncs
        # The array, loaded before the loss and idle, is loaded afresh at its
        # next use and its copy promoted: served from it, and taking writes.
        within(READ_TIMEOUT, "views with the primary's member dead", check_all_views, mnt / "a", arr, 1)
        info = read_json(f"{mnt}/a@/info")
        assert info["members"] == [kept] and "promoted" in info["layout_rule"], info
        assert stats(mnt)["copies"]["promoted_over_a_lost_member"] == 1, stats(mnt)["copies"]
        assert any("degraded: copy 1" in line for line in errors_text(mnt).splitlines()), errors_text(mnt)
        write_row(mnt / "a", arr, 5, -1.0)
        within(READ_TIMEOUT, "views after a write", check_all_views, mnt / "a", arr, 2)
        assert sorted(p for p in os.listdir(mnt) if p.startswith("e")) == sorted(f"e{i}" for i in range(40))
    # The survivor recorded it: a mount with the member gone lists it failed.
    with running(uris, mnt, options=("degraded",)) as m:
        assert devices(mnt)[lost]["state"] == "failed", devices(mnt)
        for i in range(40):
            assert os.getxattr(mnt / f"e{i}", "user.note") == str(i).encode()
        assert (mnt / "before").exists()
        within(READ_TIMEOUT, "views after the remount", check_all_views, mnt / "a", arr, 3)
        assert read_json(f"{mnt}/a@/info")["members"] == [kept]
        write_row(mnt / "a", arr, 6, -2.0)
        within(READ_TIMEOUT, "views after a write", check_all_views, mnt / "a", arr, 4)
        alive(m)
    # mmfsck --rebuild puts a fresh export in its place: the demoted copy's
    # cells come back from the new primary; a plain file's blocks on the
    # member are lost, and said so (exit 4).
    fresh = nbd_servers()
    rc, out, err = run_tool(fsck_path(), "--rebuild", fresh.uri, uris[kept], timeout=300)
    gone = [line for line in out.splitlines() if line.startswith("lost")]
    assert f"rebuilt member {lost}" in out and (rc, gone) in ((0, []), (4, ["lost (no second copy): /before: file blocks"])), \
        f"mmfsck --rebuild {fresh.uri}: exit {rc}\n{out}{err}"
    rebuilt = [fresh.uri if i == lost else uris[i] for i in range(2)]
    with running(rebuilt, mnt) as m:
        assert all(d["state"] == "ok" for d in devices(mnt)), devices(mnt)
        assert np.frombuffer(read_bytes(mnt / "a"), arr.dtype).reshape(arr.shape).tobytes() == arr.tobytes()
        # Each copy holds the bytes again, the rebuilt member's included.
        for k in (0, 1):
            got = np.frombuffer(read_bytes(f"{mnt}/a@/copy/{k}@/box/:,:,:"), arr.dtype).reshape(arr.shape)
            assert got.tobytes() == arr.tobytes(), f"copy {k} after the rebuild"
        assert os.getxattr(mnt / "e39", "user.note") == b"39"
        if gone:
            os.unlink(mnt / "before")
    fsck(joined(rebuilt))


@contextlib.contextmanager
def held_when_its_member_dies(m, mnt, servers, lost, arr, flags):
    """`mnt/a` open with `flags` while the member `lost` of its primary dies
    and the volume records it (metadata changes); while held, its views are
    served from the copy and nothing is promoted. Yields the descriptor,
    closed on the way out."""
    fd = os.open(mnt / "a", flags)
    try:
        os.sync()
        servers[lost].kill()
        assert within(READ_TIMEOUT, "metadata changes with a member dead", make_changes, mnt, 20) == [0, 0]
        alive(m)
        assert devices(mnt)[lost]["state"] == "failed", devices(mnt)
        within(READ_TIMEOUT, "views while the array is held", check_all_views, mnt / "a", arr, 5)
        assert read_json(f"{mnt}/a@/info")["members"] == [lost]
        assert stats(mnt)["copies"]["promoted_over_a_lost_member"] == 0
        yield fd
    finally:
        os.close(fd)


@hang_is_known_bug
def test_raid0_member_dies_under_an_open_array_its_next_write_promotes_the_copy(scratch_dir, nbd_servers):
    """An array open (a file descriptor, views read through it) when the
    member of its primary dies is promoted in place: reads are served from
    the copy meanwhile, and the first write through the open descriptor
    makes the copy the primary, lands there and is durable at fsync. (Before,
    such an array kept its lost primary while it was held: its writes failed
    with EIO until it was closed and loaded again.)"""
    servers, uris, mnt, arr = two_member_volume(scratch_dir, nbd_servers, 1605, (48, 64, 40))
    with running(uris, mnt) as m:
        lost, kept = array_with_a_copy(mnt, arr)
        with held_when_its_member_dies(m, mnt, servers, lost, arr, os.O_RDWR) as fd:
            # A write through the descriptor held all along.
            within(READ_TIMEOUT, "a write through the held descriptor", write_row_through, fd, arr, 3, -3.0)
            info = read_json(f"{mnt}/a@/info")
            assert info["members"] == [kept] and "promoted" in info["layout_rule"], info
            assert stats(mnt)["copies"]["promoted_over_a_lost_member"] == 1, stats(mnt)["copies"]
            within(READ_TIMEOUT, "views after the write", check_all_views, mnt / "a", arr, 6)
            within(READ_TIMEOUT, "a second write", write_row_through, fd, arr, 40, 4.5)
        # Closed and loaded again: promoted once, every byte there.
        within(READ_TIMEOUT, "views after the close", check_all_views, mnt / "a", arr, 7)
        write_row(mnt / "a", arr, 11, -1.5)
        within(READ_TIMEOUT, "views after a write", check_all_views, mnt / "a", arr, 8)
        assert stats(mnt)["copies"]["promoted_over_a_lost_member"] == 1
        alive(m)
    # A degraded remount sees the promotion and every write.
    with running(uris, mnt, options=("degraded",)) as m:
        assert read_json(f"{mnt}/a@/info")["members"] == [kept]
        within(READ_TIMEOUT, "views after the remount", check_all_views, mnt / "a", arr, 9)
        alive(m)


@hang_is_known_bug
def test_raid0_member_dies_under_a_held_array_promoted_once_it_is_let_go(scratch_dir, nbd_servers):
    """An array held (a file descriptor) but never written when the member
    of its primary dies keeps its placements while held, and is loaded
    afresh at its first use after it is closed: the copy is promoted then,
    once. (The let-go used to be one-shot: the first array load after the
    loss let go of the idle arrays only, so an array held at that moment
    kept its primary until it fell out of the recently used ones.)"""
    servers, uris, mnt, arr = two_member_volume(scratch_dir, nbd_servers, 1606, (48, 64, 40))
    with running(uris, mnt) as m:
        lost, kept = array_with_a_copy(mnt, arr)
        with held_when_its_member_dies(m, mnt, servers, lost, arr, os.O_RDONLY):
            pass
        within(READ_TIMEOUT, "views after the close", check_all_views, mnt / "a", arr, 6)
        info = read_json(f"{mnt}/a@/info")
        assert info["members"] == [kept] and "promoted" in info["layout_rule"], info
        assert stats(mnt)["copies"]["promoted_over_a_lost_member"] == 1, stats(mnt)["copies"]
        within(READ_TIMEOUT, "views again", check_all_views, mnt / "a", arr, 7)
        assert stats(mnt)["copies"]["promoted_over_a_lost_member"] == 1
        alive(m)


@hang_is_known_bug
def test_raid0_member_dies_under_unflushed_writes_they_reach_the_promoted_copy(scratch_dir, nbd_servers):
    """Writes not yet written back when the member of the array's primary
    dies are not lost: the next write promotes the copy in place and carries
    the primary's dirty cells over to it, and fsync then makes all of them
    durable on the survivor. (Before, the array's writes failed with EIO
    until it was closed, and the unflushed ones were lost.)"""
    servers, uris, mnt, arr = two_member_volume(scratch_dir, nbd_servers, 1607, (48, 64, 40))
    with running(uris, mnt) as m:
        lost, kept = array_with_a_copy(mnt, arr)
        fd = os.open(mnt / "a", os.O_RDWR)
        try:
            # Rows 7 and 30 written, not flushed, then the member dies.
            write_row_through(fd, arr, 7, 7.5, fsync=False)
            write_row_through(fd, arr, 30, -30.25, fsync=False)
            servers[lost].kill()
            assert within(READ_TIMEOUT, "metadata changes with a member dead", make_changes, mnt, 20) == [0, 0]
            alive(m)
            assert devices(mnt)[lost]["state"] == "failed", devices(mnt)
            within(READ_TIMEOUT, "a write and fsync after the loss", write_row_through, fd, arr, 9, -9.0)
            info = read_json(f"{mnt}/a@/info")
            assert info["members"] == [kept] and "promoted" in info["layout_rule"], info
            assert stats(mnt)["copies"]["promoted_over_a_lost_member"] == 1, stats(mnt)["copies"]
            within(READ_TIMEOUT, "views after the write", check_all_views, mnt / "a", arr, 10)
        finally:
            os.close(fd)
        alive(m)
    # Durable on the survivor: a degraded remount reads every write.
    with running(uris, mnt, options=("degraded",)) as m:
        assert read_json(f"{mnt}/a@/info")["members"] == [kept]
        within(READ_TIMEOUT, "views after the remount", check_all_views, mnt / "a", arr, 11)
        alive(m)
