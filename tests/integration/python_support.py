"""Helpers of the Python client's tests (tests/integration/test_python_*.py).

* Puts the repository's python/ first on sys.path, so the tests exercise this
  checkout's `mmfs` package whether or not `pip install ./python` ran (the
  `engine="mmfs"` entry point needs the install; see xarray_engine()).
* The daemon's count of data-view opens in `/.mmfs/stats`, which proves
  how many view reads an indexing call made.
"""
import json
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))

import mmfs  # noqa: E402

# Where the package is imported from (the tests check this checkout's).
assert Path(mmfs.__file__).resolve().parent == PYTHON_DIR / "mmfs", mmfs.__file__

VIEW_READ_COUNTER = ("views", "data_opens")


def stats(vol):
    return json.loads((Path(vol.mnt) / ".mmfs" / "stats").read_text())


def view_reads(vol):
    """The daemon's count of data-view opens since the mount (/.mmfs/stats
    views.data_opens): one per read of a slice, box or PLoD view."""
    tree = stats(vol)
    for key in VIEW_READ_COUNTER:
        assert isinstance(tree, dict) and key in tree, f"/.mmfs/stats has no {'.'.join(VIEW_READ_COUNTER)}"
        tree = tree[key]
    assert isinstance(tree, int)
    return tree


def xarray_engine():
    """"mmfs" when the xarray entry point is installed (pip install ./python),
    else fails (scripts/install-deps.sh --tests installs it)."""
    import xarray as xr
    if "mmfs" not in xr.backends.list_engines():
        pytest.fail("the 'mmfs' xarray engine is not registered: pip install ./python (scripts/install-deps.sh "
                    "--tests does) to install its entry point")
    return "mmfs"
