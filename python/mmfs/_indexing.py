"""numpy basic indexing mapped onto one mmfs view.

A key (ints, negative ints, slices with any step, ``...``, ``None``) is first
given to numpy itself, on a zero-strided stand-in of the array's shape: numpy
validates it (raising exactly its own ``IndexError``/``TypeError``) and says
what it returns (its shape, and whether it is a scalar). The key then becomes:

* per array dimension, a fixed index or a range ``first, first+step, ...``
  with a positive step (a negative-step slice selects the same elements as a
  positive-step one, reversed);
* the view that reads exactly those elements: the array file itself when
  every dimension is whole, ``slice/D/I`` when one dimension is fixed and the
  others whole, else ``box/SEL`` (docs/reference.md §5);
* a "post" key applied to the view's result, a numpy view of it that reverses
  the negative-step dimensions and inserts the ``None`` axes.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = ["Dim", "Selection", "resolve"]


@dataclass(frozen=True)
class Dim:
    """How a key selects one dimension of the array (length ``size``)."""

    size: int
    fixed: bool     # an integer index: the dimension is dropped
    first: int      # the smallest selected index
    step: int       # >= 1
    count: int      # elements selected (1 when fixed)
    reverse: bool   # selected by a negative step: the result runs backwards

    @property
    def whole(self) -> bool:
        return not self.fixed and self.first == 0 and self.step == 1 and self.count == self.size

    @property
    def last(self) -> int:
        return self.first + (self.count - 1) * self.step

    def box_item(self) -> str:
        """This dimension's item of a ``box/SEL`` selector."""
        if self.fixed:
            return str(self.first)
        if self.whole:
            return ":"
        stop = self.last + 1
        return f"{self.first}:{stop}" if self.step == 1 else f"{self.first}:{stop}:{self.step}"


@dataclass(frozen=True)
class Selection:
    """A resolved key: what to read and how to shape it like numpy."""

    dims: Tuple[Dim, ...]   # one per array dimension
    post: Tuple[Any, ...]   # key applied to the view's result
    shape: Tuple[int, ...]  # numpy's result shape
    scalar: bool            # numpy returns a scalar (np.generic), not an array
    nones: Tuple[int, ...]  # positions of the None axes in the result

    @property
    def empty(self) -> bool:
        return any(d.count == 0 for d in self.dims)

    @property
    def whole(self) -> bool:
        return all(d.whole for d in self.dims)

    @property
    def view_shape(self) -> Tuple[int, ...]:
        """The shape of the view's bytes: the unfixed dimensions' counts."""
        return tuple(d.count for d in self.dims if not d.fixed)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def box_selector(self) -> str:
        return ",".join(d.box_item() for d in self.dims)

    def view(self) -> Optional[str]:
        """The view (relative to ``A@/``) reading exactly the selection; ``None``
        when it is the whole array (read the array file itself)."""
        if self.whole:
            return None
        fixed = [i for i, d in enumerate(self.dims) if d.fixed]
        if len(fixed) == 1 and all(d.whole for i, d in enumerate(self.dims) if i != fixed[0]):
            return f"slice/{fixed[0]}/{self.dims[fixed[0]].first}"
        return "box/" + self.box_selector()

    def finish(self, raw: np.ndarray) -> Any:
        """The view's result ``raw`` (shape ``view_shape``) as numpy returns the key."""
        key = self.post if self.scalar else self.post + (Ellipsis,)
        return raw[key]


def _is_integer(item: Any) -> bool:
    if isinstance(item, (bool, np.bool_)):
        return False
    if isinstance(item, np.ndarray):
        return item.ndim == 0 and item.dtype.kind in "iu"
    try:
        operator.index(item)
    except TypeError:
        return False
    return True


_BASIC_HELP = ("mmfs.Array supports numpy basic indexing only (integers, slices, ..., None); "
               "read the array with np.asarray(a) first, or use a.where(...) for conditions")


def resolve(key: Any, shape: Tuple[int, ...]) -> Selection:
    """Resolves ``key`` against an array of ``shape`` (see the module doc).

    Raises numpy's own ``IndexError``/``TypeError`` for keys numpy refuses, and
    ``TypeError`` for advanced (integer-array or boolean) keys numpy accepts.
    """
    items = key if isinstance(key, tuple) else (key,)
    basic = all(it is None or it is Ellipsis or isinstance(it, slice) or _is_integer(it) for it in items)
    # numpy judges the key on a stand-in that owns no memory.
    standin = as_strided(np.zeros(1, dtype=np.uint8), shape=shape, strides=(0,) * len(shape), writeable=False)
    probe = standin[key]
    if not basic:
        raise TypeError(_BASIC_HELP + f"; got key {key!r:.200}")

    ndim = len(shape)
    n_indexing = sum(1 for it in items if it is not None and it is not Ellipsis)
    dims: List[Dim] = []
    post: List[Any] = []
    nones: List[int] = []
    out_axis = 0
    for it in items:
        if it is None:
            post.append(None)
            nones.append(out_axis)
            out_axis += 1
        elif it is Ellipsis:
            for _ in range(ndim - n_indexing):
                n = shape[len(dims)]
                dims.append(Dim(n, False, 0, 1, n, False))
                post.append(slice(None))
                out_axis += 1
        elif isinstance(it, slice):
            n = shape[len(dims)]
            start, stop, step = it.indices(n)
            r = range(start, stop, step)
            count = len(r)
            if step > 0:
                dims.append(Dim(n, False, start if count else 0, step, count, False))
            else:
                dims.append(Dim(n, False, r[-1] if count else 0, -step, count, count > 1))
            post.append(slice(None, None, -1) if dims[-1].reverse else slice(None))
            out_axis += 1
        else:
            n = shape[len(dims)]
            i = operator.index(it)
            dims.append(Dim(n, True, i + n if i < 0 else i, 1, 1, False))
    while len(dims) < ndim:  # fewer items than dimensions: the rest are whole
        n = shape[len(dims)]
        dims.append(Dim(n, False, 0, 1, n, False))
        post.append(slice(None))
    scalar = not isinstance(probe, np.ndarray)
    return Selection(tuple(dims), tuple(post), tuple(np.shape(probe)), scalar, tuple(nones))
