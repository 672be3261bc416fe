"""The plots of bench/mmfs_bench_real.py (`mmfs-bench real`): the shared
figure drawn by bench/plot_workloads.py from the JSON, and PREFIX-beams.png,
-slices.png, -cubes.png and -scans.png drawn here with matplotlib (real
clock beside the mmfs layouts' modeled clock)."""
import os
import subprocess
import sys

import numpy as np

from bench_daemon_util import BenchError
from mmfs_bench_real_workloads import pct_label

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --------------------------------------------------------------------------
# plots (matplotlib, in the style of the MultiMap paper's Figures 12 and 13)


def target_style(t, i_mmfs, i_base):
    # the palette of bench/plot_workloads.py, so the figures read alike
    mm_colors = {"naive": "#9e9e9e", "zorder": "#e6a532", "hilbert": "#4a7fc1", "multimap": "#cc3333"}
    base_colors = ["#5aa05a", "#8e6bbf", "#3fb7b7", "#b07a4f"]
    if t["kind"] == "mmfs":
        return dict(color=mm_colors.get(t["layout"], "#444444"), hatch=None)
    return dict(color=base_colors[i_base % len(base_colors)], hatch="//")


def plot_shared(json_path, prefix):
    """The shared figure of bench/plot_workloads.py (the style of `mmfs-bench
    modeled`'s plots) from our JSON; returns its PNG paths, or raises."""
    script = os.path.join(REPO, "bench", "plot_workloads.py")
    if not os.path.exists(script):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot_workloads.py")  # installed copy
    if not os.path.exists(script):
        raise BenchError("bench/plot_workloads.py not found")
    p = subprocess.run([sys.executable, script, json_path, "--out-prefix", prefix], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    if p.returncode != 0:
        raise BenchError(f"plot_workloads.py exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return [line.strip() for line in p.stdout.splitlines() if line.strip().endswith(".png")]


def plot(res, prefix):
    """Writes PREFIX-beams.png, -slices.png, -cubes.png, -scans.png; returns their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["results"]
    targets = res["targets"]
    styles = {}
    im = ib = 0
    for t in targets:
        styles[t["name"]] = target_style(t, im, ib)
        im += t["kind"] == "mmfs"
        ib += t["kind"] != "mmfs"
    mm_targets = [t for t in targets if t["kind"] == "mmfs"]
    geometry = res["config"]["geometry"]
    shp = "×".join(map(str, res["config"]["shape"]))
    cold = "cold cache" if res["cold_cache"]["drop_caches"] else "NOT cold cache"
    cell_txt = "×".join(map(str, res["config"].get("cell") or []))
    out = []

    def get(wid, tn):
        for r in rows:
            if r["workload"] == wid and r["target"] == tn:
                return r
        return None

    kinds = {w["id"]: w for w in res["workloads"]}

    def group_label(wid):
        w = kinds[wid]
        return f"Dim_{w['dim']}" if w["kind"] in ("beam", "slice") else wid

    def bars(ax, groups, tlist, value, ylabel, title):
        width = 0.8 / max(1, len(tlist))
        for i, t in enumerate(tlist):
            vals, lo, hi = [], [], []
            for wid in groups:
                r = get(wid, t["name"])
                v = value(r)
                if v is None:
                    vals.append(np.nan)
                    lo.append(0)
                    hi.append(0)
                    continue
                med, vmin, vmax = v
                vals.append(med)
                lo.append(max(0.0, med - vmin))
                hi.append(max(0.0, vmax - med))
            xs = [j + (i - (len(tlist) - 1) / 2) * width for j in range(len(groups))]
            st = styles[t["name"]]
            ax.bar(xs, vals, width, yerr=[lo, hi] if any(lo) or any(hi) else None, label=t["name"],
                   color=st["color"], hatch=st["hatch"], edgecolor="black", linewidth=0.5, capsize=2)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([group_label(g) for g in groups])
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)

    def real_pc(r):
        s = r and r.get("ms_per_cell")
        return (s["median"], s["min"], s["max"]) if s else None

    def model_pc(r):
        m = r and r.get("modeled")
        v = m.get("ms_per_cell") if m else None
        return (v, v, v) if v is not None else None

    def real_ms(r):
        s = r and r.get("ms")
        return (s["median"], s["min"], s["max"]) if s else None

    def model_ms(r):
        m = r and r.get("modeled")
        v = m.get("modeled_ms") if m else None
        return (v, v, v) if v is not None else None

    for kind, label in (("beam", "beam"), ("slice", "slice")):
        groups = [w["id"] for w in res["workloads"] if w["kind"] == kind]
        if not groups:
            continue
        ncol = 2 if mm_targets else 1
        fig, axes = plt.subplots(1, ncol, figsize=(6.2 * ncol, 4.0), squeeze=False)
        bars(axes[0][0], groups, targets, real_pc, f"time per cell (ms, {cell_txt} cells)",
             f"{label} queries, real time ({cold}), {shp} float64")
        if mm_targets:
            bars(axes[0][1], groups, mm_targets, model_pc, "modeled time per cell (ms)",
                 f"{label} queries, modeled time ({geometry}), mmfs layouts")
        fig.tight_layout()
        path = f"{prefix}-{kind}s.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)

    cubes = [w for w in res["workloads"] if w["kind"] == "cube"]
    if cubes:
        ps = [w["p"] for w in cubes]
        ncol = 2 if mm_targets else 1
        fig, axes = plt.subplots(1, ncol, figsize=(6.2 * ncol, 4.0), squeeze=False)
        for col, (tlist, value, title) in enumerate(
                [(targets, real_ms, f"p%-length cubes, real time ({cold})"),
                 (mm_targets, model_ms, f"p%-length cubes, modeled time ({geometry})")][:ncol]):
            ax = axes[0][col]
            for t in tlist:
                vals = [value(get(w["id"], t["name"])) for w in cubes]
                xs = [p for p, v in zip(ps, vals) if v]
                if not xs:
                    continue
                med = [v[0] for v in vals if v]
                lo = [v[0] - v[1] for v in vals if v]
                hi = [v[2] - v[0] for v in vals if v]
                st = styles[t["name"]]
                ax.errorbar(xs, med, yerr=[lo, hi], label=t["name"], color=st["color"], marker="o",
                            linestyle="--" if st["hatch"] else "-", capsize=2,
                            markeredgecolor="black", markeredgewidth=0.5)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xticks(ps)
            ax.set_xticklabels([pct_label(p) for p in ps])
            ax.set_xlabel("p (cube edge, % of each dimension)")
            ax.set_ylabel("total time (ms)")
            ax.set_title(title + f", {shp}", fontsize=9)
            ax.grid(which="both", alpha=0.3)
            ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        path = f"{prefix}-cubes.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)

    scans = [w["id"] for w in res["workloads"] if w["kind"] in ("full", "plod")]
    if scans:
        fig, ax = plt.subplots(1, 1, figsize=(7.0, 4.0))
        bars(ax, scans, targets, real_ms, "time (ms)", f"full scan and PLoD reads, real time ({cold}), {shp}")
        fig.tight_layout()
        path = f"{prefix}-scans.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    return out
