"""One call of the numpy front end: answered from the memos when it repeats, else planned and run.

`apply(op, operands, out, dtype, feature_level)` is what every front-end function
(`dmlgpu.front.functions`) calls. A call with a Tensor operand or `out` goes down to `dmlgpu.front.resident`, the
layer Tensor's own operators use. A call on numpy data is planned once (`dmlgpu.front.call_plan.plan`:
operands, output, pieces, all validated before any work) and the plan is carried down to the run
over numpy data in pieces (`dmlgpu.layout.host_chunks`). A call of a kind seen before (same operator,
level and dtype as given, same operand dtypes and shapes) skips planning: `dmlgpu.layout.memo` keeps
what planning decided.
"""
from __future__ import annotations

import numpy as np

from ..layout import host_chunks as host_pieces, memo
from . import resident as ops
from .call_plan import HostPlan, plan
from ..api.device import default_device
from ..layout.operands import convert
from ..table.operators import Operator
from ..describe.validation import resolve_feature_level, support_row
from ..layout.views import View

__all__ = ["apply"]

#: What the front end takes as operands, as its messages name them.
_TAKES = "numpy.ndarray, dmlgpu.Tensor or a Python scalar"
_ANCHORS = "numpy.ndarray or dmlgpu.Tensor"


def apply(op: Operator, operands: tuple, out, dtype, feature_level):
    """One call of `op`: `operands` are numpy data, Tensors or Python scalars; `dtype` is the
    output dtype as given (None: `out`'s, else the row's default; same-type operators take
    none). Returns a new array, a numpy scalar for 0-d numpy operands, a Tensor, or `out`."""
    if isinstance(out, View) or any(isinstance(x, View) for x in operands):
        return ops.apply(op, operands, out, ops.output_dtype(op, out, dtype), feature_level)
    call = (op.name, feature_level, dtype)  # the arguments as given: part of the memo key
    try:  # hot path: numpy arrays of an earlier call's dtypes and shapes
        key = _host_key(call, operands, out)
        kind = memo.HOST_PLANS.get(key) if key is not None else None
    except TypeError:  # an unhashable argument: the full path explains
        kind = None
    if kind is not None and not kind.device.closed:
        flat_in = [x.reshape(-1).view(np.uint8) for x in operands]
        result = host_pieces.run_host_call(kind.device, key, kind.pieces, flat_in, operands, out,
                                           kind.shape, kind.dtype)
        if result is None and out is None:
            result = host_pieces.new_result(kind.pieces, flat_in, operands, kind.shape, kind.dtype)
        elif result is None:
            host_pieces.run(kind.pieces, flat_in, operands, out, None)
            result = out
        return result if out is not None or result.ndim else result[()]
    for x in operands:  # an operand traced by dmlgpu.fuse: the call becomes a node of its graph
        traced = getattr(x, "dmlgpu_traced_call", None)
        if traced is not None:
            return traced(op, operands, out, dtype, feature_level)
    level = resolve_feature_level(feature_level, op.dml_name)
    row = support_row(op, level)
    arrays = convert(operands, op.dml_name, op.inputs, row.input_types, (View,), _TAKES, _ANCHORS)
    planned = plan(op, level, row, arrays, out, dtype)
    key = _host_key(call, operands, out)
    if key is not None and planned.in_place is None:  # the call can repeat as is
        memo.HOST_PLANS[key] = planned.kind
    return _run_host(planned, out)


def _run_host(planned: HostPlan, out):
    kind = planned.kind
    if out is None:
        result = host_pieces.new_result(kind.pieces, planned.flat_in, planned.arrays, kind.shape, kind.dtype)
        return result[()] if result.ndim == 0 else result
    result = out if planned.direct else np.empty(kind.shape, dtype=kind.dtype)
    host_pieces.run(kind.pieces, planned.flat_in, planned.arrays, result, planned.in_place)
    if not planned.direct:
        np.copyto(out, result, casting="equiv")
    return out


def _host_key(call, arrays, out):
    """The memo key of a call that can repeat without planning, or None: its operands are
    C-contiguous native numpy arrays, and `out` is None or one too, writeable and sharing no
    memory with any operand (neither in place nor a partial overlap, which planning decides).

    Such a call is decided by its arrays' dtypes and shapes (and which operands are the same
    array) on the current default device: the same validated operator and pieces serve every
    call with that key."""
    parts = []
    for x, first in zip(arrays, host_pieces.firsts(arrays)):
        if type(x) is not np.ndarray or not x.flags.c_contiguous or not x.dtype.isnative:
            return None
        parts.append((x.dtype, x.shape, first))
    if out is not None:
        if type(out) is not np.ndarray or not out.flags.c_contiguous or not out.dtype.isnative \
                or not out.flags.writeable or any(np.may_share_memory(out, x) for x in arrays):
            return None
        parts.append((out.dtype, out.shape))
    device = default_device()  # its buffer limit decides the pieces
    return (*call, device, device.max_buffer_size, *parts)
