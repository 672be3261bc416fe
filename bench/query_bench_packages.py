"""DuckDB and pyroaring for bench/query_bench.py (`mmfs-bench query`):
ensure_packages() imports them, installing them with pip when absent, and
sets this module's `duckdb` and `pyroaring` (None until then); the other
modules use them as packages.duckdb and packages.pyroaring."""
import os
import subprocess
import sys

from bench_daemon_util import BenchError, log

duckdb = None
pyroaring = None


def ensure_packages():
    """Imports duckdb and pyroaring, installing them with pip when absent."""
    global duckdb, pyroaring
    missing = []
    for mod in ("duckdb", "pyroaring"):
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        log(f"mmfs-bench query: Python package(s) {', '.join(missing)} missing: installing them with "
            f"`python3 -m pip install {' '.join(missing)}` (scripts/install-deps.sh installs them too)")
        env = dict(os.environ, PIP_BREAK_SYSTEM_PACKAGES="1", PIP_ROOT_USER_ACTION="ignore",
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            raise BenchError(f"pip install {' '.join(missing)} failed (exit {p.returncode}):\n{p.stdout[-2000:]}")
    import duckdb as _duckdb
    import pyroaring as _pyroaring
    duckdb, pyroaring = _duckdb, _pyroaring
