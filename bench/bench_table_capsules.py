#!/usr/bin/env python3
"""A table in capsules against the same table in the volume's default layout,
through the daemon on a mems-g2 image: the modeled device time
(`D@/plan/rows/...`, `A@/plan/...`) of a full scan, a one-attribute scan, and
record ranges of 1, 100 and 10,000 records, and the wall time and device
sectors of reading them (`D@/rows/...`, median of RUNS cold reads: the volume
is remounted before each).

    python3 bench/bench_table_capsules.py [--records 1000000] [--runs 3]
                                                [--dir /var/tmp] [--out docs/benchmarks]

Needs a build (MMFS_BUILD, default build/). Writes table-capsules.json and
table-capsules.md to --out.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("MMFS_BUILD", ROOT / "build"))
COLUMNS = [("a1", "float64"), ("a2", "int32"), ("a3", "uint16"), ("a4", "uint8")]


def is_mounted(mnt):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == str(mnt) for line in f)


class Mounted:
    def __init__(self, image, mnt):
        self.image, self.mnt = image, mnt

    def __enter__(self):
        subprocess.run([str(BUILD / "daemon" / "mmfs"), str(self.image), str(self.mnt)], check=True)
        deadline = time.time() + 30
        while not is_mounted(self.mnt):
            if time.time() > deadline:
                sys.exit("mmfs did not mount")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        for _ in range(50):
            if subprocess.run(["fusermount3", "-u", str(self.mnt)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        while is_mounted(self.mnt):
            time.sleep(0.01)


def plan(path):
    return json.loads(Path(path).read_text())


def sectors_read(mnt):
    return json.loads((mnt / ".mmfs" / "stats").read_text())["sectors_read"]


def make_table(d, records, rng):
    d.mkdir()
    for name, dtype in COLUMNS:
        arr = rng.integers(1, 100, size=records).astype(dtype)
        (d / name).touch()
        os.setxattr(d / name, "user.mmfs.dtype", dtype.encode())
        os.setxattr(d / name, "user.mmfs.shape", str(records).encode())
        arr.tofile(d / name)


def ranges(records):
    mid = records // 2
    return {"1 record": f"{mid}:{mid + 1}", "100 records": f"{mid}:{mid + 100}",
            "10,000 records": f"{mid}:{mid + 10000}", "full scan": ":"}


def measure(image, mnt, d_name, records, runs):
    out = {}
    with Mounted(image, mnt):
        d = mnt / d_name
        for what, sel in ranges(records).items():
            out[what] = {"modeled_ms": plan(Path(f"{d}@") / "plan" / "rows" / sel)["modeled_ms"]}
        out["a1 scan"] = {"modeled_ms": plan(Path(f"{d}/a1@") / "plan" / "box" / ":")["modeled_ms"]}
        layout = json.loads((Path(f"{d}@") / "info").read_text())["layout"]
    for what, sel in ranges(records).items():
        walls, sectors = [], []
        for _ in range(runs):
            with Mounted(image, mnt):
                s0 = sectors_read(mnt)
                t0 = time.perf_counter()
                (Path(f"{mnt / d_name}@") / "rows" / sel).read_bytes()
                walls.append(time.perf_counter() - t0)
                sectors.append(sectors_read(mnt) - s0)
        out[what]["wall_ms"] = statistics.median(walls) * 1e3
        out[what]["sectors"] = statistics.median(sectors)
    return layout, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mmfs-table-bench-", dir=a.dir))
    image, mnt = work / "vol.img", work / "mnt"
    mnt.mkdir()
    try:
        subprocess.run([str(BUILD / "mkfs" / "mkfs.mmfs"), "-g", "mems-g2", "-s", "2G", str(image)], check=True,
                       capture_output=True)
        rng = np.random.default_rng(17)
        with Mounted(image, mnt):
            make_table(mnt / "default", a.records, rng)
            make_table(mnt / "capsules", a.records, rng)
            os.setxattr(mnt / "capsules", "user.mmfs.layout", b"capsule")
        results = {}
        for name in ("default", "capsules"):
            layout, r = measure(image, mnt, name, a.records, a.runs)
            results[name] = {"layout": layout, "reads": r}
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", str(mnt)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    lines = [f"# A table of {a.records:,} records ({', '.join(f'{n} {t}' for n, t in COLUMNS)}) on mems-g2",
             "", "Command: `python3 bench/bench_table_capsules.py " +
             f"--records {a.records} --runs {a.runs}`", "",
             "| read | default modeled ms | capsules modeled ms | ratio | default wall ms | capsules wall ms |"
             " default sectors | capsules sectors |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for what in list(ranges(a.records)) + ["a1 scan"]:
        dflt, caps = results["default"]["reads"][what], results["capsules"]["reads"][what]
        ratio = dflt["modeled_ms"] / caps["modeled_ms"] if caps["modeled_ms"] else float("nan")
        lines.append(f"| {what} | {dflt['modeled_ms']:.3f} | {caps['modeled_ms']:.3f} | {ratio:.2f} | "
                     f"{dflt.get('wall_ms', float('nan')):.1f} | {caps.get('wall_ms', float('nan')):.1f} | "
                     f"{dflt.get('sectors', '')} | {caps.get('sectors', '')} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "table-capsules.json").write_text(json.dumps({"records": a.records, "results": results}, indent=2))
        (out / "table-capsules.md").write_text(text)


if __name__ == "__main__":
    main()
