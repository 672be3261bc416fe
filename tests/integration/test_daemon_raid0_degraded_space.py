"""The space of a RAID 0 volume mounted without a member (mmfs -o degraded,
docs/copies-on-members.md): nothing new lands on the lost member, also
where files deleted on the degraded mount held sectors on it
(Allocator::set_withheld). Before, the deleted files' sectors there went
back to the free map and the next files were written onto the missing
member: their writes failed with ENODEV.

Every mount is unmounted, even on failure."""
import os

import numpy as np

from mmfs_mount import fsck, make_array, read_bytes, view
from test_daemon_volume import joined, mkfs_members, running
from test_daemon_volume import scratch_dir  # noqa: F401  (a fixture)

P = 4  # stripe members of the RAID 0 volume


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)
        os.fsync(f.fileno())


def test_raid0_degraded_space_freed_on_the_lost_member_is_never_used_again(scratch_dir):
    images = [scratch_dir / f"m{i}.img" for i in range(P)]
    mkfs_members(images, 0, "96M")
    mnt = scratch_dir / "mnt"
    rng = np.random.default_rng(191)
    old = [rng.bytes(12 << 20) for _ in range(4)]
    with running(images, mnt):
        for k, data in enumerate(old):
            write_file(mnt / f"old{k}", data)
    survivors = images[1:]
    os.unlink(images[0])
    new = [rng.bytes(12 << 20) for _ in range(4)]
    arr = rng.integers(-1000, 1000, size=(64, 64, 32)).astype("int32")
    with running(survivors, mnt, options=("degraded",)):
        # The old files span every member: deleted, their sectors on the
        # lost one are not handed out again.
        for k in range(len(old)):
            os.unlink(mnt / f"old{k}")
        for k, data in enumerate(new):
            write_file(mnt / f"new{k}", data)
        path = make_array(mnt / "a", arr.shape, "int32", "naive", arr)
        for k, data in enumerate(new):
            assert read_bytes(mnt / f"new{k}") == data, f"new{k} differs"
        assert read_bytes(path) == arr.tobytes()
        assert read_bytes(view(path, "slice", 2, 7)) == np.ascontiguousarray(arr[:, :, 7]).tobytes()
    with running(survivors, mnt):  # recorded failed: the same at the next mount
        for k, data in enumerate(new):
            assert read_bytes(mnt / f"new{k}") == data, f"remounted: new{k} differs"
        assert read_bytes(mnt / "a") == arr.tobytes()
    fsck(joined(survivors))
