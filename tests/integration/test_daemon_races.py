"""Races between processes on one name (docs/reference.md §9: concurrent readers and writers
are safe). Here: an open racing the unlink of the same file.

The kernel looks the name up, then sends OPEN; an unlink from another process
can come between. The daemon used to register the open file anyway, for an
inode it had already freed: writes then committed checksum records for that
missing inode (`mmfsck` found "alternative cell checksums of missing inode",
the known bug of the metadata churn test) and took space no file held until
the next mount. The open must lose the race cleanly (ENOENT, as if the name
had been gone), and the volume stay clean with all its space back.
"""
import errno
import multiprocessing
import os
import time

from mmfs_mount import fsync_dir

SECONDS = 5.0  # the daemon before the fix left a stray record within 4 s every time (3 of 3 runs)


def writer(d, deadline):
    n = 0
    while time.time() < deadline:
        p = os.path.join(d, f"f{n % 3}")
        n += 1
        try:
            fd = os.open(p, os.O_WRONLY)
        except FileNotFoundError:
            try:
                fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
                os.write(fd, b"x" * 10000)
                os.close(fd)
            except FileNotFoundError:
                pass
            continue
        try:
            os.pwrite(fd, b"y" * 5000, 0)  # inside the file: a rewrite of a block holding data
        finally:
            os.close(fd)


def unlinker(d, deadline):
    n = 0
    while time.time() < deadline:
        try:
            os.unlink(os.path.join(d, f"f{n % 3}"))
        except FileNotFoundError:
            pass
        n += 1


def run(target, d, deadline):
    try:
        target(d, deadline)
    except OSError as e:  # anything but a lost race fails the test
        os._exit(10 + (e.errno or 0) % 100)
    os._exit(0)


def test_open_racing_unlink_never_reaches_a_freed_inode(volume):
    d = str(volume.mnt / "race")
    os.mkdir(d)
    fsync_dir(d)
    free = os.statvfs(volume.mnt).f_bfree
    ctx = multiprocessing.get_context("fork")
    deadline = time.time() + SECONDS
    procs = [ctx.Process(target=run, args=(f, d, deadline), daemon=True) for f in (writer, writer, unlinker)]
    try:
        for p in procs:
            p.start()
        for p in procs:
            p.join(SECONDS + 60)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()  # our own child, by its pid
                p.join(10)
    codes = [p.exitcode for p in procs]
    assert codes == [0, 0, 0], f"exit codes {codes} (10 + errno: an error other than ENOENT, e.g. " \
                               f"{10 + errno.ESTALE} for ESTALE)\n.mmfs/errors:\n{volume.errors()[-1500:]}"
    for name in os.listdir(d):
        os.unlink(os.path.join(d, name))
    os.rmdir(d)
    fsync_dir(volume.mnt)  # the extents of the removed files return to the allocator at this sync
    # Every file's space is free again in the running daemon (the last
    # RELEASEs reach it a moment after the closes).
    end = time.monotonic() + 5
    while os.statvfs(volume.mnt).f_bfree != free and time.monotonic() < end:
        time.sleep(0.05)
        fsync_dir(volume.mnt)
    assert os.statvfs(volume.mnt).f_bfree == free, \
        f"{free - os.statvfs(volume.mnt).f_bfree} blocks stay allocated after every file was removed"
    # The fixture's unmount runs mmfsck -n: no record of a missing inode may be left.
