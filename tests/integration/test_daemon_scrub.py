"""The scrub (docs/daemon.md, "Scrub"): `/.mmfs/scrub` reads every
sector of the volume once and verifies the checksummed ones. On a MEMS volume
it rides along the foreground's device batches (free bandwidth, MEMS paper
§5.1) and leaves their modeled time unchanged; on a disk it reads in idle
time. A sector corrupted behind the daemon's back is found and named, bad
commands are EINVAL, and an unmount ends a running scrub promptly."""
import errno
import json
import mmap
import os
import time

import numpy as np
import pytest

from mmfs_mount import (Volume, expect_errno, is_mounted, make_array, new_lines, random_array, read_bytes,
                        read_json, view)

SCRUB = ".mmfs/scrub"


@pytest.fixture
def volumes(volume_factory):
    """volumes(size, geometry, options) -> a mounted Volume (64 MiB by default),
    closed after the test whatever happened (mmfs_mount.volume_factory)."""
    return lambda size="64M", geometry="atlas10k3", options=(): volume_factory(size, geometry, options)


def status(vol):
    return read_json(vol.mnt / SCRUB)


def command(vol, text):
    """Writes one command; returns None or the errno it failed with."""
    fd = os.open(vol.mnt / SCRUB, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, (text + "\n").encode())
        return None
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def wait_for(vol, predicate, timeout, what, poke=None):
    """Polls the status until predicate(status) holds; `poke()` runs between polls."""
    deadline = time.monotonic() + timeout
    while True:
        st = status(vol)
        if predicate(st):
            return st
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s; status: {json.dumps(st, indent=1)[:3000]}")
        if poke:
            poke(st)
        time.sleep(0.02)


def lbn_of(array, idx):
    return int(read_bytes(view(array, "lbn", ",".join(map(str, idx)))).split()[0])


def corrupt(vol, lbn, sector_size=512):
    """Overwrites the middle of sector `lbn` in the image, the daemon unmounted."""
    was_mounted = vol.is_mounted
    if was_mounted:
        vol.unmount()
    with open(vol.image, "r+b") as f:
        f.seek(lbn * sector_size + 100)
        f.write(b"scrub me: garbage!")
    if was_mounted:
        vol.mount()


def finding_for(st, lbn):
    return [e for e in st["error_list"] if any(start <= lbn < start + n for start, n in e["lbns"])]


def test_control_file_reads_json_and_is_the_one_writable_one(volumes):
    vol = volumes()
    st = status(vol)
    assert st["state"] == "idle" and st["mode"] == "idle-time"
    assert "no free bandwidth" in st["how"]
    assert st["sectors_total"] == (64 << 20) // 512 and st["progress"] == 0
    assert os.stat(vol.mnt / SCRUB).st_mode & 0o777 == 0o600  # root's: docs/daemon.md, "Permissions"
    assert "scrub" in os.listdir(vol.mnt / ".mmfs")
    expect_errno(errno.EROFS, os.open, vol.mnt / ".mmfs" / "errors", os.O_WRONLY)
    expect_errno(errno.EROFS, os.open, vol.mnt / ".mmfs" / "stats", os.O_RDWR)
    expect_errno(errno.EROFS, os.chmod, vol.mnt / SCRUB, 0o644)


def test_bad_commands_are_einval_and_explained(volumes):
    vol = volumes(geometry="mems-g2")
    for bad in ("bogus", "start now", "STOP", "", "start idle-time please"):
        before = vol.errors()
        assert command(vol, bad) == errno.EINVAL, bad
        added = new_lines(before, vol.errors())
        assert any("/.mmfs/scrub" in line and "accepted: start" in line for line in added), (bad, added)
    assert status(vol)["state"] == "idle"
    # A running scrub is not started twice; stop is always accepted.
    assert command(vol, "start") is None
    assert status(vol)["state"] == "running"
    assert command(vol, "start") == errno.EBUSY
    assert command(vol, "stop") is None and command(vol, "stop") is None
    assert status(vol)["state"] == "stopped"
    # Free bandwidth needs equivalence classes.
    disk = volumes()
    assert command(disk, "start free-bandwidth") == errno.ENOTSUP
    assert "needs a MEMS volume" in disk.errors()


def test_idle_time_scrub_covers_a_disk_and_names_a_corrupted_sector(volumes):
    vol = volumes()
    rng = np.random.default_rng(17)
    arr = random_array(rng, (64, 64, 64), "float64")  # 4 KiB cells: eight sectors each
    path = make_array(vol.mnt / "a", arr.shape, "float64", data=arr)
    (vol.mnt / "f").write_bytes(rng.bytes(300_000))
    assert command(vol, "start") is None
    st = wait_for(vol, lambda s: s["state"] == "done", 30, "a clean scrub")
    assert st["mode"] == "idle-time" and st["progress"] == 1.0
    assert st["sectors_scanned"] == st["sectors_total"] and st["errors"] == 0
    cells = arr.nbytes // 4096 + -(-300_000 // 4096) + 2  # the array's cells, the file's blocks, two superblocks
    assert st["cells_verified"] == cells, st

    bad = lbn_of(path, (10, 20, 30))
    corrupt(vol, bad)
    before = vol.errors()
    assert command(vol, "start") is None
    st = wait_for(vol, lambda s: s["state"] == "done", 30, "the scrub of the damaged volume")
    assert st["errors"] == 1 and st["progress"] == 1.0, st
    [finding] = finding_for(st, bad)
    assert finding["path"] == "/a" and "failed its checksum" in finding["what"] and "cell" in finding["what"]
    added = new_lines(before, vol.errors())
    assert any(line.startswith("EIO /a: scrub:") and "failed its checksum" in line for line in added), added
    # The same cell read by a client is an EIO too (the read path agrees).
    expect_errno(errno.EIO, read_bytes, view(path, "box", "10,20,30"))
    # Nothing could mend it (no copy): the recheck after the scrub leaves it open.
    st = wait_for(vol, lambda s: s["recheck"]["state"] == "idle", 30, "the recheck")
    assert st["errors_resolved"] == 0 and "resolved" not in finding_for(st, bad)[0], st


def test_recheck_resolves_a_finding_once_its_cell_is_rewritten(volumes):
    """A finding is damage the scan saw; once what it names is mended (here
    the user writes the array again) `recheck` reads it again and marks it
    resolved, so `errors - errors_resolved` is the damage still there. The
    same recheck runs by itself after each scrub's repairs."""
    vol = volumes()
    assert command(vol, "recheck") == errno.EINVAL  # no scrub yet
    assert "no scrub has run" in vol.errors()
    arr = random_array(np.random.default_rng(19), (64, 64, 64), "float64")
    path = make_array(vol.mnt / "c", arr.shape, "float64", data=arr)
    bad = lbn_of(path, (33, 5, 60))
    corrupt(vol, bad)
    assert command(vol, "start") is None
    assert command(vol, "recheck") == errno.EBUSY  # the scan is still running
    st = wait_for(vol, lambda s: s["state"] == "done" and s["recheck"]["state"] == "idle", 60,
                  "the scrub and its recheck")
    [finding] = finding_for(st, bad)
    assert "failed its checksum" in finding["what"] and "resolved" not in finding, finding
    assert st["errors"] == 1 and st["errors_resolved"] == 0, st
    # The user writes the array again: every cell rewritten, with its checksum.
    with open(path, "r+b") as f:
        f.write(arr.tobytes())
        os.fsync(f.fileno())
    assert read_bytes(path) == arr.tobytes()
    assert command(vol, "recheck") is None
    st = wait_for(vol, lambda s: s["recheck"]["state"] == "idle" and s["errors_resolved"] == 1, 30,
                  "the recheck after the rewrite")
    [finding] = finding_for(st, bad)
    assert "resolved" in finding and "failed its checksum" in finding["what"], finding
    assert st["errors"] == 1, st
    # A stopped scrub's findings are partial: no recheck of them.
    assert command(vol, "start") is None and command(vol, "stop") is None
    assert command(vol, "recheck") == errno.EINVAL


def test_free_bandwidth_leaves_the_modeled_time_unchanged(volumes):
    vol = volumes(geometry="mems-g2", options=("simulate",))
    rng = np.random.default_rng(5)
    arr = random_array(rng, (256, 256), "float64")
    path = make_array(vol.mnt / "a", arr.shape, "float64", attrs={"cell": "8,8"}, data=arr)
    (vol.mnt / "f").write_bytes(rng.bytes(200_000))
    buf = mmap.mmap(-1, 4096)

    def workload():
        # Single cells through views the chunk cache cannot hold (20 > 6 per
        # array) and O_DIRECT blocks of a plain file: the same device batches each time.
        for i in range(20):
            read_bytes(view(path, "box", f"{(i * 37) % 256},{(i * 91) % 256}"))
        fd = os.open(vol.mnt / "f", os.O_RDONLY | os.O_DIRECT)
        try:
            for k in range(10):
                os.preadv(fd, [buf], 4096 * 3 * k)
        finally:
            os.close(fd)

    def measured():
        before = read_json(vol.mnt / ".mmfs" / "stats")
        workload()
        after = read_json(vol.mnt / ".mmfs" / "stats")
        return {k: after[k] - before[k] for k in ("modeled_ms", "requests", "scrub_ride_along_sectors",
                                                   "scrub_own_sectors")}

    measured()  # the device's state (the sled) at the workload's end, as before every run below
    alone = measured()
    assert command(vol, "start") is None
    assert status(vol)["mode"] == "free-bandwidth"
    ridden = measured()
    st = status(vol)
    assert ridden["scrub_ride_along_sectors"] > 100, ridden
    assert ridden["scrub_own_sectors"] == 0 and alone["scrub_ride_along_sectors"] == 0
    assert ridden["requests"] == alone["requests"]
    assert ridden["modeled_ms"] == pytest.approx(alone["modeled_ms"], rel=1e-9, abs=1e-9), (alone, ridden)
    assert st["free_bandwidth"]["picked"] == ridden["scrub_ride_along_sectors"]
    assert st["cells_verified"] > 0 and st["errors"] == 0 and st["own_reads"] == 0


def test_free_bandwidth_finds_a_sector_corrupted_in_the_class_a_foreground_read_visits(volumes):
    vol = volumes(geometry="mems-g2")
    rng = np.random.default_rng(9)
    arr = random_array(rng, (256, 256), "float64")
    # Naive one-sector cells: the array fills whole rows of its tracks, so
    # every equivalence class it touches holds several of its cells.
    path = make_array(vol.mnt / "a", arr.shape, "float64", layout="naive", attrs={"cell": "8,8"}, data=arr)
    (vol.mnt / "f").write_bytes(rng.bytes(100_000))
    cells = {(i, j): lbn_of(path, (8 * i, 8 * j)) for i in range(32) for j in range(32)}
    bad_cell = (16, 16)
    bad = cells[bad_cell]
    klass = {int(x) for x in read_bytes(vol.mnt / ".mmfs" / "equivalent" / str(bad)).split()}
    assert bad in klass
    neighbours = [c for c, lbn in cells.items() if lbn in klass and c != bad_cell]
    assert len(neighbours) >= 3, "the array's other cells in the damaged sector's class"
    corrupt(vol, bad)
    assert command(vol, "start") is None
    st = status(vol)
    assert st["mode"] == "free-bandwidth" and "free LBNs" in st["how"]
    # Nothing is read without a foreground: the scrub has no requests of its own.
    time.sleep(0.2)
    assert status(vol)["sectors_scanned"] == 0

    reads = iter(range(10**6))

    def foreground(st):
        # One element of another cell of the class, a new view each time (a
        # device read) -- until the scrub suspects a cell: its second read
        # waits for the device to be idle.
        if st["suspects"]:
            time.sleep(0.05)
            return
        n = next(reads)
        i, j = neighbours[n % len(neighbours)]
        read_bytes(view(path, "box", f"{8 * i + (n // len(neighbours)) % 8},{8 * j}"))

    before = vol.errors()
    st = wait_for(vol, lambda s: finding_for(s, bad), 30, "the corrupted sector's finding", poke=foreground)
    [finding] = finding_for(st, bad)
    assert finding["lbn"] == bad and finding["path"] == "/a"
    assert finding["what"] == f"cell {16 * 32 + 16} of /a failed its checksum"
    assert st["sectors_by"]["free_bandwidth"] > 0 and st["state"] == "running"
    assert any(f"LBN {bad}" in line and "scrub" in line for line in new_lines(before, vol.errors()))
    # Found by a sector read for free in a foreground batch, then read once more on its own.
    stats = read_json(vol.mnt / ".mmfs" / "stats")
    assert stats["scrub_ride_along_sectors"] == st["free_bandwidth"]["picked"] > 0
    assert st["own_reads"] >= 1 and stats["scrub_own_sectors"] >= 1
    assert command(vol, "stop") is None and status(vol)["state"] == "stopped"


@pytest.mark.parametrize("geometry,options", [("mems-g2", ()), ("atlas10k3", ("simulate",))])
def test_unmount_while_running_exits_promptly(volumes, geometry, options):
    vol = volumes(size="256M", geometry=geometry, options=options)
    (vol.mnt / "f").write_bytes(os.urandom(1 << 20))
    assert command(vol, "start") is None
    time.sleep(0.3)  # the disk's scrub is reading (modeled tracks); the MEMS one waits for a foreground
    assert status(vol)["state"] == "running"
    proc = vol.mount_info.proc
    began = time.monotonic()
    vol.unmount()  # asserts exit status 0 and a clean mmfsck
    assert time.monotonic() - began < 10
    assert proc.returncode == 0 and not is_mounted(vol.mnt)
