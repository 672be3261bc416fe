"""fsx-rs — the File System eXerciser's Rust rewrite, from crates.io — against a
mounted mmfs (outside suites).

fsx runs a seeded pseudorandom sequence of operations on one file and checks
every read (pread, mmap, sendfile) against its own copy of what the file must
hold; it exits non-zero on the first difference. Two runs:

* a plain file: pread/pwrite, mmap reads and writes, truncate, posix_fallocate,
  copy_file_range, sendfile, fsync, fdatasync, msync(MS_INVALIDATE),
  posix_fadvise and close/reopen, on a file of up to 256 KiB;
* an array file (docs/reference.md §4: a fixed size, prod(shape) * itemsize bytes, cells
  that reads and writes cut anywhere): fsx's `blockmode`, which never changes
  the file's size (no truncate, no posix_fallocate, no close/reopen), with
  `flen` the array's size.

The number of operations per run is $MMFS_FSX_OPS, the seed $MMFS_FSX_SEED
(default SEED). A run of more than $MMFS_FSX_OPS_PER_PROCESS (default
25,000) operations is that many fsx processes in a row on the same file,
seeds SEED, SEED+1, ... (each starts the file afresh): fsx-rs 0.3.2 never
unmaps its mapreads, so one process's operations slow down with every
mapping it holds (the kernel walks all of them on each write and truncate of
the file) and a single 1,000,000-operation process would take hours on any
filesystem. The default, OPS below, is the CI's count and the issue's:
100,000 per run, about four minutes for the three on the 2-core test machine
(alone: plain 112 s, 891 ops/s; array 75 s, 1,330 ops/s; ext4 on /var/tmp,
the same config and seed, 62 s, 1,618 ops/s; docs/benchmarks/stress-fsx.md).
scripts/stress.sh runs 1,000,000. scripts/install-deps.sh builds fsx into
/opt/fsx-VERSION; $FSX names another binary. Each run's ops/s goes to the end
of the pytest output (conftest.py), next to the plain file's rate on the
filesystem holding the test volumes (ext4 on the test machine), with the same
config and seed: the reference the issue asks for, measured in the same run.
"""
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import conftest
from mmfs_mount import cargo_tool, getx, make_array

FSX_VERSION = "0.3.2"
OPS = int(os.environ.get("MMFS_FSX_OPS", "100000"))
SEED = int(os.environ.get("MMFS_FSX_SEED", "19"))
OPS_PER_PROCESS = int(os.environ.get("MMFS_FSX_OPS_PER_PROCESS", "25000"))

# Every operation fsx-rs 0.3.2 has but punch_hole (mmfs's fallocate takes
# modes 0 and FALLOC_FL_KEEP_SIZE only).
PLAIN_CONFIG = """\
flen = 262144

[weights]
close_open = 1
read = 10
write = 10
mapread = 10
mapwrite = 10
truncate = 4
invalidate = 1
fsync = 1
fdatasync = 1
posix_fallocate = 2
sendfile = 2
posix_fadvise = 1
copy_file_range = 2
"""

# blockmode: the file's size never changes (fsx takes flen from it and writes
# it whole with zeros first); truncate, posix_fallocate and close_open are
# refused with blockmode.
ARRAY_CONFIG = """\
blockmode = true

[weights]
truncate = 0
read = 10
write = 10
mapread = 10
mapwrite = 10
invalidate = 1
fsync = 1
fdatasync = 1
sendfile = 2
posix_fadvise = 1
copy_file_range = 2
"""

# An array whose cells the runs cut everywhere: odd extents, 2-byte elements,
# the default (multimap) layout; 96 * 40 * 35 * 2 = 268,800 bytes.
ARRAY_SHAPE = (96, 40, 35)
ARRAY_DTYPE = "uint16"


# fsx-rs 0.3.2's mapread never unmaps its mapping (src/main.rs, domapread):
# each one stays until fsx exits, and at vm.max_map_count (65,530 by default)
# mmap() fails with ENOMEM and fsx panics - after about 430,000 operations of
# the plain configuration, on any filesystem. Long processes need a higher
# limit; and they slow down as the mappings pile up: a 1,000,000-operation
# process on mmfs had done ~413,000 operations after 29 minutes (76,000
# mappings; the kernel's time went to walking the file's mappings,
# vma_interval_tree_*, on each write and truncate). Hence OPS_PER_PROCESS:
# the CI's 100,000 operations of the plain file in four processes of 25,000
# took 53.1 s against 156.4 s in one, run back to back on the 2-core test
# machine (the same total count; seeds SEED..SEED+3 instead of SEED alone).
MAPS_PER_OP = 0.16  # mapread's share of the operations, with some margin


@pytest.fixture(scope="module")
def fsx():
    need = int(min(OPS, OPS_PER_PROCESS) * MAPS_PER_OP) + 1000
    limit = Path("/proc/sys/vm/max_map_count")
    if int(limit.read_text()) < need:
        try:
            limit.write_text(f"{need}\n")
        except OSError as e:
            pytest.skip(f"{OPS} fsx operations leak ~{need} mappings (fsx-rs {FSX_VERSION}'s mapread never "
                        f"unmaps); vm.max_map_count is lower and cannot be raised: {e}")
    return cargo_tool("fsx", FSX_VERSION, "FSX")


# fsx-rs 0.3.2 sometimes draws a posix_fallocate of zero bytes (offset one
# past its end; seed 21 of the plain configuration, operation 1125).
# posix_fallocate(2) refuses a zero length with EINVAL on every filesystem
# (ext4 too), and fsx then stops with "Test file system does not support
# posix_fallocate." A process that ends so, with that operation last in its
# log, is fsx's defect: its seed is skipped (and reported) and the next one
# runs in its place.
ZERO_FALLOCATE = re.compile(r"\[ERROR fsx\]\s+\d+ POSIX_FALLOCATE\s+0x[0-9a-f]+ => 0x[0-9a-f]+ \(\s*0x0 bytes\)\s*$")
MAX_SKIPPED_SEEDS = 5


def fsx_drew_zero_fallocate(output):
    lines = [line for line in output.strip().splitlines() if line.startswith("[ERROR fsx]")]
    return ("does not support posix_fallocate" in output and bool(lines)
            and ZERO_FALLOCATE.search(lines[-1]) is not None)


def run_fsx(fsx, vol, target, config_text, tag, what, where="mmfs"):
    """Runs fsx on TARGET with CONFIG_TEXT: OPS operations, in processes of at
    most OPS_PER_PROCESS with seeds SEED, SEED+1, ...; their artifacts (the
    config, .fsxlog and .fsxgood on failure) go to the volume's scratch
    directory, outside the mount. Returns the ops/s."""
    config = vol.root / f"fsx-{tag}.toml"
    config.write_text(config_text)
    artifacts = vol.root / f"fsx-{tag}"
    artifacts.mkdir()
    seconds = 0.0
    done, seed, processes = 0, SEED, 0
    skipped = []
    while done < OPS:
        n = min(OPS_PER_PROCESS, OPS - done)
        cmd = [fsx, "-N", str(n), "-S", str(seed), "-f", str(config), "-P", str(artifacts), str(target)]
        started = time.monotonic()
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=max(600, n // 50), env=dict(os.environ, RUST_BACKTRACE="0"))
        output = proc.stdout + proc.stderr
        if proc.returncode != 0 and fsx_drew_zero_fallocate(output) and len(skipped) < MAX_SKIPPED_SEEDS:
            skipped.append(seed)
            seed += 1
            continue
        seconds += time.monotonic() - started
        head = "\n".join(output.splitlines()[:5])
        assert proc.returncode == 0 and "All operations completed A-OK!" in output, (
            f"{' '.join(cmd)}: exit {proc.returncode} after {done} operations of earlier processes\n"
            f"{head}\n...\n{output[-8000:]}\n.mmfs/errors (last lines):\n{vol.errors()[-2000:]}")
        done += n
        seed += 1
        processes += 1
    rate = OPS / seconds
    detail = f", {processes} processes of <= {OPS_PER_PROCESS}" if processes > 1 else ""
    if skipped:
        detail += (f"; {'seeds' if len(skipped) > 1 else 'seed'} {', '.join(map(str, skipped))} skipped: fsx drew "
                   f"a zero-length posix_fallocate")
    line = f"fsx {FSX_VERSION} on {where}, {what}: {OPS} ops (seed {SEED}{detail}) in {seconds:.1f} s, {rate:,.0f} ops/s"
    print(line)
    conftest.TERMINAL_SUMMARY.append(line)
    return rate


def test_fsx_plain_file(fsx, volume):
    run_fsx(fsx, volume, volume.mnt / "fsx.plain", PLAIN_CONFIG, "plain", "plain file")


def test_fsx_array_file(fsx, volume):
    path = make_array(volume.mnt / "fsx.array", ARRAY_SHAPE, ARRAY_DTYPE)
    size = int(np.prod(ARRAY_SHAPE)) * np.dtype(ARRAY_DTYPE).itemsize
    assert os.stat(path).st_size == size
    run_fsx(fsx, volume, path, ARRAY_CONFIG, "array", f"array file {ARRAY_DTYPE} {'x'.join(map(str, ARRAY_SHAPE))}")
    # Still the same array: fsx changed its bytes, never its size or schema.
    assert os.stat(path).st_size == size
    assert getx(path, "shape") == ",".join(map(str, ARRAY_SHAPE))
    assert getx(path, "dtype") == ARRAY_DTYPE


def test_fsx_plain_file_reference_on_the_host_filesystem(fsx):
    """The plain-file run on the filesystem under /var/tmp (the rate mmfs is
    compared with; skipped when that is not ext4, xfs or btrfs)."""
    kind = subprocess.run(["stat", "-f", "-c", "%T", "/var/tmp"], capture_output=True, text=True).stdout.strip()
    if kind not in ("ext2/ext3", "xfs", "btrfs"):
        pytest.skip(f"/var/tmp is {kind}, not a disk filesystem")
    root = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="fsx-reference-"))
    try:
        vol = SimpleNamespace(root=root, errors=lambda: "")
        name = "ext4" if kind == "ext2/ext3" else kind
        run_fsx(fsx, vol, root / "fsx.plain", PLAIN_CONFIG, "plain", "plain file", where=f"{name} (/var/tmp)")
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False)
