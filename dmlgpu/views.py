"""Tensor views as arithmetic on (shape, element strides, byte offset): shapes, basic indexing,
transposes and reshapes, with numpy's rules where DirectML can express the result.

A view is a strided `TensorDesc` over its parent's buffer, so every view here is free. DirectML
strides are unsigned element counts, so a negative step (which numpy expresses with a negative
stride) has no view: it raises `ValidationError`.
"""
from __future__ import annotations

import operator

import numpy as np

from .errors import ValidationError
from .tensor_desc import packed_strides

__all__ = ["check_shape", "extent", "index", "is_index", "is_packed", "reshape_shape", "reshape_strides",
           "transpose_axes"]


def _fail(field, value, allowed):
    raise ValidationError("dmlgpu", None, field, value, allowed)


def is_index(value) -> bool:
    """A Python or numpy integer (bool is not one: numpy reads it as a mask)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_shape(shape) -> tuple[int, ...]:
    """`shape` (an integer or a sequence of integers) as a tuple of non-negative ints.

    Raises:
        ValidationError: a negative size or one that is no integer (2.5, "3", True).
    """
    items = (shape,) if is_index(shape) else shape
    try:
        items = tuple(items)
    except TypeError:
        _fail("shape", shape, "allowed: an integer or a sequence of non-negative integers")
    if not all(is_index(n) and n >= 0 for n in items):
        _fail("shape", shape, "allowed: an integer or a sequence of non-negative integers")
    return tuple(int(n) for n in items)


def extent(shape, strides) -> int:
    """Elements from the first to one past the last (0 when there are none)."""
    if 0 in shape:
        return 0
    return sum((n - 1) * s for n, s in zip(shape, strides)) + 1


def is_packed(shape, strides) -> bool:
    """C order without gaps (strides of size-1 dimensions do not count)."""
    return all(n == 1 or s == p for n, s, p in zip(shape, strides, packed_strides(shape)))


_INDEX_ALLOWED = ("allowed: basic indexing - integers, slices with positive steps, ... and None "
                  "(DirectML strides are unsigned; index arrays would copy)")


def index(shape, strides, offset, itemsize, key):
    """numpy's basic indexing of a view: returns (shape, strides, offset in bytes).

    Raises:
        IndexError: as numpy (too many indices, an integer out of bounds, two ellipses).
        ValidationError: a negative step, or anything that is not basic indexing.
    """
    key = key if isinstance(key, tuple) else (key,)
    for k in key:
        if not (k is None or k is Ellipsis or is_index(k) or isinstance(k, slice)):
            _fail("index", k, _INDEX_ALLOWED)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(k is not None and k is not Ellipsis for k in key)
    if used > len(shape):
        raise IndexError(f"too many indices for tensor: tensor is {len(shape)}-dimensional, "
                         f"but {used} were indexed")
    if Ellipsis in key:
        at = next(i for i, k in enumerate(key) if k is Ellipsis)
        key = key[:at] + (slice(None),) * (len(shape) - used) + key[at + 1:]
    else:
        key = key + (slice(None),) * (len(shape) - used)
    new_shape, new_strides, axis, start_offset = [], [], 0, offset
    for k in key:
        if k is None:
            new_shape.append(1)
            new_strides.append(0)
            continue
        n, s = shape[axis], strides[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)  # raises ValueError for a zero step, as numpy
            if step < 0:
                _fail("index", k, "allowed: slices with positive steps (DirectML strides are "
                                  "unsigned; copy to the host with .numpy() to reverse)")
            length = len(range(start, stop, step))
            offset += start * s * itemsize
            new_shape.append(length)
            new_strides.append(s * step)
        else:
            i = operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            offset += (i % n) * s * itemsize
        axis += 1
    if 0 in new_shape:
        offset = start_offset  # no element: numpy's offset may lie past the buffer
    return tuple(new_shape), tuple(new_strides), offset


def transpose_axes(ndim, axes) -> tuple[int, ...]:
    """numpy's `transpose` arguments: () or None reverses; else a permutation (negatives allowed)."""
    if len(axes) == 1 and (axes[0] is None or not is_index(axes[0])):
        axes = axes[0]
    if axes is None or axes == ():
        return tuple(reversed(range(ndim)))
    try:
        axes = tuple(axes)
    except TypeError:
        _fail("axes", axes, f"allowed: a permutation of range({ndim})")
    if len(axes) != ndim or not all(is_index(a) and -ndim <= a < ndim for a in axes) \
            or len({a % ndim for a in axes}) != ndim:
        _fail("axes", axes, f"allowed: a permutation of range({ndim})")
    return tuple(int(a) % ndim for a in axes)


def reshape_shape(size, new_shape) -> tuple[int, ...]:
    """`new_shape` with its one -1 (if any) resolved; its product must equal `size`."""
    items = (new_shape,) if is_index(new_shape) else tuple(new_shape)
    if not all(is_index(n) and n >= -1 for n in items) or sum(n == -1 for n in items) > 1:
        _fail("shape", new_shape, "allowed: non-negative integers and at most one -1")
    known = int(np.prod([n for n in items if n != -1], dtype=np.int64))
    if -1 in items:
        if known == 0 or size % known:
            _fail("shape", new_shape, f"cannot hold {size} elements")
        items = tuple(size // known if n == -1 else n for n in items)
    if int(np.prod(items, dtype=np.int64)) != size:
        _fail("shape", new_shape, f"allowed: a shape of {size} elements")
    return tuple(int(n) for n in items)


def reshape_strides(shape, strides, new_shape) -> tuple[int, ...] | None:
    """Strides that present the same elements in C order as `new_shape` (same size), or None
    when the layout has none (numpy's `_attempt_nocopy_reshape`)."""
    if 0 in shape:
        return packed_strides(new_shape)
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    new = list(new_shape)
    result = [0] * len(new)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(new) and oi < len(old):
        np_, op_ = new[ni], old[oi][0]
        while np_ != op_:
            if np_ < op_:
                np_ *= new[nj]
                nj += 1
            else:
                op_ *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):  # the old axes merged here must be contiguous
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        result[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            result[k - 1] = result[k] * new[k]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    last = result[ni - 1] if ni >= 1 else 1
    for k in range(ni, len(new)):
        result[k] = last
    return tuple(result)
