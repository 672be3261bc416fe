"""The markdown report of bench/query_bench.py (`mmfs-bench query`): the
machine and the method, the failures, part 1 (the Set Query Benchmark, with
the paper's Figures 1, 8 and 10 beside ours, copied here verbatim) and
part 2 (the 3-D array)."""
import setquery as sq
from query_bench_util import ENCODINGS, fbytes, fmb, fratio, fs, fsum, med

# Reference figures measured on this machine.
ISSUE_REFERENCE = {"duckdb warm": 0.59, "duckdb cold": 0.81, "pyroaring warm": 0.12, "numpy scan 3-D": 2.9}

# ----------------------------------------------------------------------------
# The paper's figures (Wu, Madduri, Canon, "Multi-Level Bitmap Indexes for
# Flash Memory Storage", LBNL 2010; papers/001_4ac93fc4a16db374.txt), copied
# verbatim. 100M rows; sizes in millions of bytes.

# Figure 8: column, cardinality, # bitmaps, Proj, BN, E1, IE, RE
PAPER_FIG8 = [
    ("K2", 2, 2, 400, 12.9, 25.8, 25.8, 25.8),
    ("K4", 4, 4, 400, 25.8, 51.6, 51.6, 51.6),
    ("K5", 5, 5, 400, 38.7, 64.5, 64.5, 64.5),
    ("K10", 10, 10, 400, 51.6, 128.8, 129.0, 129.0),
    ("K25", 25, 25, 400, 64.5, 296.9, 322.6, 322.6),
    ("K100", 100, 100, 400, 90.3, 598.3, 701.6, 765.8),
    ("K1K", 1000, 1000, 400, 129.0, 776.1, 1060.0, 1146.7),
    ("K10K", 10000, 10000, 400, 180.8, 797.7, 1081.7, 1181.1),
    ("K40K", 40000, 40000, 400, 206.8, 800.0, 1084.2, 1183.6),
    ("K100K", 100000, 100000, 400, 220.6, 801.4, 1098.9, 1185.4),
    ("K250K", 250000, 250000, 400, 235.3, 803.9, 1102.7, 1189.2),
    ("K500K", 500000, 500000, 400, 251.1, 808.0, 1108.7, 1207.8),
    ("KSEQ", 100000000, 1720, 400, 0.066, 0.089, 0.089, 0.089),
]
PAPER_FIG8_COLS = ["Proj", "BN", "E1", "IE", "RE"]
PAPER_ROWS = 100_000_000
# Figure 10: machine -> {"elapsed": [...], "read_time": [...], "read_mb": [...]} in the order Proj BN E1 IE RE;
# sums over the 75 queries.
PAPER_FIG10 = {
    "data3": {"elapsed": [581.4, 109.9, 24.4, 33.4, 34.3], "read_time": [581.9, 65.5, 12.9, 26.4, 24.2],
              "read_mb": [37103, 6226, 947, 1939, 1651]},
    "data1": {"elapsed": [481.8, 92.0, 23.7, 29.3, 29.6], "read_time": [487.4, 97.9, 16.0, 30.9, 26.7],
              "read_mb": [38859, 8953, 953, 2037, 1706]},
    "davinci": {"elapsed": [454.4, 118.8, 42.9, 52.6, 59.8], "read_time": [1588.5, 130.9, 85.9, 129.7, 120.6],
                "read_mb": [44482, 4351, 2237, 3485, 3331]},
    "turing": {"elapsed": [259.0, 44.3, 17.1, 16.1, 19.0], "read_time": [126.2, 3.8, 2.6, 4.8, 4.2],
               "read_mb": [61718, 1819, 1255, 2335, 2006]},
}
# our encoding (or the scan) that stands for each of the paper's columns
PAPER_TO_OURS = {"Proj": "none", "BN": "bn", "E1": "e1", "IE": "ie", "RE": "re"}


# ----------------------------------------------------------------------------
# the report


def report(b):
    res = b.res
    a = b.a
    L = []
    m = res["machine"]
    L.append("# mmfs-bench query — bitmap-index queries on the real clock")
    L.append("")
    L.append(f"`{res['command']}`")
    L.append("")
    L.append(f"{m.get('date')} · {m.get('host')} · {m.get('cpu', '?')} × {m.get('nproc')} · {m.get('mem_total')} · "
             f"kernel {m.get('kernel')} · git {m.get('git')} · scratch {m.get('scratch_filesystem')} · "
             f"load {m.get('loadavg')} → {m.get('loadavg_end')} · Python {m.get('python')}, numpy {m.get('numpy')}, "
             f"DuckDB {m.get('duckdb')}, pyroaring {m.get('pyroaring')}")
    L.append("")
    if not b.cold_ok:
        L.append(f"**WARNING: {b.drop.error}** — the cold figures are not cold-cache.")
        L.append("")
    L.append("Cold: before each cold pass the mmfs daemon is unmounted and mounted again (its in-memory index "
             "and chunk caches go), then `sync; echo 3 > /proc/sys/vm/drop_caches`; DuckDB gets a new "
             "connection after the drop; numpy's column files are dropped from the page cache. Warm: a second "
             "pass right after the cold one, in the same mount (index pages in the daemon's memory) or "
             "connection. Results are never reused: every mmfs query is a fresh open(2) of its "
             "`.../query/COND/count` path, whose answer the daemon computes anew for each open (docs/reference.md §5: "
             "views are not cached across opens; the daemon opens views with FOPEN_KEEP_CACHE off or direct I/O, so "
             "the kernel keeps no page of an earlier open either). What the daemon does keep, in each index's "
             "512 MiB cache, is decoded bitmaps and the rows of atoms that combined several bitmaps (a union of a "
             "range of bins, keyed by the plan's bins; docs/indexes.md): Q4's ten atoms recur across its 20 queries, "
             "so within a pass, and on the warm pass throughout, such an atom costs a copy, not the union. "
             "DuckDB has no result cache; numpy and pyroaring recompute everything. "
             f"A pass is the 75 queries in a row; its time is the sum of their wall-clock times. "
             f"Medians of {a.runs} run(s) (3-D reads: {a.runs_3d}), (min–max) beside.")
    L.append("")
    if res.get("failures"):
        L.append("## Failures")
        L.append("")
        for f in res["failures"]:
            L.append(f"* {f}")
        L.append("")
    if res.get("notes"):
        L.append("## Notes")
        L.append("")
        for n in res["notes"]:
            L.append(f"* {n}")
        L.append("")
    sqr = res.get("setquery")
    if sqr:
        setquery_report(L, sqr, a)
    f3 = res.get("field3d")
    if f3:
        field_report(L, f3, a)
    return "\n".join(L)


def setquery_report(L, s, a):
    rows = s["rows"]
    engines = s.get("engines", [])
    L.append(f"## 1. The Set Query Benchmark — {rows:,} rows, 75 count queries")
    L.append("")
    L.append("Data: O'Neil's generator (seed 1, ×16807 mod 2³¹−1 before each use, one number per column per row "
             "in the order K500K … K2; KN = number mod N + 1; KSEQ = row number from 1), as int32 arrays in "
             "the table directory `bench/` of the volume; KSEQ binned `precision:2`, the other columns `exact` "
             f"(the paper's choice). Generated in {fs(s.get('generate_s'))} s." +
             (f" KSEQ constants of Q3 scaled by {s['kseq_scale']:g} (fewer than 500,000 rows)."
              if s.get("kseq_scale", 1) != 1 else ""))
    L.append("")
    agreed = s.get("all_agreed")
    L.append(f"**Every engine returned the reference count for all 75 queries: {'yes' if agreed else 'NO'}"
             f"{' (every engine that ran)' if any(e.get('skipped') for e in engines) else ''}.**")
    L.append("")
    for e in engines:
        if e.get("mismatch"):
            L.append(f"* {e['mismatch']}")
        elif e.get("error") or e.get("skipped"):
            L.append(f"* {e['engine']}: {e.get('error') or e.get('skipped')}")
    L.append("")
    L.append("| engine | build s | index MB | × raw | warm suite s | cold suite s | cold read MB | agreed |")
    L.append("|---|---:|---:|---:|---:|---:|---:|:---:|")
    raw = rows * 4 * len(sq.COLUMNS)
    for e in engines:
        ib = e.get("index_bytes")
        if ib is None and e["engine"] == "duckdb":
            ib = e.get("database_bytes")
        rb = med(e.get("cold", {}).get("read_bytes")) if e.get("cold") else None
        L.append(f"| {e['label']} | {fs(e.get('build_s'), 2)} | {fmb(ib)} | "
                 f"{fratio(ib / raw) if ib is not None else '—'} | "
                 f"{fsum(e.get('warm', {}).get('total_s'))} | {fsum(e.get('cold', {}).get('total_s'))} | "
                 f"{fmb(rb)} | {'skipped' if e.get('skipped') else 'yes' if e.get('agreed') else 'NO'} |")
    L.append("")
    L.append(f"Raw column bytes: {fmb(raw)} MB ({len(sq.COLUMNS)} × {rows:,} × 4). DuckDB's row: the size of "
             "its database file; its build: loading the table. pyroaring: the serialized bitmaps. mmfs build: "
             "the 13 `setxattr user.mmfs.index` calls (each returns when the index is durable); "
             "read MB: index + data sectors read during the cold pass (/.mmfs/stats). "
             f"Reference from the issue, this machine: DuckDB {ISSUE_REFERENCE['duckdb warm']} s warm, "
             f"{ISSUE_REFERENCE['duckdb cold']} s cold; pyroaring {ISSUE_REFERENCE['pyroaring warm']} s warm.")
    L.append("")
    if s.get("targets"):
        L.append("Targets:")
        L.append("")
        for t in s["targets"]:
            L.append(f"* {t['target']}: {fratio(t['value'], 3)} ({t['who']}) — {'met' if t['met'] else 'MISSED'}")
        L.append("")
    # per group
    L.append("Time per query group (warm, s; cold in parentheses):")
    L.append("")
    L.append("| engine | " + " | ".join(sq.GROUPS) + " |")
    L.append("|---|" + "---:|" * len(sq.GROUPS))
    for e in engines:
        if not e.get("warm"):
            continue
        cells = []
        for g in sq.GROUPS:
            w = med(e["warm"]["groups_s"].get(g))
            c = med(e["cold"]["groups_s"].get(g)) if e.get("cold") else None
            cells.append(fs(w, 4) + (f" ({fs(c, 4)})" if c is not None else ""))
        L.append(f"| {e['engine']} | " + " | ".join(cells) + " |")
    L.append("")
    # Figure 1
    L.append("### Figure 1 — the range conditions of Q4 (paper beside ours)")
    L.append("")
    L.append("| No. | condition | mmfs spelling | # bitmaps (paper) | # bitmaps (E1, ours) |")
    L.append("|---:|---|---|---:|---:|")
    for f in s["fig1"]:
        L.append(f"| {f['no']} | {f['condition']} | `{f['mmfs']}` | {f['paper_bitmaps']} | {f['bitmaps']} |")
    L.append("")
    # Figure 8
    mm = {e["encoding"]: e for e in engines if e["kind"] == "mmfs"}
    encs = [x for x in ENCODINGS if x in mm and x != "none"]
    L.append(f"### Figure 8 — index sizes per column (MB; the paper at {PAPER_ROWS:,} rows, ours at {rows:,})")
    L.append("")
    head = ["column", "card.", "paper: Proj", "BN", "E1", "IE", "RE", "ours: raw"] + [x.upper() for x in encs] + \
        ["pyroaring"]
    L.append("| " + " | ".join(head) + " |")
    L.append("|---|" + "---:|" * (len(head) - 1))
    ro = next((e for e in engines if e["engine"] == "pyroaring"), None)
    for row in PAPER_FIG8:
        c = row[0]
        ours = [fmb((mm[x].get("index_bytes_per_column") or {}).get(c), 2) for x in encs]
        rb = (ro or {}).get("index_bytes_per_column", {}).get(c)
        cells = [c, f"{row[1]:,}"] + [f"{v:g}" for v in row[3:]] + [fmb(rows * 4, 2)] + ours + [fmb(rb, 2)]
        L.append("| " + " | ".join(cells) + " |")
    tot_paper = [sum(r[3 + i] for r in PAPER_FIG8) for i in range(5)]
    tot_ours = [mm[x].get("index_bytes") for x in encs]
    rob = (ro or {}).get("index_bytes")
    cells = ["**total**", ""] + [f"{v:,.0f}" for v in tot_paper] + [fmb(raw)] + [fmb(v) for v in tot_ours] + \
        [fmb(rob)]
    L.append("| " + " | ".join(cells) + " |")
    cells = ["**× raw**", ""] + [f"{v / tot_paper[0]:.2f}" for v in tot_paper] + ["1.00"] + \
        [fratio(None if v is None else v / raw) for v in tot_ours] + [fratio(None if rob is None else rob / raw)]
    L.append("| " + " | ".join(cells) + " |")
    L.append("")
    L.append("The paper's numbers: its Figure 8 (FastBit, 100M rows, WAH-compressed; the text gives the totals "
             "Proj 5.2 GB, BN 1.5 GB, E1 6.0 GB, IE 7.8 GB, RE 8.5 GB). Ours: `device_bytes.index` of "
             "`A@/info`, the space the index takes on the device.")
    L.append("")
    # Figure 10
    L.append("### Figure 10 — totals over the 75 queries, relative to the scan (Proj)")
    L.append("")
    cols = PAPER_FIG8_COLS
    L.append("| system | clock | " + " | ".join(cols) + " | " + " | ".join(c + " rel." for c in cols) + " |")
    L.append("|---|---|" + "---:|" * (2 * len(cols)))
    for mach, d in PAPER_FIG10.items():
        el = d["elapsed"]
        L.append(f"| paper: {mach} | elapsed s | " + " | ".join(f"{v:g}" for v in el) + " | " +
                 " | ".join(f"{v / el[0]:.3f}" for v in el) + " |")
    for mach, d in PAPER_FIG10.items():
        rm = d["read_mb"]
        L.append(f"| paper: {mach} | read MB | " + " | ".join(f"{v:,}" for v in rm) + " | " +
                 " | ".join(f"{v / rm[0]:.3f}" for v in rm) + " |")
    for kind in ("warm", "cold"):
        vals = [med(mm.get(PAPER_TO_OURS[c], {}).get(kind, {}).get("total_s")) if mm.get(PAPER_TO_OURS[c]) else None
                for c in cols]
        base = vals[0]
        L.append(f"| mmfs, this machine | {kind} s | " + " | ".join(fs(v, 4) for v in vals) + " | " +
                 " | ".join(fratio(None if v is None or not base else v / base, 3) for v in vals) + " |")
    vals = [med(mm.get(PAPER_TO_OURS[c], {}).get("cold", {}).get("read_bytes")) if mm.get(PAPER_TO_OURS[c])
            else None for c in cols]
    base = vals[0]
    L.append("| mmfs, this machine | cold read MB | " + " | ".join(fmb(v) for v in vals) + " | " +
             " | ".join(fratio(None if v is None or not base else v / base, 3) for v in vals) + " |")
    L.append("")
    L.append("Proj is the paper's projection index (the raw column, scanned); ours is the index-less scan "
             "(`user.mmfs.index=none`). The paper's times are for 100M rows on 2010 machines (data3, data1: "
             "disks; davinci: GPFS; turing: Fusion-io flash), ours for the rows above.")
    L.append("")
    # per query
    L.append("### Every query (warm ms per engine; the count every engine returned)")
    L.append("")
    names = [e["engine"] for e in engines if e.get("warm")]
    L.append("| query | mmfs condition | count | " + " | ".join(names) + " |")
    L.append("|---|---|---:|" + "---:|" * len(names))
    for i, q in enumerate(s["queries"]):
        cells = []
        for e in engines:
            if not e.get("warm"):
                continue
            v = e["warm"]["per_query_ms"][i]
            cells.append("—" if v is None else f"{v:.3g}")
        L.append(f"| {q['id']} | `{q['mmfs']}` | {q['count']:,} | " + " | ".join(cells) + " |")
    L.append("")


def field_report(L, f, a):
    shape = "×".join(map(str, f["shape"]))
    L.append(f"## 2. A 3-D float64 array {shape} ({fbytes(f['bytes'])}), bins=100 (equal frequency)")
    L.append("")
    L.append("A smooth field (sums and products of sines along each dimension) plus 0.1 × N(0,1) noise. "
             "Thresholds: the bin edge nearest the 99th / 90th percentile (`A@/info`'s edges when it shows them, "
             "else those the daemon's stride sample gives, computed the same way) and the data's quantile a "
             "quarter bin above that percentile (inside a bin). On an edge the condition "
             "is `>t`, or `>=t` when only that one is answered from the index alone (the plan's data_bytes). "
             "Every read cold (remount + drop caches before each); bytes read are deltas of /.mmfs/stats "
             "(index + data sectors); every result checked against numpy.")
    L.append("")
    for e in f.get("encodings", []):
        if e.get("error") or e.get("skipped"):
            L.append(f"* mmfs-{e['encoding']}: {e.get('error') or e.get('skipped')}")
    L.append("")
    L.append("| encoding | build s | index MB | × data | bin edges | first / last edge at the data's quantile |")
    L.append("|---|---:|---:|---:|---|---|")
    for e in f.get("encodings", []):
        ib = e.get("index_bytes")
        q0, q1 = e.get("bottom_edge_quantile"), e.get("top_edge_quantile")
        L.append(f"| {e['encoding']} | {fs(e.get('build_s'), 2)} | {fmb(ib)} | "
                 f"{fratio(None if ib is None else ib / f['bytes'], 3)} | {e.get('edges_from', '—')} | "
                 + ("—" if q0 is None else f"{q0 * 100:.2f} % / {q1 * 100:.2f} %") + " |")
    L.append("")
    L.append("Equal-frequency bins put the first and last of the 99 edges at the 1st and 99th percentiles; "
             "a threshold labelled `p99 edge` is the edge nearest the 99th percentile, so its selectivity "
             "column shows where that edge really is.")
    L.append("")
    L.append("| engine | threshold | cond | selectivity | view | cold s | bytes read | of which data | plan: index/data "
             "bytes, modeled ms |")
    L.append("|---|---|---|---:|---|---:|---:|---:|---|")
    for r in f.get("results", []):
        pl = r.get("plan")
        pls = "—" if not pl else (f"{fbytes(pl.get('index_bytes'))} / {fbytes(pl.get('data_bytes'))}, "
                                  f"{fratio(pl.get('modeled_ms'), 2)}")
        sel = r.get("selectivity")
        L.append(f"| {r['engine']} | {r['threshold']} | `{r.get('cond', '>' + repr(r['t']))}` | "
                 f"{'—' if sel is None else f'{sel * 100:.2f} %'} | {r['view']} | {fsum(r.get('s'))} | "
                 f"{fbytes(r.get('bytes_read'))} | {fbytes(r.get('data_bytes_read'))} | {pls} |"
                 + (f" ERROR {r['error']}" if r.get("error") else ""))
    L.append("")
    if f.get("targets"):
        L.append("Targets (cold):")
        L.append("")
        for t in f["targets"]:
            L.append(f"* {t['target']}: {fratio(t['value'], 3)} s ({t['who']}) — {'met' if t['met'] else 'MISSED'}")
        L.append(f"* reference: a numpy scan of the same file takes about {ISSUE_REFERENCE['numpy scan 3-D']} s "
                 "here; measured above (engine numpy).")
        L.append("")
