"""The markdown report of bench/mmfs_bench_real.py (`mmfs-bench real`): the
machine and the command, the setup, the method, the time per workload, the
per-cell time, the mmfs I/O plans beside the real time (with the host part
or the measured geometry's model), the fastest target per workload, the
plots and the failures."""
import os

from bench_daemon_util import MiB, fmt_bytes, fmt_num
from mmfs_bench_real_targets import READ_CHUNK


# --------------------------------------------------------------------------
# report


def fmt_ms(s):
    if not s:
        return "—"
    if len(s["runs"]) == 1:
        return fmt_num(s["median"], 2 if s["median"] < 10 else 1)
    d = 2 if s["median"] < 10 else 1
    return f"{fmt_num(s['median'], d)} ({fmt_num(s['min'], d)}–{fmt_num(s['max'], d)})"


def fmt_sig(x):
    if x is None:
        return "—"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


# The lines this report shares with `mmfs-bench python`'s (python_bench_report.py).

def machine_line(m, software):
    """The machine and the run: date, host, kernel, CPUs, memory, the load average
    at the start and at the end, `software` (the versions compared) and mmfs's commit."""
    return (f"{m['date']} · `{m['host']}` · kernel {m['kernel']} · {m['nproc']} CPUs"
            f"{' (' + m['cpu'] + ')' if m.get('cpu') else ''} · {m.get('mem_total', '?')} RAM · "
            f"load average {m.get('loadavg', '?')} at the start, {m.get('loadavg_end', '?')} at the end · "
            f"{software} · mmfs {m.get('git')}")


def array_line(b, m, how):
    """The setup's array: shape, size, the generator, `how` the data is used, the
    disk under test (from machine `m`) and the kept run a --reuse took up."""
    a = b.a
    return (f"* Array {'×'.join(map(str, b.shape))} float64 ({fmt_bytes(b.nbytes)}), standard normals from "
            f"`numpy.random.default_rng({a.seed})`{how} Disk under test: `{a.dir}` on "
            f"{m.get('dir_filesystem') or '?'}."
            + (f" Data taken up from a kept run of {b.setup.get('reused_from')} (--reuse)."
               if b.setup.get("reused_from") else ""))


def ingest_lines(b, what):
    """The ingest rates (`what` they are) as one line, or none without ingest times."""
    ing = b.setup.get("ingest_s") or {}
    if not ing:
        return []
    lines = [f"* Ingest ({what}): " + ", ".join(f"{k} {b.nbytes / MiB / v:.0f} MiB/s" for k, v in ing.items() if v)
             + "."]
    # Arrays with copies: the primary is durable at fsync (its rate above);
    # the copies caught up in the background after it.
    for k, v in (b.setup.get("copies_catch_up_s") or {}).items():
        lines.append(f"* {k}: the copies caught up {v:.1f} s after the fsync "
                     f"({b.nbytes / MiB / max(v, 1e-9):.0f} MiB/s per copy of the array's bytes).")
    return lines


def run_time_start(st):
    """The start of the run-time line: the setup's time, or that it was taken up."""
    return "* Run time: " + ("setup taken up (--reuse)" if st.get("reused_from")
                             else "setup %.0f s" % st.get("build_s", 0))


def report(b, res):
    a = b.a
    m = res["machine"]
    rows = res["results"]
    by = {(r["workload"], r["target"]): r for r in rows}
    tnames = [t["name"] for t in b.targets]
    L = ["# mmfs-bench real: cold-cache workloads, mmfs layouts vs h5py, zarr and numpy.memmap", ""]
    L += ["```", res["command"], "```", ""]
    L.append(machine_line(m, f"Python {m['python']}, numpy {m['numpy']}, h5py {m['h5py']} (HDF5 {m['hdf5']}), "
                             f"zarr {m.get('zarr')}"))
    L.append("")
    L.append("## Setup")
    L.append("")
    L.append(array_line(b, m, ", written slab by slab (one chunk row along dim 0) into every target."))
    if a.layouts:
        L.append(f"* mmfs: one `mkfs.mmfs -g {a.geometry}` image of {fmt_bytes(b.setup.get('image_bytes'))} "
                 f"(sparse) in the same directory, mounted by the daemon"
                 f"{' with `-o ' + a.mount_options + '`' if a.mount_options else ''}; one array file per layout "
                 f"(`user.mmfs.layout`, then `user.mmfs.shape`):")
        for lb in a.layouts:
            info = b.infos.get(lb) or {}
            extra = []
            if info.get("cell"):
                extra.append(f"cell {'×'.join(map(str, info['cell']))}")
            if info.get("basic_cube"):
                extra.append(f"basic cube {'×'.join(map(str, info['basic_cube']))} cells")
            if info.get("order"):
                extra.append(f"order {','.join(map(str, info['order']))}")
            db = (info.get("device_bytes") or {}).get("data")
            if db:
                extra.append(f"{fmt_bytes(db)} on the device")
            for c in info.get("copies") or []:  # user.mmfs.copies: each copy's placement and space
                extra.append(f"copy {c['copy']} `{c['spec']}` (cell {'×'.join(map(str, c['cell']))}) "
                             f"{fmt_bytes(c['device_bytes'])} on the device")
            L.append(f"  * `{lb}`: {', '.join(extra) if extra else info.get('error', '')}")
    ch = "×".join(map(str, b.chunks))
    L.append("* Baselines, same data, same disk: "
             + "; ".join({"h5py-contig": "`h5py-contig` an HDF5 contiguous dataset",
                          "h5py-chunked": f"`h5py-chunked` an HDF5 dataset chunked {ch}, uncompressed, "
                                          f"default chunk cache"
                                          + (f" ({fmt_bytes(b.setup['h5_chunk_cache_bytes'])})"
                                             if b.setup.get("h5_chunk_cache_bytes") else ""),
                          "zarr": f"`zarr` a zarr v3 array, chunks {ch}, no compressors or filters, "
                                  f"local directory store",
                          "memmap": "`memmap` the raw C-order file through `numpy.memmap`"}[x]
                         for x in a.baselines) + ".")
    L += ingest_lines(b, "warm, including fsync; not a measurement of this benchmark")
    st = b.setup
    L.append(run_time_start(st) + f", plans {st.get('plans_s', 0):.0f} s, "
             f"measurements {st.get('measure_s', 0):.0f} s "
             f"({sum(len(w['sels']) for w in b.workloads) * len(b.targets) * a.runs} cold reads), "
             f"total {st.get('total_s', 0):.0f} s.")
    L.append("")
    L.append("## Method")
    L.append("")
    if b.drop.ok:
        cold = ("**Cold caches**: `sync; echo 3 > /proc/sys/vm/drop_caches` before every timed read"
                + ("; before every mmfs read the daemon is also unmounted and mounted again (its own chunk "
                   "cache is not dropped otherwise), then the page cache is dropped." if a.remount else
                   "; the daemon stays mounted (--no-remount), so its own caches may be warm."))
    else:
        cold = f"**{b.drop.error}** — the times below are NOT cold-cache."
    L.append(cold + " (drop_caches empties this kernel's caches only: a virtual disk may still be cached by "
             "its host, which a guest cannot drop.)")
    bins = b.setup.get("binaries") or {}
    if bins:
        L.append("The daemon and mkfs.mmfs run from copies taken at the start ("
                 + ", ".join(f"`{v['source']}` of {v['mtime']}, sha256 {v['sha256_16']}…" for v in bins.values())
                 + "), so a rebuild during the run changes nothing.")
    L.append("Each timing covers opening the file or store, the read and the close. mmfs is read through "
             "its views (`A@/box/SEL`, `A@/slice/D/I`, `A@/plod/...`; the full scan reads the array file "
             f"itself) with {READ_CHUNK // MiB} MiB `os.readv` calls into one buffer; h5py by "
             "`h5py.File(...)[\"a\"][SEL]`, zarr by `zarr.open_array(...)[SEL]`, the raw file by "
             "`np.array(np.memmap(...)[SEL])`.")
    L.append("")
    L.append("Workloads (S = shape): **beamD** — every element along dim D, the other coordinates fixed at "
             f"{a.beams} random positions (seeded, the same for every target); each beam is its own cold "
             "read and the workload's time is the mean over the positions. **sliceD** — the middle "
             "hyperplane x_D = S_D/2. **cubeP** — a p%-length cube (MultiMap paper §5): edge "
             "max(1, round(p/100·S_d)) along every dim, random corner (seeded) such that it fits. "
             "**full** — the whole array. "
             f"**point** — one element at {a.beams} random positions, each its own cold read: the fixed cost "
             "of a cold read (for mmfs: the fresh mount's lookups, the open, the array's first use, one READ). "
             f"**plod{a.plod}-full / plod{a.plod}-slice0** — PLoD, keeping the {a.plod} most significant "
             f"bytes of every element, of the whole array (`A@/plod/{a.plod}`) and of the middle slice along "
             f"dim 0 (`A@/plod/{a.plod}@/slice/0/M`); the baselines read the same elements and drop the low bytes "
             "in numpy (inside the timing). mmfs reads the whole elements from the device today: byte planes "
             "come with the MLOC layout, so PLoD costs as much I/O as the plain read.")
    L.append("")
    L.append(f"{a.runs} run(s) of everything; the target order rotates from run to run. Times are the median "
             "(min–max) over runs in ms. **ratio** = the best baseline's median / the target's median "
             "(> 1: the mmfs layout is faster than every baseline), the best baseline per workload in bold. "
             f"**Per-cell time** = time / number of cells of the mmfs cell grid ({'×'.join(map(str, b.cell or []))} "
             "elements: the cell of the naive array, the daemon's default) that the selection touches — the same "
             "unit for every target, as `mmfs-bench modeled` counts (the papers' ms per cell, one cell per disk "
             "block); time per element is in the JSON (`us_per_element`). **model** = `modeled_ms` of "
             "`A@/plan/VIEW`: the service time the volume's geometry model predicts for the view's I/O plan "
             f"on the modeled `{a.geometry}` disk from an idle device (for beams, the mean over the "
             "positions) — the clock of the papers; the real clock is this VM's disk. Every result is "
             "compared with the reference data; a wrong element fails the run.")
    L.append("")
    L.append("## Time per workload (ms, cold cache)")
    L.append("")
    L.append("mmfs cells: real time; *model ms*; ratio vs the best baseline.")
    L.append("")
    L.append("| workload | elements | " + " | ".join(tnames) + " |")
    L.append("|---|---|" + "---|" * len(tnames))
    for w in b.workloads:
        cells = []
        for tn in tnames:
            r = by[(w["id"], tn)]
            if r["error"]:
                cells.append("error")
                continue
            txt = fmt_ms(r["ms"])
            if not r["verified"] and r["ms"]:
                txt += " **WRONG**"
            if r["target_kind"] == "baseline" and r["best_baseline"] == tn:
                txt = f"**{txt}**"
            if r["target_kind"] == "mmfs":
                mod = (r["modeled"] or {}).get("modeled_ms")
                txt += f"<br>*model {fmt_sig(mod)}*"
                if r["ratio_vs_best_baseline"] is not None:
                    txt += f"<br>×{r['ratio_vs_best_baseline']:.2f}"
            cells.append(txt)
        el = f"{w['elements']:,}" + (f" ×{len(w['sels'])}" if len(w["sels"]) > 1 else "")
        L.append(f"| {w['id']} | {el} | " + " | ".join(cells) + " |")
    L.append("")
    cell = "×".join(map(str, b.cell or []))
    L.append(f"## Per-cell time (ms per {cell} cell, median; mmfs: real / model)")
    L.append("")
    L.append("| workload | cells | " + " | ".join(tnames) + " |")
    L.append("|---|---|" + "---|" * len(tnames))
    for w in b.workloads:
        cells = []
        for tn in tnames:
            r = by[(w["id"], tn)]
            u = r["ms_per_cell"]["median"] if r["ms_per_cell"] else None
            txt = fmt_sig(u)
            if r["target_kind"] == "mmfs":
                txt += f" / {fmt_sig((r['modeled'] or {}).get('ms_per_cell'))}"
            cells.append(txt)
        L.append(f"| {w['id']} | {fmt_sig(w['cells'])} | " + " | ".join(cells) + " |")
    L.append("")
    if a.layouts:
        L.append("## mmfs I/O plans (`A@/plan/VIEW`, per read)")
        L.append("")
        # run_host_ms: set by results() on every row of a layout whose point was
        # read, when the geometry's model has no host part of its own.
        floors = {lb: (by.get(("point", f"mmfs-{lb}"), {}).get("modeled") or {}).get("run_host_ms")
                  for lb in a.layouts}
        floors = {lb: v for lb, v in floors.items() if v is not None}
        with_floor = bool(floors)
        # A geometry with the machine's costs: modeled_ms predicts the read itself.
        with_machine = any("device_ms" in ((by.get(("point", f"mmfs-{lb}"), {}).get("modeled")) or {})
                           for lb in a.layouts)
        if with_machine:
            L.append("**model** = `modeled_ms` of `A@/plan/VIEW` on this volume's measured geometry: the whole "
                     "cold read, its **device model** (`device_ms`: the device reading the view's chunks one "
                     "after another) plus the machine's part that `mkfs.mmfs -g measure` timed (`host`: a cold "
                     "read's requests through a throwaway FUSE mount and the daemon's own read path on a volume "
                     "in memory, the cells verified and gathered after each batch arrives, and handing each "
                     "chunk's bytes to the reader while the device reads the next; docs/geometry-format.md). "
                     "**error** = model / real - 1.")
            L.append("")
            L.append("**device ms**: the time the read's batches were on the device (`device_busy_ms` of "
                     "`/.mmfs/stats` on the fresh mount), which the device model predicts; it includes the "
                     "cells verified and gathered as requests arrive, so a CPU-bound read shows its CPU there too.")
            L.append("")
            L.append("| workload | view | layout | real ms | device ms | device model ms | model ms | error | "
                     "bytes read / useful (ampl.) | requests |")
            L.append("|---|---|---|---|---|---|---|---|---|---|")
        elif with_floor:
            L.append("**host** (per layout): the median cold read of one element in this run less its "
                     "`modeled_ms`: what a cold read costs besides the device (the fresh mount's lookups, the "
                     "open, the array's first use, the READ round trip): "
                     + ", ".join(f"{lb} {fmt_sig(v)} ms" for lb, v in floors.items())
                     + ". **model + host** = the view's `modeled_ms` plus that; **error** = (model + host) / "
                     "real - 1.")
            L.append("")
            L.append("**device ms**: the time the read's batches were on the device (`device_busy_ms` of "
                     "`/.mmfs/stats` on the fresh mount), which `modeled_ms` predicts; it includes the cells "
                     "verified and gathered as requests arrive, so a CPU-bound read shows its CPU there too.")
            L.append("")
            L.append("| workload | view | layout | real ms | device ms | model ms | model + host ms | error | "
                     "bytes read / useful (ampl.) | requests |")
            L.append("|---|---|---|---|---|---|---|---|---|---|")
        else:
            L.append("| workload | view | layout | real ms | model ms | bytes read / useful (ampl.) | requests |")
            L.append("|---|---|---|---|---|---|---|")
        within = {}
        for w in b.workloads:
            v = w["mmfs"][0] or "(the array file)"
            if len(w["mmfs"]) > 1:
                v += f" (+{len(w['mmfs']) - 1} more)"
            for lb in a.layouts:
                r = by[(w["id"], f"mmfs-{lb}")]
                p = r["modeled"] or {}
                if "error" in p:
                    amp = p["error"]
                elif p.get("bytes_useful"):
                    amp = (f"{fmt_bytes(int(p['bytes_read']))} / {fmt_bytes(int(p['bytes_useful']))} "
                           f"({p['bytes_read'] / p['bytes_useful']:.2f})")
                else:
                    amp = "—"
                extra = ""
                if with_machine:
                    mod, dmod, real = p.get("modeled_ms"), p.get("device_ms"), (r["ms"] or {}).get("median")
                    dev = (r.get("device_ms") or {}).get("median")
                    row_cells = [fmt_ms(r["device_ms"]) if r.get("device_ms") else "—", fmt_sig(dmod), fmt_sig(mod)]
                    # The point counts here: -g measure timed its own view on a volume in memory, so this
                    # volume's point is predicted, not fitted (in the floor report below it is the fit).
                    if mod is not None and real:
                        err = mod / real - 1
                        row_cells.append(f"{err * 100:+.0f} %")
                        hits = within.setdefault(lb, [0, 0, 0, 0, 0])
                        hits[0] += abs(err) <= 0.30
                        hits[2] += 1
                        if dev and dmod:
                            hits[3] += abs(dmod / dev - 1) <= 0.30
                            hits[4] += 1
                    else:
                        row_cells.append("—")
                    L.append(f"| {w['id']} | `{v}` | {lb} | {fmt_ms(r['ms'])} | " + " | ".join(row_cells)
                             + f" | {amp} | {fmt_sig(p.get('requests'))} |")
                    continue
                if with_floor:
                    mod, pred, real = p.get("modeled_ms"), p.get("modeled_plus_host_ms"), (r["ms"] or {}).get("median")
                    if pred is not None and real and w["kind"] != "point":
                        err = pred / real - 1
                        extra = f"{fmt_sig(pred)} | {err * 100:+.0f} % | "
                        hits = within.setdefault(lb, [0, 0, 0, 0, 0])
                        hits[0] += abs(mod / real - 1) <= 0.30
                        hits[1] += abs(err) <= 0.30
                        hits[2] += 1
                        dev = (r.get("device_ms") or {}).get("median")
                        if dev:
                            hits[3] += abs(mod / dev - 1) <= 0.30
                            hits[4] += 1
                    else:
                        extra = "— | — | "
                device = fmt_ms(r["device_ms"]) if with_floor and r.get("device_ms") else "—"
                L.append(f"| {w['id']} | `{v}` | {lb} | {fmt_ms(r['ms'])} | "
                         + (f"{device} | " if with_floor else "")
                         + f"{fmt_sig(p.get('modeled_ms'))} | {extra}{amp} | {fmt_sig(p.get('requests'))} |")
        L.append("")
        for lb, (alone, plus, total, dev_hits, dev_total) in within.items():
            if with_machine:
                L.append(f"Within ±30 % of the real time ({lb}): the model on {alone} of {total} workloads."
                         + (f" The device model within ±30 % of the device time: {dev_hits} of {dev_total}."
                            if dev_total else ""))
                L.append("")
                pt = by.get(("point", f"mmfs-{lb}"), {})
                pm, pr = (pt.get("modeled") or {}).get("modeled_ms"), (pt.get("ms") or {}).get("median")
                if pm is not None and pr and pr > pm * 1.3:
                    L.append(f"The point ({lb}) took {fmt_sig(pr)} ms against a model of {fmt_sig(pm)} ms: the "
                             f"{fmt_sig(pr - pm)} ms more is what a freshly started daemon's requests cost beyond "
                             "the cold view the probe timed on a volume in memory, and the first device read of a "
                             "fresh mount beyond an idle read (on an image file, the extent tree read again after "
                             "drop_caches). The small views miss their model by about as much.")
                    L.append("")
                continue
            L.append(f"Within ±30 % of the real time ({lb}): model alone {alone} of {total} workloads, "
                     f"model + host {plus} of {total}."
                     + (f" The model within ±30 % of the device time: {dev_hits} of {dev_total}." if dev_total else ""))
            L.append("")
    # summary of who wins
    wins = []
    for w in b.workloads:
        cand = [by[(w["id"], tn)] for tn in tnames if by[(w["id"], tn)]["ms"] and by[(w["id"], tn)]["verified"]]
        if cand:
            best = min(cand, key=lambda r: r["ms"]["median"])
            wins.append(f"{w['id']}: {best['target']}")
    if wins:
        L.append("Fastest target per workload (median): " + "; ".join(wins) + ".")
        L.append("")
    pngs = res.get("plots") or []
    if pngs:
        L.append("## Plots")
        L.append("")
        captions = {"-beams.png": "Beams: time per cell along each dimension, real clock (left) and modeled "
                                  "clock of the mmfs layouts (right).",
                    "-slices.png": "Middle slices: time per cell, real (left) and modeled (right).",
                    "-cubes.png": "p%-length cubes: total time against p, real (left) and modeled (right).",
                    "-scans.png": "Full scan and PLoD reads, real clock.",
                    "-real.png": "Every workload, real clock (bench/plot_workloads.py, the figure "
                                 "`mmfs-bench modeled` draws for the modeled clock)."}
        for p in pngs:
            name = os.path.basename(p)
            cap = next((c for suf, c in captions.items() if name.endswith(suf)), "")
            L.append(f"![{name}]({name})")
            L.append("")
            if cap:
                L.append(cap)
                L.append("")
    if res.get("plot_error"):
        L.append(f"Plots: {res['plot_error']}")
        L.append("")
    if b.failures:
        L.append("**Errors / wrong results:**")
        L.append("")
        L += [f"* {f}" for f in b.failures]
        L.append("")
    return "\n".join(L)
