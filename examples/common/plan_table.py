#!/usr/bin/env python3
"""Prints the I/O plans of views (A@/plan/VIEW, docs/reference.md §5) and compares layouts.

    plan_table.py show ARRAY 'LABEL=VIEW' ... [--record FILE.json]
    plan_table.py compare FILE.json [--base LAYOUT]

`show` reads ARRAY@/plan/VIEW for each view: the device requests the view
would execute, the bytes it reads and the bytes it returns, and the service
time the volume's geometry model predicts (from an idle device). With
--record the rows are appended to FILE.json under the array's current layout
(from ARRAY@/info), so `compare` can put layouts side by side.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mmfsview import info  # noqa: E402


def mib(n):
    return f"{n / 2**20:.2f}" if n < 10 * 2**20 else f"{n / 2**20:.0f}"


def show(args):
    meta = info(args.array)
    layout = meta["layout"]
    rows = []
    print(f"   plans of {os.path.basename(args.array)} (layout {layout}, cell {meta['cell']}"
          + (f", basic cube {meta['basic_cube']}" if meta.get("basic_cube") else "") + ")")
    print(f"   {'view':34s} {'':28s} {'requests':>8s} {'MiB read':>9s} {'MiB used':>9s} {'modeled ms':>11s}")
    for item in args.views:
        label, _, view = item.partition("=")
        if not view:
            label, view = item, item
        with open(f"{args.array}@/plan/{view}") as f:
            plan = json.load(f)
        rows.append({"label": label, "view": view, "layout": layout, "requests": plan["requests"],
                     "bytes_read": plan["bytes_read"], "bytes_useful": plan["bytes_useful"],
                     "modeled_ms": plan["modeled_ms"]})
        print(f"   {view:34s} {label[:28]:28s} {plan['requests']:8d} {mib(plan['bytes_read']):>9s} "
              f"{mib(plan['bytes_useful']):>9s} {plan['modeled_ms']:11.1f}")
    if args.record:
        old = []
        if os.path.exists(args.record):
            with open(args.record) as f:
                old = json.load(f)
        old = [r for r in old if r["layout"] != layout]
        with open(args.record, "w") as f:
            json.dump(old + rows, f, indent=1)


def compare(args):
    with open(args.file) as f:
        rows = json.load(f)
    layouts = list(dict.fromkeys(r["layout"] for r in rows))
    views = list(dict.fromkeys((r["label"], r["view"]) for r in rows))
    ms = {(r["label"], r["view"], r["layout"]): r["modeled_ms"] for r in rows}
    base = args.base if args.base in layouts else layouts[0]
    others = [lay for lay in layouts if lay != base]
    head = f"   {'view':34s} {'':28s}" + "".join(f" {lay:>10s}" for lay in layouts)
    head += "".join(f" {lay[:6] + '/' + base[:5]:>13s}" for lay in others)
    print("   modeled ms per layout (lower is better), and each layout's time relative to " + base)
    print(head)
    for label, view in views:
        line = f"   {view:34s} {label[:28]:28s}"
        line += "".join(f" {ms.get((label, view, lay), float('nan')):10.1f}" for lay in layouts)
        b = ms.get((label, view, base))
        for lay in others:
            o = ms.get((label, view, lay))
            line += f" {o / b:12.2f}x" if b and o is not None else f" {'-':>13s}"
        print(line)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("show")
    s.add_argument("array")
    s.add_argument("views", nargs="+", help="LABEL=VIEW (VIEW as below A@/plan/; LABEL without '=')")
    s.add_argument("--record", help="append the rows to this JSON file")
    c = sub.add_parser("compare")
    c.add_argument("file")
    c.add_argument("--base", default="multimap")
    args = p.parse_args(argv)
    show(args) if args.cmd == "show" else compare(args)


if __name__ == "__main__":
    main()
