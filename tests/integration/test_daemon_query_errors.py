"""Bad query conditions and index attributes (docs/reference.md §1, §4, §5): the right errno,
a line in `.mmfs/errors` (naming the position of a syntax error), nothing under
`A@/query` or `D@/query` writable, and hostile conditions — deep nesting up
to the 255-byte name limit, long garbage, odd bytes — never crash the daemon
nor change stored data; when such a condition is accepted and has one reading
in the grammar (query_oracle.parse_condition), the answer is right."""
import errno
import os
import re

import numpy as np
import pytest

from mmfs_mount import ErrorLog, expect_errno, getx, make_array, new_lines, read_bytes, read_json, setx, view
from query_oracle import (check_query, compare, constants, evaluate, exact_text, parse_condition, query_data,
                          random_condition, tree_names)

OK_FAILURES = (errno.EINVAL, errno.ENOENT, errno.ENAMETOOLONG)


@pytest.fixture(scope="module")
def vol(module_volume):
    (module_volume.mnt / "qerr").mkdir()
    return module_volume


@pytest.fixture(autouse=True)
def daemon_alive(vol):
    rc = vol.mount_info.proc.poll()
    assert rc is None, f"the module's daemon exited with status {rc} during an earlier test (see the first failure)"


@pytest.fixture(scope="module")
def target(vol):
    """An indexed float64 array (and its companions) that no failing call may change."""
    rng = np.random.default_rng(61)
    arr = query_data(rng, (30, 40), "float64")
    path = make_array(vol.mnt / "qerr" / "target", arr.shape, arr.dtype, "multimap", arr,
                      attrs={"index": "bn", "bins": "9"})
    other = query_data(rng, (30, 40), "int32")
    make_array(vol.mnt / "qerr" / "other", other.shape, other.dtype, "naive", other)
    wrong = query_data(rng, (40, 30), "int32")
    make_array(vol.mnt / "qerr" / "wrongshape", wrong.shape, wrong.dtype, "naive", wrong)
    (vol.mnt / "qerr" / "plainfile").write_bytes(b"x" * 9600)
    return path, arr


def assert_unchanged(vol, target):
    path, arr = target
    assert vol.mount_info.proc.poll() is None, "the daemon is gone"
    assert read_bytes(path) == arr.tobytes(), "stored data changed"
    info = read_json(view(path, "info"))
    assert info["index"] == "bn" and str(info["bins"]) == "9" and info["device_bytes"]["index"] > 0
    flat = arr.reshape(-1)
    check_query(view(path), ">0&!=1", (compare(flat, ">", "0") & compare(flat, "!=", "1")), flat)


def query_fails(vol, path, cond, err, output="count"):
    with ErrorLog(vol, path.name):
        expect_errno(err, read_bytes, view(path, "query", cond, output))


# --- syntax ------------------------------------------------------------------------------------

# (condition, 0-based byte offset of the problem). Digits in the conditions are
# never the offset, so the offset can be found in the error line.
MALFORMED = [
    (">=9|", 4),          # a term is missing after '|'
    ("(((>9)", 6),        # ')' missing
    (">8&<9)", 5),        # a ')' too many
    ("in[8,9", 6),        # ']' missing
    ("==", 2),            # a number is missing
    (">8&&<9", 3),        # '&' where a term must be
    ("()", 1),            # empty parentheses
    ("in[9]", 4),         # one bound
    (">1|in[9,8,7]", 9),  # three bounds
    ("!", 1),             # nothing after '!'
    (">8!", 2),           # '!' after an atom
    ("=9", 0),            # '=' is not an operator
]


@pytest.mark.parametrize("cond,position", MALFORMED, ids=[c for c, _ in MALFORMED])
def test_malformed_conditions(vol, target, cond, position):
    path, _ = target
    before = vol.errors()
    expect_errno(errno.EINVAL, read_bytes, view(path, "query", cond, "count"))
    added = [line for line in new_lines(before, vol.errors()) if path.name in line]
    assert added, f"no new line of .mmfs/errors mentions {path.name}"
    stripped = [line.replace(str(vol.mnt), "").replace(cond, "") for line in added]
    assert any(re.search(rf"(?<![\w.]){position}(?![\w.])", line) or
               re.search(rf"(?<![\w.]){position + 1}(?![\w.])", line) for line in stripped), \
        f"the error line does not name position {position} of {cond!r}: {added}"
    assert_unchanged(vol, target)


@pytest.mark.parametrize("cond", ["", "abc", ">", ">x", ">1.2.3", ">1e", ">--1", ">0x10", ">1,5", "in[,]", "in(1,2)",
                                  "&", "|>1", ">1|", "((", "))", "!!", ">=>=1", "> = 1", ">1&(", "in[1,2]]", "'>1'",
                                  ">1;", "[1,2]", "== 1 2", "<>8", ">8 <9", ">8 9"])
def test_more_malformed_conditions(vol, target, cond):
    path, _ = target
    if cond == "":
        # An empty component is no name: A@/query//count is A@/query/count.
        expect_errno(OK_FAILURES, read_bytes, view(path, "query", "count"))
        return
    names_like = cond in ("abc", "'>1'")  # a NAME might be looked up before the syntax is checked
    query_fails(vol, path, cond, (errno.EINVAL, errno.ENOENT) if names_like else errno.EINVAL)
    assert_unchanged(vol, target)


def test_names(vol, target):
    path, arr = target
    query_fails(vol, path, "missing>1", errno.ENOENT)
    query_fails(vol, path, ">1&missing<2", errno.ENOENT)
    query_fails(vol, path, "wrongshape>1", errno.EINVAL)
    query_fails(vol, path, "plainfile>1", (errno.EINVAL, errno.ENOENT))
    query_fails(vol, path, "qerr>1", (errno.EINVAL, errno.ENOENT))  # not in the array's directory
    for output in ("coords", "values", "mask"):
        query_fails(vol, path, "missing==3", errno.ENOENT, output)
        query_fails(vol, path, "wrongshape==3", errno.EINVAL, output)
    # The right ones work.
    other = np.fromfile(str(path.parent / "other"), dtype=np.int32)
    flat = arr.reshape(-1)
    t = ("or", [("cmp", "other", ">", "0"), ("cmp", "target", "<", "-5")])
    check_query(view(path), "other>0|target<-5", evaluate(t, {"other": other, "target": flat}), flat)
    assert_unchanged(vol, target)


@pytest.fixture(scope="module")
def table(vol):
    """A directory of two equal-length 1-D arrays x, y, and two that do not fit: short, square."""
    table = vol.mnt / "qerr" / "tbl"
    table.mkdir()
    rng = np.random.default_rng(62)
    x = rng.integers(0, 10, 500).astype(np.int32)
    make_array(table / "x", x.shape, x.dtype, "naive", x, attrs={"index": "e1"})
    make_array(table / "y", x.shape, np.float64, "naive", x.astype(np.float64))
    make_array(table / "short", (499,), np.int32, "naive", x[:499])
    make_array(table / "square", (20, 25), np.int32, "naive", x.reshape(20, 25))
    return table, x


def test_table_errors(vol, table):
    table, x = table
    check_query(view(table), "x>3&y<8", (x > 3) & (x < 8), np.arange(500, dtype=np.uint64), ("count", "coords"))
    for cond, err in [(">3", errno.EINVAL), ("x>3&<8", errno.EINVAL), ("in[1,2]", errno.EINVAL),
                      ("x>3&short<8", errno.EINVAL), ("square>3", errno.EINVAL), ("nothere>3", errno.ENOENT),
                      ("x>>3", errno.EINVAL)]:
        with ErrorLog(vol, table.name):
            expect_errno(err, read_bytes, view(table, "query", cond, "count"))
    assert vol.mount_info.proc.poll() is None


def test_nothing_under_a_query_can_be_changed(vol, target, table):
    path, _ = target
    q = view(path, "query", ">1")
    table, _ = table
    cases = [
        (os.open, q / "count", os.O_WRONLY),
        (os.open, q / "coords", os.O_RDWR),
        (os.open, q / "new", os.O_CREAT | os.O_WRONLY, 0o644),
        (os.mkdir, q / "dir"),
        (os.truncate, q / "values", 0),
        (os.unlink, q / "mask"),
        (os.rmdir, q),
        (os.rename, q / "count", q / "count2"),
        (os.setxattr, q / "count", "user.x", b"1"),
        (os.setxattr, q, "user.mmfs.index", b"e1"),
        (os.open, view(path, "box", "0:3,:@", "query", ">1", "count"), os.O_WRONLY),
        (os.open, view(table, "query", "x>1", "count"), os.O_WRONLY),
        (os.open, view(table, "query", "x>1", "new"), os.O_CREAT | os.O_WRONLY, 0o644),
        (os.truncate, view(table, "query", "x>1", "coords"), 0),
    ]
    problems = []
    for fn, *args in cases:
        try:
            with ErrorLog(vol, path.name if str(path) + "@" in str(args[0]) else table.name):
                expect_errno(errno.EROFS, fn, *args)
        except AssertionError as e:
            problems.append(f"{fn.__name__}{tuple(map(str, args))}: {e}")
    assert not os.path.exists(q / "new") and not os.path.exists(q / "count2")
    assert_unchanged(vol, target)
    assert not problems, "\n".join(problems)


# --- index attributes ----------------------------------------------------------------------------

@pytest.mark.parametrize("name,value", [("index", "bogus"), ("index", ""), ("index", "e1,bn"), ("index", "e2"),
                                        ("bins", "0"), ("bins", "-3"), ("bins", "precision:0"), ("bins", "edges:"),
                                        ("bins", "edges:2,1"), ("bins", "edges:2,x"), ("bins", "exact:3"),
                                        ("bins", "1.5")])
def test_bad_index_attributes_change_nothing(vol, target, name, value):
    path, _ = target
    with ErrorLog(vol, path.name):
        expect_errno(errno.EINVAL, setx, path, name, value)
    assert getx(path, "index") == "bn" and getx(path, "bins") == "9"
    assert_unchanged(vol, target)


def test_exact_bins_on_too_many_distinct_values(vol, target):
    """Exact binning of more distinct values than an index takes is refused
    (or accepted and still right); either way nothing is lost."""
    rng = np.random.default_rng(63)
    arr = (rng.integers(-2 ** 23, 2 ** 23, 1 << 21) / 1024).astype(np.float32)  # about 1.9M distinct values
    path = make_array(vol.mnt / "qerr" / "many", arr.shape, arr.dtype, "naive", arr)
    setx(path, "bins", "exact")
    try:
        setx(path, "index", "e1")
    except OSError as e:
        assert e.errno in (errno.EINVAL, errno.ENOSPC, errno.EFBIG), e
        assert getx(path, "index") == "none", "a refused index is not half there"
    else:
        assert getx(path, "index") == "e1"
    c = exact_text(arr[7])
    check_query(view(path), f"=={c}", arr == arr[7], arr, outputs=("count",))
    assert read_bytes(path) == arr.tobytes()
    os.unlink(path)


# --- hostile conditions --------------------------------------------------------------------------

def hostile_conditions(rng, arr):
    out = []
    for depth in (1, 5, 20, 40, 63, 64, 65, 100, 126):
        out.append("(" * depth + ">1" + ")" * depth)
    out += ["(" * 127 + ">1" + ")" * 126, "(" * 200, ")" * 200, "!" * 250 + ">1", "!" * 253, "!(" * 80 + ">1" + ")" * 80]
    out.append("|".join([">1"] * 80))
    out.append("&".join(["!=1"] * 60))
    out.append(">" + "9" * 250)
    out.append(">-" + "9" * 200 + ".5")
    out.append(">1e999999999999")
    out.append(">1e-999999999999")
    out.append("in[" + "1" * 120 + "," + "2" * 120 + "]")
    out.append(">" + "0" * 240 + "1")
    out.append("x" * 255)
    out.append("x" * 300)
    out.append(">1&" + "y" * 240 + "<2")
    out.append(">nan")
    out.append("==NaN|<INF")
    out.append("in[nan,1]")
    out.append(">1\t")
    out.append(">1\n|<0")
    out.append(" >1 ")
    out.append("\x01>1")
    out.append(">1\x7f")
    out.append("é>1")
    out.append(">１")  # a fullwidth digit
    out.append("in [1 , 2]")
    alphabet = list("()!&|<>=[],.-+e0123456789") + ["in", "inf", "nan", " "]
    for _ in range(150):
        n = int(rng.integers(1, 80))
        out.append("".join(alphabet[i] for i in rng.integers(0, len(alphabet), n)))
    consts = constants(rng, arr)
    for _ in range(120):  # valid conditions with one character changed, dropped or doubled
        _, text = random_condition(rng, consts, max_len=120)
        i = int(rng.integers(0, len(text)))
        how = int(rng.integers(0, 3))
        if how == 0:
            text = text[:i] + "()!&|<>=[],.-+e0123456789"[int(rng.integers(0, 25))] + text[i + 1:]
        elif how == 1:
            text = text[:i] + text[i + 1:]
        else:
            text = text[:i] + text[i] + text[i:]
        out.append(text)
    for _ in range(30):
        out.append(bytes(rng.integers(1, 256, int(rng.integers(1, 255)), dtype=np.uint8).tolist()))
    return out


def test_hostile_conditions_never_crash(vol, target):
    path, arr = target
    flat = arr.reshape(-1)
    rng = np.random.default_rng(64)
    base = os.fsencode(str(view(path, "query")))
    problems = []
    for cond in hostile_conditions(rng, arr):
        raw = cond if isinstance(cond, bytes) else cond.encode()
        raw = raw.replace(b"/", b"|").replace(b"\0", b"!")
        if raw in (b".", b".."):
            continue
        for output in ("count", "coords"):
            try:
                data = read_bytes(base + b"/" + raw + b"/" + output.encode())
            except OSError as e:
                if e.errno not in OK_FAILURES:
                    problems.append(f"{raw[:60]!r}/{output}: {errno.errorcode.get(e.errno)} ({e})")
                if len(raw) <= 255 and e.errno == errno.ENAMETOOLONG:
                    problems.append(f"{raw!r}: ENAMETOOLONG for a short name")
                continue
            assert vol.mount_info.proc.poll() is None, f"the daemon died on {raw[:80]!r}"
            tree = parse_condition(cond) if isinstance(cond, str) else None
            if tree is not None and tree_names(tree) == {""}:
                mask = evaluate(tree, {"": flat})
                expected = (f"{int(mask.sum())}\n".encode() if output == "count"
                            else np.flatnonzero(mask).astype("<u8").tobytes())
                if data != expected:
                    problems.append(f"{raw[:60]!r}/{output}: wrong answer ({len(data)} bytes)")
            elif output == "count" and not re.fullmatch(rb"\d+\n", data):
                problems.append(f"{raw[:60]!r}/count: {data[:40]!r} is not a count")
            elif output == "coords":
                coords = np.frombuffer(data, dtype="<u8") if len(data) % 8 == 0 else None
                if coords is None or (coords.size and (coords[-1] >= flat.size or (np.diff(coords) <= 0).any())):
                    problems.append(f"{raw[:60]!r}/coords: not ascending indices of the array")
    # Known-valid nesting up to depth 20 must be accepted.
    for depth in (1, 5, 20):
        cond = "(" * depth + ">1" + ")" * depth
        check_query(view(path), cond, flat > 1, flat)
    assert_unchanged(vol, target)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])


def test_many_errors_then_the_mount_still_answers(vol, target):
    path, arr = target
    for i in range(500):
        cond = [f">{i}&", f"in[{i},", f"x{i}<<1", f"(>{i}"][i % 4]
        try:
            read_bytes(view(path, "query", cond, "count"))
        except OSError as e:
            assert e.errno in (errno.EINVAL, errno.ENOENT), f"{cond}: {e}"
        else:
            raise AssertionError(f"{cond!r} was accepted")
    assert "(>499" in vol.errors().splitlines()[-1] or "499" in vol.errors().splitlines()[-1], "most recent last"
    assert_unchanged(vol, target)
