"""Helpers of the Python client's tests (tests/integration/test_python_*.py).

* Puts the repository's python/ first on sys.path, so the tests exercise this
  checkout's `mmfs` package whether or not `pip install ./python` ran (the
  `engine="mmfs"` entry point needs the install; see xarray_engine()).
* Probes for what the daemon may lack, so that tests depending on it skip
  with a clear reason: `user.mmfs.dims`, a view-read counter in
  `/.mmfs/stats`.
"""
import errno
import json
import os
import sys
import uuid
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))

import mmfs  # noqa: E402

# Where the package is imported from (the tests check this checkout's).
assert Path(mmfs.__file__).resolve().parent == PYTHON_DIR / "mmfs", mmfs.__file__

VIEW_READ_COUNTER = "view_reads"
REFUSED = (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP)


def dims_refusal(directory):
    """None when the daemon accepts `user.mmfs.dims` on an array file in
    `directory`; else the errno name it refused it with (tried once on a
    scratch array, which is then removed)."""
    path = Path(directory) / f".dims-probe-{uuid.uuid4().hex[:8]}"
    with open(path, "xb"):
        pass
    try:
        os.setxattr(path, "user.mmfs.shape", b"2,3")
        try:
            os.setxattr(path, "user.mmfs.dims", b"y,x")
        except OSError as e:
            if e.errno in REFUSED:
                return errno.errorcode[e.errno]
            raise
        return None
    finally:
        os.unlink(path)


def require_dims(directory):
    """Skips the test when the daemon refuses `user.mmfs.dims`."""
    refused = dims_refusal(directory)
    if refused:
        pytest.skip(f"the daemon refuses user.mmfs.dims ({refused}): dimension names are planned in "
                    "docs/reference.md §4 and not implemented yet")


def stats(vol):
    return json.loads((Path(vol.mnt) / ".mmfs" / "stats").read_text())


def find_counter(tree, name):
    """The value of counter `name` anywhere in the stats JSON (top level or nested), or None."""
    if isinstance(tree, dict):
        if name in tree and isinstance(tree[name], int):
            return tree[name]
        for value in tree.values():
            found = find_counter(value, name)
            if found is not None:
                return found
    return None


def view_reads(vol):
    """The daemon's count of view reads (opens of view files), skipping the
    test when /.mmfs/stats has no such counter."""
    value = find_counter(stats(vol), VIEW_READ_COUNTER)
    if value is None:
        pytest.skip(f"/.mmfs/stats has no '{VIEW_READ_COUNTER}' counter (views opened and read), so the "
                    "daemon cannot confirm one view read per indexing call; mmfs.trace() checks the "
                    "client side in the other tests")
    return value


def xarray_engine():
    """"mmfs" when the xarray entry point is installed (pip install ./python),
    else skips."""
    import xarray as xr
    if "mmfs" not in xr.backends.list_engines():
        pytest.skip("the 'mmfs' xarray engine is not registered: pip install ./python (scripts/install-deps.sh "
                    "--tests does) to install its entry point")
    return "mmfs"
