"""Copies on a volume of several devices (docs/copies-on-members.md,
docs/reference.md "Copies"), through the daemon, on a RAID 0 volume of four
image files: each placement of an array (the primary and every copy) lies
on members of its own, so a lost member loses at most one copy of any cell.

* A@/info names each placement's members; A@/lbn through every copy names a
  volume sector whose member (mapped as geometry/striped.h maps it, with
  mmfs-geom) is one of that placement's and holds the element's bytes in
  its image file; A@/plan's requests lie on the serving placement's members.
* Every view through every placement equals numpy, before and after a
  remount; the sets' reads are counted in /.mmfs/stats.
* A new number of copies moves the primary; dropping the copies moves
  nothing; mmfsck finds the volume clean.
* The volume runs without a member (mmfs -o degraded): the metadata from its
  copy on the other members, arrays with copies whole, the rest EIO; then
  mmfsck --rebuild onto a blank image makes it whole again, the array's
  cells on the new member put back from its other placement.

Every mount is unmounted, even on failure."""
import errno
import os

import numpy as np

from copies_support import check_default_views, check_placement, info, wait_current
from mmfs_mount import fsck, fsck_path, getx, make_array, read_bytes, read_json, run_tool, setx, view
from test_daemon_volume import alive, errors_text, expect_refused, joined, mkfs_members, running, stats
from test_daemon_volume import scratch_dir  # noqa: F401  (a fixture)
from test_daemon_volume_redundancy import member_place

P = 4  # stripe members of the RAID 0 volume


def members_of_element(path, arr, k, idx, images):
    """The stripe member holding element idx of placement k, checked against its image's bytes."""
    vlbn, offset = map(int, read_bytes(view(path, "copy", f"{k}@", "lbn", ",".join(map(str, idx)))).split())
    member, mlbn = member_place(vlbn, P)
    with open(images[member], "rb") as f:
        f.seek(mlbn * 512 + offset)
        got = f.read(arr.itemsize)
    assert got == arr[idx].tobytes(), f"copy {k} element {idx}: member {member} sector {mlbn} holds {got!r}"
    return member


def check_members(path, arr, images, rng):
    """Each placement's elements on its own members, per A@/info; returns the members of each."""
    i = info(path)
    sets = [i["members"]] + [c["members"] for c in i["copies"]]
    for a, s in enumerate(sets):
        for b in range(a + 1, len(sets)):
            assert not set(s) & set(sets[b]), f"placements {a} and {b} share members: {sets}"
    idxs = [tuple(int(rng.integers(0, n)) for n in arr.shape) for _ in range(16)]
    idxs += [tuple(0 for _ in arr.shape), tuple(n - 1 for n in arr.shape)]
    for k, s in enumerate(sets):
        seen = {members_of_element(path, arr, k, idx, images) for idx in idxs}
        assert seen <= set(s), f"placement {k} has elements on members {sorted(seen)}, not only on {s}"
    return sets


def rebuild_onto_blank(blank, survivors, size=96 << 20):
    """mmfsck --rebuild onto a new blank image of `size` bytes: (exit code, stdout, stderr)."""
    with open(blank, "wb") as f:
        f.truncate(size)
    return run_tool(fsck_path(), "--rebuild", blank, *survivors, timeout=300)


def test_each_copy_lies_on_members_of_its_own(scratch_dir):
    images = [scratch_dir / f"m{i}.img" for i in range(P)]
    mkfs_members(images, 0, "96M")
    mnt = scratch_dir / "mnt"
    rng = np.random.default_rng(151)
    arr = (rng.standard_normal((96, 80, 48)) * 100).astype("int32")  # 1.5 MB: tracks on every member of a set
    with running(images, mnt):
        path = make_array(mnt / "a", arr.shape, "int32", "zorder", arr)
        assert info(path).get("members") is None  # alone, the array stripes over every member
        setx(path, "copies", "naive:order=0,2,1;hilbert")
        wait_current(path)
        sets = check_members(path, arr, images, rng)
        assert sets == [[0, 3], [1], [2]], sets
        before = stats(mnt)["data_sectors_read"]
        for k in range(3):
            check_placement(path, arr, k)
        # The sets' own devices' reads are the volume's reads too.
        assert stats(mnt)["data_sectors_read"] - before >= 3 * arr.nbytes // 512
        check_default_views(path, arr)
        # A@/plan shows volume sectors: every request of each placement's plan lies on its members.
        for k in range(3):
            p = read_json(view(path, "plan", "copy", f"{k}@", "slice", 2, 11))
            for batch in p["batches"]:
                for lbn, n in batch:
                    ends = {member_place(lbn, P)[0], member_place(lbn + n - 1, P)[0]}
                    assert ends <= set(sets[k]), (k, lbn, n, sets[k])
    fsck(joined(images))

    with running(images, mnt):
        path = mnt / "a"
        assert check_members(path, arr, images, rng) == [[0, 3], [1], [2]]
        for k in range(3):
            check_placement(path, arr, k, what="remounted: ")
        # One copy: two sets; the primary moves, the hilbert copy is built on its new set.
        setx(path, "copies", "hilbert")
        wait_current(path)
        assert check_members(path, arr, images, rng) == [[0, 2], [1, 3]]
        check_placement(path, arr, 0)
        check_placement(path, arr, 1)
        # Without copies the primary stays where it is.
        lbn_before = read_bytes(view(path, "copy", "0@", "lbn", "5,6,7"))
        setx(path, "copies", "none")
        i = info(path)
        assert i["members"] == [0, 2] and not i.get("copies"), i
        assert read_bytes(view(path, "lbn", "5,6,7")) == lbn_before
        check_default_views(path, arr)
        # Writes land on the set's members and read back.
        arr[3] = -7
        with open(path, "r+b") as f:
            f.seek(3 * 80 * 48 * 4)
            f.write(arr[3].tobytes())
            os.fsync(f.fileno())
        check_default_views(path, arr, "after a write: ")
    fsck(joined(images))


def test_raid0_runs_without_a_member_and_serves_arrays_with_copies(scratch_dir):
    """A RAID 0 volume of four images loses member 1 (its image deleted): refused
    without -o degraded (naming the member and the option); with it, the
    metadata comes from its copy on the other members, an array with a copy
    on other members reads whole through every view and takes writes, data
    with no other copy on member 1 reads as EIO, new files land on the
    survivors; the next mount needs no option, and mmfsck checks it clean."""
    images = [scratch_dir / f"m{i}.img" for i in range(P)]
    mkfs_members(images, 0, "96M")
    mnt = scratch_dir / "mnt"
    rng = np.random.default_rng(163)
    arr = (rng.standard_normal((96, 80, 48)) * 100).astype("int32")
    solo = rng.standard_normal((64, 64, 64))
    plain = rng.bytes(2 << 20)
    with running(images, mnt):
        path = make_array(mnt / "c", arr.shape, "int32", "zorder", arr)
        setx(path, "copies", "naive:order=0,2,1")
        wait_current(path)
        assert check_members(path, arr, images, rng) == [[0, 2], [1, 3]]
        make_array(mnt / "solo", solo.shape, "float64", "naive", solo)
        (mnt / "plain").write_bytes(plain)
    fsck(joined(images))

    survivors = [images[0], images[2], images[3]]
    os.unlink(images[1])
    expect_refused(mnt, survivors, "member 1 of the 4-device volume", "missing", "-o degraded")
    with running(survivors, mnt, options=("degraded",)) as m:
        s = stats(mnt)
        assert s["degraded"] is True and s["devices"][1]["state"] == "failed", s["devices"]
        assert "member 1 is missing" in errors_text(mnt), errors_text(mnt)
        path = mnt / "c"
        check_default_views(path, arr, "degraded: ")
        check_placement(path, arr, 0, what="degraded: ")
        try:  # through the copy on members 1 and 3 alone: the lost member's error
            read_bytes(view(path, "copy", 1))
            raise AssertionError("copy 1 read whole without member 1")
        except OSError as e:
            assert e.errno in (errno.EIO, errno.ENODEV), e
        for name in ("solo", "plain"):  # one copy, striped over every member
            try:
                read_bytes(mnt / name)
                raise AssertionError(f"{name} read whole without member 1")
            except OSError as e:
                assert e.errno in (errno.EIO, errno.ENODEV), (name, e)
        # Writes go on: the array (its primary lies on the survivors), a new file.
        arr[10] = 12345
        with open(path, "r+b") as f:
            f.seek(10 * 80 * 48 * 4)
            f.write(arr[10].tobytes())
            os.fsync(f.fileno())
        check_default_views(path, arr, "degraded, after a write: ")
        fresh = rng.bytes(3 << 20)
        (mnt / "after").write_bytes(fresh)
        assert (mnt / "after").read_bytes() == fresh
        alive(m)
    # Recorded failed in the survivors' superblocks: no option needed now.
    with running(survivors, mnt):
        assert stats(mnt)["degraded"] is True
        check_default_views(mnt / "c", arr, "remounted degraded: ")
        assert (mnt / "after").read_bytes() == fresh
    fsck(joined(survivors))

    # mmfsck --rebuild onto a blank image: the metadata copy from its twin, the
    # array's cells that lay on member 1 from its other placement; what had no
    # second copy is listed as lost (exit 4).
    blank = scratch_dir / "new1.img"
    rc, out, err = rebuild_onto_blank(blank, survivors)
    assert rc == 4, f"mmfsck --rebuild: exit {rc}\n{out}{err}"
    assert "rebuilt member 1 of RAID 0 volume" in out and "array(s) with copies" in out, out
    assert "lost (no second copy): /solo" in out and "lost (no second copy): /plain" in out, out
    assert "not repaired" not in out, out
    rebuilt = [images[0], blank, images[2], images[3]]
    fsck(joined(rebuilt))
    with running(rebuilt, mnt):
        s = stats(mnt)
        assert s["degraded"] is False and all(d["state"] == "ok" for d in s["devices"]), s["devices"]
        path = mnt / "c"
        for k in range(2):
            check_placement(path, arr, k, what="rebuilt: ")
        check_default_views(path, arr, "rebuilt: ")
        assert (mnt / "after").read_bytes() == fresh
        try:
            read_bytes(mnt / "solo")
            raise AssertionError("solo read whole after its member was lost")
        except OSError as e:
            assert e.errno == errno.EIO, e


def test_raid0_without_the_primarys_member_promotes_a_copy_and_takes_writes(scratch_dir):
    """A RAID 0 volume loses member 0, where the array's primary lay: the
    degraded mount promotes the copy on members 1 and 3 at the array's first
    open (A@/info, the xattrs, /.mmfs/stats and .mmfs/errors say so), every
    view equals numpy, writes land and survive a remount, and mmfsck --rebuild
    onto a blank image brings the old primary (now copy 1) back current."""
    images = [scratch_dir / f"m{i}.img" for i in range(P)]
    mkfs_members(images, 0, "96M")
    mnt = scratch_dir / "mnt"
    rng = np.random.default_rng(173)
    arr = (rng.standard_normal((96, 80, 48)) * 100).astype("int32")
    with running(images, mnt):
        path = make_array(mnt / "c", arr.shape, "int32", "zorder", arr)
        setx(path, "copies", "naive:order=0,2,1")
        wait_current(path)
        i = info(path)
        assert i["members"] == [0, 2] and i["copies"][0]["members"] == [1, 3], i
    survivors = images[1:]
    os.unlink(images[0])
    with running(survivors, mnt, options=("degraded",)) as m:
        path = mnt / "c"
        i = info(path)
        assert i["layout"] == "naive" and i["members"] == [1, 3] and "member_lost" not in i, i
        assert "promoted from copy 1" in i["layout_rule"], i["layout_rule"]
        c = i["copies"][0]
        assert c["layout"] == "zorder" and c["members"] == [0, 2], c
        assert c["state"] == "behind" and c["member_lost"] is True, c
        assert getx(path, "layout") == "naive" and getx(path, "copies") == "zorder", getx(path, "copies")
        assert stats(mnt)["copies"]["promoted_over_a_lost_member"] == 1
        assert "copy 1 (naive, members 1,3) is the primary now" in errors_text(mnt), errors_text(mnt)
        check_default_views(path, arr, "promoted: ")
        check_placement(path, arr, 0, what="promoted: ")
        arr[10] = 12345
        arr[:, 7, :] = -3
        with open(path, "r+b") as f:
            f.seek(10 * 80 * 48 * 4)
            f.write(arr[10].tobytes())
            for r in range(arr.shape[0]):
                f.seek((r * 80 + 7) * 48 * 4)
                f.write(arr[r, 7].tobytes())
            os.fsync(f.fileno())
        check_default_views(path, arr, "promoted, after writes: ")
        assert "copies_error" not in info(path), info(path)  # the catch-up waits for the member
        alive(m)
    with running(survivors, mnt):  # recorded failed: no option; nothing more to promote
        assert stats(mnt)["copies"]["promoted_over_a_lost_member"] == 0
        check_default_views(mnt / "c", arr, "remounted degraded: ")
    fsck(joined(survivors))

    blank = scratch_dir / "new0.img"
    rc, out, err = rebuild_onto_blank(blank, survivors)
    assert rc == 0, f"mmfsck --rebuild: exit {rc}\n{out}{err}"
    assert "rebuilt member 0 of RAID 0 volume" in out and "lost (no second copy)" not in out, out
    rebuilt = [blank] + survivors
    fsck(joined(rebuilt))
    with running(rebuilt, mnt):
        path = mnt / "c"
        wait_current(path)
        i = info(path)
        assert i["layout"] == "naive" and i["copies"][0]["state"] == "current", i
        assert "member_lost" not in i["copies"][0], i
        for k in range(2):
            check_placement(path, arr, k, what="rebuilt: ")
        check_default_views(path, arr, "rebuilt: ")
        assert check_members(path, arr, rebuilt, rng) == [[1, 3], [0, 2]]


def test_mloc_images_lie_on_their_members_and_survive_a_lost_one(scratch_dir):
    """On a RAID 0 volume of four images: an array with an mloc copy and an mloc
    array with a copy each keep every image on its placement's members
    (A@/info, and the sectors of its extent map); every view through every
    placement equals numpy; losing a member (mount -o degraded) loses at most
    one placement of each, and mmfsck --rebuild encodes the lost images anew."""
    images = [scratch_dir / f"m{i}.img" for i in range(P)]
    mkfs_members(images, 0, "96M")
    mnt = scratch_dir / "mnt"
    rng = np.random.default_rng(181)
    arr = rng.standard_normal((64, 48, 40))
    marr = rng.standard_normal((48, 40, 32))
    with running(images, mnt):
        path = make_array(mnt / "a", arr.shape, "float64", "hilbert", arr)
        setx(path, "copies", "mloc:priority=M-V-S")  # uncompressed: A@/lbn names its bytes' sectors
        mloc = make_array(mnt / "m", marr.shape, "float64", "mloc", marr)
        setx(mloc, "copies", "naive")
        for p, a in ((path, arr), (mloc, marr)):
            wait_current(p)
            i = info(p)
            assert i["members"] == [0, 2] and i["copies"][0]["members"] == [1, 3], i
            for k in range(2):
                check_placement(p, a, k)
        assert info(mloc)["mloc"]["chunks"] >= 1  # the primary is an image (sealed)
        # The member holding the start of a's mloc copy: the one to lose.
        vlbn = int(read_bytes(view(path, "copy", "1@", "lbn", "0,0,0")).split()[0])
        lost = member_place(vlbn, P)[0]
        assert lost in (1, 3), lost
    fsck(joined(images))

    survivors = [im for i, im in enumerate(images) if i != lost]  # one placement of each array
    os.unlink(images[lost])
    with running(survivors, mnt, options=("degraded",)) as m:
        for name, a in (("a", arr), ("m", marr)):
            check_default_views(mnt / name, a, f"{name} degraded: ")
        alive(m)

    blank = scratch_dir / f"new{lost}.img"
    rc, out, err = rebuild_onto_blank(blank, survivors)
    assert rc == 0, f"mmfsck --rebuild: exit {rc}\n{out}{err}"
    assert "repaired" in out and "array(s) with copies" in out, out
    rebuilt = survivors[:lost] + [blank] + survivors[lost:]
    fsck(joined(rebuilt))
    with running(rebuilt, mnt):
        for name, a in (("a", arr), ("m", marr)):
            wait_current(mnt / name)
            for k in range(2):
                check_placement(mnt / name, a, k, what=f"{name} rebuilt: ")


def test_mloc_primary_on_a_lost_member_is_served_promoted_and_sealed_anew(scratch_dir):
    """A sealed mloc array with a naive copy loses the member its image lies
    on: a read-only degraded mount opens it all the same (the image's
    directory does not load) and serves every view from the copy; a
    read-write one promotes the copy, the image becomes copy 1, behind, and
    writes land; mmfsck --rebuild encodes the image anew on the new member."""
    images = [scratch_dir / f"m{i}.img" for i in range(P)]
    mkfs_members(images, 0, "96M")
    mnt = scratch_dir / "mnt"
    rng = np.random.default_rng(191)
    arr = rng.standard_normal((32, 32, 16))
    with running(images, mnt):
        path = make_array(mnt / "m", arr.shape, "float64", "mloc", arr)
        setx(path, "copies", "naive")
        wait_current(path)
        i = info(path)
        assert i["members"] == [0, 2] and i["copies"][0]["members"] == [1, 3], i
        assert i["mloc"]["chunks"] >= 1  # sealed: the primary is an image
        # A small image lies on one member of its set: that one is lost.
        on = {member_place(int(read_bytes(view(path, "copy", "0@", "lbn", e)).split()[0]), P)[0]
              for e in ("0,0,0", "31,31,15", "16,8,4")}
        assert len(on) == 1 and on <= {0, 2}, on
        lost = on.pop()
    survivors = [im for i, im in enumerate(images) if i != lost]
    os.unlink(images[lost])

    with running(survivors, mnt, options=("degraded", "ro")) as m:
        path = mnt / "m"
        i = info(path)
        assert "does not load" in i.get("unreadable", ""), i
        assert i["layout"] == "mloc" and stats(mnt)["copies"]["promoted_over_a_lost_member"] == 0, i
        check_default_views(path, arr, "read-only degraded: ")
        check_placement(path, arr, 1, what="read-only degraded: ")
        try:
            read_bytes(view(path, "copy", "0@", "slice", "0", "3"))
            raise AssertionError("the lost primary read through A@/copy/0@")
        except OSError as e:
            assert e.errno == errno.EIO, e
        assert "mloc image does not load" in errors_text(mnt), errors_text(mnt)
        alive(m)

    with running(survivors, mnt, options=("degraded",)) as m:
        path = mnt / "m"
        i = info(path)
        assert i["layout"] == "naive" and "promoted from copy 1" in i["layout_rule"], i
        c = i["copies"][0]
        assert c["layout"] == "mloc" and c["state"] == "behind" and c["member_lost"] is True, c
        assert stats(mnt)["copies"]["promoted_over_a_lost_member"] == 1
        check_default_views(path, arr, "promoted: ")
        arr[3] = 7.5
        with open(path, "r+b") as f:
            f.seek(3 * 32 * 16 * 8)
            f.write(arr[3].tobytes())
            os.fsync(f.fileno())
        check_default_views(path, arr, "promoted, after a write: ")
        alive(m)

    blank = scratch_dir / f"new{lost}.img"
    rc, out, err = rebuild_onto_blank(blank, survivors)
    assert rc == 0, f"mmfsck --rebuild: exit {rc}\n{out}{err}"
    assert "lost (no second copy)" not in out, out
    rebuilt = survivors[:lost] + [blank] + survivors[lost:]
    fsck(joined(rebuilt))
    with running(rebuilt, mnt):
        path = mnt / "m"
        wait_current(path)
        i = info(path)
        assert i["layout"] == "naive" and i["copies"][0]["state"] == "current", i
        for k in range(2):
            check_placement(path, arr, k, what="rebuilt: ")
        check_default_views(path, arr, "rebuilt: ")
