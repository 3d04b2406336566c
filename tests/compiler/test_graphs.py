"""compile_graph: DirectML graphs run as fused dispatches, bit for bit against the nodes run one
by one through dmlgpu.table.reference; outputs poisoned, guard bytes around every output range."""
from __future__ import annotations

import numpy as np
import pytest

import dmlgpu
from dmlgpu import ConstantDataGraphNodeDesc, DataType, GraphDesc, InputGraphEdgeDesc, IntermediateGraphEdgeDesc, OperatorGraphNodeDesc, OutputGraphEdgeDesc, TensorDesc, ValidationError, testing
from dmlgpu.describe.operator_descs import ReduceOperatorDesc
from dmlgpu.table.operators import OPERATORS, ReduceFunction

from graph_cases import int4_unpack, node, run, scalar, seven_step_chain

U8, U16, U32, U64 = DataType.UINT8, DataType.UINT16, DataType.UINT32, DataType.UINT64
SHAPE = (3, 37)  # 111 elements: groups of 4 with a tail


def as_bytes(array) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def check(device, desc, input_data, dispatches=1, **kw):
    compiled = device.compile_graph(desc)
    assert compiled.dispatches == dispatches
    got, expected = run(device, compiled, desc, [as_bytes(d) for d in input_data], **kw)
    for j, (g, e) in enumerate(zip(got, expected)):
        assert np.array_equal(g, e), f"graph output {j}: {np.flatnonzero(g != e)[:10]} differ"
    return compiled


def single(op, in_type, out_type, shape=SHAPE):
    """op alone, then op followed by BIT_NOT of its output (an intermediate kept in registers)."""
    t_in, t_out = TensorDesc(in_type, shape), TensorDesc(out_type, shape)
    first = node(op.short, *[t_in] * len(op.inputs), t_out)
    nodes = [first, node("bit_not", t_out, t_out)]
    inputs = [InputGraphEdgeDesc(k, 0, k) for k in range(len(op.inputs))]
    return GraphDesc(len(op.inputs), 2, nodes, inputs,
                     [OutputGraphEdgeDesc(0, 0, 0), OutputGraphEdgeDesc(1, 0, 1)],
                     [IntermediateGraphEdgeDesc(0, 0, 1, 0)])


CASES = [(op, i, o) for op in OPERATORS for i, o in testing.case_types(op)]


@pytest.mark.parametrize("op,in_type,out_type", CASES,
                         ids=[f"{op.short}-{i.name.lower()}-{o.name.lower()}" for op, i, o in CASES])
def test_every_operator_and_type(device, rng, op, in_type, out_type):
    desc = single(op, in_type, out_type)
    data = [testing.sample(in_type, SHAPE, rng) for _ in op.inputs]
    check(device, desc, data)


@pytest.mark.parametrize("n", [1, 3, 4, 5, 64, 1001])
def test_int4_unpack(device, rng, n):
    w = rng.integers(0, 256, n, dtype=np.uint8)
    check(device, int4_unpack(n), [w])


def test_bit_count_narrows_inside_the_graph(device, rng):
    """BIT_COUNT(u64) -> u8 feeding an 8-bit XOR with another input, then a shift by a constant."""
    n = 101
    t64, t8, c8 = TensorDesc(U64, (n,)), TensorDesc(U8, (n,)), TensorDesc(U8, (n,), (0,))
    nodes = [node("bit_count", t64, t8), node("bit_xor", t8, t8, t8), scalar(3, U8), node("bit_shift_left", t8, c8, t8)]
    desc = GraphDesc(2, 1, nodes, [InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 1, 1)],
                     [OutputGraphEdgeDesc(3, 0, 0)],
                     [IntermediateGraphEdgeDesc(0, 0, 1, 0), IntermediateGraphEdgeDesc(1, 0, 3, 0),
                      IntermediateGraphEdgeDesc(2, 0, 3, 1)])
    check(device, desc, [testing.sample(U64, (n,), rng), rng.integers(0, 256, n, dtype=np.uint8)])


@pytest.mark.parametrize("dtype", [U8, U16, U32, U64])
def test_chain_with_shared_input_and_two_outputs(device, rng, dtype):
    n = 77
    data = [testing.sample(dtype, (n,), rng) for _ in range(2)]
    check(device, seven_step_chain(n, dtype), data)


def test_broadcast_and_strided_inputs_strided_outputs(device, rng):
    """A row broadcast down the rows, a column across them, a padded-rows input, and outputs of 8,
    16 and 32 bits with padded rows (gaps keep their poison)."""
    rows, cols = 5, 13
    shape = (rows, cols)
    for dtype in (U8, U16, U32):
        row = TensorDesc(dtype, shape, (0, 1))
        col = TensorDesc(dtype, shape, (1, 0))
        padded = TensorDesc(dtype, shape, (cols + 3, 1))
        packed = TensorDesc(dtype, shape)
        out = TensorDesc(dtype, shape, (cols + 5, 1))
        nodes = [node("bit_xor", row, col, packed), node("bit_or", packed, padded, out)]
        desc = GraphDesc(3, 1, nodes, [InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 0, 1), InputGraphEdgeDesc(2, 1, 1)],
                         [OutputGraphEdgeDesc(1, 0, 0)], [IntermediateGraphEdgeDesc(0, 0, 1, 0)])
        data = [testing.sample(dtype, (cols,), rng), testing.sample(dtype, (rows,), rng),
                testing.sample(dtype, (rows * (cols + 3),), rng)]
        check(device, desc, data)


def test_in_place_output(device, rng):
    n = 50
    t = TensorDesc(U16, (n,))
    desc = GraphDesc(2, 1, [node("bit_xor", t, t, t), node("bit_not", t, t)],
                     [InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 0, 1)], [OutputGraphEdgeDesc(1, 0, 0)],
                     [IntermediateGraphEdgeDesc(0, 0, 1, 0)])
    data = [testing.sample(U16, (n,), rng) for _ in range(2)]
    check(device, desc, data, alias={0: 0})


def test_in_place_refused_where_a_read_broadcasts(device, rng):
    n = 8
    t, b = TensorDesc(U32, (n,)), TensorDesc(U32, (n,), (0,))
    desc = GraphDesc(1, 1, [node("bit_xor", t, b, t)], [InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(0, 0, 1)],
                     [OutputGraphEdgeDesc(0, 0, 0)])
    compiled = device.compile_graph(desc)
    buffer = device.upload(np.arange(n, dtype=np.uint32))
    with pytest.raises(ValidationError, match="every read of the input"):
        compiled.execute([dmlgpu.Binding(buffer)], [dmlgpu.Binding(buffer)])


def test_two_output_shapes_are_two_dispatches(device, rng):
    a, b = TensorDesc(U32, (7,)), TensorDesc(U32, (2, 3))
    desc = GraphDesc(2, 2, [node("bit_not", a, a), node("sign", b, b)],
                     [InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 1, 0)],
                     [OutputGraphEdgeDesc(0, 0, 0), OutputGraphEdgeDesc(1, 0, 1)])
    check(device, desc, [testing.sample(U32, (7,), rng), testing.sample(U32, (6,), rng)], dispatches=2)


def test_array_constant_and_shared_intermediate(device, rng):
    n = 9
    t = TensorDesc(DataType.INT8, (n,))
    mask = ConstantDataGraphNodeDesc(bytes(range(1, n + 1)), "mask")
    nodes = [node("sign", t, t), mask, node("bit_and", t, t, t), node("bit_or", t, t, t)]
    desc = GraphDesc(1, 3, nodes, [InputGraphEdgeDesc(0, 0, 0)],
                     [OutputGraphEdgeDesc(0, 0, 0), OutputGraphEdgeDesc(2, 0, 1), OutputGraphEdgeDesc(3, 0, 2)],
                     [IntermediateGraphEdgeDesc(0, 0, 2, 0), IntermediateGraphEdgeDesc(1, 0, 2, 1),
                      IntermediateGraphEdgeDesc(0, 0, 3, 0), IntermediateGraphEdgeDesc(2, 0, 3, 1)])
    check(device, desc, [testing.sample(DataType.INT8, (n,), rng)])


def test_repeated_compile_and_execute_reuse_everything(device, rng):
    desc = int4_unpack(64)
    compiled = device.compile_graph(desc)
    assert device.compile_graph(int4_unpack(64)) is compiled
    w = rng.integers(0, 256, 64, dtype=np.uint8)
    got, expected = run(device, compiled, desc, [w], repeat=3)
    assert all(np.array_equal(g, e) for g, e in zip(got, expected))


# -- validation: each rule, each rejection naming the node or edge and the field ----------------
T = TensorDesc(U32, (4,))
I8 = TensorDesc(DataType.INT8, (4,))


def good(**change):
    fields = dict(input_count=2, output_count=1, nodes=(node("bit_xor", T, T, T), node("bit_not", T, T)),
                  input_edges=(InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 0, 1)),
                  output_edges=(OutputGraphEdgeDesc(1, 0, 0),),
                  intermediate_edges=(IntermediateGraphEdgeDesc(0, 0, 1, 0),))
    fields.update(change)
    return GraphDesc(**fields)


INVALID = {
    "node invalid at level": (dict(nodes=(node("bit_xor", I8, I8, I8), node("bit_not", I8, I8))), "3_0",
                              "node 0", "DataType"),
    "node type": (dict(nodes=("xor", node("bit_not", T, T))), None, "node 0", "Type"),
    "edge to missing node": (dict(input_edges=(InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 5, 1))), None,
                             "InputEdges[1]", "ToNodeIndex"),
    "edge to missing input": (dict(input_edges=(InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 0, 2))), None,
                              "InputEdges[1]", "ToNodeInputIndex"),
    "graph input out of range": (dict(input_edges=(InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(2, 0, 1))),
                                 None, "InputEdges[1]", "GraphInputIndex"),
    "input fed twice": (dict(input_edges=(InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 0, 0))), None,
                        "InputEdges[1]", "ToNodeInputIndex"),
    "input not fed": (dict(input_edges=(InputGraphEdgeDesc(0, 0, 0),)), None, "node 0", "BTensor.edge"),
    "output twice": (dict(output_edges=(OutputGraphEdgeDesc(1, 0, 0), OutputGraphEdgeDesc(0, 0, 0))), None,
                     "OutputEdges[1]", "GraphOutputIndex"),
    "output missing": (dict(output_count=2), None, "graph output 1", "OutputEdges"),
    "from output index": (dict(intermediate_edges=(IntermediateGraphEdgeDesc(0, 1, 1, 0),)), None,
                          "IntermediateEdges[0]", "FromNodeOutputIndex"),
    "data type mismatch": (dict(nodes=(node("bit_xor", T, T, T), node("bit_not", TensorDesc(DataType.INT32, (4,)),
                                                                         TensorDesc(DataType.INT32, (4,))))),
                           None, "IntermediateEdges[0]", "DataType"),
    "sizes mismatch": (dict(nodes=(node("bit_xor", T, T, T), node("bit_not", TensorDesc(U32, (2, 2)),
                                                                     TensorDesc(U32, (2, 2))))),
                       None, "IntermediateEdges[0]", "Sizes"),
    "layout mismatch": (dict(nodes=(node("bit_xor", T, T, T), node("bit_not", TensorDesc(U32, (4,), (0,)), T))),
                        None, "IntermediateEdges[0]", "Strides"),
    "cycle": (dict(input_count=1, input_edges=(InputGraphEdgeDesc(0, 0, 0),),
                   intermediate_edges=(IntermediateGraphEdgeDesc(0, 0, 1, 0), IntermediateGraphEdgeDesc(1, 0, 0, 1)),
                   output_edges=(OutputGraphEdgeDesc(1, 0, 0),)), None, "node 0", "IntermediateEdges"),
    "dangling node": (dict(nodes=(node("bit_xor", T, T, T), node("bit_not", T, T), node("bit_not", T, T, )),
                           input_edges=(InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 0, 1),
                                        InputGraphEdgeDesc(0, 2, 0))), None, "node 2", "edges"),
    "short constant": (dict(input_count=1, nodes=(node("bit_xor", T, T, T), node("bit_not", T, T),
                                                   ConstantDataGraphNodeDesc(b"\x01\x02", "k")),
                            input_edges=(InputGraphEdgeDesc(0, 0, 0),),
                            intermediate_edges=(IntermediateGraphEdgeDesc(0, 0, 1, 0),
                                                IntermediateGraphEdgeDesc(2, 0, 0, 1))),
                       None, "IntermediateEdges[1]", "FromNodeIndex"),
    "output from constant": (dict(nodes=(node("bit_xor", T, T, T), ConstantDataGraphNodeDesc(bytes(16))),
                                  intermediate_edges=(), output_edges=(OutputGraphEdgeDesc(1, 0, 0),)),
                             None, "OutputEdges[0]", "FromNodeIndex"),
    "input types differ": (dict(input_count=1, nodes=(node("bit_not", T, T), node("bit_not", TensorDesc(DataType.INT32, (4,)),
                                                                               TensorDesc(DataType.INT32, (4,)))),
                                input_edges=(InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(0, 1, 0)),
                                output_count=2, intermediate_edges=(),
                                output_edges=(OutputGraphEdgeDesc(0, 0, 0), OutputGraphEdgeDesc(1, 0, 1))),
                           None, "graph input 0", "DataType"),
}


@pytest.mark.parametrize("name", list(INVALID))
def test_invalid_graphs_are_rejected_before_anything_runs(device, name):
    change, level, where, field = INVALID[name]
    with pytest.raises(ValidationError) as info:
        device.compile_graph(good(**change), dmlgpu.FeatureLevel.LEVEL_3_0 if level else None)
    message = str(info.value)
    assert where in message and field in message, message


def test_valid_graph_is_accepted(device):
    assert device.compile_graph(good()).dispatches == 1


def test_node_wrapper_and_names_in_messages(device):
    bad = good(nodes=(OperatorGraphNodeDesc(node("bit_xor", T, T, TensorDesc(U32, (5,))), "mix"), node("bit_not", T, T)))
    with pytest.raises(ValidationError, match=r"node 0 \('mix'\)"):
        device.compile_graph(bad)


def test_too_many_slots_is_a_validation_error(device):
    n = 60
    nodes = [node("bit_not", T, T) for _ in range(n)]
    desc = GraphDesc(1, 1, nodes, [InputGraphEdgeDesc(0, 0, 0)], [OutputGraphEdgeDesc(n - 1, 0, 0)],
                     [IntermediateGraphEdgeDesc(i, 0, i + 1, 0) for i in range(n - 1)])
    with pytest.raises(ValidationError, match="at most"):
        device.compile_graph(desc)


def test_more_outputs_than_one_dispatch_binds_split_and_recompute(device, rng):
    """Ten outputs of one shape: two dispatches, each recomputing the shared node; never in place."""
    n = 21
    t = TensorDesc(U32, (n,))
    nodes = [node("bit_not", t, t)] + [node("bit_xor", t, t, t) for _ in range(10)]
    desc = GraphDesc(1, 10, nodes, [InputGraphEdgeDesc(0, 0, 0)] + [InputGraphEdgeDesc(0, i, 1) for i in range(1, 11)],
                     [OutputGraphEdgeDesc(i, 0, i - 1) for i in range(1, 11)],
                     [IntermediateGraphEdgeDesc(0, 0, i, 0) for i in range(1, 11)])
    compiled = check(device, desc, [testing.sample(U32, (n,), rng)], dispatches=2)
    buffer = device.upload(np.zeros(n, np.uint32))
    outs = [dmlgpu.Binding(buffer)] + [dmlgpu.Binding(device.allocate(n * 4)) for _ in range(9)]
    with pytest.raises(ValidationError, match="several dispatches"):
        compiled.execute([dmlgpu.Binding(buffer)], outs)


def test_fresh_buffers_in_the_same_blocks_reuse_the_graphs_dispatches(device, rng):
    """Buffers made and released every execute land in the same pool blocks: the graph's
    remembered dispatches serve them (rebound to the new buffers, nothing checked or prepared
    again), results stay right in poisoned outputs, and a released buffer is still rejected
    though its block now holds another."""
    n = 256
    compiled = device.compile_graph(int4_unpack(n))
    device.synchronize()  # blocks freed by earlier work come back now, not between the calls
    calls = []
    check = compiled.check
    compiled.check = lambda *bindings: calls.append(1) or check(*bindings)
    for _ in range(3):
        w = rng.integers(0, 256, n, dtype=np.uint8)
        source = device.upload(w)
        lo, hi = (device.upload(np.full(n, 0xA5, np.uint8)) for _ in range(2))
        keys = (source.block_key, lo.block_key, hi.block_key)
        compiled.execute([dmlgpu.Binding(source)], [dmlgpu.Binding(lo), dmlgpu.Binding(hi)])
        assert testing.same_bits(lo.read(), w & 15) and testing.same_bits(hi.read(), w >> 4)
        for b in (hi, lo, source):  # newest first: the next three get these blocks
            b.release()
    assert len(calls) == 1, "each execute's fresh buffers were checked and prepared again"
    stale = device.upload(np.zeros(n, np.uint8))
    device.synchronize()
    stale.release()
    reused, lo, hi = (device.allocate(n) for _ in range(3))
    assert (reused.block_key, lo.block_key, hi.block_key) == keys
    with pytest.raises(ValidationError, match="released buffer"):
        compiled.execute([dmlgpu.Binding(stale)], [dmlgpu.Binding(lo), dmlgpu.Binding(hi)])


def _programs(compiled) -> list:
    return [k.program for k in compiled._kernels]


def test_element_wise_graphs_run_code_generated_for_them(device, rng):
    """One program per graph (named by its source's hash), none of the build's modules; the
    same graph compiled again is the same program."""
    n = 77
    data = [rng.integers(0, 2**32, n, dtype=np.uint32) for _ in range(2)]
    first = _programs(check(device, seven_step_chain(n), data))
    again = _programs(device.compile_graph(seven_step_chain(n + 0)))
    int4 = _programs(check(device, int4_unpack(n), [rng.integers(0, 256, n, dtype=np.uint8)]))
    assert len(first) == 1 and first[0].name.startswith("graph-") and "-s8-" not in first[0].name
    assert [p.key for p in again] == [p.key for p in first]
    assert int4[0].key != first[0].key
    assert list(first[0].spec) == [dmlgpu.kernels.variants.WORKGROUP_SIZE]


def test_packed_graph_is_one_program_at_every_size(device, rng):
    """Sizes and strides are in the generated code only where a tensor is strided: an all-packed
    graph's other sizes (the count is a push constant) run the same program and pipeline."""
    keys = set()
    for n in (100, 1000, 4096 + 7):
        compiled = check(device, int4_unpack(n), [rng.integers(0, 256, n, dtype=np.uint8)])
        keys.update(p.key for p in _programs(compiled))
    assert len(keys) == 1
    strided = set()
    for shape in ((3, 37), (5, 37)):
        t = TensorDesc(U8, shape, strides=(40, 1))
        out = TensorDesc(U8, shape)
        desc = GraphDesc(1, 1, [node("bit_not", t, out)], [InputGraphEdgeDesc(0, 0, 0)],
                         [OutputGraphEdgeDesc(0, 0, 0)], [])
        compiled = check(device, desc, [rng.integers(0, 256, 40 * shape[0], dtype=np.uint8)])
        strided.update(p.key for p in _programs(compiled))
    assert len(strided) == 2
