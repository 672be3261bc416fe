"""The Set Query Benchmark as the bitmap-index paper runs it (Wu, Madduri,
Canon, *Multi-Level Bitmap Indexes for Flash Memory Storage*, 2010, §3;
papers/001_*.txt), for bench/query_bench.py (`mmfs-bench query`).

* `generate(rows)`: the table BENCH, one int32 numpy array per column.
  O'Neil's generator (the paper's footnote 3): one 32-bit seed, initialised
  to 1 and multiplied by 16807 modulo 2^31-1 before each use (the Park-Miller
  "minimal standard" generator); row by row, one number per column in the
  order K500K, K250K, K100K, K40K, K10K, K1K, K100, K25, K10, K5, K4, K2, and
  the column KN gets (number mod N) + 1. KSEQ is the row number from 1.
  The sequence is computed without a Python loop: the n-th number is
  16807^n mod (2^31-1), so a block of L numbers is the first block times
  16807^(L*k) (every product of two numbers below 2^31 fits in uint64).
* `queries(rows)`: the 75 count queries Q1 (13), Q2a, Q2b (12 each), Q3a,
  Q3b (11 each), Q4a, Q4b (8 each) as small condition trees, with the
  spellings each engine needs: the mmfs condition of `D@/query/COND/count`
  (docs/reference.md §5), SQL, a numpy evaluation and a pyroaring evaluation.

Condition trees: ("eq"|"ne"|"lt"|"le"|"gt"|"ge", col, v), ("between", col,
a, b) (closed), ("and", [t...]), ("or", [t...]), ("not", t).
"""
import numpy as np

MODULUS = 2**31 - 1
MULTIPLIER = 16807

# Generation order (one random number per column per row, in this order).
GEN_ORDER = ["K500K", "K250K", "K100K", "K40K", "K10K", "K1K", "K100", "K25", "K10", "K5", "K4", "K2"]
CARD = {"K2": 2, "K4": 4, "K5": 5, "K10": 10, "K25": 25, "K100": 100, "K1K": 1000, "K10K": 10000,
        "K40K": 40000, "K100K": 100000, "K250K": 250000, "K500K": 500000}
# The paper's column order (its Figure 8), KSEQ last.
COLUMNS = ["K2", "K4", "K5", "K10", "K25", "K100", "K1K", "K10K", "K40K", "K100K", "K250K", "K500K", "KSEQ"]


def _powmod(base, exp, mod=MODULUS):
    return pow(int(base), int(exp), int(mod))


def park_miller_block(first_index, count):
    """uint64 array of the generator's numbers x_n = 16807^n mod (2^31-1) for
    n = first_index .. first_index + count - 1 (x_1 = 16807 is the first number
    used when the seed starts at 1)."""
    out = np.empty(count, dtype=np.uint64)
    if count == 0:
        return out
    out[0] = _powmod(MULTIPLIER, first_index)
    filled = 1
    m = np.uint64(MODULUS)
    while filled < count:  # doubling: out[f:2f] = out[0:f] * A^f mod M
        step = min(filled, count - filled)
        mult = np.uint64(_powmod(MULTIPLIER, filled))
        np.multiply(out[:step], mult, out=out[filled:filled + step])
        np.remainder(out[filled:filled + step], m, out=out[filled:filled + step])
        filled += step
    return out


def generate(rows, block_rows=1 << 20):
    """{column: int32 array of `rows`} (see the module doc)."""
    ncol = len(GEN_ORDER)
    cols = {c: np.empty(rows, dtype=np.int32) for c in GEN_ORDER}
    m = np.uint64(MODULUS)
    base = park_miller_block(1, min(block_rows, rows) * ncol)   # numbers 1 .. block_rows*ncol
    for r0 in range(0, rows, block_rows):
        n = min(block_rows, rows - r0)
        block = base[:n * ncol]
        if r0 > 0:  # numbers r0*ncol+1 .. : the first block times 16807^(r0*ncol)
            block = block * np.uint64(_powmod(MULTIPLIER, r0 * ncol))
            np.remainder(block, m, out=block)
        grid = block.reshape(n, ncol)
        for j, c in enumerate(GEN_ORDER):
            v = grid[:, j] % np.uint64(CARD[c])
            cols[c][r0:r0 + n] = v.astype(np.int32) + 1
    cols["KSEQ"] = np.arange(1, rows + 1, dtype=np.int32)
    return {c: cols[c] for c in COLUMNS}


# --------------------------------------------------------------------------
# the queries

# The paper's Figure 1: the range conditions of Q4 and the number of
# equality-encoded bitmaps each touches (at 100M rows; the same at any size).
FIG1 = [
    (("eq", "K2", 1), 1),
    (("gt", "K100", 80), 20),
    (("between", "K10K", 2000, 3000), 1001),
    (("eq", "K5", 3), 1),
    (("or", [("eq", "K25", 11), ("eq", "K25", 19)]), 2),
    (("eq", "K4", 3), 1),
    (("lt", "K100", 41), 40),
    (("between", "K1K", 850, 950), 101),
    (("eq", "K10", 7), 1),
    (("between", "K25", 3, 4), 2),
]

KSEQ_Q3A = [(400000, 500000)]
KSEQ_Q3B = [(400000, 410000), (420000, 430000), (440000, 450000), (460000, 470000), (480000, 500000)]


def kseq_scale(rows):
    """The KSEQ constants of Q3 are the benchmark's (for 1M rows; the paper
    keeps them at 100M). Below 500,000 rows they would select nothing, so
    smoke runs scale them by rows/1M; 1.0 otherwise."""
    return 1.0 if rows > 500000 else rows / 1e6


def queries(rows=10_000_000):
    """The 75 queries: list of dicts id, group, tree."""
    out = []
    for c in COLUMNS:                                          # Q1: KN = 2
        out.append(("Q1", c, ("eq", c, 2)))
    for c in COLUMNS[1:]:                                      # Q2a: K2 = 2 and KN = 3
        out.append(("Q2a", c, ("and", [("eq", "K2", 2), ("eq", c, 3)])))
    for c in COLUMNS[1:]:                                      # Q2b: K2 = 2 and not KN = 3
        out.append(("Q2b", c, ("and", [("eq", "K2", 2), ("not", ("eq", c, 3))])))
    s = kseq_scale(rows)

    def kseq(a, b):
        return ("between", "KSEQ", int(round(a * s)), int(round(b * s)))

    for c in COLUMNS[1:-1]:                                    # Q3a
        out.append(("Q3a", c, ("and", [kseq(*KSEQ_Q3A[0]), ("eq", c, 3)])))
    for c in COLUMNS[1:-1]:                                    # Q3b
        out.append(("Q3b", c, ("and", [("or", [kseq(a, b) for a, b in KSEQ_Q3B]), ("eq", c, 3)])))
    for i in range(8):                                         # Q4a: conditions i..i+2 of Figure 1
        out.append(("Q4a", str(i + 1), ("and", [FIG1[(i + k) % 10][0] for k in range(3)])))
    for i in range(8):                                         # Q4b: five, wrapping to the first two
        out.append(("Q4b", str(i + 1), ("and", [FIG1[(i + k) % 10][0] for k in range(5)])))
    return [{"id": f"{g}-{x}", "group": g, "tree": t} for g, x, t in out]


GROUPS = ["Q1", "Q2a", "Q2b", "Q3a", "Q3b", "Q4a", "Q4b"]


# --------------------------------------------------------------------------
# spellings

_MMFS_OP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_SQL_OP = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def mmfs_cond(t, top=True):
    """docs/reference.md §5 condition: `&` binds tighter than `|`, so an `or` inside an
    `and` is parenthesised."""
    k = t[0]
    if k in _MMFS_OP:
        return f"{t[1]}{_MMFS_OP[k]}{t[2]}"
    if k == "between":
        return f"{t[1]} in [{t[2]},{t[3]}]"
    if k == "not":
        inner = mmfs_cond(t[1], top=False)
        return "!" + (inner if t[1][0] not in ("and", "or") else f"({inner})")
    if k == "and":
        return "&".join(mmfs_cond(x, top=False) if x[0] != "or" else f"({mmfs_cond(x, top=False)})" for x in t[1])
    if k == "or":
        return "|".join(mmfs_cond(x, top=False) for x in t[1])
    raise ValueError(t)


def sql_cond(t):
    k = t[0]
    if k in _SQL_OP:
        return f"{t[1]} {_SQL_OP[k]} {t[2]}"
    if k == "between":
        return f"{t[1]} BETWEEN {t[2]} AND {t[3]}"
    if k == "not":
        return f"NOT ({sql_cond(t[1])})"
    if k in ("and", "or"):
        return "(" + f" {k.upper()} ".join(sql_cond(x) for x in t[1]) + ")"
    raise ValueError(t)


def paper_cond(t):
    """The paper's spelling (Figure 1 style), for the report."""
    k = t[0]
    if k in _SQL_OP:
        return f"{t[1]} {_SQL_OP[k].replace('<>', '!=')} {t[2]}"
    if k == "between":
        return f"{t[1]} between {t[2]} and {t[3]}"
    if k == "not":
        return f"not {paper_cond(t[1])}"
    if k == "and":
        return " and ".join(paper_cond(x) if x[0] != "or" else f"({paper_cond(x)})" for x in t[1])
    if k == "or":
        return " or ".join(paper_cond(x) for x in t[1])
    raise ValueError(t)


def columns_of(t):
    k = t[0]
    if k in ("and", "or"):
        out = []
        for x in t[1]:
            out += [c for c in columns_of(x) if c not in out]
        return out
    if k == "not":
        return columns_of(t[1])
    return [t[1]]


def numpy_mask(t, cols):
    """Boolean mask of the rows matching `t`; cols: name -> array."""
    k = t[0]
    if k == "eq":
        return cols[t[1]] == t[2]
    if k == "ne":
        return cols[t[1]] != t[2]
    if k == "lt":
        return cols[t[1]] < t[2]
    if k == "le":
        return cols[t[1]] <= t[2]
    if k == "gt":
        return cols[t[1]] > t[2]
    if k == "ge":
        return cols[t[1]] >= t[2]
    if k == "between":
        c = cols[t[1]]
        return (c >= t[2]) & (c <= t[3])
    if k == "not":
        return ~numpy_mask(t[1], cols)
    if k in ("and", "or"):
        m = numpy_mask(t[1][0], cols)
        for x in t[1][1:]:
            if k == "and":
                m &= numpy_mask(x, cols)
            else:
                m |= numpy_mask(x, cols)
        return m
    raise ValueError(t)


def numpy_count(t, cols):
    return int(np.count_nonzero(numpy_mask(t, cols)))


def value_range(t):
    """(lo, hi) closed value range of a comparison atom (None: unbounded)."""
    k = t[0]
    if k == "between":
        return t[2], t[3]
    v = t[2]
    return {"eq": (v, v), "lt": (None, v - 1), "le": (None, v), "gt": (v + 1, None), "ge": (v, None)}[k]


def e1_bitmaps(t, card):
    """Equality bitmaps an atom (or an or of atoms on one column) touches,
    for an exact index of a column with values 1..card (the paper's Figure 1
    column '# bitmaps')."""
    k = t[0]
    if k == "or":
        return sum(e1_bitmaps(x, card) for x in t[1])
    lo, hi = value_range(t)
    lo = 1 if lo is None else max(lo, 1)
    hi = card if hi is None else min(hi, card)
    return max(0, hi - lo + 1)
