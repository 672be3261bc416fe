"""mkfs.mmfs and mmfsck on image files (docs/reference.md §2, §3)."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import build_dir, run_tool


def tool(name):
    path = build_dir() / ("mkfs" if name == "mkfs.mmfs" else "tools") / name
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built", pytrace=False)
    return lambda *args: run_tool(path, *args)


mkfs = tool("mkfs.mmfs")
fsck = tool("mmfsck")


@pytest.fixture
def image(tmp_path):
    return tmp_path / "vol.img"


def test_mkfs_creates_an_image_and_prints_the_summary(image):
    rc, out, err = mkfs("-s", "256M", "-g", "atlas10k3", "-L", "demo", image)
    assert rc == 0, err
    assert image.stat().st_size == 256 << 20
    assert "label 'demo'" in out
    assert re.search(r"sectors of 512 bytes", out)
    assert "depth D:      128" in out
    assert "686" in out  # track lengths, outer zone first
    assert "first" in out  # the target holds only the outer part of the modeled disk
    # Sparse: mkfs wrote the superblocks and the metadata region only.
    assert image.stat().st_blocks * 512 < 64 << 20
    rc, out, err = fsck("-n", image)
    assert rc == 0, out + err
    assert "clean" in out


def test_mkfs_creates_images_only_their_owner_may_read(tmp_path):
    """The image holds every array whatever their modes: 0600 unless told
    (docs/daemon.md, "Permissions"); an existing target keeps its mode."""
    old = os.umask(0o022)
    try:
        private, shared, kept = tmp_path / "private.img", tmp_path / "shared.img", tmp_path / "kept.img"
        rc, _, err = mkfs("-q", "-s", "256M", "-g", "ssd", private)
        assert rc == 0, err
        assert private.stat().st_mode & 0o7777 == 0o600
        rc, _, err = mkfs("-q", "-s", "256M", "-g", "ssd", "--image-mode", "0640", shared)
        assert rc == 0, err
        assert shared.stat().st_mode & 0o7777 == 0o640
        kept.write_bytes(b"")
        os.chmod(kept, 0o644)
        rc, _, err = mkfs("-q", "-s", "256M", "-g", "ssd", kept)
        assert rc == 0, err
        assert kept.stat().st_mode & 0o7777 == 0o644
        for bad in ("rw", "0999", "", "77777"):
            target = tmp_path / f"bad{len(bad)}.img"
            rc, _, err = mkfs("-q", "-s", "256M", "-g", "ssd", "--image-mode", bad, target)
            assert rc != 0 and "--image-mode" in err, (bad, err)
            assert not target.exists()
    finally:
        os.umask(old)


def test_mkfs_refuses_an_existing_filesystem_without_force(image):
    assert mkfs("-q", "-s", "64M", image)[0] == 0
    before = image.read_bytes()[:16384]
    rc, out, err = mkfs("-s", "64M", image)
    assert rc == 1
    assert "mmfs" in err and "-f" in err
    assert image.read_bytes()[:16384] == before  # nothing written
    assert mkfs("-q", "-f", "-s", "64M", image)[0] == 0


def test_mkfs_refuses_ext4_signature(image):
    data = bytearray(64 << 20)
    data[1080:1082] = b"\x53\xef"
    image.write_bytes(bytes(data))
    rc, _, err = mkfs(image)
    assert rc == 1 and "ext" in err


def test_mkfs_refuses_small_targets_naming_the_minimum(image):
    rc, _, err = mkfs("-s", "1M", "-g", "atlas10k3", image)
    assert rc == 1
    assert re.search(r"at least \d+ bytes", err)


def test_mkfs_errors(image, tmp_path):
    rc, _, err = mkfs(tmp_path / "missing.img")
    assert rc == 1 and "missing.img" in err
    rc, _, err = mkfs("-s", "12Q", image)
    assert rc == 1 and "12Q" in err
    rc, _, err = mkfs("-g", "nosuch", "-s", "64M", image)
    assert rc == 1 and "nosuch" in err
    assert mkfs("--help")[0] == 0


def test_mkfs_uses_a_geometry_file(image, tmp_path):
    geo = tmp_path / "g.json"
    geo.write_text('{"kind": "disk", "sector_size": 512, "cylinders": 2000, "surfaces": 2, '
                   '"sectors_per_track": 64, "rpm": 7200, "settle_ms": 1.0, "settle_cylinders": 3}')
    rc, out, err = mkfs("-s", "128M", "-g", geo, image)
    assert rc == 0, err
    assert "depth D:      6" in out


def test_mkfs_formats_a_1tib_sparse_image_quickly(tmp_path):
    image = tmp_path / "big.img"
    rc, out, err = mkfs("-q", "-s", "1T", image)
    assert rc == 0, err
    assert image.stat().st_size == 1 << 40
    assert fsck("-n", image)[0] == 0


def test_mmfsck_repairs_a_damaged_superblock(image):
    assert mkfs("-q", "-s", "64M", image)[0] == 0
    with open(image, "r+b") as f:
        f.seek(200)
        byte = f.read(1)
        f.seek(200)
        f.write(bytes([byte[0] ^ 0x40]))
    rc, out, _ = fsck("-n", image)
    assert rc == 4 and "superblock" in out
    rc, out, _ = fsck("-y", image)
    assert rc == 1, out
    assert fsck("-n", image)[0] == 0


def test_mmfsck_on_garbage_and_bad_arguments(image):
    image.write_bytes(os.urandom(1 << 20))
    rc, _, err = fsck("-n", image)
    assert rc in (4, 8) and err
    rc, _, _ = fsck("-n", "-y", image)
    assert rc == 8
    assert fsck("--help")[0] == 0


@pytest.fixture
def loop_device(tmp_path):
    """A 256 MiB loop device over a sparse file; detached even when the test fails."""
    if os.geteuid() != 0 or subprocess.run(["which", "losetup"], capture_output=True).returncode != 0:
        pytest.skip("loop devices need root and losetup")
    backing = tmp_path / "loop.img"
    with open(backing, "wb") as f:
        f.truncate(256 << 20)
    proc = subprocess.run(["losetup", "-f", "--show", str(backing)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"losetup failed: {proc.stderr.strip()}")
    dev = proc.stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


def test_mkfs_and_mmfsck_on_a_block_device(loop_device):
    rc, out, err = mkfs("-g", "atlas10k3", "-L", "loop", loop_device)
    assert rc == 0, err
    assert "label 'loop'" in out
    assert fsck("-n", loop_device)[0] == 0
    rc, _, err = mkfs(loop_device)
    assert rc == 1 and "already holds" in err
    # The size comes from the kernel: a size option makes no sense for a device.
    assert "sectors of 512 bytes" in out


def test_a_mounted_volume_is_not_opened_by_a_second_writer(volume, tmp_path):
    """Two writers on one volume would overwrite each other's metadata: a
    second daemon, mkfs.mmfs -f and mmfsck refuse a mounted image, name it,
    and leave it untouched; after the unmount each works again."""
    from mmfs_mount import daemon_path
    (volume.mnt / "kept").write_bytes(b"still here")
    second = tmp_path / "second"
    second.mkdir()
    rc, out, err = run_tool(daemon_path(), volume.image, second)
    assert rc != 0
    assert "in use" in err and str(volume.image) in err
    rc, out, err = mkfs("-q", "-f", "-s", "512M", volume.image)
    assert rc != 0 and "in use" in err
    rc, out, err = fsck("-n", volume.image)
    assert rc != 0 and "in use" in out + err
    assert (volume.mnt / "kept").read_bytes() == b"still here"
    volume.remount()
    assert (volume.mnt / "kept").read_bytes() == b"still here"


# --- small volumes ------------------------------------------------------------------

@pytest.fixture
def scratch():
    """A fresh directory under /var/tmp (O_DIRECT works there), removed afterwards."""
    import shutil
    import tempfile
    from mmfs_mount import SCRATCH, is_mounted
    root = Path(tempfile.mkdtemp(dir=SCRATCH, prefix="mmfs-small-"))
    try:
        yield root
    finally:
        if not is_mounted(root / "mnt"):
            shutil.rmtree(root, ignore_errors=True)


def minimum_of(err):
    m = re.search(r"needs at least (\d+) bytes", err)
    assert m, f"no minimum named in: {err}"
    return int(m.group(1))


@pytest.mark.parametrize("geometry,size", [("toy1000", "4M"), ("toy2000", "8M"), ("toy1000", "min"),
                                           ("ssd", "8M"), ("atlas10k3", "8M")])
def test_small_volumes_format_mount_and_keep_data(scratch, toy_disk_definition, geometry, size):
    """docs/reference.md §7's toy disks (4 MB and 8 MB modeled devices) and 8 MiB devices of the
    built-in profiles format, mount, and keep plain files and arrays across a remount."""
    import numpy as np
    from mmfs_mount import make_array, mounted, read_array, view
    if geometry.startswith("toy"):
        definition = dict(toy_disk_definition, cylinders=int(geometry[3:]))
        geo = scratch / f"{geometry}.json"
        geo.write_text(json.dumps(definition))
    else:
        geo = geometry
    image = scratch / "vol.img"
    if size == "min":
        rc, _, err = mkfs("-s", "64K", "-g", geo, image)
        assert rc == 1
        size = str(minimum_of(err))
        image.unlink()
    rc, out, err = mkfs("-s", size, "-g", geo, image)
    assert rc == 0, err
    assert "metadata:" in out
    capacity = int(re.search(r"capacity: +(\d+) bytes of data", out).group(1))
    rng = np.random.default_rng(7)
    # The smallest volume holds 4 tracks (16 KiB of the toy disk): 1/4 of it
    # for the plain file, a 4x8 array (two 512-byte cells) beside it.
    data = rng.integers(0, 256, min(100_000, capacity // 4), dtype=np.uint8).tobytes()
    arr = rng.standard_normal((16, 24) if capacity > 1 << 20 else (4, 8))
    mnt = scratch / "mnt"
    with mounted(image, mnt):
        (mnt / "dir").mkdir()
        (mnt / "dir" / "plain.bin").write_bytes(data)
        make_array(mnt / "a", arr.shape, data=arr)
        assert (mnt / "dir" / "plain.bin").read_bytes() == data
        assert np.array_equal(read_array(mnt / "a", "float64", arr.shape), arr)
    with mounted(image, mnt):  # after a remount: from the device
        assert (mnt / "dir" / "plain.bin").read_bytes() == data
        assert np.array_equal(read_array(mnt / "a", "float64", arr.shape), arr)
        assert np.array_equal(np.fromfile(view(mnt / "a", "slice", 1, 5)), arr[:, 5])


@pytest.mark.parametrize("geometry", ["toy1000", "toy2000", "ssd", "atlas10k3"])
def test_too_small_targets_are_refused_naming_the_real_minimum(image, toy_disk_definition, geometry):
    if geometry.startswith("toy"):
        geo = image.parent / f"{geometry}.json"
        geo.write_text(json.dumps(dict(toy_disk_definition, cylinders=int(geometry[3:]))))
    else:
        geo = geometry
    rc, _, err = mkfs("-s", "64K", "-g", geo, image)
    assert rc == 1 and "18446744073709551615" not in err
    minimum = minimum_of(err)
    assert 64 << 10 < minimum < 4 << 20
    # One 4 KiB step short: refused with the same minimum; nothing written.
    image.unlink()
    rc, _, err = mkfs("-s", str(minimum - 4096), "-g", geo, image)
    assert rc == 1 and minimum_of(err) == minimum
    assert not any(image.read_bytes())
    # The minimum itself, and a size just above it, format and check clean.
    for size in (minimum, minimum + 4096 + 17):
        image.unlink()
        rc, _, err = mkfs("-q", "-s", str(size), "-g", geo, image)
        assert rc == 0, f"{size} bytes: {err}"
        rc, out, err = fsck("-n", image)
        assert rc == 0, out + err


def test_a_modeled_device_too_small_for_any_volume_is_refused(image, toy_disk_definition):
    geo = image.parent / "toy10.json"
    geo.write_text(json.dumps(dict(toy_disk_definition, cylinders=10)))  # 40 KB
    rc, _, err = mkfs("-s", "1M", "-g", geo, image)
    assert rc == 1
    assert "too small" in err and "40960 bytes" in err and "18446744073709551615" not in err


def test_mkfs_measures_the_target_and_formats_with_the_fitted_geometry(image, tmp_path):
    rc, out, err = mkfs("-s", "1G", "-g", "measure", "--measure-seconds", "3", image)
    assert rc == 0, err
    assert "measuring" in out and "latency" in out
    assert image.stat().st_size == 1 << 30
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vol.img"]  # the scratch file is gone
    assert fsck("-n", image)[0] == 0
    from mmfs_mount import mounted
    with mounted(image, tmp_path / "mnt"):
        g = json.loads((tmp_path / "mnt" / ".mmfs" / "geometry").read_text())
    assert g["kind"] == "flash" and g["profile"] == "measured"
    assert g["measured"]["scratch_file"] is True and len(g["measured"]["cells"]) >= 12
    # A formatted volume is refused before any time is spent measuring it.
    rc, out, err = mkfs("-g", "measure", image)
    assert rc == 1 and "use -f" in err and "measuring" not in out
