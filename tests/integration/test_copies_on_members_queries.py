"""Queries of an indexed array with copies on a RAID 0 volume of four image
files that loses a member (docs/copies-on-members.md, "Cells lost with a
member"; docs/reference.md §5 queries), through the daemon.

The index is derived data on the volume's shared space: whichever member
the volume loses, an index that lay on it is built again from the data at
the array's first open on the degraded mount, and every query view equals
numpy. mmfsck --rebuild onto a blank image builds an index that lay on the
lost member anew from the data its copies put back, so the rebuilt volume
answers every query too. Each member is lost in turn, on a copy of the
images, so the member holding the index is among them (its .mmfs/errors
line says so, and mmfsck's report), as are the primary's and the copy's.

Every mount is unmounted, even on failure."""
import shutil
import subprocess

import numpy as np

from copies_support import wait_current
from mmfs_mount import fsck, make_array, read_bytes, setx, view
from test_copies_on_members import rebuild_onto_blank
from test_daemon_volume import errors_text, joined, mkfs_members, running
from test_daemon_volume import scratch_dir  # noqa: F401  (a fixture)

P = 4  # stripe members of the RAID 0 volume
CONDITIONS = ["==7", ">10&<20", "<3|>45", "!(>=25)"]
REBUILT = "bitmap index lay on the lost member: it was built again from the data"


def numpy_rows(arr, cond):
    x = arr
    return {"==7": x == 7, ">10&<20": (x > 10) & (x < 20), "<3|>45": (x < 3) | (x > 45), "!(>=25)": ~(x >= 25)}[cond]


def check_queries(path, arr, what):
    """count, coords and values of every condition, on the array and on a box, equal numpy."""
    for cond in CONDITIONS:
        mask = numpy_rows(arr, cond)
        got = int(read_bytes(view(path, "query", cond, "count")))
        assert got == int(mask.sum()), f"{what}{cond}: count {got}, numpy {int(mask.sum())}"
        coords = np.frombuffer(read_bytes(view(path, "query", cond, "coords")), dtype="<u8")
        expect = np.ravel_multi_index(np.nonzero(mask), arr.shape).astype("<u8")
        assert np.array_equal(np.sort(coords), expect), f"{what}{cond}: coords differ"
        values = np.frombuffer(read_bytes(view(path, "query", cond, "values")), dtype="<i4")
        assert np.array_equal(values, arr[mask]), f"{what}{cond}: values differ"
        box = mask[10:70, :, 5:40]
        got = int(read_bytes(view(path, "box", "10:70,:,5:40@", "query", cond, "count")))
        assert got == int(box.sum()), f"{what}box {cond}: count {got}, numpy {int(box.sum())}"


def indexed_array_with_a_copy(scratch_dir):
    """The array of int32s in [0, 50) with an e1 index and a copy, on four
    fresh image files; returns (images, mount point, the array)."""
    images = [scratch_dir / f"m{i}.img" for i in range(P)]
    mkfs_members(images, 0, "96M")
    mnt = scratch_dir / "mnt"
    rng = np.random.default_rng(181)
    arr = rng.integers(0, 50, size=(96, 80, 48)).astype("int32")
    with running(images, mnt):
        path = make_array(mnt / "q", arr.shape, "int32", "zorder", arr)
        setx(path, "index", "e1")
        setx(path, "copies", "naive:order=0,2,1")
        wait_current(path)
        check_queries(path, arr, "")
    return images, mnt, arr


def survivors_of(images, lost, run):
    """Copies in `run` of every image but member `lost`'s."""
    run.mkdir()
    survivors = []
    for i, image in enumerate(images):
        if i != lost:
            survivors.append(run / image.name)
            subprocess.run(["cp", "--sparse=always", str(image), str(survivors[-1])], check=True)
    return survivors


def test_raid0_indexed_array_answers_queries_whichever_member_is_lost(scratch_dir):
    images, mnt, arr = indexed_array_with_a_copy(scratch_dir)
    rebuilt_on = []
    for lost in range(P):
        run = scratch_dir / f"lose{lost}"
        survivors = survivors_of(images, lost, run)
        with running(survivors, mnt, options=("degraded",)):
            check_queries(mnt / "q", arr, f"member {lost} lost: ")
            if REBUILT in errors_text(mnt):
                rebuilt_on.append(lost)
        with running(survivors, mnt):  # recorded failed: the new index is the array's now
            check_queries(mnt / "q", arr, f"member {lost} lost, remounted: ")
            assert REBUILT not in errors_text(mnt), errors_text(mnt)
        fsck(joined(survivors))
        shutil.rmtree(run)
    assert rebuilt_on, "no member held the index: the test did not lose it"


def test_raid0_rebuild_builds_an_index_on_the_lost_member_anew(scratch_dir):
    """mmfsck --rebuild without a mount in between: the index that lay on
    the member is built from the data the copy put back, not listed lost."""
    images, mnt, arr = indexed_array_with_a_copy(scratch_dir)
    built_on = []
    for lost in range(P):
        run = scratch_dir / f"rebuild{lost}"
        survivors = survivors_of(images, lost, run)
        rc, out, err = rebuild_onto_blank(run / "new.img", survivors)
        assert rc == 0, f"member {lost}: mmfsck --rebuild: exit {rc}\n{out}{err}"
        assert "lost (no second copy)" not in out, out
        if "built 1 bitmap index(es) that lay on the member anew" in out:
            built_on.append(lost)
        rebuilt = list(survivors)
        rebuilt.insert(lost, run / "new.img")
        fsck(joined(rebuilt))
        with running(rebuilt, mnt):
            check_queries(mnt / "q", arr, f"member {lost} rebuilt: ")
        shutil.rmtree(run)
    assert built_on, "no member held the index: the test did not lose it"
