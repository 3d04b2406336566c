"""The table's element-wise operators over dask arrays, block by block on each worker's device.

Every operator of the table (`dmlgpu.table.operators.OPERATORS`) has a function here with the
numpy front end's name and keywords (`bit_xor(a, b)`, `bit_count(x, dtype=np.uint32)`, ...).
Each block runs through the numpy front end on the device of the worker that holds it: a
numpy-backed array's blocks are uploaded, computed and downloaded per call; a Tensor-backed
array's (`dmlgpu.dask.to_device`) stay on the device and the result is Tensor-backed. Arrays
broadcast as `dask.array` broadcasts them. Operands follow the front end's rules, by the same
code (`dmlgpu.layout.operands.convert`: any byte order, Python scalars by NEP 50). Data types,
shapes and the feature level are checked on the client before the graph is built, with the
front end's `ValidationError` messages; errors raised on a worker reach the client with their
type and message.
"""
from __future__ import annotations

import functools
import inspect

import dask.array as da
import numpy as np
from dask.base import tokenize

from ..describe.operator_descs import DESC_CLASSES
from ..describe.tensor_desc import TensorDesc
from ..describe.validation import resolve_feature_level, support_row, validate
from ..errors import ValidationError
from ..front import numpy_api
from ..front.call_plan import output_type
from ..front.tensor import Tensor
from ..layout.operands import convert, data_type
from ..table.operators import OPERATORS, Operator
from .chunks import is_device_backed, meta, to_device, to_host

__all__ = ["FUNCTIONS", "map_blocks_resident", "random_bits"]

#: What the operators take as operands, as their messages name them.
_TAKES = "dask.array.Array, numpy.ndarray, a numpy scalar or a Python scalar"
_ANCHORS = "numpy.ndarray or dask.array.Array"


def _run_block(short: str, options: dict, *blocks):
    """One block on this process's device, through the numpy front end: a Tensor where an
    operand is one, else numpy."""
    result = getattr(numpy_api, short)(*blocks, **options)
    return result if isinstance(result, Tensor) else np.asarray(result)


def blockwise(func, arrays, dtype, token: str) -> da.Array:
    """`func` over the blocks of `arrays` broadcast together (numpy scalars passed as they are);
    Tensor-backed where any operand is."""
    ndim = max((np.ndim(a) for a in arrays if not isinstance(a, np.generic)), default=0)
    args = []
    for a in arrays:
        if isinstance(a, np.generic):
            args += [a, None]
        else:
            a = a if isinstance(a, da.Array) else da.asarray(a)
            args += [a, tuple(range(ndim - a.ndim, ndim))]
    on_device = any(is_device_backed(a) for a in arrays)
    return da.blockwise(func, tuple(range(ndim)), *args, token=token, dtype=dtype,
                        meta=meta(dtype, ndim) if on_device else np.empty((0,) * ndim, dtype))


def _check(op: Operator, arrays, options: dict) -> tuple[list, np.dtype]:
    """What can be checked without a device, before any graph exists; returns the operands
    (Python scalars as numpy scalars of the other operand's type) and the output dtype.

    The operands follow the front end's rules (`dmlgpu.layout.operands.convert`: any byte order,
    Python scalars by NEP 50); the data types and the feature level go through
    `dmlgpu.validate` on one-element descriptors, so the messages are those a worker's front
    end would give.
    """
    level = resolve_feature_level(options.get("feature_level"), op.dml_name)
    row = support_row(op, level)
    arrays = convert(arrays, op.dml_name, op.inputs, row.input_types, (da.Array,), _TAKES, _ANCHORS)
    arrays = [x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x for x in arrays]
    types = [data_type(x.dtype, op.dml_name, name, row.input_types) for name, x in zip(op.inputs, arrays)]
    out_type = output_type(op, row, None, options.get("dtype"), types)
    shapes = [tuple(np.shape(x)) for x in arrays]
    if all(isinstance(n, int) for shape in shapes for n in shape):  # unknown chunks: nan sizes
        try:
            np.broadcast_shapes(*shapes)
        except ValueError:
            raise ValidationError(op.dml_name, op.inputs[1], "shape", shapes[1],
                                  f"must broadcast with {op.inputs[0]}'s shape {shapes[0]}") from None
    probe = (1,) * row.dims[0]
    validate(DESC_CLASSES[op.name](*(TensorDesc(t, probe) for t in types + [out_type])), level)
    return arrays, out_type.numpy


def _make_operator(op: Operator):
    front = getattr(numpy_api, op.short)
    defaults = {name: p.default for name, p in inspect.signature(front).parameters.items()
                if p.kind is p.KEYWORD_ONLY}
    names = ", ".join(op.inputs)

    def operator(*arrays, **options):
        if len(arrays) != len(op.inputs):
            raise TypeError(f"{op.short}() takes {len(op.inputs)} arrays ({names}), got {len(arrays)}")
        unknown = sorted(set(options) - set(defaults))
        if unknown:
            raise TypeError(f"{op.short}() got unexpected keyword arguments {unknown}; "
                            f"allowed: {sorted(defaults)}")
        arrays, dtype = _check(op, arrays, {**defaults, **options})
        return blockwise(functools.partial(_run_block, op.short, options), arrays, dtype, op.short)

    operator.__name__ = operator.__qualname__ = op.short
    operator.__module__ = "dmlgpu.dask"
    keywords = ", ".join(f"{k}={v.__name__ if isinstance(v, type) else v!r}" for k, v in defaults.items())
    summary = (inspect.getdoc(front) or "").split("\n")[0]
    operator.__doc__ = (
        f"{summary}\n\n`dmlgpu.{op.short}` over dask arrays, each block on its worker's device "
        f"({op.dml_name}).\n\n"
        f"Args:\n    {names}: dask arrays (numpy- or Tensor-backed), numpy arrays, numpy or Python "
        f"scalars (NEP 50); shapes broadcast.\n"
        f"    {keywords}: as `dmlgpu.{op.short}`.\n\n"
        f"Returns:\n    A lazy dask array: Tensor-backed where an operand is (its blocks stay on the "
        f"device), else numpy-backed.\n\n"
        f"Raises:\n    ValidationError: at the call for data types, shapes and levels the front end "
        f"rejects; at compute time for what only a block shows.")
    return operator


#: Short operator name -> its function over dask arrays, for every row of the table.
FUNCTIONS = {op.short: _make_operator(op) for op in OPERATORS}


# --- Several operations per block, on the device ------------------------------------------------

def _run_resident(fn, dtype: np.dtype, options: dict, *blocks):
    blocks = [b if isinstance(b, Tensor) else Tensor.from_numpy(b) for b in blocks]
    result = fn(*blocks, **options)
    shape = np.broadcast_shapes(*(np.shape(b) for b in blocks))
    got = (tuple(result.shape), np.dtype(result.dtype)) if isinstance(result, Tensor) else None
    if got != (shape, dtype):
        made = f"{got[0]} {got[1]}" if got else type(result).__name__
        raise ValueError(f"map_blocks_resident: {getattr(fn, '__name__', fn)} returned {made} for "
                         f"blocks broadcasting to {shape}; expected a Tensor of {shape} {dtype}")
    return result


def map_blocks_resident(fn, *arrays, dtype, **options):
    """`fn` over the blocks of `arrays` as Tensors, one upload and one download per block: a
    thin case of the Tensor-backed way, `to_host(fn over to_device(arrays))`.

    Prefer keeping the arrays on the device (`to_device`) and chaining operations on them
    (`dd.bit_count(~a ^ b)`): the blocks stay there between calls. This function uploads the
    numpy-backed operands, runs `fn(*tensors, **options)` (Tensor operations chained on the
    device, e.g. `lambda t, u: dmlgpu.bit_count(~t ^ u)`) and downloads the result.

    Args:
        fn: function of Tensors to a Tensor of the blocks' broadcast shape (picklable; lambdas
            are fine with distributed).
        arrays: dask arrays, numpy arrays or numpy scalars (broadcast together).
        dtype: the result's dtype (required: it cannot be known without running `fn`).

    Returns:
        A lazy numpy-backed dask array.

    Raises:
        ValueError: at compute time, when `fn` returns another shape or dtype.
    """
    dtype = np.dtype(dtype)
    token = "resident-" + getattr(fn, "__name__", "fn").strip("<>")
    arrays = [a if isinstance(a, np.generic) else to_device(a) for a in arrays]
    return to_host(blockwise(functools.partial(_run_resident, fn, dtype, options), arrays, dtype, token))


def _random_block(dtype: np.dtype, seed: int, block_info=None):
    shape, index = block_info[None]["chunk-shape"], block_info[None]["chunk-location"]
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    # The generator's raw 64-bit words (~4 GB/s on one core; Generator.bytes made ~0.2-0.6 GB/s,
    # which took minutes for the 32 GiB of benchmarks/dask_scaling.py).
    words = np.random.default_rng((seed, *index)).bit_generator.random_raw(-(-nbytes // 8))
    block = words.view(np.uint8)[:nbytes].view(dtype).reshape(shape)
    block.flags.writeable = False
    return block


def random_bits(shape, dtype, chunks="auto", seed: int = 0):
    """Random raw bits of `dtype` (every encoding, NaNs and denormals included), made on the
    workers block by block, so that no data crosses from the client. Blocks are read-only;
    `to_device(random_bits(...))` uploads each where it is made."""
    dtype = np.dtype(dtype)
    chunks = da.core.normalize_chunks(chunks, tuple(shape), dtype=dtype)
    return da.map_blocks(functools.partial(_random_block, dtype, seed), chunks=chunks, dtype=dtype,
                         meta=np.empty((0,) * len(chunks), dtype),
                         name=f"random-bits-{dtype.name}-{seed}-{tokenize(chunks)}")
