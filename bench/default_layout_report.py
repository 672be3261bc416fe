#!/usr/bin/env python3
"""What the volume's model chooses as the default layout and cell of an array
(layouts/model_default.h), per geometry: formats a volume of each geometry,
creates an array of --shape with no layout set, and reports A@/info's
layout_rule and layout_choice — every candidate's modeled views and worst
view. -g measure formats the image after timing it (mkfs.mmfs -g measure).

  python3 bench/default_layout_report.py [--shape 256,256,256] [--dtype float64]
      [--geometries atlas10k3,cheetah36es,mems-g2,ssd,measure] [--out docs/benchmarks/default-layout-model]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_daemon_mount import fresh_volume  # noqa: E402

REPO = HERE.parent


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="256,256,256", help="the array's shape (default 256,256,256)")
    p.add_argument("--dtype", default="float64", help="its dtype (default float64)")
    p.add_argument("--geometries", default="atlas10k3,cheetah36es,mems-g2,ssd,measure",
                   help="comma-separated: built-in profiles, JSON files, or measure")
    p.add_argument("--measure-seconds", type=int, default=20, help="time budget of -g measure (default 20)")
    p.add_argument("--size", default="2G", help="the image's size (default 2G)")
    p.add_argument("--build", default=os.environ.get("MMFS_BUILD", str(REPO / "build")),
                   help="the build directory (default $MMFS_BUILD or build/)")
    p.add_argument("--dir", default="/var/tmp/mmfs-default-layout", help="scratch directory (removed after)")
    p.add_argument("--out", default=str(REPO / "docs" / "benchmarks" / "default-layout-model"),
                   help="writes OUT.json and OUT.md")
    return p.parse_args(argv)


def choice_on(geometry, args, scratch):
    image, mnt = scratch / f"{geometry}.img", scratch / f"mnt-{geometry}"
    measure = ["--measure-seconds", str(args.measure_seconds)] if geometry == "measure" else []
    daemon = fresh_volume(args.build, image, mnt, geometry, args.size, measure)
    try:
        path = mnt / "a"
        path.touch()
        os.setxattr(path, "user.mmfs.dtype", args.dtype.encode())
        t0 = time.perf_counter()
        os.setxattr(path, "user.mmfs.shape", args.shape.encode())
        create_ms = (time.perf_counter() - t0) * 1e3
        with open(f"{path}@/info") as f:
            info = json.load(f)
        return {"geometry": geometry, "layout": info["layout"], "cell": info["cell"], "rule": info["layout_rule"],
                "choice": info.get("layout_choice"), "create_ms": create_ms}
    finally:
        daemon.unmount()
        image.unlink(missing_ok=True)


def ms(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def markdown(rows, args):
    out = [f"# The default layout chosen by the model: shape {args.shape} {args.dtype}", "",
           f"Command: `python3 bench/default_layout_report.py --shape {args.shape} --dtype {args.dtype} "
           f"--geometries {args.geometries}`", "",
           "Each volume is formatted with the geometry, an array of the shape is created with no layout set, and "
           "A@/info's `layout_choice` is shown: every candidate's worst modeled view (ms, from an idle device, "
           "plus the host's part on a measured volume) over the three middle slices, the three middle beams and "
           "a 1/20 box. The candidate with the fastest worst view is the default (bold).", ""]
    for r in rows:
        c = r["choice"]
        out += [f"## {r['geometry']}", "",
                f"Chose **{r['layout']}** with cell {','.join(map(str, r['cell']))} "
                f"(setting the shape, which chose and allocated: {r['create_ms']:.0f} ms).", "",
                "| layout | cell | worst view | worst ms | " + " | ".join(
                    v for v in (c["candidates"][0]["views_ms"] if c else {})) + " |",
                "|---|---|---|---:|" + "---:|" * len(c["candidates"][0]["views_ms"] if c else {})]
        for cand in (c["candidates"] if c else []):
            bold = cand["layout"] == c["layout"] and cand["cell"] == c["cell"]
            b = "**" if bold else ""
            views = " | ".join(ms(v) for v in cand["views_ms"].values())
            out.append(f"| {b}{cand['layout']}{b} | {','.join(map(str, cand['cell']))} | {cand['worst_view']} | "
                       f"{b}{ms(cand['worst_ms'])}{b} | {views} |")
        out.append("")
    return "\n".join(out) + "\n"


def main(argv=None):
    args = parse_args(argv)
    scratch = Path(args.dir)
    scratch.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=scratch))
    rows = []
    try:
        for g in args.geometries.split(","):
            rows.append(choice_on(g, args, scratch))
            print(f"{g}: {rows[-1]['layout']} cell {rows[-1]['cell']}: {rows[-1]['rule']}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    Path(args.out + ".json").write_text(json.dumps({"shape": args.shape, "dtype": args.dtype, "rows": rows},
                                                   indent=1) + "\n")
    Path(args.out + ".md").write_text(markdown(rows, args))
    print(f"wrote {args.out}.md and .json")


if __name__ == "__main__":
    main()
