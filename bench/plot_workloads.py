#!/usr/bin/env python3
"""Plots of the mmfs-bench workloads in the style of the MultiMap paper's
figures: per-cell beam time along each dimension per layout (grouped bars,
Fig. 12(a)/13(a)), the middle slice along each dimension, p%-length cube time
against p (Fig. 12(b)), and the full scan and PLoD reads. One PNG per profile
and clock.

Usage: plot_workloads.py RESULTS.json [--out-prefix PREFIX]
  writes PREFIX-<profile>.png (modeled clock) or PREFIX-<profile>-real.png
  (real clock) for every profile in RESULTS.json; PREFIX defaults to
  RESULTS.json without its extension. Prints the paths written.
Exit status: 0 done, 2 unreadable input, 3 matplotlib missing.

Input: the JSON of `mmfs-bench modeled` (schema "mmfs-bench-modeled/1"),
or of `mmfs-bench real` / bench/mmfs_bench_real.py ("mmfs-bench-real/1",
read through real_profiles() below).

Schema "mmfs-bench-modeled/1" (a real-clock writer that wants this script to
read its JSON directly writes the same, with "clock": "real"):

  {
    "schema": "mmfs-bench-modeled/1",
    "clock": "modeled" | "real",
    "command": str,                       # the command line
    "config": {"shape": [int], "dtype": str, "itemsize": int, "bytes": int,
               "layouts": [str], "cell": [int] | "daemon default",
               "runs": int, "seed": int, "cubes": [float], "plod": int,
               "baselines": bool, "chunk_edge": int, "first_lbn": int,
               "quick": bool, "cube_definition": str},
    "profiles": [{
      "profile": str,                     # geometry profile name or JSON file
      "geometry": {...},                  # `mmfs-geom PROFILE info`
      "cell": [int],                      # the mmfs cell: the per-cell denominator
      "targets": [{"name": str,           # "mmfs-<layout>", "contiguous", "chunked"
                   "kind": "mmfs" | "baseline",
                   "label": str, "layout": str | null,
                   "placement": {...}     # or "error": str when not placed
                  }],
      "workloads": [{"id": str,           # beam<D> slice<D> cube<p> full plod<K>-full plod<K>-slice0
                     "kind": "beam" | "slice" | "cube" | "full" | "plod",
                     "dim": int | null, "p": float | null, "plod": int | null,
                     "random": bool,      # one query per run at random positions
                     "elements": int, "bytes": int,
                     "views": [str]}],    # the A@/... view of every query
      "results": [{                       # one per workload and placed target
        "workload": str, "kind": str, "dim": int | null, "p": float | null,
        "plod": int | null,
        "target": str, "target_kind": "mmfs" | "baseline", "layout": str | null,
        "clock": "modeled" | "real",
        "elements": int,                  # elements per query
        "cells": float,                   # units the target read (cells, pages, chunks); mean
        "ref_cells": float,               # mmfs-grid cells the query touches; mean
        "requests": float, "bytes_read": float, "bytes_useful": float,  # means
        "ms": {"median": float, "min": float, "max": float, "runs": [float]},
        "ms_per_cell": {... same keys ...},   # ms / ref_cells, run by run
        "best_baseline": str | null,
        "ratio_vs_best_baseline": float | null   # best baseline median / this median
      }]
    }],
    "table3": {...}                       # optional: `mmfs-bench model`'s JSON
  }

This script needs of each result only: target, target_kind, kind, dim, p,
ms.{median,min,max} and, for the per-cell panel, ms_per_cell (else
us_per_element, else ms / elements, plotted per element).
"""
import argparse
import json
import os
import re
import sys

ORDER = ["naive", "zorder", "hilbert", "multimap", "quadrangle", "capsule", "mloc"]
COLORS = {"naive": "#9e9e9e", "zorder": "#e6a532", "hilbert": "#4a7fc1", "multimap": "#cc3333"}
BASELINE_COLORS = ["#5aa05a", "#8e6bbf", "#3fb7b7", "#b07a4f"]


def png_name(prefix, profile, clock):
    """PREFIX-<profile stem>[-real].png (bench/modeled_command.cc uses the same rule)."""
    stem = os.path.splitext(os.path.basename(profile))[0]
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", stem)
    return f"{prefix}-{stem}{'' if clock == 'modeled' else '-' + clock}.png"


def real_profiles(doc):
    """mmfs-bench-real/1 -> the profile list of the schema above (what this script reads)."""
    rows = []
    for r in doc.get("results", []):
        if not r.get("ms"):
            continue
        row = dict(r)
        row["target_kind"] = "mmfs" if r.get("target_kind") == "mmfs" else "baseline"
        row["clock"] = "real"
        rows.append(row)
    geometry = doc.get("config", {}).get("geometry", "real")
    return [{"profile": geometry, "clock": "real", "results": rows}]


def load(path):
    with open(path) as f:
        doc = json.load(f)
    schema = doc.get("schema", "")
    if schema.startswith("mmfs-bench-real/"):
        return real_profiles(doc)
    if not schema.startswith("mmfs-bench-modeled/"):
        raise ValueError(f"{path}: unknown schema {schema!r}")
    clock = doc.get("clock", "modeled")
    return [dict(p, clock=clock) for p in doc["profiles"]]


def targets_of(results):
    """Targets in display order: mmfs layouts in ORDER, then baselines as they come."""
    seen = []
    for r in results:
        if r["target"] not in seen:
            seen.append(r["target"])
    kind = {r["target"]: r["target_kind"] for r in results}
    mm = sorted((t for t in seen if kind[t] == "mmfs"),
                key=lambda t: ORDER.index(t[5:]) if t[5:] in ORDER else len(ORDER))
    return mm + [t for t in seen if kind[t] != "mmfs"], kind


def style(target, kind, index, clock):
    if kind == "mmfs":
        name = target[5:] if target.startswith("mmfs-") else target
        return dict(color=COLORS.get(name, "#444444"), label=name)
    # Modeled baselines are placement models, not the libraries: say so in the legend.
    label = f"{target} (model)" if clock == "modeled" else target
    return dict(color=BASELINE_COLORS[index % len(BASELINE_COLORS)], hatch="//", label=label)


def per_cell(r):
    """(summary, unit) of the per-cell time of a result."""
    if r.get("ms_per_cell"):
        return r["ms_per_cell"], "ms per cell"
    if r.get("us_per_element"):
        return r["us_per_element"], "µs per element"
    n = max(1, r.get("elements") or 1)
    return {k: r["ms"][k] * 1e3 / n for k in ("median", "min", "max")}, "µs per element"


def bars(ax, groups, targets, kinds, clock, value, title, ylabel):
    """Grouped bars: one group per label in `groups` (label, {target: summary})."""
    import numpy as np

    width = 0.8 / max(1, len(targets))
    x = np.arange(len(groups))
    top = []
    for i, t in enumerate(targets):
        med, lo, hi = [], [], []
        for _, by in groups:
            s = by.get(t)
            v = value(s) if s else None
            med.append(v["median"] if v else np.nan)
            lo.append(v["median"] - v["min"] if v else 0)
            hi.append(v["max"] - v["median"] if v else 0)
        st = style(t, kinds[t], i - sum(1 for u in targets if kinds[u] == "mmfs"), clock)
        ax.bar(x + (i - (len(targets) - 1) / 2) * width, med, width, yerr=[lo, hi], capsize=2,
               edgecolor="black", linewidth=0.4, error_kw=dict(lw=0.6), **st)
        top += [m for m in med if m == m]
    ax.set_xticks(x)
    ax.set_xticklabels([g for g, _ in groups])
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(ylabel)
    positive = [v for v in top if v > 0]
    if positive and max(positive) / min(positive) > 30:
        ax.set_yscale("log")
        ax.set_ylabel(ylabel + " (log)")
    ax.grid(axis="y", alpha=0.3)


def plot_profile(prof, out):
    import matplotlib.pyplot as plt

    results = prof["results"]
    targets, kinds = targets_of(results)
    by = {}
    for r in results:
        by.setdefault(r["workload"], {})[r["target"]] = r
    first = {}
    for r in results:
        first.setdefault(r["workload"], r)

    def groups(kind, label):
        ws = sorted((w for w, r in first.items() if r["kind"] == kind),
                    key=lambda w: (first[w].get("dim") or 0, first[w].get("p") or 0))
        return [(label(first[w]), by[w]) for w in ws]

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    clock = prof.get("clock", "modeled")
    unit = None
    beam_groups = groups("beam", lambda r: f"Dim {r['dim']}")
    if beam_groups:
        unit = per_cell(next(iter(beam_groups[0][1].values())))[1]
    unit = unit or "ms per cell"
    bars(axes[0][0], beam_groups, targets, kinds, clock, lambda r: per_cell(r)[0],
         f"Beam queries: time {unit.split(' ', 1)[1]} along each dimension", unit)
    bars(axes[0][1], groups("slice", lambda r: f"x{r['dim']} = middle"), targets, kinds, clock, lambda r: r["ms"],
         "Middle slice along each dimension", "ms per query")

    ax = axes[1][0]
    cubes = groups("cube", lambda r: r["p"])
    for i, t in enumerate(targets):
        pts = [(p, g[t]["ms"]) for p, g in cubes if t in g]
        if not pts:
            continue
        st = style(t, kinds[t], i - sum(1 for u in targets if kinds[u] == "mmfs"), clock)
        st.pop("hatch", None)
        ps = [p for p, _ in pts]
        med = [s["median"] for _, s in pts]
        err = [[s["median"] - s["min"] for _, s in pts], [s["max"] - s["median"] for _, s in pts]]
        ax.errorbar(ps, med, yerr=err, marker="o" if kinds[t] == "mmfs" else "s", capsize=2,
                    linestyle="-" if kinds[t] == "mmfs" else "--", **st)
    ax.set_xlabel("p (edge = p % of each dimension)")
    ax.set_ylabel("ms per query")
    ax.set_title("p%-length cube queries", fontsize=9)
    if cubes:
        ax.set_xticks([p for p, _ in cubes])
        meds = [g[t]["ms"]["median"] for _, g in cubes for t in g if g[t]["ms"]["median"] > 0]
        if meds and max(meds) / min(meds) > 30:
            ax.set_yscale("log")
            ax.set_ylabel("ms per query (log)")
    ax.grid(alpha=0.3)

    scans = groups("full", lambda r: "full scan") + groups(
        "plod", lambda r: f"plod/{r['plod']}" + (f" slice{r['dim']}" if r.get("dim") is not None else ""))
    bars(axes[1][1], scans, targets, kinds, clock, lambda r: r["ms"], "Full scan and PLoD reads", "ms per query")

    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.955), ncol=min(len(labels), 7),
               fontsize=8, frameon=False)
    fig.suptitle(f"{prof['profile']} — {clock} clock" + (" (service-time model, idle device per query)"
                                                         if clock == "modeled" else ""), y=0.99, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.935))
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="JSON of mmfs-bench modeled (or real)")
    ap.add_argument("--out-prefix", help="PNG path prefix (default: RESULTS without .json)")
    a = ap.parse_args()
    try:
        import matplotlib
    except ImportError:
        print("plot_workloads.py: matplotlib is not installed (apt-get install python3-matplotlib)",
              file=sys.stderr)
        return 3
    matplotlib.use("Agg")
    try:
        profiles = load(a.results)
    except (OSError, ValueError, KeyError) as e:
        print(f"plot_workloads.py: {e}", file=sys.stderr)
        return 2
    prefix = a.out_prefix or os.path.splitext(a.results)[0]
    for prof in profiles:
        out = png_name(prefix, prof["profile"], prof.get("clock", "modeled"))
        plot_profile(prof, out)
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
