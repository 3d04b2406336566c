"""What the front end takes as an operand besides a Tensor: numpy arrays and Python scalars.

- numpy arrays in any byte order: a non-native one (`'>u4'`, as read from files) is converted to
  native order on entry, keeping its values, as numpy computes on values; results are native.
- `numpy.memmap` is a plain ndarray backed by a file. Other ndarray subclasses carry a meaning
  that an ndarray result would silently drop (a mask, matrix semantics, units), so they are
  rejected with a `ValidationError` naming the type; `np.asarray(x)` drops it on purpose.
- Python `int`, `float` and `bool` follow NEP 50: a scalar takes the data type of the array or
  Tensor it meets when its value fits, and is an error when it does not (numpy raises
  OverflowError, or overflows a float to inf with a warning; dmlgpu raises `ValidationError`
  for both, before any work). A float needs a float operand (numpy 2 rejects
  `np.bitwise_xor(uint8_array, 1.5)`); a bool needs an integer operand (numpy's bitwise ufuncs
  take bools with integers only). numpy scalars (`np.uint8(3)`) keep their own type, as in numpy.
  The scalar's value is converted first and DirectML's raw-bit semantics apply to its encoding:
  `float32_tensor ^ 1` XORs with the bits of 1.0 (0x3F800000).

These rules are the front end's and `dmlgpu.dask`'s alike: both call `convert` and `data_type`.
"""
from __future__ import annotations

from typing import Any, Union

import numpy as np
import numpy.typing as npt

from ..table.dtypes import DataType
from ..errors import DataTypeError, ValidationError

__all__ = ["PLAIN_ARRAYS", "SUBCLASS_ALLOWED", "HostOperand", "convert", "data_type", "host_array",
           "is_python_scalar", "native_dtype", "python_scalar", "scalar_key"]

#: numpy data an operator takes (the annotation of the generated functions and Tensor operators):
#: an array (any byte order), a numpy scalar, or a Python int, float or bool, which takes the
#: data type of the other operand (NEP 50).
HostOperand = Union[npt.NDArray[Any], np.generic, int, float]

#: ndarray types taken as they are (memmap: file-backed, no semantics of its own).
PLAIN_ARRAYS = (np.ndarray, np.memmap)
SUBCLASS_ALLOWED = ("allowed: numpy.ndarray (dmlgpu would drop this subclass's meaning, such as "
                    "a mask; np.asarray(x) drops it on purpose)")


def is_python_scalar(value) -> bool:
    """A Python int, float or bool (numpy's float64 subclasses float but is a numpy scalar)."""
    return isinstance(value, (int, float)) and not isinstance(value, np.generic)


def scalar_key(value) -> tuple:
    """A Python scalar as a memo key: its type and value, a float by its bits (0.0 and -0.0 are
    equal numbers but other operands of a bitwise operator; True and 1 are other types)."""
    return (type(value), value.hex() if isinstance(value, float) else value)


def host_array(value, operator: str, tensor: str | None, field: str = "type"):
    """A numpy array or scalar in native byte order, or a ValidationError for a subclass.

    Anything that is not numpy data is returned unchanged for the caller to judge.
    """
    if isinstance(value, np.ndarray):
        if type(value) not in PLAIN_ARRAYS:
            raise ValidationError(operator, tensor, field, type(value).__name__, SUBCLASS_ALLOWED)
        if not value.dtype.isnative:
            return value.astype(value.dtype.newbyteorder("="))
    elif isinstance(value, np.generic) and not value.dtype.isnative:
        return value.astype(value.dtype.newbyteorder("="))
    return value


def native_dtype(dtype) -> np.dtype:
    """`dtype` in native byte order (a dtype argument names values, not bytes)."""
    dtype = np.dtype(dtype)
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def python_scalar(value, data_type: DataType, operator: str, tensor: str) -> np.ndarray:
    """A Python scalar as a 0-d array of `data_type`, by NEP 50's rules (module docstring).

    Raises:
        ValidationError: a value outside the data type's range.
        DataTypeError: a float with an integer type, a bool with a float type.
    """
    dtype = data_type.numpy

    def fail(allowed, error=ValidationError):
        raise error(operator, tensor, "value", value,
                    f"{allowed} ({data_type.name}, the data type of the other operand; NEP 50)")

    kind = type(value).__name__
    if isinstance(value, bool):
        if data_type.is_float:
            fail("allowed: a Python int or float; a bool only with an integer data type", DataTypeError)
        return np.array(value, dtype)
    if isinstance(value, int) and not data_type.is_float:
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            fail(f"allowed: a Python int from {info.min} to {info.max}")
        return np.array(value, dtype)
    if not data_type.is_float:
        fail(f"allowed: a Python int; a {kind} only with a float data type", DataTypeError)
    with np.errstate(over="ignore"):
        try:
            converted = np.array(value, dtype)
        except OverflowError:
            converted = None
    if converted is None or (np.isinf(converted) and not (isinstance(value, float) and np.isinf(value))):
        fail(f"allowed: a Python {kind} within +/-{np.finfo(dtype).max} (or +/-inf, nan)")
    return converted


def data_type(dtype, operator: str, tensor: str | None, allowed) -> DataType:
    """The DirectML data type of numpy `dtype` (any byte order), or `DataTypeError` listing the
    numpy dtypes of `allowed` (data types) when no DirectML data type encodes it; whether the
    operator takes it is `dmlgpu.validate`'s to say."""
    try:
        found = DataType.from_numpy(native_dtype(dtype))
    except TypeError:
        found = None
    if found is None:
        raise DataTypeError(operator, tensor, "dtype", dtype,
                            "allowed: " + ", ".join(t.numpy.name for t in allowed))
    return found


def convert(values, operator: str, names, allowed, arrays: tuple, arrays_text: str, anchors_text: str) -> list:
    """The operands of one call: each numpy array in native byte order (`host_array`), each
    Python scalar as a 0-d array of the data type of the first other operand (`python_scalar`),
    anything else of a type in `arrays` (Tensors, dask arrays) as it is.

    Args:
        values: the operands as given; `names` their tensor names (`op.inputs`).
        allowed: the data types the operator takes (for the message of an unknown dtype).
        arrays: the operand types taken besides numpy data and Python scalars; `arrays_text`
            names every type taken, `anchors_text` those a scalar takes its type from (messages).

    Raises:
        ValidationError: an operand of another type, an ndarray subclass, only Python scalars,
            or a scalar that does not fit.
        DataTypeError: a dtype no DirectML data type encodes, a scalar of the wrong kind.
    """
    converted, seen = [], {}
    for name, x in zip(names, values):
        if not (isinstance(x, (*arrays, np.ndarray, np.generic)) or is_python_scalar(x)):
            raise ValidationError(operator, name, "type", type(x).__name__, f"allowed: {arrays_text}")
        if id(x) not in seen:  # the same array twice stays one array (uploaded once)
            seen[id(x)] = host_array(x, operator, name)
        converted.append(seen[id(x)])
    anchor = next(((name, x) for name, x in zip(names, converted) if not is_python_scalar(x)), None)
    if anchor is None:
        raise ValidationError(operator, names[0], "type", type(values[0]).__name__,
                              f"allowed: {anchors_text} (a Python scalar takes its data type from "
                              f"an {anchors_text.replace('numpy.ndarray', 'array').replace('dmlgpu.', '')} operand, "
                              "and there is none)")
    if len(converted) == 1:
        return converted
    anchor_type = data_type(anchor[1].dtype, operator, anchor[0], allowed)
    return [python_scalar(x, anchor_type, operator, name) if is_python_scalar(x) else x
            for name, x in zip(names, converted)]
