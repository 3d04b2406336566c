"""compile_graph with a REDUCE (and a TOP_K1): element-wise nodes fused into the reduction, bit for
bit against the nodes run one by one through dmlgpu.table.reference; outputs poisoned, guard bytes around
every output range; the dispatch count and route; the shapes the compiler refuses, by node."""
from __future__ import annotations

import numpy as np
import pytest

import dmlgpu
from dmlgpu import DataType, GraphDesc, InputGraphEdgeDesc, IntermediateGraphEdgeDesc, OutputGraphEdgeDesc, TensorDesc, ValidationError, testing
from dmlgpu.kernels import search_programs as hamming_plan
from dmlgpu.describe.operator_descs import ReduceOperatorDesc, TopK1OperatorDesc
from dmlgpu.table.operators import OPERATORS, REDUCE, AxisDirection, ReduceFunction

from graph_cases import node, reference, run, scalar

F, INC, DEC = ReduceFunction, AxisDirection.INCREASING, AxisDirection.DECREASING
U8, U32, U64 = DataType.UINT8, DataType.UINT32, DataType.UINT64


def check(device, desc, data, route, dispatches):
    compiled = device.compile_graph(desc)
    assert (compiled.route, compiled.dispatches) == (route, dispatches)
    got, expected = run(device, compiled, desc, [np.ascontiguousarray(d).reshape(-1).view(np.uint8) for d in data])
    for j, (g, e) in enumerate(zip(got, expected)):
        assert np.array_equal(g, e), f"graph output {j}: bytes {np.flatnonzero(g != e)[:10]} differ"
    return compiled


def search_graph(q, n, w, dtype, k, direction=INC, index_type=U32, keep_distances=False):
    """XOR(query [q, 1, w] broadcast, database [1, n, w] broadcast) -> BIT_COUNT -> REDUCE(SUM,
    axis 2) -> TOP_K1(axis 1): graph inputs 0 (queries) and 1 (database); outputs the values,
    the indices (and the distances)."""
    sizes = (q, n, w)
    query, database, x = TensorDesc(dtype, sizes, (w, 0, 1)), TensorDesc(dtype, sizes, (0, w, 1)), TensorDesc(dtype, sizes)
    counts, distances = TensorDesc(U32, sizes), TensorDesc(U32, (q, n, 1))
    values, indices = TensorDesc(U32, (q, k, 1)), TensorDesc(index_type, (q, k, 1))
    nodes = [node("bit_xor", query, database, x), node("bit_count", x, counts),
             ReduceOperatorDesc(counts, distances, F.SUM, (2,)), TopK1OperatorDesc(distances, values, indices, 1, k, direction)]
    outputs = [OutputGraphEdgeDesc(3, 0, 0), OutputGraphEdgeDesc(3, 1, 1)]
    if keep_distances:
        outputs.append(OutputGraphEdgeDesc(2, 0, 2))
    return GraphDesc(2, len(outputs), nodes, [InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 0, 1)], outputs,
                     [IntermediateGraphEdgeDesc(0, 0, 1, 0), IntermediateGraphEdgeDesc(1, 0, 2, 0),
                      IntermediateGraphEdgeDesc(2, 0, 3, 0)])


def codes(rng, rows, w, dtype, distinct=4):
    """Rows drawn from a few distinct codes: many equal distances (ties)."""
    pool = testing.sample(dtype, (distinct, w), rng)
    return pool[rng.integers(0, distinct, rows)]


@pytest.mark.parametrize("dtype, w", [(U8, 32), (U32, 8), (U64, 4), (DataType.INT16, 6), (U32, 3)])
@pytest.mark.parametrize("k", [1, 5, 49])
def test_the_hamming_search_graph_runs_the_fused_search(device, rng, dtype, w, k):
    """Canonical search: the Hamming kernels (one scan of 50 rows, no merge) and one split; a k
    above the register path's takes the reducing kernel and TOP_K1 (two dispatches)."""
    q, n = 3, 50
    data = [codes(rng, q, w, dtype), codes(rng, n, w, dtype)]
    check(device, search_graph(q, n, w, dtype, k), data, "hamming" if k <= 32 else "reduce", 2)


def test_the_hamming_route_with_uint64_indices_and_merges(device, rng, monkeypatch):
    monkeypatch.setattr(hamming_plan, "ROWS_PER_SLICE", 16)  # several tiles: the merge runs
    monkeypatch.setattr(hamming_plan, "TARGET_LANES_CPU", 1 << 30)
    q, n, w = 70, 200, 2
    data = [codes(rng, q, w, U32), codes(rng, n, w, U32, distinct=8)]
    compiled = check(device, search_graph(q, n, w, U32, 7, index_type=U64), data, "hamming", 3)
    assert compiled.dispatches == 3  # scan, merge, split


def test_the_hamming_route_in_batches_of_queries(device, rng, monkeypatch):
    """Partial lists limited to 4 KiB: batches of 5 queries, each a scan, a merge and a split
    into its rows of the outputs (at offsets that are not 16-byte multiples)."""
    monkeypatch.setattr(hamming_plan, "ROWS_PER_SLICE", 16)
    monkeypatch.setattr(hamming_plan, "TARGET_LANES_CPU", 1 << 30)
    monkeypatch.setattr(hamming_plan, "PARTIAL_BYTES", 1 << 12)
    q, n, w = 70, 201, 2  # (not the graph above: the device keeps compiled graphs by their desc)
    data = [codes(rng, q, w, U32), codes(rng, n, w, U32, distinct=8)]
    check(device, search_graph(q, n, w, U32, 7, index_type=U64), data, "hamming", 14 * 3)


@pytest.mark.parametrize("direction", [INC, DEC])
def test_largest_or_kept_distances_take_the_reduce_route(device, rng, direction):
    """DECREASING (the farthest) is not the search kernel's; asking for the distances stores
    them: both run the reducing kernel, then TOP_K1 over its output (two dispatches)."""
    q, n, w = 4, 30, 2
    data = [codes(rng, q, w, U32), codes(rng, n, w, U32)]
    check(device, search_graph(q, n, w, U32, 6, direction, keep_distances=True), data, "reduce", 2)
    if direction is DEC:
        check(device, search_graph(q, n, w, U32, 6, direction), data, "reduce", 2)


def _random_graph(rng, shape, axes_count, top_k):
    """Element-wise nodes of the table (a chain with graph inputs, some broadcast) over `shape`,
    then REDUCE over the `axes_count` trailing axes with a function its data type allows, then
    (optionally) TOP_K1 along axis 0. Returns (desc, input arrays) or None where the chain's
    type has no REDUCE function."""
    types = [t for t in DataType if t in OPERATORS[0].newest.input_types]
    dtype = types[rng.integers(len(types))]
    nodes, inputs, inter, data = [], [], [], []
    current = None  # (node index, type) of the chain's value

    def graph_input(t, broadcast):
        strides = None
        if broadcast and len(shape) > 1:
            strides = (0,) + tuple(int(np.prod(shape[d + 1:])) for d in range(1, len(shape)))
            data.append(testing.sample(t, shape[1:], rng))
        else:
            data.append(testing.sample(t, shape, rng))
        return TensorDesc(t, shape, strides)

    for _ in range(rng.integers(1, 5)):
        in_type = dtype if current is None else current[1]
        ops = [op for op in OPERATORS if in_type in op.newest.input_types]
        op = ops[rng.integers(len(ops))]
        out_type = in_type if op.same_type else op.newest.output_types[rng.integers(len(op.newest.output_types))]
        descs = []
        for j in range(len(op.inputs)):
            if j == 0 and current is not None:
                inter.append(IntermediateGraphEdgeDesc(current[0], 0, len(nodes), 0))
                descs.append(TensorDesc(in_type, shape))
            else:
                inputs.append(InputGraphEdgeDesc(len(data), len(nodes), j))
                descs.append(graph_input(in_type, rng.random() < 0.4))
        nodes.append(node(op.short, *descs, TensorDesc(out_type, shape)))
        current = (len(nodes) - 1, out_type)
    cases = [c for c in REDUCE.computed_cases() if c[1] == current[1]]
    if not cases:
        return None
    function, _, red_type = cases[rng.integers(len(cases))]
    axes = tuple(range(len(shape) - axes_count, len(shape)))
    reduced = tuple(1 if d in axes else s for d, s in enumerate(shape))
    inter.append(IntermediateGraphEdgeDesc(current[0], 0, len(nodes), 0))
    nodes.append(ReduceOperatorDesc(TensorDesc(current[1], shape), TensorDesc(red_type, reduced), function, axes))
    outputs = [OutputGraphEdgeDesc(len(nodes) - 1, 0, 0)]
    if top_k and reduced[0] > 1:
        k = int(rng.integers(1, reduced[0]))
        out = tuple(k if d == 0 else s for d, s in enumerate(reduced))
        inter.append(IntermediateGraphEdgeDesc(len(nodes) - 1, 0, len(nodes), 0))
        nodes.append(TopK1OperatorDesc(TensorDesc(red_type, reduced), TensorDesc(red_type, out), TensorDesc(U32, out),
                                       0, k, (INC, DEC)[rng.integers(2)]))
        outputs = [OutputGraphEdgeDesc(len(nodes) - 1, 0, 0), OutputGraphEdgeDesc(len(nodes) - 1, 1, 1)]
    return GraphDesc(len(data), len(outputs), nodes, inputs, outputs, inter), data


@pytest.mark.parametrize("seed", range(40))
def test_random_prefix_then_reduce(device, seed):
    """Random element-wise chains of the table, every data type, broadcast inputs, then REDUCE
    over 1 or 2 trailing axes (one dispatch), sometimes then TOP_K1 (two); inputs hold the edge
    values (equal extremes: ARGMIN/ARGMAX and TOP_K1 ties)."""
    rng = np.random.default_rng(seed)
    made = None
    while made is None:
        shape = tuple(int(s) for s in rng.integers(1, 7, size=rng.integers(2, 4)))
        top_k = bool(rng.integers(2))
        made = _random_graph(rng, shape, int(rng.integers(1, 3)), top_k)
    desc, data = made
    check(device, desc, data, "reduce", 1 + (desc.output_count == 2))


def test_reduce_output_to_two_graph_outputs_copies_it(device, rng):
    t, r = TensorDesc(U32, (5, 9)), TensorDesc(U32, (5, 1))
    desc = GraphDesc(1, 2, [node("bit_not", t, t), ReduceOperatorDesc(t, r, F.MAX, (1,))], [InputGraphEdgeDesc(0, 0, 0)],
                     [OutputGraphEdgeDesc(1, 0, 0), OutputGraphEdgeDesc(1, 0, 1)], [IntermediateGraphEdgeDesc(0, 0, 1, 0)])
    check(device, desc, [testing.sample(U32, (5, 9), rng)], "reduce", 2)


def _chain(reduce_axes=(1,), extra=None):
    t = TensorDesc(U32, (4, 6))
    out = TensorDesc(U32, tuple(1 if d in reduce_axes else s for d, s in enumerate((4, 6))))
    nodes = [node("bit_not", t, t), ReduceOperatorDesc(t, out, F.SUM, reduce_axes)]
    return t, out, nodes


@pytest.mark.parametrize("case, node_index, field", [
    ("axes not trailing", 1, "Axes"),
    ("prefix node is a graph output", 0, "OutputEdges"),
    ("element-wise after the REDUCE", 2, "operator"),
    ("two REDUCE nodes", 2, "operator"),
    ("TOP_K1 without a REDUCE", 0, "operator"),
    ("TOP_K1 of a graph input", 2, "InputTensor"),
    ("element-wise after the TOP_K1", 3, "operator"),
])
def test_shapes_the_compiler_does_not_fuse_are_refused_by_node(device, case, node_index, field):
    t, r0 = TensorDesc(U32, (4, 6)), TensorDesc(U32, (1, 6))
    r1 = TensorDesc(U32, (4, 1))
    if case == "axes not trailing":
        desc = GraphDesc(1, 1, [node("bit_not", t, t), ReduceOperatorDesc(t, r0, F.SUM, (0,))],
                         [InputGraphEdgeDesc(0, 0, 0)], [OutputGraphEdgeDesc(1, 0, 0)], [IntermediateGraphEdgeDesc(0, 0, 1, 0)])
    elif case == "prefix node is a graph output":
        desc = GraphDesc(1, 2, [node("bit_not", t, t), ReduceOperatorDesc(t, r1, F.SUM, (1,))],
                         [InputGraphEdgeDesc(0, 0, 0)], [OutputGraphEdgeDesc(1, 0, 0), OutputGraphEdgeDesc(0, 0, 1)],
                         [IntermediateGraphEdgeDesc(0, 0, 1, 0)])
    elif case == "element-wise after the REDUCE":
        desc = GraphDesc(1, 1, [node("bit_not", t, t), ReduceOperatorDesc(t, r1, F.SUM, (1,)), node("bit_not", r1, r1)],
                         [InputGraphEdgeDesc(0, 0, 0)], [OutputGraphEdgeDesc(2, 0, 0)],
                         [IntermediateGraphEdgeDesc(0, 0, 1, 0), IntermediateGraphEdgeDesc(1, 0, 2, 0)])
    elif case == "two REDUCE nodes":
        desc = GraphDesc(1, 2, [node("bit_not", t, t), ReduceOperatorDesc(t, r1, F.SUM, (1,)),
                                ReduceOperatorDesc(t, r1, F.MAX, (1,))],
                         [InputGraphEdgeDesc(0, 0, 0)], [OutputGraphEdgeDesc(1, 0, 0), OutputGraphEdgeDesc(2, 0, 1)],
                         [IntermediateGraphEdgeDesc(0, 0, 1, 0), IntermediateGraphEdgeDesc(0, 0, 2, 0)])
    elif case == "TOP_K1 without a REDUCE":
        k = TensorDesc(U32, (4, 2))
        desc = GraphDesc(1, 2, [TopK1OperatorDesc(t, k, k, 1, 2, INC)], [InputGraphEdgeDesc(0, 0, 0)],
                         [OutputGraphEdgeDesc(0, 0, 0), OutputGraphEdgeDesc(0, 1, 1)])
    elif case == "TOP_K1 of a graph input":
        k = TensorDesc(U32, (2, 1))
        desc = GraphDesc(2, 3, [node("bit_not", t, t), ReduceOperatorDesc(t, r1, F.SUM, (1,)),
                                TopK1OperatorDesc(r1, k, k, 0, 2, INC)],
                         [InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 2, 0)],
                         [OutputGraphEdgeDesc(1, 0, 0), OutputGraphEdgeDesc(2, 0, 1), OutputGraphEdgeDesc(2, 1, 2)],
                         [IntermediateGraphEdgeDesc(0, 0, 1, 0)])
    else:
        k = TensorDesc(U32, (2, 1))
        desc = GraphDesc(1, 1, [node("bit_not", t, t), ReduceOperatorDesc(t, r1, F.SUM, (1,)),
                                TopK1OperatorDesc(r1, k, k, 0, 2, INC), node("bit_not", k, k)],
                         [InputGraphEdgeDesc(0, 0, 0)], [OutputGraphEdgeDesc(3, 0, 0)],
                         [IntermediateGraphEdgeDesc(0, 0, 1, 0), IntermediateGraphEdgeDesc(1, 0, 2, 0),
                          IntermediateGraphEdgeDesc(2, 1, 3, 0)])
    with pytest.raises(ValidationError) as info:
        device.compile_graph(desc)
    assert info.value.operator.startswith(f"DML_GRAPH_DESC node {node_index}") and info.value.field == field
    assert "REDUCE" in info.value.allowed


def test_top_k1_output_indices_are_edges_of_their_own(device):
    """A TOP_K1 has two outputs: FromNodeOutputIndex 2 is refused, 1 names the indices, whose
    type an intermediate edge checks."""
    t, r, k = TensorDesc(U32, (4, 6)), TensorDesc(U32, (4, 1)), TensorDesc(U32, (2, 1))
    nodes = [ReduceOperatorDesc(t, r, F.SUM, (1,)), TopK1OperatorDesc(r, k, k, 0, 2, INC)]
    edges = dict(input_edges=[InputGraphEdgeDesc(0, 0, 0)], intermediate_edges=[IntermediateGraphEdgeDesc(0, 0, 1, 0)])
    with pytest.raises(ValidationError) as info:
        device.compile_graph(GraphDesc(1, 1, nodes, output_edges=[OutputGraphEdgeDesc(1, 2, 0)], **edges))
    assert info.value.field == "FromNodeOutputIndex" and "node 1" in info.value.allowed
    only_indices = GraphDesc(1, 1, nodes, output_edges=[OutputGraphEdgeDesc(1, 1, 0)], **edges)
    data = np.arange(24, dtype=np.uint32).reshape(4, 6) % 5  # REDUCE of a graph input: the program is a load
    check(device, only_indices, [data], "reduce", 2)


def test_recorded_in_a_command_list_after_an_element_wise_operator(device, rng):
    """The search graph recorded behind a BIT_NOT that writes its queries: the barriers between
    the recorded dispatches hold (the scan reads what BIT_NOT wrote), twice over."""
    q, n, w, k = 5, 40, 2, 4
    desc = search_graph(q, n, w, U32, k)
    compiled = device.compile_graph(desc)
    raw, database = codes(rng, q, w, U32), codes(rng, n, w, U32)
    flip = device.create_operator(node("bit_not", TensorDesc(U32, (q, w)), TensorDesc(U32, (q, w))))
    source, queries, db = device.upload(raw), device.allocate(raw.nbytes), device.upload(database)
    outs = [device.upload(np.full(q * k * 4, 0xA5, np.uint8)) for _ in range(2)]
    commands = dmlgpu.CommandList(device)
    commands.record(flip, [dmlgpu.Binding(source)], [dmlgpu.Binding(queries)])
    commands.record(compiled, [dmlgpu.Binding(queries), dmlgpu.Binding(db)], [dmlgpu.Binding(b) for b in outs])
    expected = reference(desc, [(~raw).view(np.uint8).reshape(-1), database.view(np.uint8).reshape(-1)],
                         [np.full(q * k * 4, 0xA5, np.uint8)] * 2)
    for _ in range(2):
        commands.execute()
        assert all(np.array_equal(b.read(), e) for b, e in zip(outs, expected))


@pytest.mark.parametrize("direction", [INC, DEC])
@pytest.mark.parametrize("function, index_type", [(F.SUM, U32), (F.MAX, U64), (F.ARGMIN, U32)])
def test_ties_through_reduce_then_top_k(device, rng, direction, function, index_type):
    """x & 3 (a constant mask) summed, maxed or arg-minned over 2 words: a handful of values over
    40 rows, so TOP_K1 meets long runs of ties in either direction (ascending index each)."""
    shape, k = (3, 40, 2), 17
    t, c = TensorDesc(U32, shape), TensorDesc(U32, shape, (0, 0, 0))
    red_type = U32
    r, out = TensorDesc(red_type, (3, 40, 1)), (3, k, 1)
    nodes = [scalar(3, U32, "mask"), node("bit_and", t, c, t), ReduceOperatorDesc(t, r, function, (2,)),
             TopK1OperatorDesc(r, TensorDesc(red_type, out), TensorDesc(index_type, out), 1, k, direction)]
    desc = GraphDesc(1, 2, nodes, [InputGraphEdgeDesc(0, 1, 0)], [OutputGraphEdgeDesc(3, 0, 0), OutputGraphEdgeDesc(3, 1, 1)],
                     [IntermediateGraphEdgeDesc(0, 0, 1, 1), IntermediateGraphEdgeDesc(1, 0, 2, 0),
                      IntermediateGraphEdgeDesc(2, 0, 3, 0)])
    check(device, desc, [rng.integers(0, 2**32, shape, dtype=np.uint32)], "reduce", 2)


def test_a_prefix_beyond_the_kernel_and_in_place_bindings_are_refused(device):
    """50 element-wise nodes before the REDUCE exceed the largest program (48 slots): refused at
    compile time naming the REDUCE node; an output bound over the input is refused at execute."""
    t, r = TensorDesc(U32, (4, 6)), TensorDesc(U32, (4, 1))
    many = 50
    nodes = [node("bit_not", t, t) for _ in range(many)] + [ReduceOperatorDesc(t, r, F.SUM, (1,))]
    desc = GraphDesc(1, 1, nodes, [InputGraphEdgeDesc(0, 0, 0)], [OutputGraphEdgeDesc(many, 0, 0)],
                     [IntermediateGraphEdgeDesc(i, 0, i + 1, 0) for i in range(many)])
    with pytest.raises(ValidationError) as info:
        device.compile_graph(desc)
    assert info.value.operator.startswith(f"DML_GRAPH_DESC node {many}") and "at most 48" in info.value.allowed
    small = GraphDesc(1, 1, nodes[-2:], [InputGraphEdgeDesc(0, 0, 0)], [OutputGraphEdgeDesc(1, 0, 0)],
                      [IntermediateGraphEdgeDesc(0, 0, 1, 0)])
    compiled = device.compile_graph(small)
    buffer = device.upload(np.zeros(24, np.uint32))
    with pytest.raises(ValidationError, match="an output may share bytes with an input only over an identical"):
        compiled.execute([dmlgpu.Binding(buffer)], [dmlgpu.Binding(buffer, 0, 16)])
    with pytest.raises(ValidationError, match="ends in a REDUCE runs as 1 dispatch.*no output may alias an input"):
        compiled.execute([dmlgpu.Binding(buffer, 0, 96)], [dmlgpu.Binding(buffer, 0, 96)])
