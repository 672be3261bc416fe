"""A RAID 0 volume (metadata on member sets) whose member dies while it is
mounted: the daemon records the member failed in the survivors' superblocks
and the metadata goes on with its copy on the other members
(docs/on-disk-format.md, "Metadata on member sets"). Before, no metadata
change could be made durable: every sync of the metadata failed with EIO
until a remount. Members are nbdkit exports, so a member can die under the
running daemon."""
import errno
import os
import time

import numpy as np
import pytest

from mmfs_mount import fsck, fsck_path, make_array, random_array, read_bytes, read_json, run_tool
from test_daemon_volume import (READ_TIMEOUT, alive, check_all_views, devices, errors_text, hang_is_known_bug,
                                joined, mkfs_members, nbd_servers, running, scratch_dir, within)

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


@hang_is_known_bug
def test_raid0_member_dies_while_mounted_metadata_goes_on(scratch_dir, nbd_servers):
    servers = [nbd_servers() for _ in range(2)]
    uris = [s.uri for s in servers]
    mkfs_members(uris, 0)
    mnt = scratch_dir / "mnt"
    rng = np.random.default_rng(1604)
    arr = random_array(rng, (64, 96, 80), "float64")
    with running(uris, mnt) as m:
        make_array(mnt / "a", arr.shape, arr.dtype, "naive", arr, attrs={"copies": "naive:order=2,1,0"})
        wait_current(mnt / "a")
        info = read_json(f"{mnt}/a@/info")
        # The member of the array's primary dies; its copy lies on the other.
        assert len(info["members"]) == 1 and info["copies"][0]["members"] != info["members"], info
        lost = info["members"][0]
        kept = 1 - lost
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
        # A flush still goes to the dead member, whose writes are not durable:
        # EIO, or 0 when its queue held nothing to flush.
        assert all(r in (0, errno.EIO) for r in fsyncs), fsyncs
        # The array is served from its copy.
        within(READ_TIMEOUT, "views with the primary's member dead", check_all_views, mnt / "a", arr, 1)
        assert sorted(p for p in os.listdir(mnt) if p.startswith("e")) == sorted(f"e{i}" for i in range(40))
    # The survivor recorded it: a mount with the member gone lists it failed
    # and promotes the array's copy, which takes writes.
    with running(uris, mnt, options=("degraded",)) as m:
        assert devices(mnt)[lost]["state"] == "failed", devices(mnt)
        for i in range(40):
            assert os.getxattr(mnt / f"e{i}", "user.note") == str(i).encode()
        assert (mnt / "before").exists()
        within(READ_TIMEOUT, "views after the remount", check_all_views, mnt / "a", arr, 2)
        info = read_json(f"{mnt}/a@/info")
        assert info["members"] == [kept] and "promoted" in info["layout_rule"], info
        arr[5] = -1.0
        fd = os.open(mnt / "a", os.O_WRONLY)
        try:
            assert os.pwrite(fd, arr[5].tobytes(), 5 * arr[5].nbytes) == arr[5].nbytes
            os.fsync(fd)
        finally:
            os.close(fd)
        within(READ_TIMEOUT, "views after a write", check_all_views, mnt / "a", arr, 3)
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
