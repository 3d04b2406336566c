"""Tensors larger than one device buffer (`dmlgpu.layout.pieces`): operators, views, assignment,
copies and transfers over Tensors whose elements span several buffers.

Most tests lower a private device's buffer limit to 4 KiB, so that small arrays span many
buffers in every layout; one test uses lavapipe's real limit (128 MiB)."""
import copy
import os
import pickle

import numpy as np
import pytest

import dmlgpu
from dmlgpu import DataType, Tensor, ValidationError, testing
from dmlgpu.describe.operator_descs import DESC_CLASSES
from dmlgpu.table.operators import BY_SHORT, OPERATORS
from dmlgpu.layout.pieces import Pieces

from conftest import POISON

LIMIT = 4096


@pytest.fixture(scope="module")
def small():
    """A device of its own whose buffers hold at most LIMIT bytes (its limit, lowered)."""
    device = dmlgpu.Device(dmlgpu.default_device().index, private=True)
    device.max_buffer_size = LIMIT
    yield device
    device.close()


def _spans(t: Tensor) -> bool:
    return isinstance(t.buffer, Pieces) and len(t.buffer.buffers) > 1


#: (name, numpy view of a (rows, cols) base): layouts whose chunks DirectML can bind.
LAYOUTS = {
    "packed": lambda x: x,
    "rows": lambda x: x[3:],
    "columns": lambda x: x[:, 16:],
    "strided": lambda x: x[1:, 5::3],
    "transposed": lambda x: x.T,
    "row": lambda x: x[2],
}


def _cases():
    for op in OPERATORS:
        for data_type in testing.one_type_per_width(op, (DataType.UINT32, DataType.INT8, DataType.FLOAT32)):
            for name in LAYOUTS:
                yield pytest.param(op, data_type, name, id=f"{op.short}-{data_type.name.lower()}-{name}")


def _poisoned(shape, data_type: DataType) -> Tensor:
    return Tensor.from_numpy(np.full(tuple(shape) + (data_type.size,), POISON, np.uint8).view(data_type.numpy)
                             .reshape(shape))


@pytest.mark.parametrize("op, data_type, layout", list(_cases()))
def test_operators_over_tensors_of_several_buffers(small, rng, op, data_type, layout):
    out_type = data_type if op.same_type else op.default_output
    rows = 64 * 8 // data_type.size  # 8 to 16 buffers for each base
    view = LAYOUTS[layout]
    bases = [testing.sample(data_type, (rows, 64), rng) for _ in op.inputs]
    with small:
        tensors = [Tensor.from_numpy(b) for b in bases]
        assert all(_spans(t) for t in tensors)
        operands = [view(t) for t in tensors]
        arrays = [view(b) for b in bases]
        if len(op.inputs) == 2:  # the second operand broadcasts a column
            operands[1], arrays[1] = operands[1][..., :1], arrays[1][..., :1]
        expected = testing.reference(op, arrays, out_type)
        got = testing.front_end(op, operands, out_type)
        assert got.shape == expected.shape and testing.same_bits(got.numpy(), expected)
        out = _poisoned(expected.shape, out_type)
        assert testing.front_end(op, operands, out_type, out=out) is out
        assert testing.same_bits(out.numpy(), expected)


@pytest.mark.parametrize("op", [op for op in OPERATORS if op.in_place], ids=lambda op: op.short)
def test_in_place_over_several_buffers(small, rng, op):
    bases = [testing.sample(DataType.UINT32, (48, 64), rng) for _ in op.inputs]
    with small:
        tensors = [Tensor.from_numpy(b) for b in bases]
        target = tensors[-1]
        buffers = list(target.buffer.buffers)
        assert testing.front_end(op, tensors, DataType.UINT32, out=target) is target
        assert target.buffer.buffers == buffers
        assert testing.same_bits(target.numpy(), testing.reference(op, bases, DataType.UINT32))


def test_views_reads_and_writes(small, rng):
    x = testing.sample(DataType.UINT32, (40, 64), rng)
    with small:
        t = Tensor.from_numpy(x)
        assert _spans(t) and testing.same_bits(t.numpy(), x)
        for key in (np.s_[5:30], np.s_[:, 3:60:2], np.s_[17], np.s_[39, 63], np.s_[::7, ::5]):
            assert testing.same_bits(t[key].numpy(), x[key]) and t[key].tolist() == x[key].tolist()
        assert testing.same_bits(t.T.numpy(), x.T)
        assert testing.same_bits(t.reshape(64, 40).numpy(), x.reshape(64, 40))
        assert testing.same_bits(t[:, 1:].reshape(-1).numpy(), x[:, 1:].reshape(-1))  # a copy
        for dtype in (np.uint8, np.int16, np.float32, np.uint64):
            assert testing.same_bits(t.view(dtype).numpy(), x.view(dtype))
        assert int(t[20, 5]) == int(x[20, 5])
        t[10:30] = 7
        x[10:30] = 7
        t[:, 8:40:4] = np.arange(8, dtype=np.uint32)
        x[:, 8:40:4] = np.arange(8, dtype=np.uint32)
        t[2:38] = t[4:40]  # overlapping, across buffers
        x[2:38] = x[4:40].copy()
        t[0] = Tensor.from_numpy(x[39])
        x[0] = x[39]
        t[5:25] ^= 3  # an in-place operator on a view
        x[5:25] ^= 3
        assert testing.same_bits(t.numpy(), x)


def test_copies_and_transfers(small, device, rng):
    x = testing.sample(DataType.FLOAT32, (40, 64), rng)
    with small:
        t = Tensor.from_numpy(x)
        for made in (t.copy(), copy.copy(t), copy.deepcopy(t), pickle.loads(pickle.dumps(t)), t.T.copy().T):
            assert made.device is small and _spans(made) and testing.same_bits(made.numpy(), x)
    moved = t.to(device)
    assert moved.device is device and not isinstance(moved.buffer, Pieces)
    assert testing.same_bits(moved.numpy(), x)
    back = moved.to(small)
    assert _spans(back) and testing.same_bits(back.numpy(), x)


def test_overlap_is_refused_before_any_work_and_odd_cuts_run(small, rng):
    with small:
        t = Tensor.from_numpy(np.full((40, 64), 0xA5A5A5A5, np.uint32))
        with pytest.raises(ValidationError, match="overlapping"):
            dmlgpu.bit_not(t[:-2], out=t[2:])
        assert (t.numpy() == 0xA5A5A5A5).all()
        x = testing.sample(DataType.UINT32, (64, 100), rng)  # rows of 400 bytes: 10 a buffer
        odd = Tensor.from_numpy(x)
        out = Tensor.from_numpy(np.full((100, 64), 0xA5A5A5A5, np.uint32))
        dmlgpu.bit_not(odd.T, out=out)  # columns cut between buffers where outputs are off 16 bytes
        assert testing.same_bits(out.numpy(), ~x.T)
        assert testing.same_bits((~odd.T).numpy(), ~x.T)  # a new result is cut where its chunks begin


def test_dask_blocks_larger_than_a_buffer(small, rng):
    da = pytest.importorskip("dask.array")
    import dmlgpu.dask as dmlgpu_dask

    x = testing.sample(DataType.UINT16, (96, 64), rng)
    y = testing.sample(DataType.UINT16, (96, 64), rng)
    a, b = da.from_array(x, chunks=(48, 64)), da.from_array(y, chunks=(48, 64))  # 6 KiB blocks
    with small:
        got = dmlgpu_dask.map_blocks_resident(lambda t, u: ~t ^ u, a, b, dtype=np.uint16).compute(scheduler="sync")
    assert testing.same_bits(got, ~x ^ y)


def test_real_buffer_limit(device):
    """The device's own limit (lavapipe: 128 MiB, NVIDIA: 4 GiB): a Tensor 64 MiB larger spans
    two buffers and computes exactly."""
    nbytes = device.max_buffer_size + (64 << 20)
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if 6 * nbytes > host:
        pytest.skip(f"needs {6 * nbytes >> 30} GiB of host memory")
    x = np.arange(nbytes // 4, dtype=np.uint32)
    t = Tensor.from_numpy(x)
    assert _spans(t) and len(t.buffer.buffers) == 2
    u = t ^ 0x5A5A5A5A
    assert _spans(u)
    x ^= 0x5A5A5A5A
    assert np.array_equal(u.numpy(), x)
    del u
    x ^= 0x5A5A5A5A
    n = x.size
    assert testing.same_bits(t[n - 5:].numpy(), x[n - 5:])
    assert np.array_equal(dmlgpu.bit_count(t[:: 1 << 12]).numpy(), np.bitwise_count(x[:: 1 << 12]))


def test_command_lists_bind_the_pieces(small, rng):
    x = testing.sample(DataType.UINT32, (32, 64), rng)
    with small:
        t = Tensor.from_numpy(x)
        out = Tensor.empty(t.shape, np.uint32)
        assert [b.size_in_bytes for b in t.buffer.buffers] == [b.size_in_bytes for b in out.buffer.buffers]
        commands = dmlgpu.CommandList(small)
        desc = dmlgpu.TensorDesc(DataType.UINT32, [x.size])  # spanning bindings run per piece
        small.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc)).execute(
            [dmlgpu.Binding(t.buffer)], [dmlgpu.Binding(out.buffer)])
        assert testing.same_bits(out.numpy(), ~x)
        for source, target in zip(t.buffer.buffers, out.buffer.buffers):
            desc = dmlgpu.TensorDesc(DataType.UINT32, [source.size_in_bytes // 4])
            not_op = small.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
            commands.record(not_op, [dmlgpu.Binding(source)], [dmlgpu.Binding(target)])
        commands.execute()
        assert testing.same_bits(out.numpy(), ~x)


def test_a_spanning_transpose_runs_in_blocks_not_rows(small, rng, monkeypatch):
    """Bands of output rows split into blocks of columns: a dispatch per (band, input buffer),
    not one per output row and input buffer."""
    x = testing.sample(DataType.UINT32, (128, 128), rng)  # 16 buffers of 8 rows
    with small:
        t = Tensor.from_numpy(x)
        pieces = len(t.buffer.buffers)
        dispatches = []
        enqueue = small.enqueue
        monkeypatch.setattr(small, "enqueue", lambda launch: dispatches.append(launch) or enqueue(launch))
        got = ~t.T
        assert testing.same_bits(got.numpy(), ~x.T)
    assert pieces == 16 and len(dispatches) <= pieces * pieces < 128 * pieces, len(dispatches)


def test_hamming_searches_a_spanning_database_piece_by_piece(small, rng):
    """A packed Tensor of whole-word codes over several buffers is searched where it lies, one
    database piece per buffer; a view whose rows a buffer boundary cuts is copied, and still right."""
    from test_hamming import numpy_knn
    database = rng.integers(0, 2**32, size=(300, 8), dtype=np.uint32)  # 32-byte rows, 128 per buffer
    queries = rng.integers(0, 2**32, size=(5, 8), dtype=np.uint32)
    with small:
        t = Tensor.from_numpy(database)
        assert _spans(t)
        for view, rows in ((t, database), (t[1:], database[1:]), (t[17:290], database[17:290])):
            index = dmlgpu.HammingIndex(view)
            assert index.in_place and index.pieces == len(view.buffer.buffers) > 1
            for k in (1, 7, 100):  # (a query's lists of all pieces fit one 4 KiB buffer)
                got_d, got_i = index.search(queries, k)
                want_d, want_i = numpy_knn(rows, queries, k)
                assert np.array_equal(got_i, want_i) and np.array_equal(got_d, want_d)
        codes = rng.integers(0, 256, size=(700, 12), dtype=np.uint8)  # 12-byte rows: 320 per buffer
        cut = Tensor.from_numpy(codes)[1:]  # its pieces begin off a 16-byte boundary
        index = dmlgpu.HammingIndex(cut)
        assert _spans(cut) and not index.in_place
        spanning_queries = Tensor.from_numpy(codes[:400])
        assert _spans(spanning_queries)
        got_d, got_i = index.search(spanning_queries, 3)
        want_d, want_i = numpy_knn(codes[1:], codes[:400], 3)
        assert np.array_equal(got_i.numpy(), want_i) and np.array_equal(got_d.numpy(), want_d)


REDUCTION_LAYOUTS = {"packed": lambda x: x, "transposed": lambda x: x.T, "strided": lambda x: x[3:, 1::3],
                     "rows": lambda x: x[5:]}


@pytest.mark.parametrize("layout", list(REDUCTION_LAYOUTS))
@pytest.mark.parametrize("axis", [None, 0, 1], ids=lambda a: f"axis{a}")
@pytest.mark.parametrize("name, data_type", [("sum", DataType.FLOAT32), ("mean", DataType.FLOAT16),
                                             ("argmax", DataType.INT32), ("prod", DataType.UINT64),
                                             ("logsumexp", DataType.FLOAT32)], ids=lambda v: str(v).lower())
def test_reductions_over_several_buffers(small, rng, name, data_type, axis, layout):
    """REDUCE over a Tensor of many 4 KiB buffers, in several layouts (walks within a piece,
    across pieces, and ones that cross at every step: copied into the kernel's order first):
    the reference's bits (floats: the exact result rounded once), as over one buffer."""
    from dmlgpu.table.operators import REDUCE_NAMES
    from dmlgpu.table.reference import reduce as reference_reduce
    function = {v: k for k, v in REDUCE_NAMES.items()}[name]
    x = (rng.standard_normal((64, 100)) * 4).astype(data_type.numpy) if data_type.is_float else \
        testing.sample(data_type, (64, 100), rng)
    view = REDUCTION_LAYOUTS[layout]
    with small:
        t = view(Tensor.from_numpy(x))
        assert _spans(t)
        got = getattr(dmlgpu, name)(t, axis=axis, keepdims=True)
        xv = np.ascontiguousarray(view(x))
        axes = tuple(range(xv.ndim)) if axis is None else (axis,)
        out_type = np.int64 if name == "argmax" else None
        assert testing.same_bits(got.numpy(), reference_reduce(xv, function, axes, out_type))


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("largest", [True, False])
def test_top_k_over_several_buffers(small, rng, axis, largest):
    """TOP_K1 over many buffers: sequences within a piece (axis 1) and across every piece (axis
    0), many ties: the reference's values and indices."""
    from dmlgpu.table.reference import top_k as reference_top_k
    from dmlgpu.table.operators import AxisDirection
    x = rng.integers(0, 9, size=(64, 100)).astype(np.int16)
    with small:
        t = Tensor.from_numpy(x)
        assert _spans(t)
        values, indices = dmlgpu.top_k(t, 7, axis=axis, largest=largest)
    direction = AxisDirection.DECREASING if largest else AxisDirection.INCREASING
    expected = reference_top_k(x, axis, 7, direction)
    assert testing.same_bits(values.numpy(), expected[0]) and np.array_equal(indices.numpy(), expected[1])


def test_one_long_walk_over_several_buffers(small, rng):
    """One sequence of many buffers: each piece's chunk states (REDUCE) and its K best (TOP_K1),
    then one merge; ties across pieces by ascending index; numpy data too large for a buffer."""
    from dmlgpu.table.reference import reduce as reference_reduce
    from dmlgpu.table.operators import ReduceFunction
    x = rng.integers(0, 50, size=20_000).astype(np.float32)
    with small:
        t = Tensor.from_numpy(x)
        assert len(t.buffer.buffers) > 10
        assert testing.same_bits(dmlgpu.sum(t).numpy(), reference_reduce(x, ReduceFunction.SUM, (0,)).reshape(()))
        assert dmlgpu.argmax(t).numpy() == np.argmax(x) and dmlgpu.argmin(x) == np.argmin(x)
        values, indices = dmlgpu.top_k(t, 40)
        order = np.argsort(-x, kind="stable")[:40]
        assert np.array_equal(indices.numpy(), order) and np.array_equal(values.numpy(), x[order])
        assert testing.same_bits(dmlgpu.logsumexp(x), reference_reduce(x, ReduceFunction.LOG_SUM_EXP, (0,)).reshape(()))


def test_compiled_operators_execute_spanning_bindings(small, rng):
    """CompiledOperator.execute given Pieces (element-wise, REDUCE, TOP_K1), as a CommandList
    records them: the same bits eagerly and replayed from a list."""
    from dmlgpu.describe.operator_descs import ReduceOperatorDesc, TopK1OperatorDesc
    from dmlgpu.table.operators import AxisDirection, ReduceFunction
    x = rng.standard_normal((64, 64)).astype(np.float32)
    with small:
        t = Tensor.from_numpy(x)
        desc = dmlgpu.TensorDesc(DataType.FLOAT32, t.shape)
        total = small.create_operator(ReduceOperatorDesc(desc, dmlgpu.TensorDesc(DataType.FLOAT32, (64, 1)),
                                                         ReduceFunction.L2, (1,)))
        pick = small.create_operator(TopK1OperatorDesc(desc, dmlgpu.TensorDesc(DataType.FLOAT32, (3, 64)),
                                                       dmlgpu.TensorDesc(DataType.UINT32, (3, 64)), 0, 3,
                                                       AxisDirection.INCREASING))
        norms, values, indices = (_poisoned(s, d) for s, d in (((64, 1), DataType.FLOAT32), ((3, 64), DataType.FLOAT32),
                                                               ((3, 64), DataType.UINT32)))
        total.execute([dmlgpu.Binding(t.buffer)], [dmlgpu.Binding(norms.buffer)])
        pick.execute([dmlgpu.Binding(t.buffer)], [dmlgpu.Binding(values.buffer), dmlgpu.Binding(indices.buffer)])
        eager = [norms.numpy(), values.numpy(), indices.numpy()]
        assert np.allclose(eager[0].ravel(), np.linalg.norm(x.astype(np.float64), axis=1), rtol=1e-6)
        order = np.argsort(x, axis=0, kind="stable")[:3]
        assert np.array_equal(eager[2], order) and np.array_equal(eager[1], np.take_along_axis(x, order, 0))
        for out in (norms, values, indices):
            out[...] = np.zeros((), out.dtype)
        commands = dmlgpu.CommandList(small)
        commands.record(total, [dmlgpu.Binding(t.buffer)], [dmlgpu.Binding(norms.buffer)])
        commands.record(pick, [dmlgpu.Binding(t.buffer)], [dmlgpu.Binding(values.buffer), dmlgpu.Binding(indices.buffer)])
        for _ in range(2):
            commands.execute()
            assert all(testing.same_bits(o.numpy(), e) for o, e in zip((norms, values, indices), eager))


def test_reductions_at_the_real_buffer_limit(device, rng):
    """The device's own limit (lavapipe: 128 MiB): a float sum and a top_k over a Tensor 16 MiB
    larger than one buffer (two pieces, one walk across them)."""
    from dmlgpu.table.reference import round_to
    from fractions import Fraction
    nbytes = device.max_buffer_size + (16 << 20)
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if 6 * nbytes > host:
        pytest.skip(f"needs {6 * nbytes >> 30} GiB of host memory")
    x = rng.integers(-1000, 1000, size=nbytes // 4).astype(np.float32) / np.float32(8)  # exact in float64 sums
    t = Tensor.from_numpy(x)
    assert _spans(t) and len(t.buffer.buffers) == 2
    expected = round_to(Fraction(float(x.astype(np.float64).sum())), np.float32)  # (exact: multiples of 1/8)
    assert testing.same_bits(dmlgpu.sum(t).numpy(), np.float32(expected))
    x[-3] = 5000
    t[-3] = 5000
    values, indices = dmlgpu.top_k(t, 2)
    assert values.numpy()[0] == 5000 and indices.numpy()[0] == x.size - 3


def _record(commands, op, operands, out):
    """Record `op` over these Tensors in `commands` as a user would: descriptors of the views'
    layouts (broadcast through zero strides), each bound whole at its offset."""
    shape = out.shape
    descs = [dmlgpu.TensorDesc(v.data_type, shape, dmlgpu.front.resident.broadcast_strides(v.shape, shape, v.strides))
             for v in operands] + [dmlgpu.TensorDesc(out.data_type, shape, out.strides)]
    compiled = commands.device.create_operator(DESC_CLASSES[op.name](*descs))
    commands.record(compiled, [dmlgpu.Binding(v.buffer, v.offset) for v in operands],
                    [dmlgpu.Binding(out.buffer, out.offset)])


#: Layouts of LAYOUTS that a Binding can name (views starting at a 16-byte boundary).
BOUND_LAYOUTS = ("packed", "rows", "columns", "transposed", "row")


@pytest.mark.parametrize("op, data_type, layout", [c for c in _cases() if c.values[2] in BOUND_LAYOUTS])
def test_command_lists_record_spanning_tensors(small, rng, op, data_type, layout):
    """A recorded call over Tensors of several buffers runs the eager call's per-piece steps:
    on every replay the same bits as the eager call and the reference (fused where the list
    fuses, packed and transposed; one dispatch a step otherwise)."""
    fuse = layout in ("packed", "transposed")
    out_type = data_type if op.same_type else op.default_output
    rows = 64 * 8 // data_type.size
    view = LAYOUTS[layout]
    bases = [testing.sample(data_type, (rows, 64), rng) for _ in op.inputs]
    with small:
        operands = [view(Tensor.from_numpy(b)) for b in bases]
        arrays = [view(b) for b in bases]
        if len(op.inputs) == 2:  # the second operand broadcasts a column
            operands[1], arrays[1] = operands[1][..., :1], arrays[1][..., :1]
        expected = testing.reference(op, arrays, out_type)
        eager, recorded = _poisoned(expected.shape, out_type), _poisoned(expected.shape, out_type)
        assert _spans(eager) or _spans(operands[0])
        testing.front_end(op, operands, out_type, out=eager)
        commands = dmlgpu.CommandList(small, fuse=fuse)
        _record(commands, op, operands, recorded)
        assert commands.dispatches > 1 or layout == "row"  # per-piece executions (a row lies in one)
        for _ in range(2):
            commands.execute()
            assert testing.same_bits(recorded.numpy(), expected) and testing.same_bits(eager.numpy(), expected)
            recorded[...] = np.zeros((), out_type.numpy)


def test_command_lists_record_spanning_steps_in_place_and_copies(small, rng):
    """In place over a spanning Tensor, a broadcast scalar operand, then an input whose chunks
    start off a 16-byte boundary of their buffers (copied into temporaries the list keeps), all
    in one list, replayed: the sequential answer each time."""
    x = testing.sample(DataType.UINT8, (128, 100), rng)  # rows of 100 bytes: 40 a buffer
    with small:
        t = Tensor.from_numpy(x)
        k = Tensor.from_numpy(np.array(0x5A, np.uint8))
        out = _poisoned((128, 50), DataType.UINT8)  # 81 rows a buffer: a chunk from input row 81, one
        # from output row 120 (off a 16-byte boundary of its buffer)
        assert _spans(t) and _spans(out)
        commands = dmlgpu.CommandList(small)
        _record(commands, BY_SHORT["bit_not"], [t], t)
        _record(commands, BY_SHORT["bit_xor"], [t, k], t)
        _record(commands, BY_SHORT["bit_not"], [t[:, 16:66]], out)  # chunks of input rows 81.. copied
        assert commands.dispatches > 3 * 3
        expected = x.copy()
        for _ in range(2):
            commands.execute()
            expected = ~expected ^ np.uint8(0x5A)
            assert testing.same_bits(t.numpy(), expected)
            assert testing.same_bits(out.numpy(), ~expected[:, 16:66])


def test_command_lists_refuse_spanning_bindings_they_cannot_split(small):
    with small:
        t = Tensor.from_numpy(np.zeros((64, 64), np.uint32))
        commands = dmlgpu.CommandList(small)
        desc = dmlgpu.TensorDesc(DataType.UINT32, t.shape)
        not_op = small.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
        for bad, field in ((dmlgpu.Binding(t.buffer, 4), "Binding.Offset"),
                           (dmlgpu.Binding(t.buffer, 16), "Binding.SizeInBytes")):
            with pytest.raises(ValidationError) as caught:
                commands.record(not_op, [bad], [dmlgpu.Binding(t.buffer)])
            assert caught.value.field == field and "DML_OPERATOR_ELEMENT_WISE_BIT_NOT" in str(caught.value)
        graph = small.compile_graph(dmlgpu.GraphDesc(1, 1, [dmlgpu.OperatorGraphNodeDesc(
            dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))], [dmlgpu.InputGraphEdgeDesc(0, 0, 0)],
            [dmlgpu.OutputGraphEdgeDesc(0, 0, 0)], []))
        with pytest.raises(ValidationError, match="one Buffer per binding of a graph"):
            commands.record(graph, [dmlgpu.Binding(t.buffer)], [dmlgpu.Binding(t.buffer)])
        assert commands.dispatches == 0


def test_a_repeated_spanning_call_plans_once(small, rng):
    """The second identical call (and a call over other Tensors of the same layouts) reuses the
    first call's plan: nothing is cut into chunks or compiled again (a plan is made on each
    miss of `memo.TENSOR_SPANS`, counted by `memo.stats`)."""
    def plans():
        return dmlgpu.layout.memo.stats()["tensor_spans"]["misses"]

    x, y = (testing.sample(DataType.UINT32, (40, 64), rng) for _ in range(2))
    dmlgpu.layout.memo.clear()
    with small:
        t, u = Tensor.from_numpy(x), Tensor.from_numpy(y)
        out = _poisoned((40, 64), DataType.UINT32)
        for _ in range(3):
            dmlgpu.bit_xor(t, u, out=out)
            assert testing.same_bits(out.numpy(), x ^ y)
        assert plans() == 1
        for _ in range(2):
            assert testing.same_bits((t ^ u).numpy(), x ^ y)  # a new result: one more plan
        assert plans() == 2
        v, w = Tensor.from_numpy(y), Tensor.from_numpy(x)  # other Tensors of the same layouts
        dmlgpu.bit_xor(v, w, out=out)
        assert testing.same_bits(out.numpy(), x ^ y) and plans() == 2
        dmlgpu.bit_xor(t[1:], u[1:], out=out[1:])
        assert plans() == 3 and dmlgpu.layout.memo.stats()["tensor_spans"]["entries"] == 3
        small.empty_cache()  # releases the memos
        assert dmlgpu.layout.memo.stats()["tensor_spans"] == {"entries": 0, "bound": dmlgpu.layout.memo.DEFAULT_SIZE, "misses": 0}
        dmlgpu.bit_xor(t, u, out=out)
        assert plans() == 1 and testing.same_bits(out.numpy(), x ^ y)


def test_command_lists_at_the_real_buffer_limit(device, rng):
    """The device's own limit (lavapipe: 128 MiB): a list over a Tensor 1 MiB larger than one
    buffer, with a broadcast scalar, in place and over a view, replayed: numpy's answer."""
    nbytes = device.max_buffer_size + (1 << 20)
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if 8 * nbytes > host:
        pytest.skip(f"needs {8 * nbytes >> 30} GiB of host memory")
    x = rng.integers(0, 2**32, size=(nbytes // 4096, 1024), dtype=np.uint32)
    with device:
        t = Tensor.from_numpy(x)
        k = Tensor.from_numpy(np.array(0x5A5A5A5A, np.uint32))
        out = _poisoned(x.shape, DataType.UINT32)
        assert _spans(t) and _spans(out)
        commands = dmlgpu.CommandList(device)
        _record(commands, BY_SHORT["bit_xor"], [t, k], out)  # a broadcast scalar
        _record(commands, BY_SHORT["bit_not"], [out], out)  # in place
        _record(commands, BY_SHORT["bit_and"], [t[16:], out[:-16]], out[:-16])  # a view, in place
        expected = ~(x ^ np.uint32(0x5A5A5A5A))
        expected[:-16] &= x[16:]
        for _ in range(2):
            commands.execute()
            assert np.array_equal(out.numpy(), expected)
        commands.release()


@pytest.mark.parametrize("data_type", [DataType.UINT8, DataType.INT16, DataType.FLOAT32, DataType.UINT64],
                         ids=lambda t: t.name.lower())
def test_outputs_off_16_byte_boundaries_over_several_buffers(small, rng, data_type):
    """A given out whose chunks start off 16-byte boundaries of its buffers (an odd element
    offset into a spanning Tensor, rows of an odd number of bytes, a transpose whose columns
    buffers cut anywhere) is written where it lies: right elements, every byte around kept."""
    raw = f"u{data_type.size}"
    rows, cols = 8 * 4096 // (37 * data_type.size), 37  # rows of 37 elements: boundaries anywhere
    x = testing.sample(data_type, (rows, cols), rng)
    y = testing.sample(data_type, (rows, 1), rng)
    with small:
        t, u = Tensor.from_numpy(x), Tensor.from_numpy(y)
        base = _poisoned((rows * cols + 8,), data_type)
        assert _spans(t) and _spans(base)
        want = base.numpy().view(raw)
        for start in (1, 3, 7):
            out = base[start:start + rows * cols].reshape(rows, cols)
            assert out.offset % 16 and testing.front_end(BY_SHORT["bit_xor"], [t, u], data_type, out=out) is out
            want[start:start + rows * cols] = (x.view(raw) ^ y.view(raw)).reshape(-1)
            assert testing.same_bits(base.numpy().view(raw), want)
        out = base[5:5 + rows * cols].reshape(cols, rows)
        dmlgpu.bit_not(t.T, out=out)
        want[5:5 + rows * cols] = (~x.view(raw).T).reshape(-1)
        assert testing.same_bits(base.numpy().view(raw), want)
        out = base[2:2 + rows * cols].reshape(rows, cols)[:, 1::2]  # strided, off a boundary
        dmlgpu.bit_not(t[:, :18], out=out)
        want[2:2 + rows * cols].reshape(rows, cols)[:, 1::2] = ~x.view(raw)[:, :18]
        assert testing.same_bits(base.numpy().view(raw), want)
        view = base[3:3 + rows * cols]
        dmlgpu.bit_not(view, out=view)  # in place, off a boundary, across buffers
        want[3:3 + rows * cols] = ~want[3:3 + rows * cols]
        assert testing.same_bits(base.numpy().view(raw), want)
        commands = dmlgpu.CommandList(small)  # recorded: the same steps (t's buffers cut rows of 37)
        dmlgpu.layout.memo.clear()
        _record(commands, BY_SHORT["bit_not"], [t], base[:rows * cols].reshape(rows, cols))
        (plan,) = dmlgpu.layout.memo.TENSOR_SPANS.values()
        assert any(step.out_shift for step in plan.steps), "no output chunk off a 16-byte boundary: untested"
        commands.execute()
        want[:rows * cols] = ~x.view(raw).reshape(-1)
        assert testing.same_bits(base.numpy().view(raw), want)
