"""The control directory /.mmfs (docs/reference.md §6) against mmfs-geom (docs/reference.md §7)."""
import errno
import json
import os
import subprocess

import numpy as np
import pytest

from mmfs_mount import (expect_errno, geom_path, make_array, random_array, read_bytes, read_json, view)


@pytest.fixture(scope="module")
def vol(module_volume):
    return module_volume


def geom(*args):
    proc = subprocess.run([str(geom_path()), *map(str, args)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def text(path):
    return read_bytes(path).decode()


def test_control_dir_is_hidden_but_resolvable(vol):
    ctl = vol.mnt / ".mmfs"
    assert ".mmfs" not in os.listdir(vol.mnt)
    assert os.path.isdir(ctl)
    assert set(os.listdir(ctl)) == {"geometry", "stats", "errors", "audit", "scrub", "boundaries", "adjacent",
                                    "equivalent", "rectangle"}
    # Only at the root.
    (vol.mnt / "sub").mkdir(exist_ok=True)
    assert not os.path.exists(vol.mnt / "sub" / ".mmfs")


def test_geometry_equals_mmfs_geom_info(vol):
    mine = read_json(vol.mnt / ".mmfs" / "geometry")
    reference = json.loads(geom("atlas10k3", "info"))
    for key in ("sector_size", "capacity_sectors", "tracks", "depth", "skew_deg"):
        assert key in mine, f"/.mmfs/geometry lacks {key}"
    different = {k: (mine.get(k), v) for k, v in reference.items() if mine.get(k) != v}
    assert not different, f"/.mmfs/geometry differs from mmfs-geom atlas10k3 info: {different}"
    assert os.stat(vol.mnt / ".mmfs" / "geometry").st_size == len(read_bytes(vol.mnt / ".mmfs" / "geometry"))


LBNS = [0, 1, 685, 686, 1000, 32928, 123457, 500000, 1048575]


def test_boundaries_equal_mmfs_geom(vol):
    for lbn in LBNS:
        assert text(vol.mnt / ".mmfs" / "boundaries" / str(lbn)) == geom("atlas10k3", "boundaries", lbn), lbn
        low, high = map(int, text(vol.mnt / ".mmfs" / "boundaries" / str(lbn)).split())
        assert low <= lbn <= high


def test_adjacent_equals_mmfs_geom(vol):
    depth = read_json(vol.mnt / ".mmfs" / "geometry")["depth"]
    for lbn in LBNS[:-1]:
        for step in (1, 2, 17, depth):
            got = text(vol.mnt / ".mmfs" / "adjacent" / str(lbn) / str(step))
            assert got == geom("atlas10k3", "adjacent", lbn, step), (lbn, step)
    expect_errno((errno.EINVAL, errno.ERANGE), read_bytes, vol.mnt / ".mmfs" / "adjacent" / "0" / str(depth + 1))
    expect_errno((errno.EINVAL, errno.ERANGE), read_bytes, vol.mnt / ".mmfs" / "adjacent" / "0" / "0")
    expect_errno(errno.EINVAL, read_bytes, vol.mnt / ".mmfs" / "adjacent" / "zero" / "1")
    expect_errno(errno.ERANGE, read_bytes, vol.mnt / ".mmfs" / "boundaries" / str(10**15))


def test_equivalent_is_not_supported_on_a_disk(vol):
    expect_errno(errno.ENOTSUP, read_bytes, vol.mnt / ".mmfs" / "equivalent" / "0")


def test_equivalent_on_a_mems_volume(volume_factory):
    vol = volume_factory(geometry="mems-g2")
    for lbn in (0, 4321, 200000):
        got = text(vol.mnt / ".mmfs" / "equivalent" / str(lbn))
        assert got == geom("mems-g2", "equivalent", lbn), lbn
        assert str(lbn) in got.split()
    mine = read_json(vol.mnt / ".mmfs" / "geometry")
    assert mine["depth"] == json.loads(geom("mems-g2", "info"))["depth"]


def numbers(obj, prefix=""):
    """Flattens a JSON object to {dotted.key: number}."""
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(numbers(v, f"{prefix}{k}."))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out[prefix.rstrip(".")] = obj
    return out


def test_stats_grow_after_a_read(vol):
    arr = random_array(np.random.default_rng(61), (64, 64, 64), "float64")
    path = make_array(vol.mnt / "stats-array", arr.shape, arr.dtype, "multimap", arr)
    vol.remount()  # cold caches: the next read goes to the device
    before = numbers(read_json(vol.mnt / ".mmfs" / "stats"))
    groups = {word: [k for k in before if word in k.lower()] for word in ("request", "sector", "batch", "ms")}
    for word, keys in groups.items():
        assert keys, f"/.mmfs/stats has no numeric field about {word!r}: {sorted(before)}"
    assert read_bytes(view(path, "slice", 0, 10)) == arr[10].tobytes()
    assert read_bytes(path) == arr.tobytes()
    after = numbers(read_json(vol.mnt / ".mmfs" / "stats"))
    for word, keys in groups.items():
        assert any(after.get(k, 0) > before[k] for k in keys), f"no {word} field grew after a read: {keys}"


def test_control_dir_is_read_only(vol):
    ctl = vol.mnt / ".mmfs"
    ro = (errno.EROFS, errno.EACCES)
    expect_errno(ro, os.open, ctl / "errors", os.O_WRONLY)
    expect_errno(ro, os.open, ctl / "stats", os.O_RDWR)
    expect_errno(ro, os.open, ctl / "new", os.O_CREAT | os.O_WRONLY, 0o644)
    expect_errno(ro, os.mkdir, ctl / "dir")
    expect_errno(ro, os.unlink, ctl / "geometry")
    expect_errno(ro, os.truncate, ctl / "errors", 0)
    expect_errno(ro, os.chmod, ctl, 0o777)
    expect_errno(ro + (errno.ENOTSUP,), os.setxattr, ctl / "geometry", "user.x", b"1")
    expect_errno(ro + (errno.EBUSY, errno.EPERM), os.rename, ctl, vol.mnt / "renamed")
    expect_errno(ro, os.rmdir, ctl)
    assert os.path.isdir(ctl) and not os.path.exists(vol.mnt / "renamed")
    expect_errno(errno.EEXIST, os.mkdir, ctl)  # the name is taken
    expect_errno(errno.EEXIST, os.open, ctl, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)


def test_geometry_reports_the_atropos_parameters(vol):
    mine = read_json(vol.mnt / ".mmfs" / "geometry")
    q = json.loads(geom("atlas10k3", "quadrangle", 1))
    assert mine["p"] == 1
    assert mine["stripe_unit_sectors"] == q["N"]
    assert {k: mine["atropos"][k] for k in ("w", "d", "b", "N", "H", "R")} == {k: q[k] for k in ("w", "d", "b", "N", "H", "R")}
    assert mine["atropos"]["p"] == 1


def test_rectangle_is_the_lbn_s_quadrangle_row(vol):
    q = json.loads(geom("atlas10k3", "quadrangle", 1))
    w, b = q["w"], q["b"]
    for lbn in [0, 5, 686 * 7 + 300, 123457]:
        low, high = map(int, text(vol.mnt / ".mmfs" / "boundaries" / str(lbn)).split())
        if lbn - low >= w * b:
            continue  # a residual sector: checked below
        r = read_json(vol.mnt / ".mmfs" / "rectangle" / str(lbn))
        # One device: the row is the first w*b sectors of the LBN's track, w blocks of b sectors.
        assert r["runs"] == [[low, w * b]], lbn
        assert sorted(r["blocks"]) == [low + i * b for i in range(w)], lbn
        assert r["first_vlbn"] % w == 0 and r["first_vlbn"] <= r["vlbn"] < r["first_vlbn"] + w
        assert r["p"] == 1 and r["lbn"] == lbn
    # The R residual sectors at a track's end belong to no rectangle.
    expect_errno(errno.ERANGE, read_bytes, vol.mnt / ".mmfs" / "rectangle" / str(w * b))
    expect_errno(errno.EINVAL, read_bytes, vol.mnt / ".mmfs" / "rectangle" / "x1")


def test_rectangle_on_mems_is_not_supported(mems):
    expect_errno(errno.ENOTSUP, read_bytes, mems.mnt / ".mmfs" / "rectangle" / "0")
