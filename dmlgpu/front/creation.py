"""Tensors made from data or filled, with numpy's and CuPy's names: `asarray`, `empty`, `zeros`,
`ones`, `full`.

Each gives a packed Tensor on `device` (default: the current or default device). DirectML
converts no types on the device, so `asarray` of a Tensor with another dtype is refused (a cast
goes through the host; `Tensor.view(dtype)` reinterprets the bits), and `full` uploads its value
once and broadcasts it on the device.
"""
from __future__ import annotations

from typing import Any, Sequence, Union

import numpy as np
import numpy.typing as npt

from ..api.device import Device, default_device
from ..errors import ValidationError
from .tensor import Tensor

__all__ = ["Shape", "asarray", "empty", "full", "ones", "zeros"]

#: A shape: an int or a sequence of ints, as numpy takes it.
Shape = Union[int, Sequence[int]]


def asarray(a: Any, dtype: npt.DTypeLike | None = None, device: Device | None = None) -> Tensor:
    """`a` as a Tensor, as `cupy.asarray`: numpy data, a (nested) list or a scalar is uploaded
    (`np.asarray(a, dtype)` first); a Tensor is returned as it is, or copied to `device` where that
    is another device.

    Args:
        a: numpy data, a Python sequence or scalar, or a Tensor.
        dtype: the data type (numpy's rules for what `np.asarray` makes of `a` when None); for a
            Tensor, None or its own dtype.
        device: a `dmlgpu.Device`; None: the current (or default) device, or a Tensor's own.

    Returns:
        A packed Tensor (or `a` itself).

    Raises:
        ValidationError: a dtype DirectML does not have (bool, complex, ...), more than 2^32-1
            elements, an ndarray subclass (masked array, matrix), or a Tensor with another dtype
            (DirectML converts no types: `t.view(dtype)` reinterprets its bits, and
            `dmlgpu.asarray(t.numpy().astype(dtype))` casts through the host).
    """
    if isinstance(a, Tensor):
        if dtype is not None and np.dtype(dtype) != a.dtype:
            raise ValidationError("dmlgpu", None, "dtype", np.dtype(dtype).name,
                                  f"allowed: the Tensor's own {a.dtype.name} (DirectML converts no types: "
                                  "t.view(dtype) reinterprets the bits, dmlgpu.asarray(t.numpy().astype(dtype)) "
                                  "casts through the host)")
        return a if device is None or device is a.device else a.to(device)
    if not isinstance(a, np.ndarray) or dtype is not None:
        a = np.asarray(a, dtype=dtype)
    return Tensor.from_numpy(a, device)


def empty(shape: Shape, dtype: npt.DTypeLike = np.float64, device: Device | None = None) -> Tensor:
    """A Tensor of `shape` whose elements are whatever its memory held (`numpy.empty`).

    Raises:
        ValidationError: a shape that is not non-negative integers, a dtype DirectML does not
            have, or more than 2^32-1 elements.
    """
    return Tensor.empty(shape, dtype, device, zero_fill=False)


def zeros(shape: Shape, dtype: npt.DTypeLike = np.float64, device: Device | None = None) -> Tensor:
    """A Tensor of `shape` filled with zeros on the device (`numpy.zeros`; raises as `empty`)."""
    return Tensor.empty(shape, dtype, device)


def full(shape: Shape, fill_value: Any, dtype: npt.DTypeLike | None = None, device: Device | None = None) -> Tensor:
    """A Tensor of `shape` filled with `fill_value` (`numpy.full`): the value is converted by
    numpy's rules (`dtype` None: numpy's dtype for the value), uploaded once and broadcast on the
    device.

    Raises:
        ValidationError: as `empty`; OverflowError, ValueError: numpy's, for a value the dtype
            cannot hold.
    """
    value = np.asarray(fill_value, dtype=dtype)
    if value.ndim:
        raise ValidationError("dmlgpu", None, "fill_value", fill_value, "allowed: a scalar")
    device = device or default_device()
    result = Tensor.empty(shape, value.dtype, device, zero_fill=False)
    if result.size:
        result[...] = Tensor.from_numpy(value.reshape(1), device)
    return result


def ones(shape: Shape, dtype: npt.DTypeLike = np.float64, device: Device | None = None) -> Tensor:
    """A Tensor of `shape` filled with ones (`numpy.ones`; raises as `full`)."""
    return full(shape, 1, dtype, device)
