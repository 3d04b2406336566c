"""numpy-style front end of the reduce and top-k rows: `sum`, `min`, `max`, `argmin`, `argmax`
(DML_OPERATOR_REDUCE) and `top_k` (DML_OPERATOR_TOP_K1), on numpy arrays and Tensors.

A numpy array in gives a numpy array out (uploaded, computed, downloaded once); a Tensor in gives
a Tensor out on its device. The functions work on device views (`layout.views.View`) and make
their results as the class of their operand, as `front.resident` does: this module sits below
`front.tensor`, whose methods (`t.sum()`, `t.argmax()`, ...) call it. Every call builds a descriptor and goes through `validate` (one
compiled operator per shape, kept by the device), so a call DirectML would reject raises
`ValidationError` before any work. Divergences from numpy, from DirectML's rules:
- `sum` keeps the input's type and wraps (numpy widens int32 to int64); DirectML sums only
  32- and 64-bit integers, and dmlgpu no floats (a float sum's rounding depends on its order);
- `min`/`max`/`argmin`/`argmax`/`top_k` order floats by their encoding's total order
  (-NaN < -inf < -0.0 < +0.0 < +inf < +NaN) where numpy propagates NaN;
- `argmin`/`argmax` take a tuple of axes too (the index is row-major over them), and give int64.
"""
from __future__ import annotations

import builtins
from typing import Any, Protocol, TypeVar, Union, overload

import numpy as np
import numpy.typing as npt

from ..describe.operator_descs import DESC_CLASSES
from ..api.device import default_device
from ..table.dtypes import DataType
from ..errors import ValidationError
from ..layout.operands import host_array
from ..table.operators import REDUCE, TOP_K, AxisDirection, ReduceFunction
from ..layout import pieces
from ..layout.pieces import Pieces
from ..layout.views import View
from ..table.feature_levels import FeatureLevel
from ..describe.tensor_desc import MINIMUM_BUFFER_TENSOR_ALIGNMENT, TensorDesc, calc_buffer_tensor_size
from ..describe.bindings import Binding
from .resident import copy

#: A device view in, the same class out (a `dmlgpu.Tensor` gives Tensors).
_V = TypeVar("_V", bound=View)
#: numpy data a reduction takes (a 0-d array or numpy scalar gives a 0-d array).
HostData = Union[npt.NDArray[Any], np.generic]
#: `axis`: None (all), an axis, or a tuple of axes.
Axis = Union[int, "tuple[int, ...]", None]
#: A feature level, its value, or None for the newest.
Level = Union[FeatureLevel, int, None]

#: argmin/argmax's output type: numpy's intp.
INDEX_TYPE = DataType.INT64
TOP_K_INDEX_TYPE = DataType.UINT32


def _traced(x, op, feature_level) -> None:
    """An operand traced by dmlgpu.fuse (the front end's protocol, as in front_end.apply) is
    handed the call, which it refuses by name: a reduction or selection is not element-wise."""
    traced = getattr(x, "dmlgpu_traced_call", None)
    if traced is not None:
        traced(op, (x,), None, None, feature_level)


def _one_buffer(name: str, nbytes: int, buffers: int, device) -> None:
    """ValidationError for an input larger than one device buffer: these rows run one dispatch."""
    if buffers > 1 or nbytes > device.max_buffer_size:
        given = f"a Tensor of {nbytes} bytes in memory over {buffers} buffers" if buffers > 1 else f"{nbytes} bytes"
        raise ValidationError(name, "InputTensor", "x", given,
                              f"allowed: at most one buffer ({device.max_buffer_size} bytes on {device.name}): "
                              "reductions and top_k do not run over Tensors that span buffers")


def _operand(x, name: str) -> tuple[View, bool]:
    """(the operand as a view on its device, whether the caller gave numpy data)."""
    if isinstance(x, View):
        if isinstance(x.buffer, Pieces):
            _one_buffer(name, x.size * x.itemsize, len(x.buffer.buffers), x.device)
        if x.offset % MINIMUM_BUFFER_TENSOR_ALIGNMENT:
            x = copy(x)  # DirectML binds at 16-byte multiples: a packed copy starts at 0
        return x, False
    x = host_array(x, name, "InputTensor", "x")
    if not isinstance(x, (np.ndarray, np.generic)):
        raise ValidationError(name, "InputTensor", "x", type(x).__name__,
                              "allowed: a numpy array or a dmlgpu.Tensor")
    x = np.asarray(x)
    if DataType.from_numpy(x.dtype) is None:
        raise ValidationError(name, "InputTensor", "dtype", x.dtype,
                              "allowed: the numpy dtypes of DirectML's data types")
    device = default_device()
    _one_buffer(name, x.nbytes, 1, device)
    return View.from_fields(pieces.upload(device, x), x.shape, DataType.from_numpy(x.dtype)), True


def _axes(axis, ndim: int, name: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not -ndim <= a < ndim:
            raise ValidationError(name, None, "axis", axis, f"allowed: None, or integers in [{-ndim}, {ndim - 1}]")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValidationError(name, None, "axis", axis, "allowed: each axis at most once")
    return tuple(out)


def _desc(t: View) -> tuple[TensorDesc, Binding]:
    sizes, strides = (t.shape, t.strides) if t.shape else ((1,), (1,))
    desc = TensorDesc(t.data_type, sizes, strides)
    return desc, Binding(t.buffer, t.offset, t.buffer.size_in_bytes - t.offset)


def _result(like: View, shape, data_type: DataType) -> View:
    """A packed result on `like`'s device, of `like`'s class."""
    size = calc_buffer_tensor_size(data_type, shape)
    return type(like).from_fields(like.device.allocate(builtins.max(4, size), zero_fill=False), tuple(shape), data_type)


def _reshaped(t: View, shape) -> View:
    """A packed view (a result, a 0-d operand) with another shape of the same size."""
    return type(t).from_fields(t.buffer, tuple(shape), t.data_type, t.offset)


def _download(t: View) -> np.ndarray:
    """A packed view's elements, as a new numpy array."""
    return t.buffer.read(t.offset, t.size * t.itemsize).view(t.dtype).reshape(t.shape)


def reduce(x: Any, function: ReduceFunction, axis: Axis = None, keepdims: bool = False,
           feature_level: Level = None) -> Any:
    """DML_OPERATOR_REDUCE with `function` over `axis` (None: all), numpy's keepdims.

    Returns a numpy array for numpy input, a Tensor for a Tensor.

    Raises:
        ValidationError: a type or axis DirectML (or dmlgpu's exactness) rejects, before any work.
    """
    name = REDUCE.dml_name
    _traced(x, REDUCE, feature_level)
    t, host = _operand(x, name)
    axes = _axes(axis, builtins.max(1, t.ndim), name)
    if not t.shape:
        t = _reshaped(t, (1,))
    kept = tuple(1 if d in axes else s for d, s in enumerate(t.shape))
    out_type = INDEX_TYPE if function in REDUCE.index_functions else t.data_type
    out = _result(t, kept, out_type)
    (in_desc, in_binding), (out_desc, out_binding) = _desc(t), _desc(out)
    operator = t.device.create_operator(DESC_CLASSES[REDUCE.name](in_desc, out_desc, function, axes),
                                        feature_level)
    operator.execute([in_binding], [out_binding])
    shape = kept if keepdims else tuple(s for d, s in enumerate(kept) if d not in axes)
    if not host:
        return _reshaped(out, shape) if shape != kept else out
    return _download(out).reshape(shape)


class Reduction(Protocol):
    """The type of `dmlgpu.sum`, `min`, `max`, `prod`, `argmin` and `argmax`: numpy data in, a
    numpy array out; a Tensor in, a Tensor out."""

    @overload
    def __call__(self, x: _V, axis: Axis = None, keepdims: bool = False, feature_level: Level = None) -> _V: ...

    @overload
    def __call__(self, x: HostData, axis: Axis = None, keepdims: bool = False,
                 feature_level: Level = None) -> npt.NDArray[Any]: ...

    def __call__(self, x: Any, axis: Axis = None, keepdims: bool = False, feature_level: Level = None) -> Any: ...


def _named(function: ReduceFunction, numpy_name: str) -> Reduction:
    def reduction(x: Any, axis: Axis = None, keepdims: bool = False, feature_level: Level = None) -> Any:
        return reduce(x, function, axis, keepdims, feature_level)

    reduction.__name__ = reduction.__qualname__ = numpy_name
    reduction.__doc__ = (
        f"numpy.{numpy_name}'s call on the device: DML_OPERATOR_REDUCE with {function.dml_name}.\n\n"
        "Args:\n    x: a numpy array or a dmlgpu.Tensor.\n    axis: None (all), an int or a tuple of ints.\n"
        "    keepdims: keep the reduced axes with size 1.\n    feature_level: a FeatureLevel; None: the newest.\n\n"
        "Returns:\n    A numpy array for numpy input, a Tensor for a Tensor.\n\n"
        "Raises:\n    ValidationError: a data type or axis DirectML rejects (or a float sum), before any work.\n\n"
        "Divergences from numpy: module docstring of dmlgpu.front.reductions.")
    return reduction


sum = _named(ReduceFunction.SUM, "sum")  # noqa: A001 -- numpy's names, on purpose
"""numpy.sum's call on the device (DML_REDUCE_FUNCTION_SUM): integers wrap at the input's width."""
min = _named(ReduceFunction.MIN, "min")  # noqa: A001
"""numpy.min's call on the device (DML_REDUCE_FUNCTION_MIN): floats by their total order."""
max = _named(ReduceFunction.MAX, "max")  # noqa: A001
"""numpy.max's call on the device (DML_REDUCE_FUNCTION_MAX): floats by their total order."""
argmin = _named(ReduceFunction.ARGMIN, "argmin")
"""numpy.argmin's call on the device (DML_REDUCE_FUNCTION_ARGMIN): the first smallest, int64."""
argmax = _named(ReduceFunction.ARGMAX, "argmax")
"""numpy.argmax's call on the device (DML_REDUCE_FUNCTION_ARGMAX): the first largest, int64."""
prod = _named(ReduceFunction.MULTIPLY, "prod")
"""numpy.prod's call on the device (DML_REDUCE_FUNCTION_MULTIPLY): integers wrap at the input's width."""


@overload
def top_k(x: _V, k: int, axis: int = -1, largest: bool = True, feature_level: Level = None) -> tuple[_V, _V]: ...
@overload
def top_k(x: HostData, k: int, axis: int = -1, largest: bool = True,
          feature_level: Level = None) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]: ...
def top_k(x: Any, k: int, axis: int = -1, largest: bool = True, feature_level: Level = None) -> Any:
    """The `k` largest (or smallest) elements along `axis`, sorted, and their indices
    (DML_OPERATOR_TOP_K1; ties by ascending index whatever the direction).

    Args:
        x: a numpy array or a dmlgpu.Tensor (at least one dimension).
        k: how many: greater than 0 and less than the size along `axis` (DirectML's rule;
            numpy's full sort, k equal to the size, is `np.sort`'s job).
        axis: the axis to select along (negative counts from the end).
        largest: True for the largest first (DECREASING), False for the smallest (INCREASING).

    Returns:
        (values, indices): numpy arrays for numpy input, Tensors for a Tensor; indices are uint32.

    Raises:
        ValidationError: a bad k, axis or data type, before any work.
    """
    name = TOP_K.dml_name
    _traced(x, TOP_K, feature_level)
    t, host = _operand(x, name)
    if not t.shape:
        raise ValidationError(name, "InputTensor", "Sizes", (), "allowed: at least one dimension")
    (axis,) = _axes(axis, t.ndim, name)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 < k < t.shape[axis]:
        raise ValidationError(name, None, "K", k, f"allowed: an integer greater than 0 and less than "
                              f"{t.shape[axis]} (the size along axis: DirectML's rule for K)")
    shape = tuple(int(k) if d == axis else s for d, s in enumerate(t.shape))
    values, indices = _result(t, shape, t.data_type), _result(t, shape, TOP_K_INDEX_TYPE)
    direction = AxisDirection.DECREASING if largest else AxisDirection.INCREASING
    descs = [_desc(v) for v in (t, values, indices)]
    operator = t.device.create_operator(
        DESC_CLASSES[TOP_K.name](*(d for d, _ in descs), axis, int(k), direction), feature_level)
    operator.execute([descs[0][1]], [descs[1][1], descs[2][1]])
    if host:
        return _download(values), _download(indices)
    return values, indices


__all__ = ["Reduction", "argmax", "argmin", "max", "min", "prod", "reduce", "sum", "top_k"]
