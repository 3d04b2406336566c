"""What the demo and the benchmarks time dmlgpu against, read from each row's `peer`.

A row's peer is numpy's (CuPy's, PyTorch's) fastest function with DirectML's result on the input
types it names (`Operator.peer.exact_on`): np.bitwise_count on unsigned integers (on signed ones it
counts |x|, DirectML the raw bits), np.sign on integers (on floats NaN differs), np.isnan on floats.
Every comparison times an operator on one of those types, on data where both give the same
result (shift amounts below the element width: numpy and PyTorch give 0 past it, DirectML masks
the amount), and checks that they do before timing.
"""
from __future__ import annotations

import numpy as np

from dmlgpu import testing
from dmlgpu.table.dtypes import DataType
from dmlgpu.table.operators import Operator
from dmlgpu.table.reference import shift_amount


def timed_type(op: Operator, bits: int | None = None) -> DataType | None:
    """The input type `op` is timed on: the first its peer is exact on that the row takes (of
    `bits` width; without, a 32-bit one where there is one); None when there is none."""
    taken = [t for t in op.peer.exact_on if t in op.newest.input_types]
    if bits is not None:
        taken = [t for t in taken if t.bits == bits]
    else:
        taken = [t for t in taken if t.bits == 32] or taken
    return taken[0] if taken else None


def out_type(op: Operator, in_type: DataType) -> DataType:
    return op.default_output or in_type


def timed_inputs(op: Operator, data_type: DataType, count: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Inputs for a timed comparison: every edge value and random bits (`testing.sample`), shift
    amounts taken below the element width, where numpy's shift is DirectML's."""
    arrays = [testing.sample(data_type, (count,), rng) for _ in op.inputs]
    if op.masks_shift_amount:
        arrays[-1] = shift_amount(arrays[-1])
    return arrays


def peer_function(op: Operator, module):
    """The row's peer in `module` (numpy, CuPy or PyTorch), called as fn(*inputs, out=y); None
    when the module has no such function (numpy before 2.0 has no bitwise_count)."""
    name = op.peer.numpy
    if module.__name__ == "torch":
        name = op.peer.torch or name
    return getattr(module, name, None)


def numpy_result(op: Operator, arrays, data_type: DataType) -> np.ndarray | None:
    """The numpy peer's result on `arrays`, written into an array of the operator's output type."""
    function = peer_function(op, np)
    if function is None:
        return None
    result = np.empty(np.broadcast_shapes(*(a.shape for a in arrays)), out_type(op, data_type).numpy)
    function(*arrays, out=result)
    return result


def torch_dtype(torch, data_type: DataType):
    """PyTorch's type for a measured type: integers as the signed type of the same width (PyTorch
    has more operators on them than on its unsigned 16/32/64-bit types; the bits are the same, and
    a peer whose result then differs is found by the check before timing)."""
    if data_type.is_float:
        return {16: torch.float16, 32: torch.float32, 64: torch.float64}[data_type.bits]
    return {8: torch.uint8, 16: torch.int16, 32: torch.int32, 64: torch.int64}[data_type.bits]
