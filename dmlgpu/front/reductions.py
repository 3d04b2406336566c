"""numpy-style front end of the reduce and top-k rows (DML_OPERATOR_REDUCE, DML_OPERATOR_TOP_K1),
on numpy arrays and Tensors: one function per DML_REDUCE_FUNCTION member that numpy or SciPy names
(`table.operators.REDUCE_NAMES`): `sum`, `prod`, `min`, `max`, `argmin`, `argmax`, `mean`
(numpy's) and `logsumexp` (`scipy.special.logsumexp`); `norm` (`numpy.linalg.norm`'s vector
norms, ord 1 and 2: L1 and L2); `reduce` for any member (LOG_SUM and SUM_SQUARE have no other
name); `top_k`.

A numpy array in gives a numpy array out (uploaded, computed, downloaded once); a Tensor in gives
a Tensor out on its device, also a Tensor that spans several buffers (reduced piece by piece,
then combined: dmlgpu/api/selection_spans.py). The functions work on device views
(`layout.views.View`) and make their results as the class of their operand, as `front.resident`
does: this module sits below `front.tensor`, whose methods (`t.sum()`, `t.argmax()`, ...) call
it. A reduction is planned once per layout of its operand (`View.layout`, in
`layout.memo.TENSOR_PLANS`: a Tensor not seen before costs what one seen before costs): the
descriptor built and validated (one compiled operator per shape, kept by the device), so a call
DirectML would reject raises `ValidationError` before any work; a new result takes the block of
a dropped one where it can, so the operator's remembered dispatches serve it again. Divergences
from numpy, from DirectML's rules:
- results keep the input's type: integer `sum`/`prod` wrap (numpy widens int32 to int64);
  DirectML sums only 32- and 64-bit integers; `mean`, `logsumexp` and `norm(ord=2)` take floats
  only (numpy gives float64 for integers);
- float sums, means, norms, products and `logsumexp` are accumulated in a fixed order with
  compensation and rounded once (docs/guide/reductions.md): the same bits on every run, at
  least as accurate as numpy's (FLOAT16 accumulates in float32, as numpy's float16 `sum` does
  not); a NaN result is the quiet NaN;
- `min`/`max`/`argmin`/`argmax`/`top_k` order floats by their encoding's total order
  (-NaN < -inf < -0.0 < +0.0 < +inf < +NaN) where numpy propagates NaN;
- `argmin`/`argmax` take a tuple of axes too (the index is row-major over them), and give int64;
- `norm` is a vector norm over `axis` (None: every element), also for a 2-D array, where numpy's
  `ord=1` with no axis is a matrix norm.
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Protocol, TypeVar, Union, overload

import numpy as np
import numpy.typing as npt

from ..describe.operator_descs import DESC_CLASSES
from ..api.device import default_device
from ..table.dtypes import DataType
from ..errors import ValidationError
from ..layout.operands import host_array
from ..table.operators import NORM_ORDERS, REDUCE, REDUCE_NAMES, TOP_K, AxisDirection, ReduceFunction
from ..layout import memo, pieces
from ..layout.views import View
from ..table.feature_levels import FeatureLevel
from ..describe.tensor_desc import MINIMUM_BUFFER_TENSOR_ALIGNMENT, TensorDesc
from ..describe.bindings import Binding
from ..describe.validation import checked_axes
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


def _operand(x, name: str) -> tuple[View, bool]:
    """(the operand as a view on its device, whether the caller gave numpy data)."""
    if isinstance(x, View):
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
    return View.from_fields(pieces.upload(default_device(), x), x.shape, DataType.from_numpy(x.dtype)), True


def _result(like: View, shape, data_type: DataType) -> View:
    """A packed result on `like`'s device, of `like`'s class: one Buffer, or Pieces where one
    cannot hold it."""
    memory = pieces.allocate(like.device, shape, data_type.size, zero_fill=False, device_writes_first=True)
    return type(like).from_fields(memory, tuple(shape), data_type)


def _reshaped(t: View, shape) -> View:
    """A packed view (a result, a 0-d operand) with another shape of the same size."""
    return type(t).from_fields(t.buffer, tuple(shape), t.data_type, t.offset)


def _download(t: View) -> np.ndarray:
    """A packed view's elements, as a new numpy array."""
    return t.buffer.read(t.offset, t.size * t.itemsize).view(t.dtype).reshape(t.shape)


@overload
def reduce(x: _V, function: ReduceFunction, axis: Axis = None, keepdims: bool = False,
           feature_level: Level = None) -> _V: ...
@overload
def reduce(x: HostData, function: ReduceFunction, axis: Axis = None, keepdims: bool = False,
           feature_level: Level = None) -> npt.NDArray[Any]: ...
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
    try:  # planned once per layout of the operand (`View.layout`: never by which view it is)
        key = (REDUCE.name, t.layout, function, repr(axis), bool(keepdims), repr(feature_level))
        plan = memo.TENSOR_PLANS.get(key)
    except TypeError:  # (a layout that cannot be a key): planned every call
        key = plan = None
    if plan is None:
        plan = _planned(t, function, axis, keepdims, feature_level, name)
        if key is not None:
            memo.TENSOR_PLANS[key] = plan
    operator, kept, shape, out_type = plan
    if not t.shape:
        t = _reshaped(t, (1,))
    out = _result(t, kept, out_type)
    operator.execute([Binding(t.buffer, t.offset, t.buffer.size_in_bytes - t.offset)],
                     [Binding(out.buffer, 0, out.buffer.size_in_bytes)])
    if not host:
        return _reshaped(out, shape) if shape != kept else out
    return _download(out).reshape(shape)


def _planned(t: View, function: ReduceFunction, axis: Axis, keepdims: bool, feature_level: Level, name: str):
    """(the compiled operator, the output's shape with the reduced axes kept, the result's shape,
    its data type) of a reduction of views laid out as `t`: validated here, once per layout."""
    axes = checked_axes(axis, builtins.max(1, t.ndim), name)
    if not t.shape:
        t = _reshaped(t, (1,))
    kept = tuple(1 if d in axes else s for d, s in enumerate(t.shape))
    out_type = INDEX_TYPE if function in REDUCE.index_functions else t.data_type
    sizes, strides = (t.shape, t.strides) if t.shape else ((1,), (1,))
    out_desc = TensorDesc(out_type, kept, tuple(math.prod(kept[d + 1:]) for d in range(len(kept))))
    operator = t.device.create_operator(DESC_CLASSES[REDUCE.name](TensorDesc(t.data_type, sizes, strides), out_desc,
                                                                  function, axes), feature_level)
    shape = kept if keepdims else tuple(s for d, s in enumerate(kept) if d not in axes)
    return operator, kept, shape, out_type


class Reduction(Protocol):
    """The type of `dmlgpu.sum`, `prod`, `min`, `max`, `argmin`, `argmax`, `mean` and `logsumexp`: numpy data in, a
    numpy array out; a Tensor in, a Tensor out."""

    @overload
    def __call__(self, x: _V, axis: Axis = None, keepdims: bool = False, feature_level: Level = None) -> _V: ...

    @overload
    def __call__(self, x: HostData, axis: Axis = None, keepdims: bool = False,
                 feature_level: Level = None) -> npt.NDArray[Any]: ...

    def __call__(self, x: Any, axis: Axis = None, keepdims: bool = False, feature_level: Level = None) -> Any: ...


def _named(function: ReduceFunction, name: str) -> Reduction:
    def reduction(x: Any, axis: Axis = None, keepdims: bool = False, feature_level: Level = None) -> Any:
        return reduce(x, function, axis, keepdims, feature_level)

    peer = "scipy.special" if function is ReduceFunction.LOG_SUM_EXP else "numpy"
    reduction.__name__ = reduction.__qualname__ = name
    reduction.__doc__ = (
        f"{peer}.{name}'s call on the device: DML_OPERATOR_REDUCE with {function.dml_name}.\n\n"
        "Args:\n    x: a numpy array or a dmlgpu.Tensor.\n    axis: None (all), an int or a tuple of ints.\n"
        "    keepdims: keep the reduced axes with size 1.\n    feature_level: a FeatureLevel; None: the newest.\n\n"
        "Returns:\n    A numpy array for numpy input, a Tensor for a Tensor.\n\n"
        "Raises:\n    ValidationError: a data type or axis DirectML rejects, before any work.\n\n"
        "Divergences from numpy: module docstring of dmlgpu.front.reductions.")
    return reduction


# One function per name of the table's REDUCE_NAMES, written out for type checkers (NAMED below
# fails at import if the table names one that is not here).
sum = _named(ReduceFunction.SUM, "sum")  # noqa: A001 -- numpy's names, on purpose
"""numpy.sum's call on the device (DML_REDUCE_FUNCTION_SUM): integers wrap at the input's width;
floats in a fixed compensated order."""
prod = _named(ReduceFunction.MULTIPLY, "prod")
"""numpy.prod's call on the device (DML_REDUCE_FUNCTION_MULTIPLY): integers wrap at the input's width."""
min = _named(ReduceFunction.MIN, "min")  # noqa: A001
"""numpy.min's call on the device (DML_REDUCE_FUNCTION_MIN): floats by their total order."""
max = _named(ReduceFunction.MAX, "max")  # noqa: A001
"""numpy.max's call on the device (DML_REDUCE_FUNCTION_MAX): floats by their total order."""
argmin = _named(ReduceFunction.ARGMIN, "argmin")
"""numpy.argmin's call on the device (DML_REDUCE_FUNCTION_ARGMIN): the first smallest, int64."""
argmax = _named(ReduceFunction.ARGMAX, "argmax")
"""numpy.argmax's call on the device (DML_REDUCE_FUNCTION_ARGMAX): the first largest, int64."""
mean = _named(ReduceFunction.AVERAGE, "mean")
"""numpy.mean's call on the device (DML_REDUCE_FUNCTION_AVERAGE): floats only."""
logsumexp = _named(ReduceFunction.LOG_SUM_EXP, "logsumexp")
"""scipy.special.logsumexp's call on the device (DML_REDUCE_FUNCTION_LOG_SUM_EXP): max-shifted, floats only."""

#: The functions by the table's names (REDUCE_NAMES).
NAMED: dict[str, Reduction] = {name: globals()[name] for name in REDUCE_NAMES.values()}


@overload
def norm(x: _V, ord: int | None = None, axis: Axis = None, keepdims: bool = False,  # noqa: A002
         feature_level: Level = None) -> _V: ...
@overload
def norm(x: HostData, ord: int | None = None, axis: Axis = None, keepdims: bool = False,  # noqa: A002
         feature_level: Level = None) -> npt.NDArray[Any]: ...
def norm(x: Any, ord: int | None = None, axis: Axis = None, keepdims: bool = False,  # noqa: A002 -- numpy's name
         feature_level: Level = None) -> Any:
    """numpy.linalg.norm's vector norms on the device: DML_OPERATOR_REDUCE with
    DML_REDUCE_FUNCTION_L2 (`ord` None or 2: the square root of the sum of squares) or
    DML_REDUCE_FUNCTION_L1 (`ord` 1: the sum of absolute values).

    Args:
        x: a numpy array or a dmlgpu.Tensor.
        ord: None, 1 or 2.
        axis: None (every element, whatever the rank), an int or a tuple of ints.
        keepdims: keep the reduced axes with size 1.

    Returns:
        A numpy array for numpy input, a Tensor for a Tensor, of the input's type.

    Raises:
        ValidationError: another `ord`, or a data type or axis DirectML rejects, before any work.

    Divergences from numpy: module docstring of dmlgpu.front.reductions.
    """
    function = NORM_ORDERS.get(2 if ord is None else ord) if isinstance(ord, (int, type(None))) \
        and not isinstance(ord, bool) else None
    if function is None:
        raise ValidationError(REDUCE.dml_name, None, "ord", ord,
                              f"allowed: None, {', '.join(map(str, NORM_ORDERS))} (vector norms)")
    return reduce(x, function, axis, keepdims, feature_level)



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
    try:  # planned once per layout of the operand, as `reduce`
        key = (TOP_K.name, t.layout, repr(axis), repr(k), bool(largest), repr(feature_level))
        plan = memo.TENSOR_PLANS.get(key)
    except TypeError:
        key = plan = None
    if plan is None:
        plan = _planned_top_k(t, axis, k, largest, feature_level, name)
        if key is not None:
            memo.TENSOR_PLANS[key] = plan
    operator, shape = plan
    values, indices = _result(t, shape, t.data_type), _result(t, shape, TOP_K_INDEX_TYPE)
    operator.execute([Binding(t.buffer, t.offset, t.buffer.size_in_bytes - t.offset)],
                     [Binding(values.buffer, 0, values.buffer.size_in_bytes),
                      Binding(indices.buffer, 0, indices.buffer.size_in_bytes)])
    if host:
        return _download(values), _download(indices)
    return values, indices


def _planned_top_k(t: View, axis, k, largest: bool, feature_level: Level, name: str):
    """(the compiled operator, the results' shape) of a top_k of views laid out as `t`: validated
    here, once per layout."""
    if not t.shape:
        raise ValidationError(name, "InputTensor", "Sizes", (), "allowed: at least one dimension")
    if isinstance(axis, tuple) or isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise ValidationError(name, None, "axis", axis, "allowed: one integer axis (TOP_K1 selects along one)")
    (axis,) = checked_axes(axis, t.ndim, name)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 < k < t.shape[axis]:
        raise ValidationError(name, None, "K", k, f"allowed: an integer greater than 0 and less than "
                              f"{t.shape[axis]} (the size along axis: DirectML's rule for K)")
    shape = tuple(int(k) if d == axis else s for d, s in enumerate(t.shape))
    direction = AxisDirection.DECREASING if largest else AxisDirection.INCREASING
    packed = tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))
    descs = [TensorDesc(t.data_type, t.shape, t.strides), TensorDesc(t.data_type, shape, packed),
             TensorDesc(TOP_K_INDEX_TYPE, shape, packed)]
    operator = t.device.create_operator(DESC_CLASSES[TOP_K.name](*descs, axis, int(k), direction), feature_level)
    return operator, shape


__all__ = ["Reduction", "argmax", "argmin", "logsumexp", "max", "mean", "min", "norm", "prod", "reduce", "sum", "top_k"]
