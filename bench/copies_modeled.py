#!/usr/bin/env python3
"""Copies under the model: an array placed by one layout with a copy in
another, against the two layouts alone (docs/reference.md, "Copies").

Formats a volume of --geometry per array and creates four arrays of --shape (no data
is needed for a plan): one in --primary alone, one in --copy alone, one
in --primary with user.mmfs.copies = --copy, and --copy alone placed alike
(below). For every beam (--beams random
positions per dimension, seeded), the middle slice of each dimension and the
p% cubes (--cubes), it reads A@/plan/VIEW of each: the modeled time of the
two single layouts, and for the array with the copy the placement that
serves the view (served_by) and its modeled time. **ratio** = the copy
array's time / the better single layout's (the copy lies on other tracks
than a single layout's array, so the two need not be equal).

The model prices a read from an idle head resting at the volume's start,
so an array placed farther in pays a longer first seek. A fourth array
takes that apart: --copy alone again, placed behind a --primary array of
the same shape, so it lies where the copy array's copy does (**ratio at
the same place**: the copy array's time / the better of the primary alone
and this one).

  python3 bench/copies_modeled.py [--geometry atlas10k3] [--shape 256,256,256]
      [--primary multimap] [--copy hilbert] [--out docs/benchmarks/copies-modeled]
"""
import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_daemon_mount import fresh_volume  # noqa: E402

REPO = HERE.parent


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--geometry", default="atlas10k3", help="mkfs.mmfs -g PROFILE (default atlas10k3)")
    p.add_argument("--shape", default="256,256,256", help="the arrays' shape (default 256,256,256)")
    p.add_argument("--dtype", default="float64", help="their dtype (default float64)")
    p.add_argument("--primary", default="multimap", help="the primary's layout (default multimap)")
    p.add_argument("--copy", default="hilbert", help="the copy, as user.mmfs.copies spells it (default hilbert)")
    p.add_argument("--beams", type=int, default=4, help="random beam positions per dimension (default 4)")
    p.add_argument("--cubes", default="1,5,10", help="p of the p%% cubes, comma-separated (default 1,5,10)")
    p.add_argument("--seed", type=int, default=6, help="seed of the positions (default 6)")
    p.add_argument("--size", default="2G", help="the image's size (default 2G)")
    p.add_argument("--build", default=os.environ.get("MMFS_BUILD", str(REPO / "build")),
                   help="the build directory (default $MMFS_BUILD or build/)")
    p.add_argument("--out", default=str(REPO / "docs" / "benchmarks" / "copies-modeled"),
                   help="writes OUT.json and OUT.md")
    return p.parse_args(argv)


def views(shape, beams, cubes, seed):
    """(name, the path below A@/plan/) of every view priced."""
    rng = random.Random(seed)
    n = len(shape)
    out = []
    for d in range(n):
        for i in range(beams):
            sel = [str(rng.randrange(s)) for s in shape]
            sel[d] = ":"
            out.append((f"beam{d}#{i}", "box/" + ",".join(sel)))
    for d in range(n):
        out.append((f"slice{d}", f"slice/{d}/{shape[d] // 2}"))
    for p in cubes:
        edge = [max(1, round(p / 100 * s)) for s in shape]
        lo = [rng.randrange(s - e + 1) for s, e in zip(shape, edge)]
        out.append((f"cube{p}", "box/" + ",".join(f"{a}:{a + e}" for a, e in zip(lo, edge))))
    return out


def make_array(a, path, attrs):
    path.touch()
    os.setxattr(path, "user.mmfs.dtype", a.dtype.encode())
    for k, v in attrs.items():
        if k != "copies":
            os.setxattr(path, f"user.mmfs.{k}", v.encode())
    os.setxattr(path, "user.mmfs.shape", a.shape.encode())
    if "copies" in attrs:
        os.setxattr(path, "user.mmfs.copies", attrs["copies"].encode())


def first_lbn(path, k=None):
    """The volume sector of element 0 (of placement k when given)."""
    via = f"{path}@/copy/{k}@/lbn/" if k is not None else f"{path}@/lbn/"
    with open(via + ",".join("0" for _ in os.getxattr(path, "user.mmfs.shape").decode().split(","))) as f:
        return int(f.read().split()[0])


def plans_on_fresh_volume(a, attrs, spelled_views, scratch, behind=None):
    """A@/plan of every view of one array alone on a freshly formatted volume
    (so each array lies where a volume's first array lies), or behind an
    array of attributes `behind` created first; and where element 0 lies
    (of each placement)."""
    image, mnt = Path(scratch) / "v.img", Path(scratch) / "mnt"
    daemon = fresh_volume(a.build, image, mnt, a.geometry, a.size)
    try:
        if behind:
            make_array(a, mnt / "before", behind)
        path = mnt / "a"
        make_array(a, path, attrs)
        out = []
        for spelled in spelled_views:
            with open(f"{path}@/plan/{spelled}") as f:
                out.append(json.load(f))
        starts = [first_lbn(path, 0)] + ([first_lbn(path, 1)] if "copies" in attrs else [])
        return out, starts
    finally:
        daemon.unmount()
        image.unlink(missing_ok=True)


def main(argv=None):
    a = parse_args(argv)
    shape = [int(x) for x in a.shape.split(",")]
    cubes = [int(x) for x in a.cubes.split(",")]
    vs = views(shape, a.beams, cubes, a.seed)
    copy_attrs = {"layout": a.copy.split(":")[0]}
    for kv in a.copy.split(":")[1:]:  # the copy's own keys for the single-layout array too
        k, _, v = kv.partition("=")
        copy_attrs[k] = v
    arrays = {"primary": ({"layout": a.primary}, None), "copy": (copy_attrs, None),
              "both": ({"layout": a.primary, "copies": a.copy}, None),
              "copy_placed": (copy_attrs, {"layout": a.primary})}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as scratch:
        runs = {name: plans_on_fresh_volume(a, attrs, [p for _, p in vs], scratch, behind)
                for name, (attrs, behind) in arrays.items()}
    plans = {name: r[0] for name, r in runs.items()}
    starts = {name: r[1] for name, r in runs.items()}
    rows = []
    for i, (vname, spelled) in enumerate(vs):
        both = plans["both"][i]
        own = {c["copy"]: c["modeled_ms"] for c in both["copies"]}
        best = min(plans["primary"][i]["modeled_ms"], plans["copy"][i]["modeled_ms"])
        alike = min(plans["primary"][i]["modeled_ms"], plans["copy_placed"][i]["modeled_ms"])
        rows.append({"view": vname, "path": spelled, "primary_ms": plans["primary"][i]["modeled_ms"],
                     "copy_ms": plans["copy"][i]["modeled_ms"], "copy_placed_ms": plans["copy_placed"][i]["modeled_ms"],
                     "with_copy_ms": both["modeled_ms"], "own_ms": own, "served_by": both["served_by"],
                     "ratio": both["modeled_ms"] / best, "ratio_placed": both["modeled_ms"] / alike,
                     "own_ratio": both["modeled_ms"] / min(own.values())})
    res = {"geometry": a.geometry, "shape": shape, "dtype": a.dtype, "primary": a.primary, "copy": a.copy,
           "command": "python3 bench/copies_modeled.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "starts": starts, "rows": rows, "workloads": workloads(rows)}
    Path(a.out + ".json").write_text(json.dumps(res, indent=1) + "\n")
    Path(a.out + ".md").write_text(markdown(res))
    print(markdown(res))


def workloads(rows):
    """Per workload (a beam's positions averaged, as mmfs-bench does): the three times and the ratio."""
    groups = {}
    for r in rows:
        groups.setdefault(r["view"].split("#")[0], []).append(r)
    out = []
    for name, rs in groups.items():
        mean = lambda key: sum(r[key] for r in rs) / len(rs)  # noqa: E731
        p, c, w = mean("primary_ms"), mean("copy_ms"), mean("with_copy_ms")
        cp = mean("copy_placed_ms")
        out.append({"workload": name, "primary_ms": p, "copy_ms": c, "copy_placed_ms": cp, "with_copy_ms": w,
                    "ratio": w / min(p, c), "ratio_placed": w / min(p, cp),
                    "served_by": sorted({r["served_by"] for r in rs})})
    return out


def markdown(res):
    rows, wl = res["rows"], res["workloads"]
    primary, copy = res["primary"], res["copy"]
    out = [f"# Copies under the model: {primary} with a {copy} copy, {res['geometry']}", "",
           f"Command: `{res['command']}`", "",
           f"Four arrays of shape {','.join(map(str, res['shape']))} {res['dtype']}, each on a freshly "
           f"formatted {res['geometry']} volume: {primary} alone, {copy} alone and {primary} with "
           f"`user.mmfs.copies={copy}`, each the volume's first array (its copy is placed after the primary, "
           f"farther from where the model's idle head rests), and {copy} placed alike (below). Modeled ms from "
           "`A@/plan/VIEW` (idle "
           "device); a beam workload is the mean over its positions, as `mmfs-bench` reports it. "
           "**served by**: the placement the copy array reads the view through (0 the primary, 1 the copy). "
           "**ratio**: the copy array's time / the better single layout's. "
           f"**{copy} placed alike**: {copy} alone again, created behind a {primary} array of the same shape, "
           "so it lies where the copy array's copy does; **ratio alike**: the copy array's time / the better "
           f"of {primary} alone and {copy} placed alike. Element 0 lies at volume sector "
           f"{res['starts']['both'][1]} in the copy array's copy and at {res['starts']['copy_placed'][0]} in "
           f"{copy} placed alike ({res['starts']['copy'][0]} in {copy} alone).", "",
           "## Per workload", "",
           f"| workload | {primary} alone | {copy} alone | {copy} placed alike | with the copy | served by | ratio "
           "| ratio alike |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for w in wl:
        out.append(f"| {w['workload']} | {w['primary_ms']:.2f} | {w['copy_ms']:.2f} | {w['copy_placed_ms']:.2f} | "
                   f"{w['with_copy_ms']:.2f} | {','.join(map(str, w['served_by']))} | {w['ratio']:.3f} | "
                   f"{w['ratio_placed']:.3f} |")
    worst = max(wl, key=lambda w: w["ratio"])
    worst_alike = max(wl, key=lambda w: w["ratio_placed"])
    out += ["", f"Worst workload ratio: {worst['ratio']:.3f} ({worst['workload']}); every workload within 1.05: "
                f"{'yes' if all(w['ratio'] <= 1.05 for w in wl) else 'no'}. At the same place: worst "
                f"{worst_alike['ratio_placed']:.3f} ({worst_alike['workload']}); every workload within 1.05: "
                f"{'yes' if all(w['ratio_placed'] <= 1.05 for w in wl) else 'no'}. Worst view: {primary} alone "
                f"{max(r['primary_ms'] for r in rows):.1f} ms, {copy} alone {max(r['copy_ms'] for r in rows):.1f} "
                f"ms, with the copy {max(r['with_copy_ms'] for r in rows):.1f} ms.", "",
            "## Every view", "",
            "**own** = the copy array's time / its cheaper own placement's (A@/plan's `copies`): the serving "
            "choice itself.", "",
            f"| view | {primary} alone | {copy} alone | {copy} placed alike | with the copy | served by | ratio "
            "| ratio alike | own |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['view']} | {r['primary_ms']:.2f} | {r['copy_ms']:.2f} | {r['copy_placed_ms']:.2f} | "
                   f"{r['with_copy_ms']:.2f} | {r['served_by']} | {r['ratio']:.3f} | {r['ratio_placed']:.3f} | "
                   f"{r['own_ratio']:.3f} |")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    main()
