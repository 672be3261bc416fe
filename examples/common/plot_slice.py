#!/usr/bin/env python3
"""Plots one or more mmfs views to a PNG, side by side.

    plot_slice.py OUT.png VIEW [VIEW ...] [--title T] [--panel-titles 'A|B|...']
                  [--cmap C] [--symmetric [--clip F]] [--transpose] [--aspect A]

Each VIEW is a path such as /mnt/a@/slice/2/64 or /mnt/a@/box/10,:,35,: :
its bytes are read with numpy.fromfile and its shape comes from the array's
`A@/info` (see mmfsview.py). A 2-D view is drawn as an image (first view
dimension down, second across; --transpose swaps them), a 1-D view as a
curve. Axis names come from the array's `user.dims` xattr when it has one
(for instance an HDF5 attribute `dims` that mmfs-import carried over), the
colour bar's unit from `user.units`. Panels share one colour scale.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402  (no pyplot: no GUI, faster start)
from matplotlib.figure import Figure  # noqa: E402

from mmfsview import describe, info, read_view, xattr  # noqa: E402


def kept_dims(array_shape, view):
    """Indices of the array's dimensions a view keeps (for axis names)."""
    n = len(array_shape)
    if view.startswith("plod/"):
        view = view.partition("@/")[2]
    parts = view.split("/") if view else []
    if parts and parts[0] == "slice":
        return [d for d in range(n) if d != int(parts[1])]
    if parts and parts[0] == "box":
        return [d for d, item in enumerate(parts[1].split(",")) if ":" in item]
    return list(range(n))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="PNG file to write")
    p.add_argument("views", nargs="+", help="view paths (1-D or 2-D after fixed dimensions are dropped)")
    p.add_argument("--title", default=None, help="figure title")
    p.add_argument("--panel-titles", default=None, help="'|'-separated titles, one per view (default: the view path)")
    p.add_argument("--cmap", default="viridis")
    p.add_argument("--symmetric", action="store_true", help="colour scale symmetric about 0")
    p.add_argument("--clip", type=float, default=1.0,
                   help="with --symmetric: colour scale at this fraction of the largest |value| (default 1)")
    p.add_argument("--transpose", action="store_true", help="first view dimension across, second down")
    p.add_argument("--aspect", default="equal", help="imshow aspect: equal, auto or a number (pixel height/width)")
    args = p.parse_args(argv)

    arrays, names, units = [], [], None
    for path in args.views:
        array, view, _, shape = describe(path)
        data = read_view(path)
        if data.ndim not in (1, 2):
            sys.exit(f"plot_slice.py: {path}: a {data.ndim}-D view ({shape}); fix more dimensions to get 1-D or 2-D")
        info_shape = [int(s) for s in info(array)["shape"]]
        dims = (xattr(array, "user.dims") or ",".join(f"dim{d}" for d in range(len(info_shape)))).split(",")
        kept = kept_dims(info_shape, view)
        names.append([dims[d] if d < len(dims) else f"dim{d}" for d in kept])
        units = units or xattr(array, "user.units")
        arrays.append(data.T if (args.transpose and data.ndim == 2) else data)
        if args.transpose and data.ndim == 2:
            names[-1] = names[-1][::-1]

    if args.panel_titles:
        titles = args.panel_titles.split("|")
        if len(titles) != len(args.views):
            sys.exit(f"plot_slice.py: {len(titles)} panel titles for {len(args.views)} views")
    else:  # the view relative to the array's directory: velocity@/box/4,:,35,:
        titles = [os.path.basename(describe(v)[0]) + v[len(describe(v)[0]):] for v in args.views]
    titles = [t if len(t) < 60 else "..." + t[-57:] for t in titles]
    finite = [a[np.isfinite(a)] for a in arrays if a.ndim == 2] or [np.zeros(1)]  # images share one scale
    vmax = max(float(np.abs(f).max()) if f.size else 1.0 for f in finite) * args.clip
    if args.symmetric:
        vmin = -vmax
    else:
        vmin = min(float(f.min()) if f.size else 0.0 for f in finite)
        vmax = max(float(f.max()) if f.size else 1.0 for f in finite)
    aspect = args.aspect if args.aspect in ("equal", "auto") else float(args.aspect)

    # Panel height from the images' shape and aspect, so wide sections get no empty bands.
    ratios = [a.shape[0] * (1.0 if aspect == "equal" else 0.8 if aspect == "auto" else aspect) / a.shape[1]
              for a in arrays if a.ndim == 2] or [0.7]
    height = min(6.5, max(2.8, 4.4 * max(ratios) + 1.4))
    fig = Figure(figsize=(4.8 * len(arrays) + 1.4, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(arrays), squeeze=False)
    image = None
    for ax, data, name, title in zip(axes[0], arrays, names, titles):
        if data.ndim == 1:
            ax.plot(np.arange(data.size), data, lw=1)
            ax.set_xlabel(name[0])
            ax.set_ylabel(units or "value")
            ax.grid(alpha=0.3)
        else:
            image = ax.imshow(data, cmap=args.cmap, vmin=vmin, vmax=vmax, aspect=aspect,
                              interpolation="nearest")
            ax.set_ylabel(name[0])
            ax.set_xlabel(name[1])
        ax.set_title(title, fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), shrink=0.9, label=units or "")
    if args.title:
        fig.suptitle(args.title)
    fig.savefig(args.out, dpi=100)
    print(f"plot_slice.py: wrote {args.out} ({', '.join('x'.join(map(str, a.shape)) for a in arrays)})")


if __name__ == "__main__":
    main()
