"""Tensor-backed dask arrays (`dmlgpu.dask.to_device`), in this process with dask's synchronous
scheduler (no cluster, no thread): every operator and data type of the table through the dask
functions, Python's operators and numpy's ufuncs, broadcasting, slicing, rechunk, concatenate,
the reduction trees and top-k merges, each compared bit for bit with `dmlgpu.table.reference`;
the results stay Tensors, and a chain moves nothing between host and device (the device's
transfer counters). Clusters are tested in tests/test_dask.py (in child processes)."""
import operator

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is not installed (pip install .[dask])")
pytest.importorskip("distributed", reason="distributed is not installed (pip install .[dask])")

import dask  # noqa: E402

import dmlgpu  # noqa: E402
import dmlgpu.dask as dd  # noqa: E402
from dmlgpu import Tensor  # noqa: E402
from dmlgpu.table.operators import OPERATORS, REDUCE, TOP_K, AxisDirection, ReduceFunction  # noqa: E402
from dmlgpu.table import reference  # noqa: E402
from dmlgpu.table.reference import REFERENCES  # noqa: E402

SHAPE = (37, 50)
#: Uneven blocks; a split_every of 2 makes trees of several levels.
CHUNKS = ((10, 20, 7), (20, 3, 27))
SPLIT = 2
TRANSFER_KEYS = ("uploads", "upload_bytes", "downloads", "download_bytes")


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def bits_equal(got, expected) -> bool:
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return False
    width = f"u{got.dtype.itemsize}"
    return np.array_equal(got.view(width), expected.view(width))


def host(x) -> np.ndarray:
    """A dask array's value on the host: Tensor-backed ones must compute to a Tensor."""
    value = x.compute()
    if dd.is_device_backed(x):
        assert isinstance(value, Tensor), type(value)
        return value.numpy()
    return value


def raw(rng, shape, dtype) -> np.ndarray:
    """Random raw bits of `dtype`: every encoding (NaN, -0.0, denormals, iinfo edges) can occur."""
    dtype = np.dtype(dtype)
    return np.frombuffer(rng.bytes(int(np.prod(shape)) * dtype.itemsize), dtype).reshape(shape).copy()


def transfers() -> dict:
    stats = dmlgpu.default_device().memory_stats()
    return {k: stats[k] for k in TRANSFER_KEYS}


def delta(before: dict) -> dict:
    after = transfers()
    return {k: after[k] - before[k] for k in TRANSFER_KEYS}


def _operator_cases() -> list:
    """Every operator once and every data type once (the blocks' plumbing does not depend on the
    pair; tests/kernels runs every operator on every type): operator i takes the first of its
    types not yet taken, then each type still untaken joins the first operator that allows it."""
    cases, taken = [], set()
    for op in OPERATORS:
        types = list(op.newest.input_types)
        t = next((t for t in types if t.numpy.name not in taken), types[0])
        cases.append((op, t))
        taken.add(t.numpy.name)
    for op in OPERATORS:
        for t in op.newest.input_types:
            if t.numpy.name not in taken:
                cases.append((op, t))
                taken.add(t.numpy.name)
    return cases


OPERATOR_CASES = _operator_cases()


@pytest.mark.parametrize("op, dtype", OPERATOR_CASES, ids=[f"{op.short}-{t.numpy.name}" for op, t in OPERATOR_CASES])
def test_every_operator_and_type_on_device_blocks(op, dtype, rng):
    """dd.<op> over Tensor-backed operands (the second a broadcast row) is the reference's
    answer bit for bit, and stays Tensor-backed."""
    arrays = [raw(rng, SHAPE, dtype.numpy)] + [raw(rng, SHAPE[-1:], dtype.numpy) for _ in op.inputs[1:]]
    chunks = [CHUNKS] + [CHUNKS[-1:]] * (len(op.inputs) - 1)
    on_device = [dd.to_device(da.from_array(a, chunks=c)) for a, c in zip(arrays, chunks)]
    result = dd.FUNCTIONS[op.short](*on_device)
    assert dd.is_device_backed(result) and isinstance(result._meta, Tensor)
    expected = REFERENCES[op.short](*arrays)
    assert result.dtype == expected.dtype
    assert bits_equal(host(result), expected)


PYTHON_OPERATORS = [op for op in OPERATORS if op.python_operator]


@pytest.mark.parametrize("op", PYTHON_OPERATORS, ids=[op.short for op in PYTHON_OPERATORS])
def test_python_operators_and_numpy_ufuncs(op, rng):
    """`~x`, `x ^ y`, ... and np.invert, np.bitwise_xor, ... on Tensor-backed dask arrays run
    Tensor's own operators block by block (dask infers the dtype with numpy's rules: unsigned
    integers, where numpy and DirectML agree)."""
    arrays = [raw(rng, SHAPE, np.uint16), raw(rng, (SHAPE[0], 1), np.uint16)][:len(op.inputs)]
    chunks = [CHUNKS, (CHUNKS[0], 1)][:len(op.inputs)]
    x = [dd.to_device(da.from_array(a, chunks=c)) for a, c in zip(arrays, chunks)]
    expected = REFERENCES[op.short](*arrays)
    python = getattr(operator, op.python_operator + ("_" if op.python_operator in ("and", "or") else ""))
    for result in (python(*x), getattr(np, op.numpy_ufunc)(*x)):
        assert dd.is_device_backed(result)
        assert bits_equal(host(result), expected)


def test_scalars_broadcasting_and_mixed_operands(rng):
    a0 = raw(rng, SHAPE, np.uint32)
    a = dd.to_device(da.from_array(a0, chunks=CHUNKS))
    column = raw(rng, (SHAPE[0], 1), np.uint32)
    assert bits_equal(host(dd.bit_xor(a, 0xFF)), a0 ^ np.uint32(0xFF))
    assert bits_equal(host(a >> 3), a0 >> np.uint32(3))
    assert bits_equal(host(dd.bit_and(a, column)), a0 & column)  # a numpy operand, uploaded per block
    assert bits_equal(host(dd.bit_or(a, da.from_array(column, chunks=(7, 1)))), a0 | column)  # host blocks
    assert bits_equal(host(dd.bit_count(dd.bit_not(a), dtype=np.uint32)), REFERENCES["bit_count"](~a0, np.uint32))
    with pytest.raises(dmlgpu.ValidationError):  # checked on the client, before any graph
        dd.bit_xor(a, dd.to_device(da.zeros(SHAPE, dtype=np.uint16, chunks=CHUNKS)))


def test_slicing_rechunk_concatenate_persist(rng):
    a0, b0 = raw(rng, SHAPE, np.int8), raw(rng, SHAPE, np.int8)
    a, b = (dd.to_device(da.from_array(v, chunks=CHUNKS)) for v in (a0, b0))
    cases = {
        "slices": (a[3:30:2, 5:], a0[3:30:2, 5:]),
        "row": (a[4], a0[4]),
        "new axis": (a[None, :, 7], a0[None, :, 7]),
        "rechunk": (a.rechunk((9, 25)), a0),
        "rechunk whole": (a.rechunk(-1), a0),
        "concatenate": (da.concatenate([a, b], axis=1), np.concatenate([a0, b0], axis=1)),
        "transpose": (a.T, a0.T),
        "persist": (dd.bit_xor(a, b).persist(), a0 ^ b0),
    }
    for name, (got, expected) in cases.items():
        assert dd.is_device_backed(got), name
        assert bits_equal(host(got), expected), name
    assert isinstance(dd.bit_xor(a, b).persist().blocks[1, 2].compute(), Tensor)
    numpy_back = dd.to_host(a).compute()
    assert type(numpy_back) is np.ndarray and bits_equal(numpy_back, a0)
    assert dd.to_device(a) is a and dd.to_host(numpy_backed := da.from_array(a0)) is numpy_backed
    with pytest.raises(dmlgpu.ValidationError):  # DirectML strides are unsigned: no negative step
        a[::-1].compute()


def test_a_chain_stays_on_the_device(rng):
    """The README's pipeline and a 7-step chain over blocks on the device: exact, and no byte
    crosses between host and device until `compute` (which joins the blocks on the device)."""
    a0, b0 = raw(rng, SHAPE, np.uint32), raw(rng, SHAPE, np.uint32)
    a, b = (dd.to_device(da.from_array(v, chunks=CHUNKS)).persist() for v in (a0, b0))
    # Joining blocks copies with XOR 0: its scalar is uploaded once per device and dtype (uint32
    # for a and b, uint8 for bit_count's results), here rather than in the counted part
    for warm in (a, b, dd.bit_count(a)):
        warm.compute()
    before = transfers()
    readme = dd.bit_count(~a ^ b).persist()
    chain = dd.bit_count(((~a ^ b) & (a | b)) ^ (a >> b)).persist()  # not, xor, or, and, shift, xor, count
    joined = chain.compute()
    assert delta(before) == dict.fromkeys(TRANSFER_KEYS, 0)
    R = REFERENCES
    assert bits_equal(readme.compute().numpy(), R["bit_count"](R["bit_xor"](R["bit_not"](a0), b0)))
    expected = R["bit_count"](R["bit_xor"](R["bit_and"](R["bit_xor"](R["bit_not"](a0), b0), R["bit_or"](a0, b0)),
                                            R["bit_shift_right"](a0, b0)))
    assert bits_equal(joined.numpy(), expected)
    before = transfers()
    assert bits_equal(dd.to_host(chain).compute(), expected)
    assert delta(before)["download_bytes"] == expected.nbytes  # one download per block, nothing else


REDUCE_TYPES = [np.uint32, np.int32, np.int64, np.uint64]
ORDERED_TYPES = [np.float32, np.float16, np.int8, np.uint16, np.int64]


@pytest.mark.parametrize("dtype", REDUCE_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("name", ["sum", "min", "max"])
def test_sum_min_max_trees(name, dtype, rng):
    if name != "sum":
        dtype = ORDERED_TYPES[REDUCE_TYPES.index(dtype)]
    x0 = raw(rng, SHAPE, dtype)
    function = {"sum": ReduceFunction.SUM, "min": ReduceFunction.MIN, "max": ReduceFunction.MAX}[name]
    for backed in (dd.to_device(da.from_array(x0, chunks=CHUNKS)), da.from_array(x0, chunks=CHUNKS)):
        for axis in (None, 0, 1, (0, 1)):
            for keepdims in (False, True):
                got = getattr(dd, name)(backed, axis=axis, keepdims=keepdims, split_every=SPLIT)
                axes = (0, 1) if axis is None else axis if isinstance(axis, tuple) else (axis,)
                expected = reference.reduce(x0, function, axes)
                if not keepdims:
                    expected = expected.reshape(tuple(s for d, s in enumerate(SHAPE) if d not in axes))
                assert dd.is_device_backed(got) == dd.is_device_backed(backed)
                assert bits_equal(host(got), expected), (name, axis, keepdims)


@pytest.mark.parametrize("dtype", ORDERED_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("name", ["argmin", "argmax"])
def test_argmin_argmax_trees_take_the_first_index(name, dtype, rng):
    function = ReduceFunction.ARGMIN if name == "argmin" else ReduceFunction.ARGMAX
    few = raw(rng, (4,), dtype)  # four values only: ties across blocks everywhere
    x0 = few[rng.integers(0, 4, SHAPE)]
    for backed, axes in ((dd.to_device(da.from_array(x0, chunks=CHUNKS)), (None, 0, 1)),
                         (da.from_array(x0, chunks=CHUNKS), (None,))):  # numpy blocks: uploaded once each
        for axis in axes:
            got = getattr(dd, name)(backed, axis=axis, split_every=SPLIT)
            if axis is None:
                expected = reference.reduce(x0.reshape(-1), function, (0,), np.int64).reshape(())
            else:
                expected = reference.reduce(x0, function, (axis,), np.int64).squeeze(axis)
            assert got.dtype == np.int64 and bits_equal(host(got), expected), (name, axis)
    kept = getattr(dd, name)(dd.to_device(da.from_array(x0, chunks=CHUNKS)), axis=1, keepdims=True)
    assert bits_equal(host(kept), reference.reduce(x0, function, (1,), np.int64))


#: (dtype, axes, ks): k = 1 and a k past several blocks for float32 (raw encodings: NaNs, -0.0) on both axes; k = 4 and 25 on one axis else.
TOP_K_CASES = [(np.float32, (0, 1), (1, 25)), (np.int16, (1,), (4,)), (np.uint32, (0,), (25,))]


@pytest.mark.parametrize("dtype, axes, ks", TOP_K_CASES, ids=[np.dtype(t).name for t, _, _ in TOP_K_CASES])
def test_top_k_merges_along_a_whole_axis(dtype, axes, ks, rng):
    few = raw(rng, (6,), dtype)
    x0 = few[rng.integers(0, 6, SHAPE)]  # ties across blocks
    x = dd.to_device(da.from_array(x0, chunks=CHUNKS))
    for axis in axes:
        for k in ks:  # a block shorter than k along axis 1 (3), k longer than several blocks
            for largest in (True, False):
                values, indices = dd.top_k(x, k, axis=axis, largest=largest, split_every=SPLIT)
                direction = AxisDirection.DECREASING if largest else AxisDirection.INCREASING
                ev, ei = reference.top_k(x0, axis, k, direction, np.int64)
                assert dd.is_device_backed(values) and indices.dtype == np.int64
                assert bits_equal(host(values), ev), (axis, k, largest)
                assert bits_equal(host(indices), ei), (axis, k, largest)
    host_values, host_indices = dd.top_k(da.from_array(x0, chunks=CHUNKS), 3, axis=0)
    ev, ei = reference.top_k(x0, 0, 3, AxisDirection.DECREASING, np.int64)
    assert bits_equal(host_values.compute(), ev) and bits_equal(host_indices.compute(), ei)


def test_reductions_are_checked_on_the_client():
    x = dd.to_device(da.zeros(SHAPE, dtype=np.float32, chunks=CHUNKS))
    narrow = dd.to_device(da.zeros(4, dtype=np.uint8))
    cases = [(dd.sum, (narrow,), {}), (dd.min, (x,), {"axis": 2}), (dd.argmin, (x,), {"axis": (0, 1)}),
             (dd.top_k, (x, 50), {"axis": 1}), (dd.top_k, (x, 0), {})]
    for function, args, options in cases:
        with pytest.raises(dmlgpu.ValidationError) as error:
            function(*args, **options)
        assert error.value.operator in (REDUCE.dml_name, TOP_K.dml_name)


def test_map_blocks_resident_is_the_device_way_with_numpy_at_both_ends(rng):
    a0, b0 = raw(rng, SHAPE, np.uint16), raw(rng, SHAPE[-1:], np.uint16)
    a, b = da.from_array(a0, chunks=CHUNKS), da.from_array(b0, chunks=(17,))
    chained = dd.map_blocks_resident(lambda t, u: dmlgpu.bit_count(~t ^ u), a, b, dtype=np.uint8)
    assert not dd.is_device_backed(chained)
    assert bits_equal(chained.compute(), REFERENCES["bit_count"](~a0 ^ b0))
    with pytest.raises(ValueError, match="map_blocks_resident"):
        dd.map_blocks_resident(lambda t: ~t, a, dtype=np.uint8).compute()
