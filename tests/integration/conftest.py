"""Shared fixtures for the integration tests: the built tools and a runner.

The build directory is `build/` at the repository root, or $MMFS_BUILD
(scripts/test.sh --sanitize points it at build-asan/).
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


# Lines a test wants at the end of the pytest output (e.g. pjdfstest's summary,
# which scripts/test.sh repeats before its totals).
TERMINAL_SUMMARY = []


def pytest_terminal_summary(terminalreporter):
    for line in TERMINAL_SUMMARY:
        terminalreporter.write_line(line)


def build_dir() -> Path:
    env = os.environ.get("MMFS_BUILD")
    return Path(env).resolve() if env else REPO_ROOT / "build"


def run_tool(path, *args, input=None, timeout=120):
    """Runs a tool; returns (returncode, stdout, stderr) as text."""
    proc = subprocess.run([str(path), *map(str, args)], input=input, capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="session")
def mmfs_geom_path() -> Path:
    """Path of the built mmfs-geom; fails (not skips) when it was not built."""
    path = build_dir() / "tools" / "mmfs-geom"
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built: run scripts/build.sh (or set MMFS_BUILD)", pytrace=False)
    return path


@pytest.fixture
def mmfs_geom(mmfs_geom_path):
    """mmfs_geom(*args, input=None) -> (rc, stdout, stderr)."""

    def run(*args, input=None):
        return run_tool(mmfs_geom_path, *args, input=input)

    return run


# The uniform toy disk of docs/reference.md §7 with a settle angle of zero (settle_ms 0) and
# D = 4, so adjacent(L, s) = L + s * sectors_per_track.
TOY_DISK = {
    "kind": "disk", "sector_size": 512, "cylinders": 1000, "surfaces": 1,
    "sectors_per_track": 8, "rpm": 10000, "track_skew_sectors": 0,
    "settle_ms": 0, "settle_cylinders": 4, "conservatism_deg": 0,
}


@pytest.fixture
def geometry_file(tmp_path):
    """geometry_file(obj_or_text, name="geom.json") -> path of a file holding it."""

    def write(content, name="geom.json"):
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return path

    return write


@pytest.fixture
def toy_disk_definition():
    """The toy disk's JSON definition (a fresh copy to modify)."""
    return dict(TOY_DISK)


@pytest.fixture
def toy_disk(geometry_file):
    """Path of a file holding the toy disk."""
    return geometry_file(TOY_DISK, "toy-disk.json")


# --- the mmfs FUSE daemon (tests/integration/test_daemon_*.py) ----------------
# Fixtures `volume`, `module_volume`, `mems` and `volume_factory`: mounted volumes on
# image files under /var/tmp; see mmfs_mount.py.
from mmfs_mount import mems, module_volume, volume, volume_factory  # noqa: E402,F401
