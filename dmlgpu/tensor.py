"""Device-resident tensors: data that stays on the GPU between operators.

A Tensor is a packed C-order array in a device Buffer. The numpy-style functions and Python's
operators (`~`, `^`, ...: dmlgpu.numpy_api installs them from the operator table) take Tensors and
return Tensors without host round trips; `.numpy()` downloads.
"""
from __future__ import annotations

import numpy as np

from .bindings import Binding
from .device import default_device
from .dtypes import DataType
from .errors import ValidationError


class Tensor:
    """Data on a device: a Buffer range holding a packed array of `shape` and `data_type`."""

    __array_ufunc__ = None  # `ndarray ^ Tensor` must reach Tensor.__rxor__, not numpy

    def __init__(self, buffer, shape, data_type: DataType, offset: int = 0):
        self.buffer = buffer
        self.shape = tuple(int(s) for s in shape)
        self.data_type = DataType(data_type)
        self.offset = offset

    @classmethod
    def from_numpy(cls, array, device=None) -> "Tensor":
        """Upload a numpy array (any layout) to `device` (default: the default device)."""
        if not isinstance(array, (np.ndarray, np.generic)):
            raise ValidationError("dmlgpu", None, "array", type(array).__name__, "allowed: numpy.ndarray")
        array = np.asarray(array)
        data_type = DataType.from_numpy(array.dtype)
        if data_type is None:
            raise ValidationError("dmlgpu", None, "dtype", array.dtype,
                                  "allowed: the numpy dtypes of DirectML's data types")
        device = device or default_device()
        return cls(device.upload(np.ascontiguousarray(array)), array.shape, data_type)

    @classmethod
    def empty(cls, shape, dtype, device=None) -> "Tensor":
        """An uninitialised (zero-filled) tensor on `device`."""
        data_type = DataType.from_numpy(dtype)
        if data_type is None:
            raise ValidationError("dmlgpu", None, "dtype", dtype,
                                  "allowed: the numpy dtypes of DirectML's data types")
        device = device or default_device()
        nbytes = int(np.prod(shape, dtype=np.int64)) * data_type.size
        return cls(device.allocate(max(4, -(-nbytes // 4) * 4)), shape, data_type)

    @property
    def device(self):
        return self.buffer.device

    @property
    def dtype(self) -> np.dtype:
        return self.data_type.numpy

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.data_type.size

    def binding(self, size_in_bytes: int) -> Binding:
        return Binding(self.buffer, self.offset, size_in_bytes)

    def numpy(self) -> np.ndarray:
        """Download into a new numpy array."""
        data = self.buffer.read(self.offset, self.nbytes)
        return data.view(self.dtype).reshape(self.shape)

    def to(self, device) -> "Tensor":
        """This tensor on `device` (itself if it is there already; else a copy through the host)."""
        if device is self.device:
            return self
        return Tensor.from_numpy(self.numpy(), device)

    def __repr__(self):
        return f"<dmlgpu.Tensor {self.shape} {self.data_type.name} on {self.device.name}>"
