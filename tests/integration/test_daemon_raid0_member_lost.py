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
        (mnt / "before").write_bytes(b"x" * 4096)
        os.sync()
        servers[1].kill()

        def changes():
            # Each one a metadata commit; the first that meets member 1 records it failed.
            for i in range(40):
                os.mkdir(mnt / f"d{i}")
                os.rename(mnt / f"d{i}", mnt / f"e{i}")
                os.setxattr(mnt / f"e{i}", "user.note", str(i).encode())
            return [try_fsync(mnt / f"e{i}") for i in range(3)]

        fsyncs = within(READ_TIMEOUT, "metadata changes with member 1 dead", changes)
        alive(m)
        devs = devices(mnt)
        assert devs[1]["state"] == "failed" and devs[1]["target"] == uris[1], devs
        assert devs[0]["state"] == "ok", devs
        errors = errors_text(mnt)
        assert any(uris[1] in line and "failed while the volume runs" in line for line in errors.splitlines()), errors
        # A flush still reaches the dead member, whose writes are not durable: EIO, or 0 once nothing is left to flush there.
        assert all(r in (0, errno.EIO) for r in fsyncs), fsyncs
        # The array is served from its copy on member 0 where its primary lay on member 1.
        within(READ_TIMEOUT, "views with member 1 dead", check_all_views, mnt / "a", arr, 1)
        assert sorted(p for p in os.listdir(mnt) if p.startswith("e")) == sorted(f"e{i}" for i in range(40))
    # The survivors recorded it: a mount with the member gone lists it failed.
    with running(uris, mnt, options=("degraded",)) as m:
        assert devices(mnt)[1]["state"] == "failed", devices(mnt)
        for i in range(40):
            assert os.getxattr(mnt / f"e{i}", "user.note") == str(i).encode()
        assert (mnt / "before").exists()
        within(READ_TIMEOUT, "views after the remount", check_all_views, mnt / "a", arr, 2)
        alive(m)
    # mmfsck --rebuild puts a fresh export in its place: the array's cells
    # come back from its copy; a plain file's blocks on the member are lost,
    # and said so (exit 4).
    fresh = nbd_servers()
    rc, out, err = run_tool(fsck_path(), "--rebuild", fresh.uri, uris[0], timeout=300)
    lost = [line for line in out.splitlines() if line.startswith("lost")]
    assert "rebuilt member 1" in out and (rc, lost) in ((0, []), (4, ["lost (no second copy): /before: file blocks"])), \
        f"mmfsck --rebuild {fresh.uri}: exit {rc}\n{out}{err}"
    rebuilt = [uris[0], fresh.uri]
    with running(rebuilt, mnt) as m:
        assert all(d["state"] == "ok" for d in devices(mnt)), devices(mnt)
        assert np.frombuffer(read_bytes(mnt / "a"), arr.dtype).reshape(arr.shape).tobytes() == arr.tobytes()
        assert os.getxattr(mnt / "e39", "user.note") == b"39"
        if lost:
            os.unlink(mnt / "before")
    fsck(joined(rebuilt))
