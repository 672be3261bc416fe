"""The progress bar and quiet output of mmfs-import and mmfs-export (--progress,
--no-progress, -q / --quiet; no bar when stderr is not a terminal)."""
import re

import numpy as np

from h5_support import MiB, assert_exported, check_array, mmfs_export, mmfs_import, write_h5
from h5_support import d, vol  # noqa: F401,F811 (fixtures, requested by name)


# --- progress and quiet ---------------------------------------------------------------

def test_progress_and_quiet(d, tmp_path):
    arr = np.linspace(0, 1, 4 * MiB // 4, dtype="f4").reshape(1024, 1024)
    src = write_h5(tmp_path / "in.h5", {"/p": (arr, {"chunks": (64, 1024)})})
    res = mmfs_import("--progress", f"{src}:/p", d / "a").ok()
    assert re.search(r"\d+(\.\d+)?\s?%", res.err), f"no progress bar on stderr with --progress\n{res}"
    assert "imported /p" in res.out
    res = mmfs_import("--force", "--no-progress", f"{src}:/p", d / "a").ok()
    assert res.err == "" and "imported /p" in res.out, res
    res = mmfs_import("--force", "-q", f"{src}:/p", d / "a").ok()
    assert res.out == "" and res.err == "", f"-q prints nothing but errors\n{res}"
    res = mmfs_import("--force", "--quiet", "--progress", f"{src}:/p", d / "a").ok()
    assert res.out == "" and res.err == "", f"--quiet wins over --progress\n{res}"
    check_array(d / "a", arr)
    mmfs_import("-q", f"{src}:/missing", d / "b").failed(r"/missing")
    out = tmp_path / "out.h5"
    res = mmfs_export("--progress", d / "a", f"{out}:/p").ok()
    assert re.search(r"\d+(\.\d+)?\s?%", res.err), f"no progress bar on stderr with --progress\n{res}"
    res = mmfs_export("-q", "--force", d / "a", f"{out}:/p").ok()
    assert res.out == "" and res.err == "", f"-q prints nothing but errors\n{res}"
    res = mmfs_export("--force", d / "a", f"{out}:/p").ok()
    assert res.err == "", f"no progress bar when stderr is not a terminal\n{res}"
    mmfs_export("-q", d / "nothing", f"{out}:/q").failed()
    assert_exported(out, "/p", arr)
