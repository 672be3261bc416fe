"""The memory an import of a large dataset needs: the tool's own peak RSS stays far
below the dataset's size with --buffer 8, and every byte arrives."""
import os
import subprocess
import sys

import h5py

from h5_support import MiB, smooth_planes, tool_path
from mmfs_mount import assert_array_bytes, is_sanitized, pread_all


# --- memory ---------------------------------------------------------------------------

# A small process that runs the tool and reports the tool's own peak RSS: measuring a child of
# the test process would count the pages it shares with this (large) process until its exec.
_RSS_WRAPPER = """
import os, sys
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run_measured(cmd, out_dir, timeout=300):
    """Runs cmd; returns (exit status, stdout, stderr, the tool's peak RSS in bytes)."""
    rss_file = out_dir / "maxrss"
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", _RSS_WRAPPER, str(rss_file), *map(str, cmd)],
                          capture_output=True, encoding="utf-8", errors="replace", timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert rss_file.exists(), f"the RSS wrapper failed: {proc.stderr}"
    return proc.returncode, proc.stdout, proc.stderr, int(rss_file.read_text()) * 1024


def test_memory_of_a_large_import(volume_factory, tmp_path):
    """A 400 MiB dataset (chunked, gzip 1) imported with --buffer 8: the tool's peak RSS stays
    far below the dataset's size, and every byte arrives."""
    planes, rows, cols = 400, 1024, 256
    src = tmp_path / "large.h5"
    with h5py.File(src, "w") as f:
        ds = f.create_dataset("/big", shape=(planes, rows, cols), dtype="f4", chunks=(4, 256, 256),
                              compression="gzip", compression_opts=1)
        for p in range(0, planes, 16):
            ds[p:p + 16] = smooth_planes(p, p + 16)
    assert os.path.getsize(src) < 64 * MiB, "the HDF5 file stays small"
    vol = volume_factory(size="1G")
    importer = tool_path("mmfs-import")
    rc, out, err, rss = run_measured([importer, "--buffer", "8", "-q", f"{src}:/big", vol.mnt / "big"], tmp_path)
    assert rc == 0, f"mmfs-import --buffer 8: exit {rc}\n{out}{err}"
    total = planes * rows * cols * 4
    assert os.stat(vol.mnt / "big").st_size == total
    if not is_sanitized(importer):
        assert rss < 100 * MiB, f"peak RSS {rss / MiB:.0f} MiB importing {total / MiB:.0f} MiB with --buffer 8"
    fd = os.open(vol.mnt / "big", os.O_RDONLY)
    try:
        step = 16
        for p in range(0, planes, step):
            want = smooth_planes(p, p + step)
            got = pread_all(fd, want.nbytes, p * rows * cols * 4)
            if got != want.tobytes():
                assert_array_bytes(got, want, f"planes {p}..{p + step} of the imported array")
    finally:
        os.close(fd)
