"""What copies buy (docs/reference.md, "Copies"): bytes flipped in the image
inside about 1 % of one placement's cells are never seen by a reader. A read
that meets such a cell serves it from another copy and rewrites it in place
(a `self-healed:` line in .mmfs/errors, `copies.self_healed_cells` in
/.mmfs/stats); a scrub repairs every such cell without any read; after
either, every placement reads clean with no further repair, and the
fixtures' unmount finds `mmfsck -n` clean.

The damage is put where `A@/copy/K@/lbn/I0,...` says an element of a cell
lies, in the image file while the volume is unmounted."""
import json
import os
import time

import numpy as np
import pytest

from mmfs_mount import make_array, random_array, read_bytes, read_json, view

SHAPE = (64, 64, 32)


def stats(vol):
    return read_json(vol.mnt / ".mmfs" / "stats")


def healed(vol):
    return stats(vol)["copies"]["self_healed_cells"]


def wait_current(path, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        copies = read_json(view(path, "info"))["copies"]
        if all(c["state"] == "current" for c in copies):
            return
        assert time.monotonic() < deadline, f"copies still behind: {copies}"
        time.sleep(0.05)


def cells_of(path, k, rng, fraction):
    """About `fraction` of placement k's cells, each as (an element index inside it, its LBN, its offset)."""
    info = read_json(view(path, "info"))
    cell = info["cell"] if k == 0 else info["copies"][k - 1]["cell"]
    grid = [-(-s // c) for s, c in zip(SHAPE, cell)]
    total = int(np.prod(grid))
    picks = rng.choice(total, size=max(2, int(round(total * fraction))), replace=False)
    out = []
    for linear in picks:
        at = np.unravel_index(int(linear), grid)
        idx = tuple(min(int(a) * c + c // 2, s - 1) for a, c, s in zip(at, cell, SHAPE))
        lbn, offset = map(int, read_bytes(view(path, "copy", f"{k}@", "lbn", ",".join(map(str, idx)))).split())
        out.append((idx, lbn, offset))
    return out


def flip(vol, places):
    sector = read_json(vol.mnt / ".mmfs" / "geometry")["sector_size"]
    vol.unmount()
    with open(vol.image, "r+b") as f:
        for _, lbn, offset in places:
            f.seek(lbn * sector + offset)
            b = f.read(1)
            f.seek(lbn * sector + offset)
            f.write(bytes([b[0] ^ 0xA5]))
    vol.mount()


def read_everything(path, arr, copies):
    for k in range(copies + 1):
        assert read_bytes(view(path, "copy", k)) == arr.tobytes(), f"copy/{k}"
        for d in range(arr.ndim):
            got = np.frombuffer(read_bytes(view(path, "copy", f"{k}@", "slice", d, 5)), arr.dtype)
            assert np.array_equal(got, np.take(arr, 5, axis=d).ravel()), f"copy/{k}@/slice/{d}/5"
    assert read_bytes(path) == arr.tobytes(), "the file"
    for d in range(arr.ndim):
        got = np.frombuffer(read_bytes(view(path, "slice", d, 9)), arr.dtype)
        assert np.array_equal(got, np.take(arr, 9, axis=d).ravel()), f"slice/{d}/9"


@pytest.mark.parametrize("damaged", [1, 0], ids=["copy", "primary"])
def test_reads_heal_flipped_bytes_in_one_placement(volume, damaged):
    arr = random_array(np.random.default_rng(3), SHAPE, "float64")
    path = make_array(volume.mnt / "a", SHAPE, "float64", "multimap", arr)
    os.setxattr(path, "user.mmfs.copies", b"naive")
    wait_current(path)
    places = cells_of(path, damaged, np.random.default_rng(4), 0.01)
    flip(volume, places)
    before_errors = volume.errors()
    read_everything(path, arr, 1)  # no error reaches the reader
    assert healed(volume) == len(places), (healed(volume), len(places))
    lines = [line for line in volume.errors()[len(before_errors):].splitlines() if "self-healed" in line]
    assert len(lines) == len(places), lines
    assert all("/a" in line and "rewritten in place" in line for line in lines), lines
    # Repaired on the device: a fresh mount reads every placement with no repair.
    volume.remount()
    read_everything(path, arr, 1)
    assert healed(volume) == 0


def test_scrub_repairs_every_bad_cell_without_a_read(volume):
    arr = random_array(np.random.default_rng(5), SHAPE, "int32")
    path = make_array(volume.mnt / "s", SHAPE, "int32", "hilbert", arr)
    os.setxattr(path, "user.mmfs.copies", b"naive;zorder")
    wait_current(path)
    rng = np.random.default_rng(6)
    places = cells_of(path, 1, rng, 0.01) + cells_of(path, 2, rng, 0.01)
    flip(volume, places)
    with open(volume.mnt / ".mmfs" / "scrub", "w") as f:
        f.write("start\n")
    deadline = time.monotonic() + 120
    while True:
        st = read_json(volume.mnt / ".mmfs" / "scrub")
        if st["copies"]["state"] == "idle" and st["state"] != "running":
            break
        assert time.monotonic() < deadline, json.dumps(st)[:2000]
        time.sleep(0.05)
    assert st["copies"]["arrays_checked"] == 1, st["copies"]
    assert st["copies"]["cells_repaired"] == len(places), (st["copies"], len(places))
    assert healed(volume) == len(places)
    volume.remount()
    read_everything(path, arr, 2)
    assert healed(volume) == 0, "every bad cell was repaired by the scrub"


def test_a_cell_bad_in_every_placement_is_an_error_not_wrong_bytes(volume):
    arr = random_array(np.random.default_rng(7), SHAPE, "float64")
    path = make_array(volume.mnt / "b", SHAPE, "float64", "naive", arr)
    os.setxattr(path, "user.mmfs.copies", b"naive:order=0,1,2")
    wait_current(path)
    idx = (10, 20, 30)
    places = []
    for k in (0, 1):
        lbn, offset = map(int, read_bytes(view(path, "copy", f"{k}@", "lbn", ",".join(map(str, idx)))).split())
        places.append((idx, lbn, offset))
    flip(volume, places)
    with pytest.raises(OSError) as e:
        read_bytes(view(path, "box", "10,20,30"))
    assert e.value.errno == 5  # EIO
    # Elsewhere the array reads as written.
    got = np.frombuffer(read_bytes(view(path, "slice", 0, 40)), arr.dtype)
    assert np.array_equal(got, arr[40].ravel())
    # Writing the array again gives the cell back, in every placement.
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, arr.tobytes(), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    wait_current(path)
    read_everything(path, arr, 1)
