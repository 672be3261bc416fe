#!/usr/bin/env python3
"""Plots mmfs-bench model results in the style of the MultiMap paper's
Figures 12 and 13: per-cell beam time along each dimension, and total time of
the cube queries, per layout, one panel pair per profile and dataset.

Usage: plot_multimap.py RESULTS.json OUT.png [paper|mmfs]
The third argument picks the issuing discipline (default: paper).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LAYOUTS = ["naive", "hilbert", "multimap"]
COLORS = {"naive": "#bbbbbb", "hilbert": "#6699cc", "multimap": "#cc3333"}


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2)
    data = json.load(open(sys.argv[1]))
    discipline = sys.argv[3] if len(sys.argv) > 3 else "paper"
    results = {p: [r for r in rows if r.get("discipline", "paper") == discipline]
               for p, rows in data["results"].items()}
    panels = [(p, ds) for p in results for ds in sorted({r["dataset"] for r in results[p]})]
    fig, axes = plt.subplots(len(panels), 2, figsize=(11, 3.2 * len(panels)), squeeze=False)
    for row, (profile, ds) in enumerate(panels):
        rows = [r for r in results[profile] if r["dataset"] == ds]
        for col, per_cell in enumerate([True, False]):
            ax = axes[row][col]
            queries = []
            for r in rows:
                if r["per_cell"] == per_cell and r["query"] not in queries:
                    queries.append(r["query"])
            width = 0.8 / len(LAYOUTS)
            for i, layout in enumerate(LAYOUTS):
                vals, errs = [], []
                for q in queries:
                    match = [r for r in rows if r["query"] == q and r["layout"] == layout]
                    vals.append(match[0]["mean_ms"] if match else 0)
                    errs.append(match[0]["stdev_ms"] if match else 0)
                xs = [j + (i - 1) * width for j in range(len(queries))]
                ax.bar(xs, vals, width, yerr=errs, label=layout.capitalize() if layout != "multimap" else "MultiMap",
                       color=COLORS[layout], edgecolor="black", linewidth=0.5)
            ax.set_xticks(range(len(queries)))
            ax.set_xticklabels(queries)
            ax.set_ylabel("I/O time per cell (ms)" if per_cell else "Total I/O time (ms)")
            ax.set_title(f"{profile}, {ds}: {'beam' if per_cell else 'range'} queries ({discipline} discipline)",
                         fontsize=10)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
