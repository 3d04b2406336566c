"""Tensor views as arithmetic on (shape, element strides, byte offset): shapes, basic indexing,
transposes and reshapes, with numpy's rules where DirectML can express the result.

A view is a strided `TensorDesc` over its parent's buffer, so every view here is free. DirectML
strides are unsigned element counts, so a negative step (which numpy expresses with a negative
stride) has no view: it raises `ValidationError`.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..describe.shapes import extent, is_packed  # noqa: F401 (re-exported)
from ..errors import ValidationError
from ..describe.tensor_desc import packed_strides

__all__ = ["check_shape", "extent", "index", "is_index", "is_packed", "reshape_shape", "reshape_strides",
           "transpose_axes"]


#: The largest size of one dimension (numpy's: a signed 64-bit count).
MAX_SIZE = 2**63 - 1


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
    """`new_shape` with its one -1 (if any) resolved; its product must equal `size` (Python
    integers: no wrapping, so `(2**32, 2**32)` is no shape of 0 elements)."""
    try:
        items = (new_shape,) if is_index(new_shape) else tuple(new_shape)
    except TypeError:
        items = (new_shape,)
    if not all(is_index(n) and -1 <= n <= MAX_SIZE for n in items) or sum(n == -1 for n in items) > 1:
        _fail("shape", new_shape, f"allowed: integers from 0 to {MAX_SIZE} and at most one -1")
    items = tuple(int(n) for n in items)
    known = math.prod(n for n in items if n != -1)
    if -1 in items:
        if known == 0 or size % known:
            _fail("shape", new_shape, f"cannot hold {size} elements")
        items = tuple(size // known if n == -1 else n for n in items)
    if math.prod(items) != size:
        _fail("shape", new_shape, f"allowed: a shape of {size} elements")
    return items


def view_layout(shape, strides, offset, old_size, new_size):
    """numpy's `ndarray.view(dtype)` as arithmetic: (shape, element strides, byte offset) of
    the same bytes read as elements of `new_size` bytes instead of `old_size`.

    The same size keeps the layout. Another size needs the last dimension contiguous (stride
    1, numpy's rule) and its bytes a whole number of new elements; it is resized, and every
    other stride and the offset must be whole new elements.

    Raises:
        ValidationError: a layout numpy would refuse to view so.
    """
    if old_size == new_size:
        return shape, strides, offset
    allowed = (f"allowed: a view whose last dimension is contiguous and holds a whole number of "
               f"{new_size}-byte elements, other strides and the offset whole {new_size}-byte steps "
               "(numpy's rules for a view of another itemsize)")
    if not shape:
        _fail("dtype", f"{new_size}-byte elements of a 0-d view", allowed)
    last_bytes = shape[-1] * old_size
    if (shape[-1] > 1 and strides[-1] != 1) or last_bytes % new_size or offset % new_size \
            or any(n > 1 and st * old_size % new_size for n, st in zip(shape[:-1], strides[:-1])):
        _fail("dtype", f"{new_size}-byte elements of shape {shape}, strides {strides} at byte {offset}", allowed)
    new_shape = shape[:-1] + (last_bytes // new_size,)
    new_strides = tuple(st * old_size // new_size for st in strides[:-1]) + (1,)
    return new_shape, new_strides, offset


class View:
    """The fields of a strided view of a device buffer: buffer, shape, data type, byte offset
    of the first element and element strides, fixed once made (a view is a value).

    The layer that runs operators over device-resident data (`dmlgpu.front.resident`) works on Views and
    makes its results as the class of its operands; `dmlgpu.Tensor` is the View users hold.
    """

    __slots__ = ("_buffer", "_shape", "_data_type", "_offset", "_strides", "_key", "_layout", "__weakref__")

    @classmethod
    def from_fields(cls, buffer, shape: tuple, data_type, offset: int = 0, strides: tuple | None = None,
                    layout: tuple | None = None):
        """A view from fields dmlgpu computed itself (a view of a valid one, a fresh result):
        no checks, for hot paths. `layout`, where the caller knows it (a planned call's result:
        the layout of its first result), is what `layout` would compute."""
        view = object.__new__(cls)
        view._buffer, view._shape, view._data_type, view._offset = buffer, shape, data_type, offset
        view._strides = packed_strides(shape) if strides is None else strides
        view._key = None
        view._layout = layout
        return view

    @property
    def buffer(self):
        """The `dmlgpu.Buffer` holding the elements (`dmlgpu.layout.pieces.Pieces` where they span several)."""
        return self._buffer

    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def data_type(self):
        return self._data_type

    @property
    def offset(self) -> int:
        """Byte offset of the first element in `buffer`."""
        return self._offset

    @property
    def strides(self) -> tuple:
        """Elements between neighbours per dimension (DirectML's convention, not numpy's bytes)."""
        return self._strides

    @property
    def key(self) -> tuple:
        """(buffer serial, offset, shape, strides, data type): equal for two views exactly when
        they view the same elements of the same live-or-dead buffer the same way (serials are
        never reused); the front ends find a repeated call by its operands' keys."""
        key = self._key
        if key is None:
            key = self._key = (self._buffer.serial, self._offset, self._shape, self._strides, self._data_type)
        return key

    @property
    def layout(self) -> tuple:
        """(device, whether the memory spans several buffers, data type, shape, strides, offset
        within its 16-byte binding unit): equal for two views that any call plans the same way,
        whichever buffers they view and wherever in them (the call pipeline's memos are keyed
        by it, never by a view's identity)."""
        layout = self._layout
        if layout is None:
            buffer = self._buffer
            layout = self._layout = (buffer.device, type(buffer), self._data_type, self._shape, self._strides,
                                     self._offset % 16)
        return layout

    @property
    def device(self):
        return self._buffer.device

    @property
    def dtype(self):
        return self._data_type.numpy

    @property
    def itemsize(self) -> int:
        return self._data_type.size

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return math.prod(self._shape)


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
