"""Device-resident tensors: data that stays on the GPU between operators.

A Tensor is a strided view of a device Buffer (`views.View`): shape, element strides
(DirectML's convention) and the byte offset of its first element. `Tensor.from_numpy` and
`Tensor.empty` make packed tensors; indexing, `.T`, `transpose`, `reshape` and `view(dtype)`
make zero-copy views of the same Buffer. Python's operators (`~`, `^`, ...: the base
`TensorOperators`, generated from each operator row's `python_operator` with their types),
the numpy-style functions and numpy's matching ufuncs take Tensors and return Tensors without
host round trips; they run through `dmlgpu.front.resident`, the layer below both Tensor and the numpy
front end. `.numpy()` downloads.

What a numpy user expects of an array, and where dmlgpu differs:
- `t == u`, `t != u` raise TypeError (DirectML's LOGICAL_EQUALS is not among dmlgpu's
  operators; compare on the host with `.numpy()`); a Tensor is unhashable, as a numpy array
  is (`Tensor.key` identifies a view, for memo keys).
- `bool(t)`, `int(t)`, `float(t)`, `t.item()` of one element download it; `bool` of several or
  none is a ValueError, as numpy's.
- `t[key] = value` writes a scalar, numpy data (numpy's casting and broadcasting) or a Tensor of
  the same data type through basic indexing; in-place operators (`t[:4] ^= 1`) write in place.
- `pickle` and `copy.deepcopy` carry the data; it lands on the current (or default) device.
  `copy.copy(t)` is `t.copy()`, as CuPy's.
- CuPy's methods: `sum`, `min`, `max`, `prod`, `argmin`, `argmax` (`dmlgpu.front.reductions`),
  `ravel`, `flatten`; `repr` and `str` show the values with numpy's print options (only the
  corners numpy's summary shows are downloaded past its `threshold`).
- No hidden downloads and no foreign hand-offs: `np.asarray(t)` raises TypeError, numpy's
  functions (`np.sum(t)`, `__array_function__`) raise TypeError naming the dmlgpu function that
  computes on the device, and DLPack (`torch.as_tensor(t)`, `np.from_dlpack(t)`) raises
  BufferError saying to download with `.numpy()`: Vulkan memory has no DLPack device type.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from . import reductions, resident as ops
from ..layout import pieces, views
from ..api.device import Buffer, Device, default_device
from ..table.dtypes import ALL, DataType
from ..errors import ValidationError
from ..layout.operands import data_type as operand_data_type, host_array
from ..table.operators import BIT_XOR
from ..layout.pieces import Pieces
from ..describe.tensor_desc import MAX_ELEMENTS, packed_strides
from .reductions import Axis, Level
from .tensor_operators import TensorOperators
from .tensor_protocols import ARRAY_FUNCTIONS, NUMPY_COUNTERPARTS, UFUNC_OPERATORS, TensorProtocols

__all__ = ["ARRAY_FUNCTIONS", "NUMPY_COUNTERPARTS", "Tensor", "UFUNC_OPERATORS"]

_EQUALITY = ("dmlgpu.Tensor has no element-wise {0} (DirectML's ELEMENT_WISE_LOGICAL_EQUALS is not among "
             "dmlgpu's operators) and does not compare by identity: compare on the host with "
             "t.numpy() {0} other, tell objects apart with `is`, or views with `.key`")


def _data_type(dtype) -> DataType:
    return operand_data_type(dtype, "dmlgpu", None, ALL)  # the front end's rule (dmlgpu.layout.operands)


def _check_fits(shape, data_type: DataType) -> int:
    """Bytes of a packed tensor of `shape`; ValidationError past DirectML's element count."""
    count = math.prod(shape)
    if count > MAX_ELEMENTS:
        raise ValidationError("dmlgpu", None, "shape", shape,
                              f"allowed: at most 2^32-1 elements (DirectML's sizes are 32-bit), not {count}")
    return count * data_type.size


def _rebuild(array: np.ndarray) -> Tensor:
    """Unpickle a Tensor: its data uploaded to the current (or default) device."""
    return Tensor.from_numpy(array)


class Tensor(views.View, TensorOperators, TensorProtocols):
    """A strided view of a device Buffer, as a numpy-like array that lives on the device.

    Args:
        buffer: the live `dmlgpu.Buffer` holding the elements (a `dmlgpu.layout.pieces.Pieces` of
            several buffers where they are more than one holds).
        shape: non-negative integers, outermost first.
        data_type: a `DataType` (or its DirectML value).
        offset: byte offset of the first element in `buffer`, a multiple of the element size.
        strides: elements between neighbours per dimension (DirectML's convention; numpy's
            `ndarray.strides` counts bytes); None means packed C order.

    Views whose first element is not at a 16-byte boundary are fine as inputs (DirectML binds at
    16-byte multiples, so dmlgpu binds the aligned-down range and adds a size-2 dimension whose
    stride is the element offset; a fresh result is then allocated twice its size, or, with
    `out` given, such an input is first copied) and as outputs (the target of `out=`, of an
    in-place operator or of an assignment): bound from the aligned-down byte and written from
    the element offset by the strided kernel, one element per invocation.

    A Tensor's fields are fixed once it is made (a view is a value, as a torch tensor's shape
    is): a new view is a new Tensor. That is what lets the front end find a repeated call by
    its Tensors' `key`s.

    To make a Tensor from data, call `dmlgpu.asarray(data)` (or `Tensor.from_numpy(array)`);
    `dmlgpu.empty`, `zeros`, `ones` and `full` make new ones.

    Raises:
        TypeError: `buffer` is not a device Buffer (data: `dmlgpu.asarray` makes a Tensor of it),
            or `shape` or `data_type` is missing.
        ValidationError: a released buffer or one of a closed device, a bad shape, strides or
            offset, or a view reaching past `buffer`.
    """

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # as numpy arrays: `==` is no identity

    def __init__(self, buffer: Buffer | Pieces, shape: Sequence[int] | None = None,
                 data_type: DataType | int | None = None, offset: int = 0,
                 strides: Sequence[int] | None = None) -> None:
        if not isinstance(buffer, (Buffer, Pieces)):
            raise TypeError(f"dmlgpu.Tensor(buffer, shape, data_type) views a device Buffer, not a "
                            f"{type(buffer).__name__}: to make a Tensor from data, call dmlgpu.asarray(data) "
                            "(or dmlgpu.Tensor.from_numpy(array)); dmlgpu.empty/zeros/ones/full make new ones")
        if data_type is None:
            raise TypeError("dmlgpu.Tensor(buffer, shape, data_type) needs the shape and the data type of the "
                            "view; dmlgpu.asarray(data) makes a Tensor of data")
        buffer.check_live()
        shape = views.check_shape(shape)
        data_type = DataType(data_type)
        itemsize = data_type.size
        if strides is None:
            strides = packed_strides(shape)
        strides = tuple(strides)
        if len(strides) != len(shape) or not all(views.is_index(s) and s >= 0 for s in strides):
            raise ValidationError("dmlgpu", None, "strides", strides,
                                  f"allowed: {len(shape)} non-negative element counts")
        strides = tuple(int(s) for s in strides)
        if not views.is_index(offset) or offset < 0 or offset % itemsize:
            raise ValidationError("dmlgpu", None, "offset", offset,
                                  f"allowed: a non-negative multiple of the element size ({itemsize})")
        offset = int(offset)
        end = offset + views.extent(shape, strides) * itemsize
        if end > buffer.size_in_bytes:
            raise ValidationError("dmlgpu", None, "shape", shape,
                                  f"the view ends at byte {end}, past its buffer's {buffer.size_in_bytes}")
        self._buffer, self._shape, self._data_type, self._offset, self._strides = \
            buffer, shape, data_type, offset, strides
        self._key = self._layout = None

    @classmethod
    def from_numpy(cls, array: npt.NDArray[Any] | np.generic, device: Device | None = None) -> Tensor:
        """Upload a numpy array (any layout, any byte order: values are kept, the Tensor is
        native) to `device` (default: the current or default device).

        Raises:
            ValidationError: not numpy data, an ndarray subclass (masked array, matrix), a
                dtype DirectML does not have, or more than 2^32-1 elements. More bytes than one
                device buffer holds span several (`dmlgpu.layout.pieces`).
        """
        if not isinstance(array, (np.ndarray, np.generic)):
            raise ValidationError("dmlgpu", None, "array", type(array).__name__, "allowed: numpy.ndarray")
        array = np.asarray(host_array(array, "dmlgpu", None, "array"))
        data_type = _data_type(array.dtype)
        device = device or default_device()
        _check_fits(array.shape, data_type)
        # (a fresh packed view of memory made for it: what __init__ would check holds by construction)
        return cls.from_fields(pieces.upload(device, array), tuple(array.shape), data_type)

    @classmethod
    def empty(cls, shape: int | Sequence[int], dtype: npt.DTypeLike, device: Device | None = None, *,
              zero_fill: bool = True) -> Tensor:
        """A new packed tensor on `device` (default: the current or default device), zero-filled
        on the device unless `zero_fill` is False (`dmlgpu.empty`).

        Raises:
            ValidationError: a shape that is not non-negative integers, an unknown dtype, or
                more than 2^32-1 elements. More bytes than one device buffer holds span several.
        """
        shape = views.check_shape(shape)
        data_type = _data_type(dtype)
        device = device or default_device()
        _check_fits(shape, data_type)
        # (a fresh packed view of memory made for it: what __init__ would check holds by construction)
        return cls.from_fields(pieces.allocate(device, shape, data_type.size, zero_fill=zero_fill), shape, data_type)

    # -- what numpy users expect of an array ------------------------------------------------
    @property
    def nbytes(self) -> int:
        """Bytes of the elements (not of the memory a strided view spans), as numpy."""
        return self.size * self.data_type.size

    @property
    def is_packed(self) -> bool:
        """Whether the elements lie in C order without gaps."""
        return views.is_packed(self.shape, self.strides)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d dmlgpu.Tensor (a library walking it as nested sequences, such as "
                            "torch.as_tensor, cannot take a Tensor: download it with t.numpy() first)")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d dmlgpu.Tensor")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, key) -> Tensor:
        """numpy's basic indexing, as a zero-copy view: integers, slices (positive steps),
        `...` and None. An integer for every dimension gives a 0-d Tensor.

        Raises:
            IndexError: as numpy (out of bounds, too many indices).
            ValidationError: a negative step (DirectML strides are unsigned) or an index array.
        """
        shape, strides, offset = views.index(self.shape, self.strides, self.offset, self.itemsize, key)
        return Tensor.from_fields(self.buffer, shape, self.data_type, offset, strides)

    def __setitem__(self, key, value) -> None:
        """`t[key] = value` through basic indexing (as `__getitem__`).

        `value` is a Python scalar or numpy data, cast and broadcast by numpy's assignment
        rules, or a Tensor of the same device and data type (DirectML converts no types:
        `.view(dtype)` reinterprets bits), broadcast, copied on the device (an overlapping
        one is copied first, so the result is numpy's). A packed target takes host data as
        one write at any offset; a strided target, and any target of a Tensor value, is
        written by a device copy (at any offset too).

        Raises:
            IndexError, ValidationError: as indexing; a Tensor of another data type or device,
                shapes that do not broadcast (nothing is written).
            ValueError, OverflowError, TypeError: numpy's, for host data it cannot assign.
        """
        target = self[key]
        if isinstance(value, views.View):
            if value.key == target.key:
                return  # `t[key] op= u`: the in-place operator wrote it already
            if value.data_type != target.data_type:
                raise ValidationError("dmlgpu", None, "value", f"a Tensor of {value.data_type.name}",
                                      f"allowed: a Tensor of {target.data_type.name}, the target's data type "
                                      "(DirectML converts no types; .view(dtype) reinterprets bits)")
            shape, strides = value.shape, value.strides
            while len(shape) > target.ndim and shape[0] == 1:  # numpy drops leading 1s
                shape, strides = shape[1:], strides[1:]
            if len(shape) > target.ndim or any(n not in (1, m) for n, m in zip(shape[::-1], target.shape[::-1])):
                raise ValidationError("dmlgpu", None, "value", f"a Tensor of shape {value.shape}",
                                      f"allowed: a shape that broadcasts to the target's {target.shape}")
            if value.buffer is target.buffer and value.size and target.size:
                value = ops.copy(value)  # numpy's result where the two overlap
                strides = value.strides[len(value.shape) - len(shape):]
            value = Tensor.from_fields(value.buffer, target.shape, value.data_type, value.offset,
                                 tuple(ops.broadcast_strides(shape, target.shape, strides)))
            ops.apply(BIT_XOR, (value, 0), target, None, None)
            return
        data = np.empty(target.shape, target.dtype)
        data[...] = value
        if target.size == 0:
            return
        if target.is_packed:
            target.buffer.write(data, target.offset)
            return
        staged = Tensor.from_fields(pieces.upload(target.device, data), target.shape, target.data_type)
        ops.apply(BIT_XOR, (staged, 0), target, None, None)

    def transpose(self, *axes) -> Tensor:
        """The view with dimensions permuted (`t.transpose()`, `t.transpose(1, 0, 2)` or a tuple)."""
        order = views.transpose_axes(self.ndim, axes)
        return Tensor.from_fields(self.buffer, tuple(self.shape[a] for a in order), self.data_type, self.offset,
                            tuple(self.strides[a] for a in order))

    @property
    def T(self) -> Tensor:
        """The view with dimensions reversed."""
        return self.transpose()

    def reshape(self, *shape) -> Tensor:
        """The same elements in C order with a new shape (one size may be -1).

        A view when the layout allows (always for packed Tensors), else a packed copy made on
        the device, as numpy and CuPy do.

        Raises:
            ValidationError: a shape of another size.
        """
        shape = views.reshape_shape(self.size, shape[0] if len(shape) == 1 else shape)
        strides = views.reshape_strides(self.shape, self.strides, shape)
        if strides is None:
            return self.copy().reshape(shape)
        return Tensor.from_fields(self.buffer, shape, self.data_type, self.offset, strides)

    def view(self, dtype) -> Tensor:
        """The same bytes as elements of `dtype`, zero-copy (numpy's `ndarray.view(dtype)`).

        The same itemsize keeps the shape; another itemsize resizes the last dimension, which
        must be contiguous and hold a whole number of new elements (numpy's rules).

        Raises:
            ValidationError: a dtype DirectML does not have, or a layout numpy would not view so.
        """
        data_type = _data_type(dtype)
        shape, strides, offset = views.view_layout(self.shape, self.strides, self.offset,
                                                   self.itemsize, data_type.size)
        if isinstance(self.buffer, Pieces) and not self.buffer.divides(data_type.size):
            raise ValidationError("dmlgpu", None, "dtype", data_type.numpy.name,
                                  "allowed: an itemsize that divides where this Tensor's buffers begin "
                                  "(its elements span several buffers)")
        return Tensor.from_fields(self.buffer, shape, data_type, offset, strides)

    def copy(self) -> Tensor:
        """A packed copy on the same device (raw bits kept: XOR with zero)."""
        return ops.copy(self)

    def ravel(self) -> Tensor:
        """The elements in C order as one dimension: a view where the layout allows (numpy's
        `ravel`), else a packed copy on the device."""
        return self.reshape(-1)

    def flatten(self) -> Tensor:
        """A packed one-dimensional copy of the elements in C order, on the same device."""
        return self.copy().reshape(-1)

    # -- reductions, as CuPy's methods: `dmlgpu.front.reductions` ----------------------------
    def sum(self, axis: Axis = None, keepdims: bool = False, *, feature_level: Level = None) -> Tensor:
        """`dmlgpu.sum(t)`: DML_REDUCE_FUNCTION_SUM over `axis` (None: all); integers wrap at the
        Tensor's width, as DirectML's (numpy widens), and floats are refused (an order-dependent
        rounding). Returns a Tensor on the same device."""
        return reductions.sum(self, axis, keepdims, feature_level)

    def prod(self, axis: Axis = None, keepdims: bool = False, *, feature_level: Level = None) -> Tensor:
        """`dmlgpu.prod(t)`: DML_REDUCE_FUNCTION_MULTIPLY over `axis`, wrapping as `sum` does."""
        return reductions.prod(self, axis, keepdims, feature_level)

    def min(self, axis: Axis = None, keepdims: bool = False, *, feature_level: Level = None) -> Tensor:
        """`dmlgpu.min(t)`: DML_REDUCE_FUNCTION_MIN over `axis` (floats by their total order)."""
        return reductions.min(self, axis, keepdims, feature_level)

    def max(self, axis: Axis = None, keepdims: bool = False, *, feature_level: Level = None) -> Tensor:
        """`dmlgpu.max(t)`: DML_REDUCE_FUNCTION_MAX over `axis` (floats by their total order)."""
        return reductions.max(self, axis, keepdims, feature_level)

    def argmin(self, axis: Axis = None, keepdims: bool = False, *, feature_level: Level = None) -> Tensor:
        """`dmlgpu.argmin(t)`: the first smallest element's index (int64) over `axis` (None: all,
        row-major)."""
        return reductions.argmin(self, axis, keepdims, feature_level)

    def argmax(self, axis: Axis = None, keepdims: bool = False, *, feature_level: Level = None) -> Tensor:
        """`dmlgpu.argmax(t)`: the first largest element's index (int64) over `axis` (None: all,
        row-major)."""
        return reductions.argmax(self, axis, keepdims, feature_level)

    def numpy(self) -> np.ndarray:
        """Download into a new C-ordered numpy array (a view downloads the range it spans)."""
        if self.size == 0:
            return np.empty(self.shape, self.dtype)
        span = views.extent(self.shape, self.strides)
        data = self.buffer.read(self.offset, span * self.itemsize).view(self.dtype)
        if self.is_packed:
            return data.reshape(self.shape)
        byte_strides = [s * self.itemsize for s in self.strides]
        return np.lib.stride_tricks.as_strided(data, self.shape, byte_strides).copy()

    def tolist(self) -> Any:
        """The elements as nested Python lists of Python scalars (a 0-d Tensor: one scalar)."""
        return self.numpy().tolist()

    def item(self):
        """The one element as a Python scalar (downloaded).

        Raises:
            ValueError: the Tensor has not exactly one element, as numpy.
        """
        if self.size != 1:
            raise ValueError(f"can only convert a dmlgpu.Tensor of size 1 to a Python scalar, not size {self.size}")
        return self.numpy().reshape(-1)[0].item()

    def __bool__(self) -> bool:
        """The truth of the one element; ValueError for several or none, as numpy."""
        if self.size != 1:
            raise ValueError(f"The truth value of a dmlgpu.Tensor with {self.size} elements is ambiguous "
                             "(one element has one): use t.numpy().any() or t.numpy().all()")
        return bool(self.item())

    def _scalar(self, kind: str):
        if self.size != 1:
            raise TypeError(f"only a dmlgpu.Tensor of one element converts to {kind}, not one of {self.size}")
        return self.item()

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __index__(self) -> int:
        """A 0-d integer Tensor as an index (`range(t)`, `operator.index(t)`), as numpy."""
        if self.ndim or self.data_type.is_float or self.dtype == np.bool_:
            raise TypeError("only a 0-d dmlgpu.Tensor of an integer data type converts to an index, "
                            f"not {self.shape} {self.data_type.name}")
        return int(self.item())

    def __eq__(self, other):
        raise TypeError(_EQUALITY.format("=="))

    def __ne__(self, other):
        raise TypeError(_EQUALITY.format("!="))

    def to(self, device) -> Tensor:
        """This tensor on `device` (itself if it is there already; else a copy through the host).

        Raises:
            TypeError: `device` is not a `dmlgpu.Device` (for host data, call `.numpy()`).
        """
        if not isinstance(device, Device):
            raise TypeError(f"Tensor.to takes a dmlgpu.Device, not {type(device).__name__} {device!r}; "
                            "call .numpy() to download into a numpy array")
        if device is self.device:
            return self
        return Tensor.from_numpy(self.numpy(), device)

    # -- copies and pickles: the data travels --------------------------------------------------
    def __reduce__(self):
        """Pickled as its data (downloaded); unpickled onto the current (or default) device."""
        return _rebuild, (self.numpy(),)

    def __copy__(self) -> Tensor:
        """`copy.copy(t)`: `t.copy()`, a packed copy on the same device (as CuPy)."""
        return self.copy()

    def __deepcopy__(self, memo) -> Tensor:
        """`copy.deepcopy(t)`: a packed copy on the current (or default) device, as unpickling
        gives (a device copy where that is `t`'s device)."""
        device = default_device()
        return self.copy() if device is self.device else self.to(device)


