"""Device-resident tensors: data that stays on the GPU between operators.

A Tensor is a strided view of a device Buffer: shape, element strides (DirectML's convention)
and the byte offset of its first element. `Tensor.from_numpy` and `Tensor.empty` make packed
tensors; indexing, `.T`, `transpose` and `reshape` make zero-copy views of the same Buffer. The
numpy-style functions, Python's operators (`~`, `^`, ...: dmlgpu.numpy_api installs them from the
operator table) and numpy's matching ufuncs take Tensors and return Tensors without host round
trips; `.numpy()` downloads.
"""
from __future__ import annotations

import numpy as np

from . import views
from .device import default_device
from .dtypes import ALL, DataType
from .errors import ValidationError
from .operands import data_type as operand_data_type, host_array
from .operators import BIT_XOR, OPERATORS
from .tensor_desc import packed_strides

__all__ = ["Tensor", "UFUNC_OPERATORS"]

#: numpy ufunc name -> operator, from the table's `numpy_ufunc` column.
UFUNC_OPERATORS = {op.numpy_ufunc: op for op in OPERATORS if op.numpy_ufunc}


def _data_type(dtype) -> DataType:
    return operand_data_type(dtype, "dmlgpu", None, ALL)  # the front end's rule (dmlgpu.operands)



def _no_front_end(*args):
    raise RuntimeError("dmlgpu.numpy_api is not imported (import dmlgpu)")


#: The front end's call (op, operands, out, dtype, level), installed by dmlgpu.numpy_api, which
#: builds on this module: Tensor methods that run an operator go through it.
_front_end = _no_front_end


def install_front_end(apply) -> None:
    global _front_end
    _front_end = apply


class Tensor:
    """A strided view of a device Buffer, as a numpy-like array that lives on the device.

    Args:
        buffer: the `dmlgpu.Buffer` holding the elements.
        shape: non-negative integers, outermost first.
        data_type: a `DataType` (or its DirectML value).
        offset: byte offset of the first element in `buffer`, a multiple of the element size.
        strides: elements between neighbours per dimension (DirectML's convention; numpy's
            `ndarray.strides` counts bytes); None means packed C order.

    Views whose first element is not at a 16-byte boundary are fine as inputs (DirectML binds at
    16-byte multiples, so dmlgpu binds the aligned-down range and adds a size-2 dimension whose
    stride is the element offset; a fresh result is then allocated twice its size, or, with
    `out` given, such an input is first copied), but not as `out`: an output must start where
    DirectML can bind it.

    A Tensor's fields are fixed once it is made (a view is a value, as a torch tensor's shape
    is): a new view is a new Tensor. That is what lets the front end find a repeated call by
    its Tensors' `key`s.

    Raises:
        ValidationError: a bad shape, strides or offset, or a view reaching past `buffer`.
    """

    __slots__ = ("_buffer", "_shape", "_data_type", "_offset", "_strides", "_key", "__weakref__")

    def __init__(self, buffer, shape, data_type: DataType, offset: int = 0, strides=None):
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
        self._key = None

    @classmethod
    def _made(cls, buffer, shape: tuple, data_type: DataType, offset: int = 0, strides: tuple | None = None):
        """A Tensor from fields dmlgpu computed itself (a view of a valid Tensor, a fresh
        result): no checks, for hot paths."""
        tensor = object.__new__(cls)
        tensor._buffer, tensor._shape, tensor._data_type, tensor._offset = buffer, shape, data_type, offset
        tensor._strides = packed_strides(shape) if strides is None else strides
        tensor._key = None
        return tensor

    # -- the view's fields (read-only) -------------------------------------------------------
    @property
    def buffer(self):
        """The `dmlgpu.Buffer` holding the elements."""
        return self._buffer

    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def data_type(self) -> DataType:
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
        """(buffer serial, offset, shape, strides, data type): equal for two Tensors exactly
        when they view the same elements of the same live-or-dead buffer the same way (serials
        are never reused); the front end finds a repeated call by its operands' keys."""
        key = self._key
        if key is None:
            key = self._key = (self._buffer.serial, self._offset, self._shape, self._strides, self._data_type)
        return key

    @classmethod
    def from_numpy(cls, array, device=None) -> "Tensor":
        """Upload a numpy array (any layout, any byte order: values are kept, the Tensor is
        native) to `device` (default: the default device).

        Raises:
            ValidationError: not numpy data, an ndarray subclass (masked array, matrix), or a
                dtype DirectML does not have.
        """
        if not isinstance(array, (np.ndarray, np.generic)):
            raise ValidationError("dmlgpu", None, "array", type(array).__name__, "allowed: numpy.ndarray")
        array = np.asarray(host_array(array, "dmlgpu", None, "array"))
        data_type = _data_type(array.dtype)
        device = device or default_device()
        return cls(device.upload(np.ascontiguousarray(array)), array.shape, data_type)

    @classmethod
    def empty(cls, shape, dtype, device=None) -> "Tensor":
        """An uninitialised (zero-filled) packed tensor on `device`.

        Raises:
            ValidationError: a shape that is not non-negative integers, or an unknown dtype.
        """
        shape = views.check_shape(shape)
        data_type = _data_type(dtype)
        device = device or default_device()
        nbytes = int(np.prod(shape, dtype=np.int64)) * data_type.size
        return cls(device.allocate(max(4, -(-nbytes // 4) * 4)), shape, data_type)

    # -- what numpy users expect of an array ------------------------------------------------
    @property
    def device(self):
        return self.buffer.device

    @property
    def dtype(self) -> np.dtype:
        return self.data_type.numpy

    @property
    def itemsize(self) -> int:
        return self.data_type.size

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

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
            raise TypeError("len() of a 0-d dmlgpu.Tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d dmlgpu.Tensor")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, key) -> "Tensor":
        """numpy's basic indexing, as a zero-copy view: integers, slices (positive steps),
        `...` and None. An integer for every dimension gives a 0-d Tensor.

        Raises:
            IndexError: as numpy (out of bounds, too many indices).
            ValidationError: a negative step (DirectML strides are unsigned) or an index array.
        """
        shape, strides, offset = views.index(self.shape, self.strides, self.offset, self.itemsize, key)
        return Tensor._made(self.buffer, shape, self.data_type, offset, strides)

    def transpose(self, *axes) -> "Tensor":
        """The view with dimensions permuted (`t.transpose()`, `t.transpose(1, 0, 2)` or a tuple)."""
        order = views.transpose_axes(self.ndim, axes)
        return Tensor._made(self.buffer, tuple(self.shape[a] for a in order), self.data_type, self.offset,
                            tuple(self.strides[a] for a in order))

    @property
    def T(self) -> "Tensor":
        """The view with dimensions reversed."""
        return self.transpose()

    def reshape(self, *shape) -> "Tensor":
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
        return Tensor._made(self.buffer, shape, self.data_type, self.offset, strides)

    def copy(self) -> "Tensor":
        """A packed copy on the same device (raw bits kept: XOR with zero)."""
        return _front_end(BIT_XOR, (self, 0), None, None, None)

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

    def __array__(self, dtype=None, copy=None):
        """Refused: `np.asarray(tensor)` raises TypeError; call `.numpy()`.

        As CuPy (which points to `.get()`) and PyTorch for device tensors: a download waits for
        the device and copies the data, and an implicit one inside numpy (np.asarray, np.sum,
        a loop mixing arrays and Tensors) hides that cost where nobody sees it.
        """
        raise TypeError("dmlgpu.Tensor does not convert to a numpy array implicitly "
                        "(a hidden device-to-host copy); call .numpy() to download it")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy's ufuncs that name a dmlgpu operator (`Operator.numpy_ufunc`: np.invert,
        np.bitwise_xor, ...) run on the device and return a Tensor; `out=` may be a Tensor.

        Semantics are DirectML's, not numpy's: raw bits (np.invert of a float Tensor inverts
        its encoding, where numpy raises), shift amounts masked to the element width. Any
        other ufunc, ufunc method (reduce, accumulate, ...) or argument raises TypeError.
        """
        op = UFUNC_OPERATORS.get(ufunc.__name__)
        if op is None:
            raise TypeError(f"numpy.{ufunc.__name__} has no dmlgpu operator; dmlgpu.Tensor takes "
                            f"{', '.join('numpy.' + name for name in UFUNC_OPERATORS)} "
                            "(or call .numpy() to compute on the host)")
        if method != "__call__":
            raise TypeError(f"numpy.{ufunc.__name__}.{method} is not supported on dmlgpu.Tensor")
        out = kwargs.pop("out", None)
        if isinstance(out, tuple):
            if len(out) != 1:
                raise TypeError(f"numpy.{ufunc.__name__}: out must hold one Tensor")
            out = out[0]
        if kwargs:
            raise TypeError(f"numpy.{ufunc.__name__} on dmlgpu.Tensor takes no {', '.join(sorted(kwargs))} argument")
        return _front_end(op, inputs, out, None, None)

    def to(self, device) -> "Tensor":
        """This tensor on `device` (itself if it is there already; else a copy through the host)."""
        if device is self.device:
            return self
        return Tensor.from_numpy(self.numpy(), device)

    def __repr__(self):
        layout = "" if self.is_packed and not self.offset else f" strides {self.strides} at byte {self.offset}"
        return f"<dmlgpu.Tensor {self.shape} {self.data_type.name}{layout} on {self.device.name}>"
