"""The results of bench/python_bench.py (`mmfs-bench python`): result rows per
section with their ratios and targets (reported, not enforced), the JSON
document and the markdown report."""
from bench_daemon_util import MiB, fmt_bytes, summary
from mmfs_bench_real_report import array_line, fmt_ms, ingest_lines, machine_line, run_time_start
from mmfs_bench_real_run import json_head
from python_bench_measure import DASK_READERS, VIEW_READERS, ZARR_READERS, n_chunks
from python_bench_setup import chunk_label

SCHEMA = "mmfs-bench-python/1"
OVERHEAD_MAX = 1.05          # engine="mmfs" / raw view read
OVERHEAD_ABS_MS = 1.0        # ... or at most this much slower
SPEEDUP_MIN = 2.0            # engine="mmfs" at least this much faster than h5netcdf and zarr 64³
ZARR_VIEW_MAX = 1.5          # mmfs zarr view / real store
DASK_MAX = 1.0               # dask over mmfs / dask over memmap


def _ratio(x, y):
    return x / y if x is not None and y is not None and y > 0 else None


def _cell(m, key):
    s = m.times.get(key)
    return {"ms": summary([x * 1e3 for x in s]) if s else None, "error": m.errors.get(key),
            "verified": bool(s) and key not in m.errors}


def _verdict(ok):
    return None if ok is None else ("PASS" if ok else "FAIL")


def _minus(a, b):
    return None if a is None or b is None else a - b


def _engine_ok(xm, floor):
    """The mmfs engine's own part (xr-mmfs less xarray's floor around the same
    raw read): within the overhead target."""
    if xm is None or floor is None:
        return None
    return xm <= floor * OVERHEAD_MAX or xm - floor <= OVERHEAD_ABS_MS


def results(b, m):
    """The rows of every section (JSON-ready)."""
    out = {"views": [], "zarr": [], "dask": []}
    for v in (m.views if "views" in m.a.sections else []):
        cells = {r: _cell(m, ("views", v["id"], r)) for r in VIEW_READERS if r in m.a.view_readers}
        med = {r: m.median_ms(("views", v["id"], r)) for r in cells}
        xm, raw = med.get("xr-mmfs"), med.get("raw")
        over = _ratio(xm, raw)
        over_ok = None if over is None else (over <= OVERHEAD_MAX or xm - raw <= OVERHEAD_ABS_MS)
        vs_h5, vs_zarr = _ratio(med.get("xr-h5netcdf"), xm), _ratio(med.get("xr-zarr"), xm)
        speed_ok = None if vs_h5 is None or vs_zarr is None else (vs_h5 >= SPEEDUP_MIN and vs_zarr >= SPEEDUP_MIN)
        out["views"].append(dict(view=v["id"], what=v["what"], mmfs_view=v["view"], bytes=v["bytes"],
                                 readers=cells, overhead=over, overhead_target=_verdict(over_ok),
                                 package_overhead=_ratio(med.get("mmfs.open"), raw),
                                 engine_ms=_minus(xm, med.get("xr-floor")),
                                 engine_target=_verdict(_engine_ok(xm, med.get("xr-floor"))),
                                 xarray_ms=_minus(med.get("xr-floor"), raw),
                                 h5netcdf_over_mmfs=vs_h5, zarr_over_mmfs=vs_zarr,
                                 speedup_target=_verdict(speed_ok),
                                 zarr_view_over_zarr=_ratio(med.get("xr-zarr-view"), med.get("xr-zarr"))))
    if "zarr" in m.a.sections:
        for c in b.zarr_chunks:
            for v in m.views:
                row = f"{chunk_label(c)}:{v['id']}"
                cells = {r: _cell(m, ("zarr", row, r)) for r in ZARR_READERS}
                ratio = _ratio(m.median_ms(("zarr", row, "zarr-mmfs")), m.median_ms(("zarr", row, "zarr-real")))
                out["zarr"].append(dict(chunks=list(c), view=v["id"], what=v["what"], bytes=v["bytes"],
                                        chunks_read=_chunks_touched(v["sel"], b.shape, c), readers=cells,
                                        chunk_plan=b.zarr_plans.get(c),
                                        mmfs_over_real=ratio,
                                        target=_verdict(None if ratio is None else ratio <= ZARR_VIEW_MAX)))
    for label, c in m.dask_chunks:
        row = f"{label}:{chunk_label(c)}"
        cells = {r: _cell(m, ("dask", row, r)) for r in DASK_READERS}
        for r in cells:
            cells[r]["means"] = m.values.get(("dask", row, r))
        ratio = _ratio(m.median_ms(("dask", row, "dask-mmfs")), m.median_ms(("dask", row, "dask-memmap")))
        out["dask"].append(dict(chunks_from=label, chunks=list(c), n_chunks=n_chunks(b.shape, c), readers=cells,
                                skipped=m.skipped.get(row), mmfs_over_memmap=ratio,
                                target=_verdict(None if ratio is None else ratio <= DASK_MAX)))
    return out


def _chunks_touched(sel, shape, chunks):
    n = 1
    for x, s, c in zip(sel, shape, chunks):
        if x is None:
            n *= -(-s // c)
        elif isinstance(x, tuple):
            n *= (x[1] - 1) // c - x[0] // c + 1
    return n


def to_json(b, m, machine, rows):
    a = b.a
    return json_head(SCHEMA, machine) | {
        "config": {"shape": list(b.shape), "dtype": "float64", "bytes": b.nbytes, "geometry": a.geometry,
                   "layout": a.layout or None, "cell": a.cell or None, "runs": a.runs, "seed": a.seed, "chunk": list(b.chunks),
                   "zarr_chunks": [list(c) for c in b.zarr_chunks], "dask_chunks": a.dask_chunks,
                   "dask_max_chunks": a.dask_max_chunks,
                   "sections": a.sections, "view_readers": a.view_readers, "dir": a.dir,
                   "mount_options": a.mount_options,
                   "targets": {"overhead_max": OVERHEAD_MAX, "overhead_abs_ms": OVERHEAD_ABS_MS,
                               "speedup_min": SPEEDUP_MIN, "zarr_view_max": ZARR_VIEW_MAX, "dask_max": DASK_MAX}},
        "cold_cache": {"drop_caches": b.drop.ok, "error": b.drop.error, "remount_mmfs": a.remount},
        "setup": b.setup,
        "array": {"info": b.info, "brick": list(b.brick) if b.brick else None,
                  "chunks": list(b.preferred) if getattr(b, "preferred", None) else None,
                  "preferred_chunks": b.preferred_chunks,
                  "zarr_chunk_plans": {chunk_label(c): p for c, p in b.zarr_plans.items()}},
        "readers": {"views": {k: v[0] for k, v in VIEW_READERS.items()},
                    "zarr": {k: v[0] for k, v in ZARR_READERS.items()},
                    "dask": {k: v[0] for k, v in DASK_READERS.items()}},
        "views": [dict(v, sel=list(v["sel"])) for v in m.views],
        "reference_mean": b.ref_mean,
        "results": rows,
        "failures": b.failures,
    }


def _ms(cell):
    if cell is None:
        return "—"
    if cell["error"]:
        return "**WRONG**" if cell["error"].startswith("WRONG") else "**error**"
    return fmt_ms(cell["ms"])


def _x(r, digits=2):
    return "—" if r is None else f"{r:.{digits}f}×"


def _d(ms):
    return "—" if ms is None else f"{ms:+.2f}"


def _v(verdict):
    return "—" if verdict is None else (verdict if verdict == "PASS" else f"**{verdict}**")


def report(b, m, res):
    a = b.a
    mach = res["machine"]
    rows = res["results"]
    ch = "×".join(map(str, b.chunks))
    L = ["# mmfs-bench python: the mmfs Python package and the Zarr view beside h5netcdf, zarr and numpy.memmap",
         "", "```", res["command"], "```", ""]
    L.append(machine_line(mach, ", ".join(f"{k} {v}" for k, v in (mach.get("packages") or {}).items() if v)))
    L += ["", "## Setup", ""]
    info = b.info or {}
    L.append(array_line(b, mach, "; every read is compared with it (bit for bit; the dask means to 1e-9 relative "
                                 f"of numpy's mean, {b.ref_mean!r})."))
    L.append(f"* mmfs: a `mkfs.mmfs -g {a.geometry}` image of {fmt_bytes(b.setup.get('image_bytes'))} (sparse), "
             f"mounted by the daemon{' with `-o ' + a.mount_options + '`' if a.mount_options else ''}; the array "
             f"`a` made by `mmfs.create(path, shape, \"float64\", data=...)`"
             f"{' with layout=' + repr(a.layout) if a.layout else ' (the volume default layout)'}"
             f"{' and cell=(' + a.cell + ')' if a.cell else ''}: layout "
             f"`{info.get('layout')}`, cell {'×'.join(map(str, info.get('cell') or []))}, brick "
             f"(`mmfs.Array.brick`) {'×'.join(map(str, b.brick or []))}, natural dask chunk (`mmfs.Array.chunks`, "
             f"xarray's `preferred_chunks`: the brick grown to ≥ 16 MiB or the whole array) "
             f"{'×'.join(map(str, getattr(b, 'preferred', None) or []))}. The package "
             f"is `{b.setup.get('mmfs_package')}`.")
    if a.copies:
        L.append(f"* Copies: `user.mmfs.copies={a.copies}` set after the data (built from it, durable when setxattr "
                 f"returned): " + "; ".join(f"copy {c.get('copy')} `{c.get('spec')}` ({c.get('state')})"
                                           for c in info.get("copies") or [])
                 + ". Each view and each zarr chunk is served by the placement the model prices cheapest; "
                 "`A@/plan/...` names it. The data then takes "
                 f"{1 + len(info.get('copies') or [])}× its bytes on the device, as the "
                 f"{len(b.zarr_chunks)} real zarr stores together take {len(b.zarr_chunks)}×.")
    L.append(f"* `a.h5`: netCDF4/HDF5 written with h5netcdf (dims `dim_0..dim_{b.n - 1}` as dimension scales), "
             f"chunked {ch}, uncompressed. `zarr-*.zarr`: zarr v3 groups written by zarr-python, array `a` in "
             f"chunks " + ", ".join("×".join(map(str, c)) for c in b.zarr_chunks)
             + ", no compressors or filters (the mmfs Zarr view is uncompressed too), local directory stores. "
             "`a.raw`: the C-order bytes, for `numpy.memmap`.")
    L += ingest_lines(b, "warm, with fsync; not measured here")
    st = b.setup
    L.append(run_time_start(st) + f", measurements {st.get('measure_s', 0):.0f} s, total "
             f"{st.get('total_s', 0):.0f} s; a remount took {st.get('remount_ms_median', 0):.0f} ms (median, not in any time below).")
    L += ["", "## Method", ""]
    if b.drop.ok:
        L.append("**Cold caches**: `sync; echo 3 > /proc/sys/vm/drop_caches` before every timed read"
                 + ("; before every read on mmfs the daemon is also unmounted and mounted again (a fresh mount "
                    "per read: its own caches start empty), then the page cache is dropped." if a.remount else
                    "; the daemon stays mounted (--no-remount): its own caches may be warm."))
    else:
        L.append(f"**{b.drop.error}** — the times below are NOT cold-cache.")
    L.append("")
    L.append(f"Each time is the median of {a.runs} run(s) (min–max in brackets when more than one) and covers the "
             "user's whole call: **opening** the dataset, store or array (`xr.open_dataset`, `xr.open_zarr`, "
             "`mmfs.open`, `zarr.open_array`, `open`), the read and the close. Python imports, xarray's engine "
             "discovery and dask's first use are warmed up before the first timed read. The readers of a row are "
             "rotated from run to run. A wrong result or an error is shown as such and counts in no ratio.")
    L.append("")
    L.append("Readers:")
    L.append("")
    for k, (d, on) in VIEW_READERS.items():
        if k in a.view_readers:
            L.append(f"* `{k}`{' (on mmfs)' if on else ''}: "
                     + d.format(c=ch, cc=",".join(map(str, b.chunks))))
    if rows["views"]:
        section_views(L, a, rows, ch)
    if rows["zarr"]:
        L += ["", "## 2. The Zarr view beside a real zarr store", ""]
        L.append(f"`zarr.open_array(store)[key]` on a zarr v3 store with chunks C on the local disk (`real`) and "
                 f"on the mmfs directory `A@/zarr/C0,C1,C2/` (`mmfs`); `chunks` = chunks the view touches. Target: "
                 f"mmfs ≤ {ZARR_VIEW_MAX:g}× real. Times in ms.")
        plans = []
        for c in b.zarr_chunks:
            p = b.zarr_plans.get(c) or {}
            if p.get("bytes_read") and p.get("bytes_useful"):
                plans.append(f"{'×'.join(map(str, c))}: {fmt_bytes(p['bytes_read'])} read for "
                             f"{fmt_bytes(p['bytes_useful'])} ({p['bytes_read'] / p['bytes_useful']:.2g}×), "
                             f"{p.get('requests')} requests"
                             + (f", served by copy {p['served_by']}" if p.get("served_by") is not None else ""))
        if plans:
            L.append("")
            L.append("The device's part of one chunk of the view (its plan, `A@/plan/zarr/C0,C1,C2/c/0/0/0`): "
                     + "; ".join(plans) + ". A chunk thinner than the cells is read through the box of whole "
                     "cells around it, which the array's chunk cache keeps for the chunks beside it (docs/daemon.md, "
                     "the Zarr v3 view): a scan reads each cell about once. The first chunk opened in a cold box "
                     "is read by itself (the plan above) when the volume's model reads it in half the box's time "
                     "or less; otherwise a single thin chunk reads its whole layer of cells.")
        L.append("")
        L.append("| chunks C | view | MiB | chunks | real | mmfs | mmfs÷real | target |")
        L.append("|---|---|---:|---:|---:|---:|---:|:-:|")
        for r in rows["zarr"]:
            L.append(f"| {'×'.join(map(str, r['chunks']))} | `{r['what']}` | {r['bytes'] / MiB:.3g} | "
                     f"{r['chunks_read']} | {_ms(r['readers']['zarr-real'])} | {_ms(r['readers']['zarr-mmfs'])} | "
                     f"{_x(r['mmfs_over_real'])} | {_v(r['target'])} |")
    if rows["dask"]:
        L += ["", "## 3. dask over mmfs and over numpy.memmap", ""]
        L.append(f"`dask.array.from_array(X, chunks).mean().compute(scheduler=\"threads\")` with X = "
                 f"`mmfs.open(A)` and X = `np.memmap` of `a.raw` (same bytes, same disk), both cold; both means "
                 f"checked against numpy's. `natural` = the chunk the array prefers (`mmfs.Array.chunks`, "
                 f"`encoding['preferred_chunks']`: the brick grown to ≥ 16 MiB), `auto` = dask's "
                 f"`chunks=\"auto\"` on the mmfs array (multiples of `natural`), `brick` = the layout's brick "
                 f"(`mmfs.Array.brick`), used for both. Target: mmfs ≤ {DASK_MAX:g}× memmap. Times in ms.")
        L.append("")
        L.append("| chunks | tasks (chunks) | dask-mmfs | dask-memmap | mmfs÷memmap | target |")
        L.append("|---|---:|---:|---:|---:|:-:|")
        for r in rows["dask"]:
            if r["skipped"]:
                L.append(f"| {r['chunks_from']}: {'×'.join(map(str, r['chunks']))} | {r['n_chunks']} | "
                         f"{r['skipped']} | | | |")
                continue
            L.append(f"| {r['chunks_from']}: {'×'.join(map(str, r['chunks']))} | {r['n_chunks']} | "
                     f"{_ms(r['readers']['dask-mmfs'])} | {_ms(r['readers']['dask-memmap'])} | "
                     f"{_x(r['mmfs_over_memmap'])} | {_v(r['target'])} |")
    L += ["", "## Targets", ""]
    for name, sec, field in (("engine=\"mmfs\" overhead", "views", "overhead_target"),
                             ("the mmfs engine's own part (beyond xarray's floor)", "views", "engine_target"),
                             ("engine=\"mmfs\" ≥ 2× h5netcdf and zarr", "views", "speedup_target"),
                             ("Zarr view ≤ 1.5× real store", "zarr", "target"),
                             ("dask over mmfs ≤ memmap", "dask", "target")):
        vs = [r[field] for r in rows[sec]]
        if vs:
            L.append(f"* {name}: {vs.count('PASS')} PASS, {vs.count('FAIL')} FAIL"
                     + (f", {vs.count(None)} not measured" if None in vs else "") + ".")
    if b.failures:
        L += ["", "## Errors and wrong results", ""]
        L += [f"* {f}" for f in b.failures]
    return "\n".join(L)


def section_views(L, a, rows, ch):
    L += ["", "## 1. Views through xarray and the package", ""]
    L.append(f"`overhead` = xr-mmfs ÷ raw (target ≤ {OVERHEAD_MAX} or at most {OVERHEAD_ABS_MS:g} ms more: what "
             f"the package and xarray add to the view read, open_dataset included); `pkg` = mmfs.open ÷ raw; "
             f"`h5nc÷` and `zarr÷` = xr-h5netcdf and xr-zarr ÷ xr-mmfs (target ≥ {SPEEDUP_MIN:g}× on both); "
             f"`view÷zarr` = xr-zarr-view ÷ xr-zarr. `xarray` = xr-floor − raw: what xarray's own "
             f"open_dataset, isel and values cost around the same raw read (a backend that asks the mount "
             f"nothing); `engine` = xr-mmfs − xr-floor: the mmfs engine's own part (its xattrs, CF decoding, "
             f"the package's indexing), target ≤ {OVERHEAD_MAX} of xr-floor or at most {OVERHEAD_ABS_MS:g} ms. "
             f"Times in ms.")
    L.append("")
    vr = [r for r in VIEW_READERS if r in a.view_readers]
    L.append("| view | MiB | " + " | ".join(vr) + " | overhead | target | xarray | engine | target | pkg | h5nc÷ | "
             "zarr÷ | target ≥2× | view÷zarr |")
    L.append("|---|---:|" + "---:|" * len(vr) + "---:|:-:|---:|---:|:-:|---:|---:|---:|:-:|---:|")
    for r in rows["views"]:
        L.append(f"| `{r['what']}` | {r['bytes'] / MiB:.3g} | " + " | ".join(_ms(r["readers"].get(x)) for x in vr)
                 + f" | {_x(r['overhead'], 3)} | {_v(r['overhead_target'])} | {_d(r.get('xarray_ms'))} | "
                 f"{_d(r.get('engine_ms'))} | {_v(r.get('engine_target'))} | {_x(r['package_overhead'], 3)} | "
                 f"{_x(r['h5netcdf_over_mmfs'])} | {_x(r['zarr_over_mmfs'])} | {_v(r['speedup_target'])} | "
                 f"{_x(r['zarr_view_over_zarr'])} |")
