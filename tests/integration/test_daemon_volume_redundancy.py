"""Redundancy of volumes of several devices (docs/reference.md, mount option
`degraded`; docs/daemon.md, "Scrub"), through the daemon, on image files:

* `mmfs -o degraded` mounts a RAID 1 volume whose member is missing, blank or
  a path that no longer opens: refused without the option (naming the member
  and the option), served from the mirrors with it (views equal numpy,
  writes go on), recorded in the survivors' superblocks so the next mount
  needs no option; `mmfsck --rebuild` onto the blank image makes it
  byte-identical to its mirror and the volume whole again.
* A cell damaged on one side of a RAID 1 mirror (bytes flipped in one image
  at the member sector the striped geometry maps the cell to) never reaches
  a reader; the scrub reads both sides and rewrites each damaged cell from
  the other, so the two images agree again.

Every mount is unmounted, even on failure."""
import json
import os
import time

import numpy as np

from mmfs_mount import (assert_array_bytes, fsck, fsck_path, geom_path, make_array, mounted, random_array,
                        read_bytes, run_tool, start_daemon, stop_daemon, view)
from test_daemon_volume import (GEOMETRY, alive, check_all_views, errors_text, expect_refused, joined,
                                mkfs_members, running, stats)
from test_daemon_volume import scratch_dir  # noqa: F401  (a fixture)


def test_degraded_mount_of_raid1_images_and_rebuild(scratch_dir):
    """mmfs -o degraded on a RAID 1 volume of image files whose member 2 is
    missing, then blank: refused without the option (naming the member and
    the option), mounted with it; every byte is served from the mirror,
    writes go on, /.mmfs/stats and /.mmfs/errors say what is degraded, and
    mmfsck --rebuild onto the blank image makes the pair identical again."""
    a = [scratch_dir / f"a{i}.img" for i in range(4)]
    mkfs_members(a, 1, "96M")
    mnt = scratch_dir / "mnt"
    rng = np.random.default_rng(29)
    arrays = {"hil": random_array(rng, (24, 64, 96), "float64"), "naive": random_array(rng, (200, 300), "int32")}
    with mounted(joined(a), mnt):
        make_array(mnt / "hil", arrays["hil"].shape, "float64", "hilbert", arrays["hil"])
        make_array(mnt / "naive", arrays["naive"].shape, "int32", "naive", arrays["naive"])
        (mnt / "plain").write_bytes(b"before " * 1000)

    survivors = [a[0], a[1], a[3]]
    expect_refused(mnt, survivors, "member 2 of the 4-device volume", "missing", "-o degraded")
    blank = scratch_dir / "blank.img"
    with open(blank, "wb") as f:
        f.truncate(96 << 20)
    with_blank = [a[0], a[1], blank, a[3]]
    expect_refused(mnt, with_blank, str(blank), "not an mmfs volume member", "-o degraded")

    gone = scratch_dir / "vanished.img"  # a device path that no longer opens: left out too
    m = start_daemon(joined([*with_blank, gone]), mnt, options=("degraded",))
    ok = False
    try:
        s = stats(mnt)
        assert s["degraded"] is True and s["devices"][2]["state"] == "failed", s["devices"]
        assert all(s["devices"][d]["state"] == "ok" for d in (0, 1, 3)), s["devices"]
        errs = errors_text(mnt)
        assert f"{blank}: holds no mmfs superblock" in errs and "member 2 is missing" in errs, errs
        assert str(gone) in errs and "(left out)" in errs, errs
        for name, arr in arrays.items():
            check_all_views(mnt / name, arr, 3)
        assert (mnt / "plain").read_bytes() == b"before " * 1000
        # Writes go on, to the survivors.
        arrays["hil"][5] = -1.5
        with open(mnt / "hil", "r+b") as f:
            f.seek(5 * 64 * 96 * 8)
            f.write(arrays["hil"][5].tobytes())
            os.fsync(f.fileno())
        (mnt / "plain").write_bytes(b"during " * 1000)
        arrays["new"] = random_array(rng, (40, 40, 40), "int16")
        make_array(mnt / "new", arrays["new"].shape, "int16", "zorder", arrays["new"])
        for name, arr in arrays.items():
            check_all_views(mnt / name, arr, 4)
        alive(m)
        ok = True
    finally:
        rc, problems = stop_daemon(m)
        if ok:
            assert not problems and rc == 0, f"unmount: {'; '.join(problems)}; exit {rc}\n{m.stderr()}"

    # The survivors recorded the failure: no option needed now, and mmfsck checks them clean.
    with running(survivors, mnt):
        assert stats(mnt)["degraded"] is True
        assert_array_bytes(read_bytes(mnt / "hil"), arrays["hil"], "hil")
    fsck(joined(survivors))

    rc, out, err = run_tool(fsck_path(), "--rebuild", blank, *survivors, timeout=300)
    assert rc == 0 and "rebuilt member 2" in out, f"mmfsck --rebuild: exit {rc}\n{out}{err}"
    rebuilt = [a[0], a[1], blank, a[3]]
    fsck(joined(rebuilt))
    # The pair is identical again past the superblocks (each names its own place).
    room = 64 << 10
    x, y = np.memmap(blank, np.uint8, "r"), np.memmap(a[3], np.uint8, "r")
    end = min(len(x), len(y)) - room
    assert np.array_equal(x[room:end], y[room:end]), "the rebuilt member differs from its mirror"
    del x, y
    with mounted(joined([a[3], blank, a[0], a[1]]), mnt):
        s = stats(mnt)
        assert s["degraded"] is False and all(d["state"] == "ok" for d in s["devices"]), s["devices"]
        for name, arr in arrays.items():
            check_all_views(mnt / name, arr, 5)
        assert (mnt / "plain").read_bytes() == b"during " * 1000


def member_place(vlbn, p, geometry=GEOMETRY):
    """(stripe member, member LBN) of volume LBN `vlbn` on a volume of p stripe
    members (geometry/striped.h: member track m holds VLBN v when
    L(m) <= v / p < L(m+1); its copies k = 0..p-1 follow each other)."""
    rc, out, err = run_tool(geom_path(), geometry, "boundaries", str(vlbn // p))
    assert rc == 0, err
    low, high = map(int, out.split())
    off = vlbn - p * low
    return off // (high - low + 1), low + off % (high - low + 1)


def test_raid1_repairs_a_damaged_cell_from_the_mirror(scratch_dir):
    """Bytes flipped in one side of a RAID 1 volume's mirror, inside cells of an
    array with no copies: every read sees the right bytes; the scrub reads
    both sides and rewrites each damaged cell from the other (self-healed
    lines and copies.self_healed_cells), so the two images agree again."""
    a = [scratch_dir / f"a{i}.img" for i in range(4)]
    mkfs_members(a, 1, "96M")
    mnt = scratch_dir / "mnt"
    shape = (32, 48, 40)
    arr = random_array(np.random.default_rng(31), shape, "float64")
    rng = np.random.default_rng(32)
    with mounted(joined(a), mnt):
        path = make_array(mnt / "m", shape, "float64", "multimap", arr, attrs={"cell": "4,4,4"})
        idxs = {tuple(int(rng.integers(0, s)) for s in shape) for _ in range(12)}
        places = [tuple(map(int, read_bytes(view(path, "lbn", ",".join(map(str, i)))).split())) for i in idxs]
    flipped = []
    for vlbn, offset in places:
        member, mlbn = member_place(vlbn, 2)
        side = len(flipped) % 2  # either side of the pair: the other one holds the cell intact
        image = a[2 * member + side]
        with open(image, "r+b") as f:
            f.seek(mlbn * 512 + offset)
            b = f.read(1)
            f.seek(mlbn * 512 + offset)
            f.write(bytes([b[0] ^ 0x96]))
        flipped.append((member, mlbn))
    m = start_daemon(joined(a), mnt)
    ok = False
    try:
        assert_array_bytes(read_bytes(mnt / "m"), arr, "m")
        for d in range(3):
            assert_array_bytes(read_bytes(view(mnt / "m", "slice", d, 3)), np.take(arr, 3, axis=d), f"slice/{d}/3")
        (mnt / ".mmfs" / "scrub").write_text("start\n")
        deadline = time.monotonic() + 120
        while True:
            st = json.loads((mnt / ".mmfs" / "scrub").read_text())
            if st["copies"]["state"] == "idle" and st["state"] != "running":
                break
            assert time.monotonic() < deadline, json.dumps(st)[:2000]
            time.sleep(0.05)
        # The sector scan covered the volume's own space and found nothing but the damage repaired.
        assert st["progress"] == 1.0 and st["sectors_scanned"] >= st["sectors_total"], json.dumps(st)[:2000]
        others = [line for line in errors_text(mnt).splitlines() if "self-healed:" not in line and "scrub:" in line]
        assert all("failed its checksum" in line for line in others), others[:5]
        healed = stats(mnt)["copies"]["self_healed_cells"]
        assert healed == len(flipped), (healed, len(flipped), st["copies"])
        lines = [line for line in errors_text(mnt).splitlines() if "self-healed:" in line]
        assert len(lines) == healed and all("of the mirror; served from side" in line for line in lines), \
            errors_text(mnt)
        assert_array_bytes(read_bytes(mnt / "m"), arr, "m after the scrub")
        ok = True
    finally:
        rc, problems = stop_daemon(m)
        if ok:
            assert not problems and rc == 0, f"unmount: {'; '.join(problems)}; exit {rc}\n{m.stderr()}"
    for member, mlbn in flipped:
        sides = [open(a[2 * member + k], "rb").read()[mlbn * 512:(mlbn + 1) * 512] for k in (0, 1)]
        assert sides[0] == sides[1], f"member {member} LBN {mlbn}: the sides still differ"
    fsck(joined(a))
