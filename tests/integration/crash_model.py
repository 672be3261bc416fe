"""The model of the crash campaign's workload (test_crash_campaign.py): what a
worker's directory holds, the operations a worker runs, and how each one
changes the model.

A worker owns one directory of the volume (w0/, w1/, ...) and names from two
pools: plain files p*, array files a*. Its model is a `Space`: the bytes of
every plain file, and the data, layout, order and index of every array. An
operation is a JSON-able dict ({"kind": ..., parameters}); every byte it
writes comes from a seed in it, so the worker (which runs it) and the test
(which reads it back from the worker's journal) derive the same model from
the same records.
"""
import copy
import dataclasses
import random

import numpy as np

PLAIN_NAMES = [f"p{i}" for i in range(10)]
ARRAY_NAMES = [f"a{i}" for i in range(5)]
LAYOUTS = ["naive", "zorder", "hilbert", "multimap", "mloc"]
INDEXES = ["none", "e1", "bn", "range", "interval", "re", "ie"]
# user.mmfs.copies values (getfattr shows them as written); mloc arrays have none.
COPIES = ["none", "naive", "hilbert", "zorder", "multimap", "naive;hilbert"]
# (shape, dtype) of the arrays a worker creates: 1 to 4 dimensions, every
# itemsize, 32 KiB to 1 MiB (the volume is 512 MiB; a relayout holds two
# placements at once).
ARRAY_KINDS = [((40, 50, 60), "float32"), ((64, 64, 32), "float64"), ((256, 128), "int16"),
               ((100000,), "int32"), ((24, 30, 20, 10), "uint8"), ((48, 48, 40), "int64")]
MAX_PLAIN = 300 * 1024  # bytes of a plain file written at once


@dataclasses.dataclass
class ArrayObj:
    data: np.ndarray  # the C-order contents
    layout: str
    order: str        # user.mmfs.order as getfattr shows it
    index: str
    copies: str = "none"  # user.mmfs.copies as getfattr shows it


@dataclasses.dataclass
class Space:
    plain: dict = dataclasses.field(default_factory=dict)   # name -> bytes
    arrays: dict = dataclasses.field(default_factory=dict)  # name -> ArrayObj

    def names(self):
        return set(self.plain) | set(self.arrays)

    def copy(self):
        return copy.deepcopy(self)


# --- data from seeds ---------------------------------------------------------------------------

def plain_bytes(seed, n) -> bytes:
    return np.random.default_rng(seed).bytes(n)


def array_values(seed, shape, dtype) -> np.ndarray:
    """Values with few distinct keys (an `exact` index of an integer array
    holds them) and, for floats, dyadic ones (query constants compare exactly).
    Integers are small and non-negative, so bytes mixed from two such arrays
    (a write that cuts elements, then a crash) stay small too."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 40, size=shape).astype(dtype)
    return (rng.integers(-64, 64, size=shape) / 4.0).astype(dtype)


def default_order(ndim) -> str:
    return ",".join(str(d) for d in reversed(range(ndim)))


def write_span(op, arr: np.ndarray) -> bytes:
    """The bytes an `awrite` puts at op["off"]: the same span of a fresh array of
    the op's values (so a span that cuts elements still writes small values)."""
    fresh = array_values(op["seed"], arr.shape, arr.dtype)
    return fresh.reshape(-1).view(np.uint8)[op["off"]:op["off"] + op["len"]].tobytes()


# --- the effect of an operation on the model --------------------------------------------------

def apply(space: Space, op) -> None:
    kind = op["kind"]
    if kind == "pcreate":
        space.plain[op["name"]] = plain_bytes(op["seed"], op["size"])
    elif kind in ("pwrite", "pappend"):
        old = space.plain[op["name"]]
        off = len(old) if kind == "pappend" else op["off"]
        data = plain_bytes(op["seed"], op["len"])
        grown = old.ljust(off, b"\0")
        space.plain[op["name"]] = grown[:off] + data + grown[off + len(data):]
    elif kind == "ptruncate":
        space.plain[op["name"]] = space.plain[op["name"]][:op["size"]].ljust(op["size"], b"\0")
    elif kind in ("prename", "arename"):
        pool = space.plain if kind == "prename" else space.arrays
        pool[op["dst"]] = pool.pop(op["src"])
    elif kind in ("punlink", "porphan"):
        del space.plain[op["name"]]
    elif kind == "aunlink":
        del space.arrays[op["name"]]
    elif kind in ("acreate", "aconvert"):
        shape, dtype = ARRAY_KINDS[op["array_kind"]]
        space.arrays[op["name"]] = ArrayObj(array_values(op["seed"], shape, dtype), op["layout"],
                                            default_order(len(shape)), op.get("index", "none"),
                                            op.get("copies", "none"))
    elif kind == "awrite":
        a = space.arrays[op["name"]]
        flat = a.data.reshape(-1).view(np.uint8)
        flat[op["off"]:op["off"] + op["len"]] = np.frombuffer(write_span(op, a.data), np.uint8)
    elif kind == "arelayout":
        setattr(space.arrays[op["name"]], op["attr"], op["value"])
    elif kind == "aindex":
        space.arrays[op["name"]].index = op["index"]
    elif kind == "acopies":
        space.arrays[op["name"]].copies = op["copies"]
    elif kind == "azero":
        space.arrays[op["name"]].data[...] = 0
    elif kind == "read":
        pass
    else:
        raise ValueError(f"unknown operation {kind!r}")


def names_of(op):
    """The names an operation may change."""
    if op["kind"] in ("prename", "arename"):
        return [op["src"], op["dst"]]
    return [op["name"]]


# --- choosing the next operation ---------------------------------------------------------------

# kind -> weight
WEIGHTS = {"pcreate": 6, "pwrite": 5, "pappend": 4, "ptruncate": 2, "prename": 3, "punlink": 2, "porphan": 1,
           "acreate": 4, "aconvert": 2, "awrite": 5, "arelayout": 4, "aindex": 3, "acopies": 3, "azero": 1,
           "arename": 2,
           "aunlink": 1, "read": 2}


def choose(rng: random.Random, space: Space):
    """A random operation valid for `space` (None when none of the drawn kinds is)."""
    free_plain = [n for n in PLAIN_NAMES if n not in space.plain]
    free_arrays = [n for n in ARRAY_NAMES if n not in space.arrays]
    plain, arrays = sorted(space.plain), sorted(space.arrays)
    seed = rng.getrandbits(32)
    for _ in range(20):
        kind = rng.choices(list(WEIGHTS), list(WEIGHTS.values()))[0]
        if kind == "pcreate" and free_plain:
            return {"kind": kind, "name": rng.choice(free_plain), "size": rng.randint(0, MAX_PLAIN), "seed": seed}
        if kind == "pwrite" and plain:
            name = rng.choice(plain)
            size = len(space.plain[name])
            return {"kind": kind, "name": name, "off": rng.randint(0, size + 8192),
                    "len": rng.randint(1, MAX_PLAIN // 2), "seed": seed}
        if kind == "pappend" and plain:
            return {"kind": kind, "name": rng.choice(plain), "len": rng.randint(1, 64 * 1024), "seed": seed}
        if kind == "ptruncate" and plain:
            name = rng.choice(plain)
            return {"kind": kind, "name": name, "size": rng.randint(0, len(space.plain[name]) + 10000)}
        if kind == "prename" and plain:
            # onto a free name or over another plain file
            src = rng.choice(plain)
            return {"kind": kind, "src": src, "dst": rng.choice([n for n in PLAIN_NAMES if n != src])}
        if kind == "punlink" and plain:
            return {"kind": kind, "name": rng.choice(plain)}
        if kind == "porphan" and plain:  # unlinked while open, then written: freed at the close
            return {"kind": kind, "name": rng.choice(plain), "len": rng.randint(1, 64 * 1024), "seed": seed}
        if kind == "acreate" and free_arrays:
            layout = rng.choice(LAYOUTS)
            # Copies set before the shape: built when the array is created.
            copies = "none" if layout == "mloc" else rng.choice(["none", "none", "naive", "hilbert"])
            return {"kind": kind, "name": rng.choice(free_arrays), "array_kind": rng.randrange(len(ARRAY_KINDS)),
                    "layout": layout, "index": rng.choice(["none", "none"] + INDEXES[1:]),
                    "copies": copies, "pieces": rng.choice([1, 1, 4]), "seed": seed}
        if kind == "aconvert" and free_arrays:  # a plain file of the right size becomes the array
            return {"kind": kind, "name": rng.choice(free_arrays), "array_kind": rng.randrange(len(ARRAY_KINDS)),
                    "layout": rng.choice(LAYOUTS), "seed": seed}
        if kind == "awrite" and arrays:
            name = rng.choice(arrays)
            a = space.arrays[name]
            total = a.data.nbytes
            if rng.random() < 0.7:  # whole rows of dimension 0
                row = total // a.data.shape[0]
                r0 = rng.randrange(a.data.shape[0])
                r1 = rng.randint(r0 + 1, min(a.data.shape[0], r0 + max(1, a.data.shape[0] // 3)))
                off, n = r0 * row, (r1 - r0) * row
            else:  # any span, cutting elements and cells
                off = rng.randrange(total)
                n = rng.randint(1, min(total - off, 200_000))
            return {"kind": kind, "name": name, "off": off, "len": n, "seed": seed}
        if kind == "arelayout" and arrays:
            name = rng.choice(arrays)
            a = space.arrays[name]
            if a.data.ndim > 1 and rng.random() < 0.3:
                perm = list(range(a.data.ndim))
                while ",".join(map(str, perm)) == a.order:
                    rng.shuffle(perm)
                return {"kind": kind, "name": name, "attr": "order", "value": ",".join(map(str, perm))}
            # An array with copies cannot become mloc (mloc copies are not implemented).
            return {"kind": kind, "name": name, "attr": "layout",
                    "value": rng.choice([x for x in LAYOUTS if x != a.layout and (x != "mloc" or a.copies == "none")])}
        if kind == "aindex" and arrays:
            name = rng.choice(arrays)
            return {"kind": kind, "name": name,
                    "index": rng.choice([x for x in INDEXES if x != space.arrays[name].index])}
        with_layouts = [n for n in arrays if space.arrays[n].layout != "mloc"]
        if kind == "acopies" and with_layouts:  # built, dropped or changed; kills hit their catch-up too
            name = rng.choice(with_layouts)
            return {"kind": kind, "name": name,
                    "copies": rng.choice([x for x in COPIES if x != space.arrays[name].copies])}
        if kind == "azero" and arrays:
            return {"kind": kind, "name": rng.choice(arrays)}
        if kind == "arename" and arrays:
            src = rng.choice(arrays)
            return {"kind": kind, "src": src, "dst": rng.choice([n for n in ARRAY_NAMES if n != src])}
        if kind == "aunlink" and arrays:
            return {"kind": kind, "name": rng.choice(arrays)}
        if kind == "read" and (plain or arrays):
            return {"kind": kind, "name": rng.choice(plain + arrays)}
    return None
