"""The example walk-throughs (examples/*/walkthrough.sh) at a tiny scale.

Each walk-through generates its HDF5 input, formats and mounts a volume,
imports with mmfs-import, reads views, compares them with h5py, plots PNGs,
exports with mmfs-export, unmounts and runs mmfsck. Here each runs in seconds
(earthquake: 20x64x64x64 float32; s3d: 64^3 float64) in a fresh directory
under /var/tmp (a real disk: the daemon opens the image with O_DIRECT), with the tools of
conftest.build_dir() ($MMFS_BUILD honoured). Checked: exit status 0, every
printed comparison says "equal", the PNGs are valid PNG files, mmfsck finds
the volume clean, and no mount is left behind — also when a step fails (a
failing mmfs-import is injected) or the arguments are wrong; --keep keeps the
image (unmounted) and the input, and only that.
"""
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest

from conftest import REPO_ROOT, build_dir

EXAMPLES = REPO_ROOT / "examples"
SCRATCH = "/var/tmp"
TOOLS = ["mkfs/mkfs.mmfs", "daemon/mmfs", "tools/mmfs-import", "tools/mmfs-export", "tools/mmfsck"]
RUN_TIMEOUT = 150  # seconds; a tiny run takes ~5-20 s


# --- helpers -------------------------------------------------------------------

def mounts_under(root):
    """Mount points at or below `root`, from /proc/mounts."""
    root = os.path.realpath(root)
    found = []
    with open("/proc/mounts") as f:
        for line in f:
            point = line.split()[1].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
            if point == root or point.startswith(root + "/"):
                found.append(point)
    return found


def check_png(path):
    """A valid PNG: signature, IHDR first with a non-empty image, every chunk's CRC, IDAT that
    inflates, IEND last. Returns (width, height)."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG signature"
    pos, chunks, idat = 8, [], b""
    while pos < len(data):
        assert pos + 12 <= len(data), f"{path}: truncated chunk at byte {pos}"
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"{path}: bad CRC in chunk {kind!r}"
        chunks.append(kind)
        if kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND", f"{path}: chunks {chunks[:3]}...{chunks[-2:]}"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 0 and height > 0, f"{path}: empty image {width}x{height}"
    assert len(zlib.decompress(idat)) > 0, f"{path}: empty image data"
    return width, height


def need_tools(build):
    for tool in TOOLS:
        path = build / tool
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is not built: run scripts/build.sh (or set MMFS_BUILD)", pytrace=False)


def run_walkthrough(name, work, *args, build=None, timeout=RUN_TIMEOUT):
    """Runs examples/NAME/walkthrough.sh --workdir WORK ARGS...; returns (rc, output).

    On a timeout the script gets SIGTERM (its trap unmounts) before it is killed. Whatever
    happens, a mount left under WORK is removed and reported as a failure."""
    env = dict(os.environ, MMFS_BUILD=str(build or build_dir()))
    cmd = ["bash", str(EXAMPLES / name / "walkthrough.sh"), "--workdir", str(work), *map(str, args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=SCRATCH, start_new_session=True)
    problems = []
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # our own child, by its pid: its EXIT trap unmounts
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        problems.append(f"timed out after {timeout} s")
    finally:
        left = mounts_under(work)
        for point in left:
            subprocess.run(["fusermount3", "-uz", point], capture_output=True, timeout=60)
        if left:
            problems.append(f"mounts left behind: {left}")
    if problems:
        raise AssertionError(f"{' '.join(cmd)}: {'; '.join(problems)}\n{out[-6000:]}")
    return proc.returncode, out


@pytest.fixture
def workdir():
    path = Path(tempfile.mkdtemp(dir=SCRATCH, prefix="mmfs-test-examples-"))
    try:
        yield path
    finally:
        if not mounts_under(path):
            shutil.rmtree(path, ignore_errors=True)


# --- the walk-throughs -----------------------------------------------------------

CASES = [
    pytest.param("earthquake", "0.01", ["section.png", "surface.png", "seismograms.png"], "velocity-box.h5", 4,
                 False, id="earthquake"),
    pytest.param("s3d", "0.125", ["temperature-plod.png", "velocity.png"], "s3d-box.h5", 9, True, id="s3d-keep"),
]


@pytest.mark.parametrize("name, scale, pngs, exported, min_equal, keep", CASES)
def test_walkthrough(name, scale, pngs, exported, min_equal, keep, workdir):
    need_tools(build_dir())
    rc, out = run_walkthrough(name, workdir, "--scale", scale, *(["--keep"] if keep else []))
    assert rc == 0, f"{name} walk-through exited with {rc}:\n{out[-6000:]}"
    assert "Walk-through finished." in out

    # every comparison with h5py / numpy printed by the walk-through says equal (the echoed
    # commands, lines starting with "$ ", contain both words)
    printed = [line for line in out.splitlines() if not line.startswith("$ ")]
    assert not [line for line in printed if "DIFFERENT" in line], out[-6000:]
    equal = [line for line in printed if re.search(r"\bequal\b", line)]
    assert len(equal) >= min_equal, f"expected at least {min_equal} 'equal' comparisons, got {equal}"
    assert re.search(r"vol\.img: clean — 0 problem\(s\)", out), "mmfsck -n did not report a clean volume"

    # the outputs stay; the image, the input and the mount point only with --keep
    for png in pngs:
        width, height = check_png(workdir / "out" / png)
        assert width >= 300 and height >= 150, f"{png}: {width}x{height}"
    assert (workdir / "out" / exported).stat().st_size > 0
    assert not mounts_under(workdir)
    if keep:
        assert (workdir / "vol.img").is_file() and list((workdir / "input").glob("*.h5")), "--keep kept nothing"
        assert "kept" in out
    else:
        assert not (workdir / "vol.img").exists(), "the image should be removed without --keep"
        assert not (workdir / "input").exists(), "the generated input should be removed without --keep"
        assert not (workdir / "mnt").exists(), "the mount point should be removed without --keep"

    if name == "earthquake":
        # the layouts were compared side by side, and the data survived two relayouts
        assert re.search(r"view\s+multimap\s+naive\s+hilbert", out), "no MultiMap/Naive/Hilbert table"
        assert "after two relayouts, mmfs view vs h5py: equal" in out
    else:
        # MLOC's figure: ~1e-4 maximum relative error with 3 of the 8 bytes
        errors = {(m.group(1), int(m.group(2))): float(m.group(3))
                  for m in re.finditer(r"^\s+(\w+)\s+plod/(\d): max relative error (\S+)", out, re.M)}
        assert set(errors) >= {("temperature", 2), ("temperature", 3), ("u", 3)}, errors
        assert errors[("temperature", 3)] < 2.5e-4 < errors[("temperature", 2)] < 0.07, errors


def test_failure_unmounts(workdir):
    """A step failing while the volume is mounted (and the script's cwd is inside it): the
    script exits non-zero, says so, and leaves no mount and no image behind."""
    real = build_dir()
    need_tools(real)
    fake = workdir / "build"
    for tool in TOOLS:
        (fake / tool).parent.mkdir(parents=True, exist_ok=True)
        (fake / tool).symlink_to(real / tool)
    broken = fake / "tools" / "mmfs-import"
    broken.unlink()
    broken.write_text("#!/bin/sh\necho 'mmfs-import: injected failure' >&2\nexit 1\n")
    broken.chmod(0o755)
    rc, out = run_walkthrough("earthquake", workdir / "work", "--scale", "0.004", build=fake)  # 8 time steps
    assert rc != 0, out[-6000:]
    assert "injected failure" in out and "FAILED" in out and "the volume is unmounted" in out, out[-3000:]
    assert not mounts_under(workdir)
    assert not (workdir / "work" / "vol.img").exists()


@pytest.mark.parametrize("args, message", [
    (["--scale", "abc"], "--scale must be a number"),
    (["--scale", "0"], "--scale must be a number"),
    (["--frobnicate"], "unknown argument"),
    (["--build", "/nonexistent-mmfs-build"], "build directory not found"),
])
def test_bad_arguments(args, message, workdir):
    for name in ("earthquake", "s3d"):
        rc, out = run_walkthrough(name, workdir / "work", *args)
        assert rc == 2 and message in out, f"{name} {args}: exit {rc}\n{out}"
        assert not (workdir / "work" / "vol.img").exists()


def test_help():
    for name in ("earthquake", "s3d"):
        proc = subprocess.run(["bash", str(EXAMPLES / name / "walkthrough.sh"), "--help"], capture_output=True,
                              text=True, timeout=30)
        assert proc.returncode == 0 and "--scale" in proc.stdout and "--workdir" in proc.stdout
