"""Concurrency soak: 16 readers of random views and 2 writers
of other arrays and plain files, every read compared with numpy, no error, the
daemon's memory within a stated bound.

One 512 MiB volume holds READER_ARRAYS (every dtype family, 1 to 4
dimensions, the four layouts, a custom cell and order, two bitmap indexes)
with known data. READERS processes loop until the deadline: each picks an
array and a view at random — the whole file, `A@/slice/D/I`, `A@/box/SEL`,
`A@/plod/K` and `A@/plod/K@/slice|box/...`, `A@/query/COND/count|coords|
values|mask` (also below a box), `A@/info`, `A@/plan/...` — and compares what
it reads with numpy computed from the known data (conditions and their numpy
oracle from query_oracle.py). WRITERS processes each own WRITER_ARRAYS[i] and
PLAIN_FILES plain files: they rewrite and patch them, truncate the array to 0
through a descriptor that has its pages cached, fsync, and read everything
back against their own model; writer 0 also re-lays the readers' arrays out
underneath them (setxattr user.mmfs.layout), which must not change a byte any
reader sees.

Copies and a corrupting device. Two reader arrays and writer 0's array have
copies in other layouts (user.mmfs.copies), so views are served by either
placement and writer 0's writes are caught up in the background while it
goes on; readers also read through one placement (`A@/copy/K@/slice/...`).
A flipper thread flips a byte in the image file, under the live daemon,
inside a random cell of a reader array's copy every FLIP_S seconds: every
reader must still see the right bytes (the cell is served from the other
placement and rewritten in place). At the end every placement of those
arrays is read whole, and the repairs must be in `/.mmfs/stats`.

Any mismatch, any errno, any new line in `.mmfs/errors` but `self-healed:`
and `served from another copy:` ones (about the flipped arrays) fails; at the end the writers check their files whole, and the
unmount's mmfsck must find the volume clean.

Memory. The parent samples the daemon's VmRSS every SAMPLE_S seconds and
reads its VmHWM (/proc/PID/status) at the end. What the daemon may hold
beyond its size before the arrays exist (`base`, sampled after the mount)
follows from its caches (docs/daemon.md, fs/array/array_index.h):

* per array, 6 decoded chunks of at most min(32 MiB, its size) (a view is
  never larger than its array), and the dirty cells of a write (at most its
  size): 7 * its size, 8 with a relayout's copy;
* per FUSE worker (at most 16), one chunk load in flight (the chunk and its
  cells: twice the largest array) and a 1 MiB request and reply buffer each;
* per bitmap index, its cache of decoded bitmaps and of the estimates of the
  conditions asked (at most 2 bitmaps each): (128 + 2 * CONDITIONS) bitmaps
  of at most rows / 8 bytes (the index caches up to 512 MiB each,
  ArrayIndex::kCacheBytes, which distinct conditions would fill: hence the
  fixed pools of conditions below);
* freed memory the daemon keeps for reuse: up to FREE_RESERVE (256 MiB)
  at each tick of its flusher, which returns the rest (daemon/heap_trim.h);
* query results, the metadata store (a 16 MiB region on this volume), glibc
  and libfuse: SLACK.

    VmHWM <= base + 8 * sum(array bytes) + 16 * (2 * largest + 2 MiB)
                  + sum over indexes (128 + 2 * CONDITIONS) * rows / 8
                  + FREE_RESERVE + SLACK

(about base + 1,130 MiB here; docs/benchmarks/stress-soak.md has the
measured peaks). The largest RSS by each quarter of the run is printed: a
leak would show as a steady climb, and did before the daemon trimmed its
heap (540, 600, 700, 900 MiB in ten minutes: fragmentation, the memory in
use stayed flat). Steps are expected when rare coincidences (several loads
of the largest array at once) set a new peak, so the climb is not asserted.

The time is $MMFS_SOAK_SECONDS (default SECONDS below, the CI's;
scripts/stress.sh sets 600), the seed $MMFS_SOAK_SEED.
"""
import collections
import json
import multiprocessing
import os
import threading
import time
import traceback

import numpy as np

import conftest
import query_oracle
from mmfs_mount import (assert_array_bytes, make_array, new_lines, plod, pread_all, pwrite_all, random_array,
                        random_pieces, read_bytes, sel_string, setx, view, write_pieces)

SECONDS = float(os.environ.get("MMFS_SOAK_SECONDS", "45"))
SEED = int(os.environ.get("MMFS_SOAK_SEED", "19"))
READERS = 16
WRITERS = 2
SAMPLE_S = 0.25
FLIP_S = 0.5  # a byte flipped in a copy's cell this often
MIB = 1 << 20
SLACK = 96 * MIB  # glibc arena slack, libfuse, query results, the metadata store
FREE_RESERVE = 256 * MIB  # kFreeHeapReserve in daemon/filesystem.cc

# name: (shape, dtype, initial layout, other schema attributes, layouts a relayout may choose)
ALL_LAYOUTS = ("naive", "zorder", "hilbert", "multimap")
READER_ARRAYS = {
    "cube": ((64, 64, 64), "float64", "multimap", {"copies": "naive"}, ALL_LAYOUTS),
    "grid": ((384, 512), "int32", "zorder", {"index": "e1"}, ALL_LAYOUTS),
    "hyper": ((12, 16, 10, 18), "uint16", "hilbert", {}, ALL_LAYOUTS),
    "big": ((96, 256, 160), "float32", "naive", {"index": "re", "copies": "hilbert"}, ALL_LAYOUTS),
    "line": ((50000,), "int64", "hilbert", {}, ALL_LAYOUTS),
    "tiny": ((37, 53), "int8", "naive", {"cell": "5,7"}, ("naive", "zorder", "hilbert")),
    "wide": ((5, 700, 9), "float64", "multimap", {"order": "1,0,2"}, ALL_LAYOUTS),
}
WRITER_ARRAYS = [
    ("w0", (96, 96, 32), "float64", "multimap", {"copies": "naive;hilbert"}),
    ("w1", (300, 400), "int16", "zorder", {"index": "bn", "bins": "16"}),
]
PLAIN_FILES = 3
# What a writer asks of its indexed array after each change (a fixed set, as
# CONDITIONS below).
WRITER_CONDITIONS = [("==", 0), ("<", 0), (">=", 1000), ("<=", -20000), ("!=", 7), (">", 30000)]
PLAIN_MAX = 1 << 20
# Query outputs a reader may read, per array: `big` matches millions of
# elements, whose coords would be tens of MiB.
QUERY_OUTPUTS = {"big": ("count",)}
# Queries of an indexed array draw from this many conditions, fixed at the
# start: an index keeps the estimates of the conditions it answered, up to
# 512 MiB each (ArrayIndex::kCacheBytes), so endless new conditions would fill
# it for minutes and hide a leak. Unindexed arrays get new conditions always.
CONDITIONS = 32

READ_KINDS = {"whole": 2, "slice": 10, "box": 10, "plod": 4, "plod_view": 4, "query": 6, "box_query": 2,
              "info": 1, "plan": 1, "copy_view": 3}
WRITE_KINDS = {"rewrite": 2, "patch": 6, "zero": 1, "plain_write": 6, "plain_truncate": 1, "fsync": 1,
               "relayout": 2}


# --- the known data ------------------------------------------------------------------

def reader_data(name):
    shape, dtype, _, attrs, _ = READER_ARRAYS[name]
    rng = np.random.default_rng(SEED * 1000 + list(READER_ARRAYS).index(name))
    if "index" in attrs:
        # Duplicates, extremes and (floats) NaN, infinities and subnormals: what
        # an index's bins must get right.
        return query_oracle.query_data(rng, shape, dtype)
    return random_array(rng, shape, dtype)


def make_arrays(root):
    """Creates every array (readers' and writers') with its data; returns the readers' data."""
    data = {}
    for name, (shape, dtype, layout, attrs, _) in READER_ARRAYS.items():
        data[name] = reader_data(name)
        make_array(root / name, shape, dtype, layout, data[name], attrs)
    for name, shape, dtype, layout, attrs in WRITER_ARRAYS:
        make_array(root / name, shape, dtype, layout, None, attrs)
    return data


def array_bytes():
    sizes = [int(np.prod(s)) * np.dtype(d).itemsize for s, d, *_ in READER_ARRAYS.values()]
    sizes += [int(np.prod(s)) * np.dtype(d).itemsize for _, s, d, *_ in WRITER_ARRAYS]
    return sizes


def index_rows():
    """Rows of each indexed array."""
    rows = [int(np.prod(s)) for s, _, _, attrs, _ in READER_ARRAYS.values() if "index" in attrs]
    return rows + [int(np.prod(s)) for _, s, _, _, attrs in WRITER_ARRAYS if "index" in attrs]


def copies_of(attrs):
    return 0 if attrs.get("copies", "none") == "none" else len(attrs["copies"].split(";"))


def memory_bound(base):
    """The bound of the module doc."""
    sizes = array_bytes()
    indexes = sum((128 + 2 * CONDITIONS) * -(-rows // 8) for rows in index_rows())
    # A copy's catch-up or self-healing holds at most one more array's worth.
    copies = sum(int(np.prod(s)) * np.dtype(d).itemsize * copies_of(a) for s, d, _, a, _ in READER_ARRAYS.values())
    copies += sum(int(np.prod(s)) * np.dtype(d).itemsize * copies_of(a) for _, s, d, _, a in WRITER_ARRAYS)
    return base + 8 * sum(sizes) + copies + 16 * (2 * max(sizes) + 2 * MIB) + indexes + FREE_RESERVE + SLACK


# --- random views --------------------------------------------------------------------

def random_selection(rng, shape):
    """A numpy basic-indexing selection (ints and slices, none empty) of `shape`."""
    sel = []
    for n in shape:
        r = rng.random()
        if r < 0.2:
            sel.append(int(rng.integers(0, n)))
        elif r < 0.3:
            sel.append(slice(None))
        else:
            a = int(rng.integers(0, n))
            b = int(rng.integers(a + 1, n + 1))
            sel.append(slice(a, b, int(rng.integers(2, 6))) if r < 0.6 else slice(a, b))
    return tuple(sel)


def random_slice(rng, arr):
    d = int(rng.integers(0, arr.ndim))
    i = int(rng.integers(0, arr.shape[d]))
    return ("slice", d, i), np.take(arr, i, axis=d)


def read_view(path, expected, what):
    """Reads a data view whole and compares it with numpy; returns the bytes read."""
    expected = np.ascontiguousarray(expected)
    size = os.stat(path).st_size
    assert size == expected.nbytes, f"{what}: st_size {size}, expected {expected.nbytes}"
    got = read_bytes(path)
    assert_array_bytes(got, expected, what)
    return len(got)


def read_query(path, output, mask, flat):
    """One output of a query view against the numpy mask over A's linear indices."""
    if output != "mask":
        query_oracle.check_output(path, output, mask, flat, str(path))
        return os.stat(path).st_size
    got = query_oracle.decode_roaring(read_bytes(path))
    assert np.array_equal(got, np.flatnonzero(mask)), f"{path}: {len(got)} indices, expected {int(mask.sum())}"
    return os.stat(path).st_size


class ReaderState:
    """The readers' arrays: paths, data, condition constants, and the condition
    pools of indexed arrays with their numpy masks (made once, before the fork)."""

    def __init__(self, root, data, rng):
        self.root, self.data = root, data
        self.consts = {name: query_oracle.constants(rng, arr) for name, arr in data.items()}
        self.pools = {}
        for name, arr in data.items():
            if "index" in READER_ARRAYS[name][3]:
                conds = [query_oracle.random_condition(rng, self.consts[name], depth=2) for _ in range(CONDITIONS)]
                self.pools[name] = [(text, query_oracle.evaluate(tree, {"": arr}).reshape(-1)) for tree, text in conds]

    def condition(self, rng, name):
        """(text, mask over A's linear indices) of a random condition on array `name`."""
        if name in self.pools:
            return self.pools[name][int(rng.integers(0, CONDITIONS))]
        tree, text = query_oracle.random_condition(rng, self.consts[name], depth=2)
        return text, query_oracle.evaluate(tree, {"": self.data[name]}).reshape(-1)

    def read(self, rng, kind, name):
        """Reads one random view of kind `kind` of array `name`; returns the bytes read."""
        path, arr = self.root / name, self.data[name]
        if kind == "whole":
            return read_view(path, arr, f"{path} (the whole file)")
        if kind == "slice":
            spec, expected = random_slice(rng, arr)
            return read_view(view(path, *spec), expected, f"{name}@/slice/{spec[1]}/{spec[2]}")
        if kind == "box":
            sel = random_selection(rng, arr.shape)
            return read_view(view(path, "box", sel_string(sel)), arr[sel], f"{name}@/box/{sel_string(sel)}")
        if kind == "copy_view":  # through one placement (the primary alone when there are no copies)
            k = int(rng.integers(0, copies_of(READER_ARRAYS[name][3]) + 1))
            spec, expected = random_slice(rng, arr)
            return read_view(view(path, "copy", f"{k}@", *spec), expected,
                             f"{name}@/copy/{k}@/slice/{spec[1]}/{spec[2]}")
        k = int(rng.integers(1, arr.dtype.itemsize + 1))
        if kind == "plod":
            return read_view(view(path, "plod", k), plod(arr, k), f"{name}@/plod/{k}")
        if kind == "plod_view":
            coarse = plod(arr, k)
            if rng.random() < 0.5:
                spec, expected = random_slice(rng, coarse)
                return read_view(view(path, "plod", f"{k}@", *spec), expected, f"{name}@/plod/{k}@/slice")
            sel = random_selection(rng, arr.shape)
            return read_view(view(path, "plod", f"{k}@", "box", sel_string(sel)), coarse[sel],
                             f"{name}@/plod/{k}@/box/{sel_string(sel)}")
        if kind in ("query", "box_query"):
            cond, mask = self.condition(rng, name)
            base = view(path)
            if kind == "box_query":
                sel = random_selection(rng, arr.shape)
                inside = np.zeros(arr.shape, bool)
                inside[sel] = True
                mask = mask & inside.reshape(-1)
                base = view(path, "box", sel_string(sel) + "@")
            outputs = QUERY_OUTPUTS.get(name, query_oracle.OUTPUTS)
            output = outputs[int(rng.integers(0, len(outputs)))]
            return read_query(base / "query" / cond / output, output, mask, arr.reshape(-1))
        if kind == "info":
            text = read_bytes(view(path, "info"))
            info = json.loads(text)
            assert [int(s) for s in info["shape"]] == list(arr.shape), f"{name}@/info: shape {info['shape']}"
            assert info["dtype"] == arr.dtype.name, f"{name}@/info: dtype {info['dtype']}"
            assert info["layout"] in READER_ARRAYS[name][4], f"{name}@/info: layout {info['layout']}"
            return len(text)
        assert kind == "plan"
        spec, expected = random_slice(rng, arr)
        text = read_bytes(view(path, "plan", *spec))
        plan = json.loads(text)
        assert plan["bytes_useful"] == expected.nbytes, f"{name}@/plan/slice: bytes_useful {plan['bytes_useful']}"
        assert plan["requests"] == sum(len(b) for b in plan["batches"]), f"{name}@/plan/slice: requests"
        return len(text)


def reader(index, state, deadline, out):
    """Reads random views until DEADLINE; sends (counts, bytes, failures)."""
    rng = np.random.default_rng(SEED * 100 + index)
    names, kinds = list(state.data), list(READ_KINDS)
    weights = np.array([READ_KINDS[k] for k in kinds], float)
    counts, nbytes, failures = collections.Counter(), 0, []
    try:
        while time.time() < deadline and len(failures) < 5:
            name = names[int(rng.integers(0, len(names)))]
            kind = kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]
            try:
                nbytes += state.read(rng, kind, name)
                counts[kind] += 1
            except (AssertionError, OSError) as e:
                failures.append(f"reader {index}: {kind} of {name}: {e!r}"[:2000])
    except BaseException:
        failures.append(f"reader {index}: {traceback.format_exc()}")
    out.send((dict(counts), nbytes, failures))
    out.close()


# --- writers -------------------------------------------------------------------------

class WriterState:
    """One writer's array and plain files, with the model of each."""

    def __init__(self, index, root, rng):
        self.index, self.root, self.rng = index, root, rng
        name, shape, dtype, _, _ = WRITER_ARRAYS[index]
        self.path = root / name
        self.model = np.zeros(shape, dtype)  # an array starts as zeros
        self.plain = [root / f"{name}.plain{i}" for i in range(PLAIN_FILES)]
        self.plain_models = [bytearray() for _ in self.plain]
        for p in self.plain:
            p.touch()

    def check_array(self, what):
        assert_array_bytes(read_bytes(self.path), self.model, f"{self.path} after {what}")
        d = int(self.rng.integers(0, self.model.ndim))
        i = int(self.rng.integers(0, self.model.shape[d]))
        assert_array_bytes(read_bytes(view(self.path, "slice", d, i)), np.take(self.model, i, axis=d),
                           f"{self.path}@/slice/{d}/{i} after {what}")
        # The index follows the writes (its delta, or a rebuild at write-back).
        if self.model.dtype.kind == "i":
            op, bound = WRITER_CONDITIONS[int(self.rng.integers(0, len(WRITER_CONDITIONS)))]
            count = read_bytes(view(self.path, "query", f"{op}{bound}", "count"))
            expected = int(query_oracle.compare(self.model, op, str(bound)).sum())
            assert count == f"{expected}\n".encode(), f"{self.path}@/query/{op}{bound}/count: {count!r}, {expected}"

    def new_values(self, shape):
        return random_array(self.rng, shape, self.model.dtype)

    def step(self, kind, relayout_targets):
        rng = self.rng
        if kind == "rewrite":
            self.model = self.new_values(self.model.shape)
            raw = self.model.tobytes()
            write_pieces(self.path, raw, random_pieces(rng, len(raw), 256 << 10))
            self.check_array("a rewrite")
        elif kind == "patch":
            flat = self.model.reshape(-1)
            start = int(rng.integers(0, flat.size))
            n = int(rng.integers(1, min(flat.size - start, 40000) + 1))
            flat[start:start + n] = self.new_values((n,))
            fd = os.open(self.path, os.O_WRONLY)
            try:
                pwrite_all(fd, flat[start:start + n].tobytes(), start * flat.itemsize)
            finally:
                os.close(fd)
            self.check_array("a patch")
        elif kind == "zero":
            # Through a descriptor whose pages are cached: it must read zeros at once.
            fd = os.open(self.path, os.O_RDWR)
            try:
                size = self.model.nbytes
                assert pread_all(fd, size, 0) == self.model.tobytes(), f"{self.path}: before the truncate"
                os.ftruncate(fd, 0)
                self.model[...] = 0
                assert pread_all(fd, size, 0) == bytes(size), f"{self.path}: stale bytes after a truncate to 0"
            finally:
                os.close(fd)
            self.check_array("a truncate to 0")
        elif kind in ("plain_write", "plain_truncate"):
            i = int(rng.integers(0, len(self.plain)))
            path, model = self.plain[i], self.plain_models[i]
            fd = os.open(path, os.O_RDWR)
            try:
                if kind == "plain_write":
                    off = int(rng.integers(0, min(len(model), PLAIN_MAX - 1) + 1))
                    data = rng.bytes(int(rng.integers(1, min(PLAIN_MAX - off, 256 << 10) + 1)))
                    pwrite_all(fd, data, off)
                    if off > len(model):
                        model.extend(bytes(off - len(model)))
                    model[off:off + len(data)] = data
                else:
                    size = int(rng.integers(0, PLAIN_MAX + 1))
                    os.ftruncate(fd, size)
                    del model[size:]
                    model.extend(bytes(size - len(model)))
                got = pread_all(fd, len(model) + 1, 0)
            finally:
                os.close(fd)
            assert got == bytes(model), f"{path}: read {len(got)} bytes back, not the {len(model)} written"
        elif kind == "fsync":
            for p in [self.path] + self.plain:
                fd = os.open(p, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        elif kind == "relayout":
            name = relayout_targets[int(rng.integers(0, len(relayout_targets)))]
            choices = READER_ARRAYS[name][4]
            setx(self.root / name, "layout", choices[int(rng.integers(0, len(choices)))])
        else:
            raise AssertionError(kind)

    def final_check(self):
        self.check_array("the run")
        for path, model in zip(self.plain, self.plain_models):
            assert read_bytes(path) == bytes(model), f"{path}: differs from its model at the end"


def writer(index, root, deadline, out):
    """Writes until DEADLINE; sends (counts, failures)."""
    rng = np.random.default_rng(SEED * 10 + index)
    counts, failures = collections.Counter(), []
    kinds = [k for k in WRITE_KINDS if k != "relayout" or index == 0]
    weights = np.array([WRITE_KINDS[k] for k in kinds], float)
    try:
        state = WriterState(index, root, rng)
        targets = list(READER_ARRAYS)
        while time.time() < deadline and len(failures) < 5:
            kind = kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]
            try:
                state.step(kind, targets)
                counts[kind] += 1
            except (AssertionError, OSError) as e:
                failures.append(f"writer {index}: {kind}: {e!r}"[:2000])
        if not failures:
            state.final_check()
    except BaseException:
        failures.append(f"writer {index}: {traceback.format_exc()}")
    out.send((dict(counts), failures))
    out.close()


# --- the corrupting device -----------------------------------------------------------

class Background:
    """A thread running self._run() from `with` to its end, which sets self._stop and joins it."""

    def __init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False


class Flipper(Background):
    """Flips one byte inside a random cell of a reader array's copy 1, in the
    image file under the live daemon, every FLIP_S seconds until stopped.
    Copies keep their extents through the primary's relayouts, so a flip
    never lands in space another file may take."""

    def __init__(self, volume, root):
        self.image, self.root = volume.image, root
        self.sector = json.loads(read_bytes(volume.mnt / ".mmfs" / "geometry"))["sector_size"]
        self.names = [n for n, (_, _, _, attrs, _) in READER_ARRAYS.items() if copies_of(attrs)]
        self.flips, self.failures = collections.Counter(), []
        super().__init__()

    def _run(self):
        rng = np.random.default_rng(SEED * 7)
        fd = os.open(self.image, os.O_RDWR)
        try:
            while not self._stop.wait(FLIP_S):
                name = self.names[int(rng.integers(0, len(self.names)))]
                shape = READER_ARRAYS[name][0]
                idx = ",".join(str(int(rng.integers(0, s))) for s in shape)
                try:
                    lbn, offset = map(int, read_bytes(view(self.root / name, "copy", "1@", "lbn", idx)).split())
                except OSError as e:
                    self.failures.append(f"flipper: {name}@/copy/1@/lbn/{idx}: {e!r}")
                    continue
                at = lbn * self.sector + offset
                b = os.pread(fd, 1, at)
                os.pwrite(fd, bytes([b[0] ^ 0x5A]), at)
                self.flips[name] += 1
        finally:
            os.close(fd)


# --- the daemon's memory -------------------------------------------------------------

def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/status has no {field}")


class MemorySampler(Background):
    """Samples the daemon's VmRSS every SAMPLE_S seconds on a thread."""

    def __init__(self, pid):
        self.pid, self.samples = pid, []
        super().__init__()

    def _run(self):
        start = time.monotonic()
        while not self._stop.is_set():
            self.samples.append((time.monotonic() - start, status_kib(self.pid, "VmRSS") * 1024))
            self._stop.wait(SAMPLE_S)

    def rss_at(self, fraction):
        """The largest RSS sampled up to `fraction` of the run."""
        end = self.samples[-1][0] * fraction
        return max(rss for t, rss in self.samples if t <= end)


# --- the test ------------------------------------------------------------------------

def run_processes(ctx, targets):
    """Starts (target, args) processes, each with a pipe; returns [(process, receiving end)]."""
    procs = []
    for target, args in targets:
        receive, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=target, args=(*args, send), daemon=True)
        p.start()
        send.close()
        procs.append((p, receive))
    return procs


def test_soak(volume):
    pid = volume.mount_info.proc.pid
    base = status_kib(pid, "VmRSS") * 1024
    root = volume.mnt / "soak"
    root.mkdir()
    state = ReaderState(root, make_arrays(root), np.random.default_rng(SEED))
    errors_before = volume.errors()
    ctx = multiprocessing.get_context("fork")
    deadline = time.time() + SECONDS
    started = time.monotonic()
    procs = []
    try:
        with MemorySampler(pid) as memory, Flipper(volume, root) as flipper:
            procs = run_processes(ctx, [(reader, (i, state, deadline)) for i in range(READERS)] +
                                  [(writer, (i, root, deadline)) for i in range(WRITERS)])
            results = []
            for p, receive in procs:
                left = deadline + 300 - time.time()
                assert receive.poll(max(left, 1)), f"a process (pid {p.pid}) did not finish within 300 s of the end"
                try:
                    results.append(receive.recv())
                except EOFError:
                    p.join(10)
                    raise AssertionError(f"process {p.pid} ended without a result (exit code {p.exitcode})") from None
                p.join(30)
        seconds = time.monotonic() - started
    finally:
        for p, _ in procs:
            if p.is_alive():
                p.kill()  # our own child, by its pid
                p.join(10)
    hwm = status_kib(pid, "VmHWM") * 1024
    read_results, write_results = results[:READERS], results[READERS:]
    failures = [f for _, _, fs in read_results for f in fs] + [f for _, fs in write_results for f in fs]
    reads = sum((collections.Counter(c) for c, _, _ in read_results), collections.Counter())
    writes = sum((collections.Counter(c) for c, _ in write_results), collections.Counter())
    nbytes = sum(b for _, b, _ in read_results)
    total = sum(reads.values())
    bound = memory_bound(base)
    line = (f"soak on mmfs: {READERS} readers, {WRITERS} writers, {seconds:.0f} s: {total} reads compared with "
            f"numpy ({total / seconds:,.0f}/s, {nbytes / MIB / seconds:,.1f} MiB/s; "
            f"{', '.join(f'{k} {v}' for k, v in reads.most_common())}), {sum(writes.values())} writer operations "
            f"({', '.join(f'{k} {v}' for k, v in writes.most_common())}), {len(failures)} errors; daemon RSS "
            f"{base / MIB:.0f} MiB at the start, peak {hwm / MIB:.0f} MiB (VmHWM; bound {bound / MIB:.0f} MiB); "
            f"largest by 1/4, 1/2, 3/4 and the end of the run "
            f"{', '.join(f'{memory.rss_at(q) / MIB:.0f}' for q in (0.25, 0.5, 0.75, 1))} MiB")
    print(line)
    conftest.TERMINAL_SUMMARY.append(line)
    assert not failures, "failures:\n" + "\n".join(failures[:40]) + \
        "\n.mmfs/errors (new lines):\n" + "\n".join(new_lines(errors_before, volume.errors())[-20:])
    assert all(p.exitcode == 0 for p, _ in procs), [p.exitcode for p, _ in procs]
    added = new_lines(errors_before, volume.errors())
    # What the flips leave: repairs by view reads, and reads of the array's
    # own (a relayout's) served from the other placement.
    healed_lines = [line for line in added if "self-healed:" in line or "served from another copy:" in line]
    others = [line for line in added if line not in healed_lines]
    assert not others, f"new lines in .mmfs/errors during the soak: {others[:20]}"
    # The flips were met and repaired: every placement of the arrays with copies reads whole.
    assert not flipper.failures, flipper.failures[:5]
    assert sum(flipper.flips.values()) >= 5, flipper.flips
    for name in flipper.names:
        for k in range(copies_of(READER_ARRAYS[name][3]) + 1):
            assert_array_bytes(read_bytes(view(root / name, "copy", k)), state.data[name],
                               f"{name}@/copy/{k} at the end")
    healed = json.loads(read_bytes(volume.mnt / ".mmfs" / "stats"))["copies"]["self_healed_cells"]
    print(f"soak: {dict(flipper.flips)} bytes flipped in copies; {healed} cells self-healed "
          f"({len(healed_lines)} self-healed or served-from-another-copy lines during the run)")
    assert healed >= 1, (healed, flipper.flips)
    assert all(any(f"/{name}" in line for name in flipper.names) for line in healed_lines), healed_lines[:5]
    # Every reader and writer got work done (a stuck mount would read nothing).
    assert all(sum(c.values()) >= 5 for c, _, _ in read_results), [sum(c.values()) for c, _, _ in read_results]
    assert all(writes[k] > 0 for k in ("rewrite", "patch", "plain_write", "relayout")), writes
    assert hwm <= bound, f"the daemon's peak RSS {hwm / MIB:.0f} MiB is over the bound {bound / MIB:.0f} MiB"
