"""`sum`, `min`, `max`, `argmin`, `argmax` and `top_k` over dask arrays: dask's reduction tree
(`dask.array.reduction`) with dmlgpu's reduce and top-k rows in every task.

Each block is reduced on its worker's device (`dmlgpu.sum(block, axis, keepdims=True)`, ...);
the partial results are joined (`concatenate`, on the device for Tensors) and reduced again,
`split_every` at a time, up to one result. Over a Tensor-backed array every step runs on the
device and the result is Tensor-backed; over a numpy-backed one each block goes through the
numpy front end (uploaded, reduced, the small result downloaded). The semantics are
`dmlgpu.sum`'s and its siblings' (DirectML's): sums keep the input's type and wrap; floats are
ordered by their encoding's total order; argmin/argmax give the first index of the extreme
value, int64, over the whole array.

The index steps run on the device too, with the table's operators only
(`dmlgpu.dask.device_indices`): a block's local indices become global ones by adding the
block's offset, and after a merge the indices of the values kept are picked by position.

Checks (data type, axes, k) run on the client before a graph is built, with the messages the
front end gives.
"""
from __future__ import annotations

import builtins
import functools

import dask.array as da
import numpy as np
from dask.array.dispatch import concatenate_lookup

from ..describe.operator_descs import DESC_CLASSES
from ..describe.tensor_desc import TensorDesc
from ..describe.validation import checked_axes, validate
from ..errors import ValidationError
from ..front import reductions as front
from ..front.tensor import Tensor
from ..table.dtypes import DataType
from ..table.operators import REDUCE, TOP_K, AxisDirection, ReduceFunction
from . import device_indices
from .chunks import concatenate, is_device_backed, meta

__all__ = ["argmax", "argmin", "max", "min", "sum", "top_k"]

#: int64, as `dmlgpu.argmin` (numpy's intp): a dask array's global indices may pass 2^32.
INDEX_DTYPE = np.dtype(np.int64)


def _meta_of(x: da.Array, dtype, ndim: int):
    return meta(dtype, ndim) if is_device_backed(x) else np.empty((0,) * ndim, dtype)


def _check_reduce(x, function: ReduceFunction, axes, feature_level) -> np.dtype:
    """The front end's checks of a reduce call, on one-element descriptors: returns the
    output dtype."""
    name = REDUCE.dml_name
    if not isinstance(x, da.Array):
        raise ValidationError(name, "InputTensor", "x", type(x).__name__, "allowed: a dask.array.Array")
    in_type = DataType.from_numpy(x.dtype)
    if in_type is None:
        raise ValidationError(name, "InputTensor", "dtype", x.dtype, "allowed: the numpy dtypes of DirectML's data types")
    out_type = DataType.INT64 if function in REDUCE.index_functions else in_type
    ndim = builtins.max(1, x.ndim)
    validate(DESC_CLASSES[REDUCE.name](TensorDesc(in_type, (1,) * ndim), TensorDesc(out_type, (1,) * ndim),
                                       function, axes or (0,)), feature_level)
    return out_type.numpy


# --- sum, min, max -------------------------------------------------------------------------------

def _reduce_block(name: str, feature_level, block, axis=None, keepdims=False, computing_meta=False):
    if computing_meta:  # dask asks for a meta: it is given, no device work
        return block
    return getattr(front, name)(block, axis=axis, keepdims=keepdims, feature_level=feature_level)


def _named(function: ReduceFunction, name: str):
    def reduction(x, axis=None, keepdims: bool = False, split_every=None, feature_level=None):
        axes = checked_axes(axis, x.ndim if isinstance(x, da.Array) else 0, REDUCE.dml_name)
        dtype = _check_reduce(x, function, axes, feature_level)
        step = functools.partial(_reduce_block, name, feature_level)
        out_ndim = x.ndim if keepdims else x.ndim - len(axes)
        return da.reduction(x, step, step, axis=axes, keepdims=keepdims, dtype=dtype, split_every=split_every,
                            name=f"dmlgpu-{name}", meta=_meta_of(x, dtype, out_ndim))

    reduction.__name__ = reduction.__qualname__ = name
    reduction.__module__ = "dmlgpu.dask"
    reduction.__doc__ = (
        f"`dmlgpu.{name}` over a dask array: DML_OPERATOR_REDUCE ({function.dml_name}) in each block and up "
        "dask's reduction tree.\n\n"
        "Args:\n    x: a dask array, numpy- or Tensor-backed.\n    axis: None (all), an int or a tuple of ints.\n"
        "    keepdims: keep the reduced axes with size 1.\n    split_every: partial results reduced per task "
        "(dask's default where None).\n    feature_level: a FeatureLevel; None: the newest.\n\n"
        "Returns:\n    A lazy dask array, Tensor-backed for a Tensor-backed `x`.\n\n"
        "Raises:\n    ValidationError: a data type or axis DirectML rejects (or a float sum), on the client.")
    return reduction


sum = _named(ReduceFunction.SUM, "sum")  # noqa: A001 -- numpy's names, on purpose
min = _named(ReduceFunction.MIN, "min")  # noqa: A001
max = _named(ReduceFunction.MAX, "max")  # noqa: A001


# --- argmin, argmax, top_k -------------------------------------------------------------------------
# A partial result is {"vals": values, "arg": their global int64 indices} along the axis (where it
# lies in the array); dask joins such dicts key by key (`_concatenate2`), as it does for CuPy's arg
# reductions, with the function `concatenate_lookup` gives for the dict's type: `Partial` is
# registered with the Tensors' `concatenate`. The partials are Tensors even for a numpy-backed
# array (its blocks are uploaded once).

class Partial(dict):
    """{"vals": Tensor, "arg": Tensor}: one step's values and their global indices."""


concatenate_lookup.register(Partial, concatenate)

def _on_device(block) -> Tensor:
    return block if isinstance(block, Tensor) else Tensor.from_numpy(np.ascontiguousarray(block))


def _offset(block_info, axis: int) -> int:
    """Where the block begins along `axis` in the whole array."""
    return int(block_info[0]["array-location"][axis][0])


def _identity(piece, axis=None, keepdims=True, computing_meta=False):
    return piece


def _last(t: Tensor, axis: int) -> Tensor:
    """The view of `t` with `axis` moved last."""
    return t if axis == t.ndim - 1 else t.transpose(*[d for d in range(t.ndim) if d != axis], axis)


def _back(t: Tensor, axis: int) -> Tensor:
    """The view of `t` (`axis` last) with its last axis moved back to `axis`."""
    if axis == t.ndim - 1:
        return t
    order = list(range(t.ndim - 1))
    order.insert(axis, t.ndim - 1)
    return t.transpose(*order)


def _arg_chunk(extreme: str, feature_level, axis: int, block, block_info=None):
    """A block's extreme values along `axis` and their global indices."""
    t = _on_device(block)
    values = getattr(front, extreme)(t, axis=axis, keepdims=True, feature_level=feature_level)
    local = getattr(front, "arg" + extreme)(t, axis=axis, keepdims=True, feature_level=feature_level)
    return Partial(vals=values, arg=device_indices.add_constant(local, _offset(block_info, axis)))


def _arg_combine(extreme: str, feature_level, data, axis, keepdims=True, computing_meta=False):
    """The extreme of joined partials and the lowest global index holding it."""
    (a,) = axis
    values, indices = data["vals"], data["arg"]
    best = getattr(front, extreme)(values, axis=a, keepdims=True, feature_level=feature_level)
    flagged = device_indices.flag_high(indices if indices.is_packed else indices.copy(),
                                       device_indices.differs(values, best))
    return Partial(vals=best, arg=front.min(flagged, axis=a, keepdims=True, feature_level=feature_level))


def _arg_aggregate(extreme: str, feature_level, host: bool, data, axis, keepdims=False, computing_meta=False):
    first = _arg_combine(extreme, feature_level, data, axis)["arg"]
    if not keepdims:
        first = first.reshape(tuple(s for d, s in enumerate(first.shape) if d not in axis))
    return first.numpy() if host else first


def _arg_reduction(x, extreme: str, function: ReduceFunction, axis, keepdims: bool, split_every, feature_level):
    name = REDUCE.dml_name
    if not isinstance(x, da.Array):
        raise ValidationError(name, "InputTensor", "x", type(x).__name__, "allowed: a dask.array.Array")
    if axis is None:
        if x.ndim != 1:  # the flat index: dask's reshape keeps whole rows per block
            flat = _arg_reduction(x.reshape(-1), extreme, function, 0, False, split_every, feature_level)
            return flat.reshape((1,) * x.ndim) if keepdims else flat
        axis = 0
    if isinstance(axis, (bool, tuple)) or not isinstance(axis, (int, np.integer)) or not -x.ndim <= axis < x.ndim:
        raise ValidationError(name, None, "axis", axis,
                              f"allowed: None or one integer in [{-x.ndim}, {x.ndim - 1}] over a dask array")
    axis = int(axis) % x.ndim
    _check_reduce(x, function, (axis,), feature_level)
    if any(np.isnan(c) for c in x.chunks[axis]):
        raise ValidationError(name, None, "axis", axis, "allowed: an axis of known chunk sizes (x.compute_chunk_sizes())")
    chunks = tuple((1,) * len(c) if d == axis else c for d, c in enumerate(x.chunks))
    pieces = x.map_blocks(functools.partial(_arg_chunk, extreme, feature_level, axis), chunks=chunks,
                          dtype=x.dtype, meta=np.empty((0,) * x.ndim, x.dtype), token=f"dmlgpu-arg{extreme}-chunk")
    return da.reduction(
        pieces, _identity, functools.partial(_arg_aggregate, extreme, feature_level, not is_device_backed(x)),
        combine=functools.partial(_arg_combine, extreme, feature_level), axis=(axis,), keepdims=keepdims,
        dtype=INDEX_DTYPE, split_every=split_every, concatenate=True, name=f"dmlgpu-arg{extreme}",
        meta=_meta_of(x, INDEX_DTYPE, x.ndim if keepdims else x.ndim - 1))


def argmin(x, axis=None, keepdims: bool = False, split_every=None, feature_level=None):
    """`dmlgpu.argmin` over a dask array: the first index of the least value (the encoding's
    total order for floats), int64, global over the array.

    Args:
        x: a dask array, numpy- or Tensor-backed.
        axis: None (the flat index over the whole array: dask's reshape first, which keeps whole
            rows per block) or one int.
        keepdims: keep the reduced axis with size 1.
        split_every: partial results combined per task (dask's default where None).
        feature_level: a FeatureLevel; None: the newest.

    Returns:
        A lazy int64 dask array, Tensor-backed for a Tensor-backed `x`.

    Raises:
        ValidationError: a data type or axis DirectML rejects, on the client.
    """
    return _arg_reduction(x, "min", ReduceFunction.ARGMIN, axis, keepdims, split_every, feature_level)


def argmax(x, axis=None, keepdims: bool = False, split_every=None, feature_level=None):
    """`dmlgpu.argmax` over a dask array: as `argmin`, for the greatest value."""
    return _arg_reduction(x, "max", ReduceFunction.ARGMAX, axis, keepdims, split_every, feature_level)


def _top_k_chunk(k: int, largest: bool, feature_level, axis: int, block, block_info=None):
    """A block's k best along `axis` (all of them, unsorted, where it has no more than k) and
    their global indices."""
    t = _on_device(block)
    n = t.shape[axis]
    if n > k:
        values, local = front.top_k(t, k, axis=axis, largest=largest, feature_level=feature_level)
        local = device_indices.widen(local)
    else:
        values = t
        local = Tensor.empty(_last(t, axis).shape, np.uint32, t.device)
        local[...] = device_indices.positions(t.device, n)
        local = _back(device_indices.widen(local), axis)
    return Partial(vals=values, arg=device_indices.add_constant(local, _offset(block_info, axis)))


def _top_k_merge(k: int, largest: bool, feature_level, data, axis, keepdims=True, computing_meta=False):
    """The k best of joined partials along `axis` and their indices; kept whole where they hold
    no more than k (then they are all there is: a last merge has more than k, as k is below
    the axis' size)."""
    (a,) = axis
    values, indices = data["vals"], data["arg"]
    if values.shape[a] <= k:
        return Partial(vals=values, arg=indices)
    best, where = front.top_k(values, k, axis=a, largest=largest, feature_level=feature_level)
    picked = device_indices.select_last(_last(indices, a).copy(), _last(where, a))
    return Partial(vals=best, arg=_back(picked, a))


def _top_k_aggregate(k: int, largest: bool, feature_level, host: bool, data, axis, keepdims=True,
                     computing_meta=False):
    merged = _top_k_merge(k, largest, feature_level, data, axis)
    return {part: t.numpy() if host else t for part, t in merged.items()}


def top_k(x, k: int, axis: int = -1, largest: bool = True, split_every=None, feature_level=None):
    """`dmlgpu.top_k` along a whole axis of a dask array: each block's k best (DML_OPERATOR_TOP_K1),
    then merges of the partial lists up dask's reduction tree.

    Args:
        x: a dask array (numpy- or Tensor-backed), at least one dimension.
        k: greater than 0 and less than the size along `axis` (DirectML's rule).
        axis: the axis to select along.
        largest: True for the largest first, False for the smallest.
        split_every: partial lists merged per task (dask's default where None).
        feature_level: a FeatureLevel; None: the newest.

    Returns:
        (values, indices): lazy dask arrays with k along `axis`, sorted, ties by ascending index;
        indices are int64 and global over the axis. Tensor-backed for a Tensor-backed `x`.

    Raises:
        ValidationError: a bad k, axis or data type, on the client.
    """
    name = TOP_K.dml_name
    if not isinstance(x, da.Array):
        raise ValidationError(name, "InputTensor", "x", type(x).__name__, "allowed: a dask.array.Array")
    if not x.ndim:
        raise ValidationError(name, "InputTensor", "Sizes", (), "allowed: at least one dimension")
    (axis,) = checked_axes(axis, x.ndim, name)
    size = x.shape[axis]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or np.isnan(size) or not 0 < k < size:
        raise ValidationError(name, None, "K", k, f"allowed: an integer greater than 0 and less than "
                              f"{size} (the size along axis: DirectML's rule for K)")
    k = int(k)
    in_type = DataType.from_numpy(x.dtype)
    if in_type is None:
        raise ValidationError(name, "InputTensor", "dtype", x.dtype, "allowed: the numpy dtypes of DirectML's data types")
    probe = tuple(k + 1 if d == axis else 1 for d in range(x.ndim))
    kept = tuple(k if d == axis else 1 for d in range(x.ndim))
    direction = AxisDirection.DECREASING if largest else AxisDirection.INCREASING
    validate(DESC_CLASSES[TOP_K.name](TensorDesc(in_type, probe), TensorDesc(in_type, kept),
                                      TensorDesc(DataType.UINT32, kept), axis, k, direction), feature_level)
    chunks = tuple(tuple(builtins.min(n, k) for n in c) if d == axis else c for d, c in enumerate(x.chunks))
    pieces = x.map_blocks(functools.partial(_top_k_chunk, k, largest, feature_level, axis), chunks=chunks,
                          dtype=x.dtype, meta=np.empty((0,) * x.ndim, x.dtype), token="dmlgpu-top-k-chunk")
    merged = da.reduction(
        pieces, _identity, functools.partial(_top_k_aggregate, k, largest, feature_level, not is_device_backed(x)),
        combine=functools.partial(_top_k_merge, k, largest, feature_level), axis=(axis,), keepdims=True,
        dtype=x.dtype, split_every=split_every, concatenate=True, output_size=k, name="dmlgpu-top-k",
        meta=np.empty((0,) * x.ndim, x.dtype))
    return tuple(merged.map_blocks(_part, part, dtype=dtype, meta=_meta_of(x, dtype, x.ndim))
                 for part, dtype in (("vals", x.dtype), ("arg", INDEX_DTYPE)))


def _part(merged: dict, part: str):
    return merged[part]
