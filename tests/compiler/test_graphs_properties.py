"""Random DAGs of up to 16 table operators compiled with compile_graph, bit for bit against the
nodes run one by one through dmlgpu.table.reference: every data type, BIT_COUNT's narrower outputs
inside the graph, graph inputs packed / broadcast / padded and read by several nodes in
different layouts, scalar and array constants, shared intermediates, several outputs (packed or
padded), outputs bound in place over an input; outputs poisoned, guard bytes around each."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from dmlgpu import ConstantDataGraphNodeDesc, GraphDesc, InputGraphEdgeDesc, IntermediateGraphEdgeDesc, OutputGraphEdgeDesc, TensorDesc, testing
from dmlgpu.table.dtypes import ALL
from dmlgpu.table.operators import OPERATORS, field_name

from graph_cases import node, run

EXAMPLES = 40 if os.environ.get("DMLGPU_HYPOTHESIS_PROFILE", "ci") == "ci" else 2000


def layout(draw, dtype, shape, kind):
    """An input description of `shape`: packed, broadcast along some dimensions, or padded rows."""
    if kind == "packed":
        return TensorDesc(dtype, shape)
    if kind == "broadcast":
        keep = [draw(st.booleans()) for _ in shape]
        strides, step = [0] * len(shape), 1
        for d in reversed(range(len(shape))):
            if keep[d]:
                strides[d], step = step, step * shape[d]
        return TensorDesc(dtype, shape, tuple(strides))
    pad = draw(st.integers(1, 3))
    strides, step = [], 1
    for d, size in reversed(list(enumerate(shape))):
        strides.append(step)
        step = step * size + (pad if d == len(shape) - 1 else 0)
    return TensorDesc(dtype, shape, tuple(reversed(strides)))


@st.composite
def graphs(draw):
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=1, max_size=3)))
    main = draw(st.sampled_from(ALL))
    count = draw(st.integers(1, 16))
    nodes, input_edges, inter = [], [], []
    inputs = []  # (dtype, [descs read through])
    pool = {main: []}  # dtype -> node indices computing it
    users = {}

    def operand(dtype, to, j):
        choice = draw(st.sampled_from(["node", "node", "input", "old input", "scalar", "array"]))
        if choice == "node" and pool.get(dtype):
            src = draw(st.sampled_from(pool[dtype]))
            inter.append(IntermediateGraphEdgeDesc(src, 0, to, j))
            users.setdefault(src, []).append(to)
            return TensorDesc(dtype, shape)
        if choice in ("scalar", "array"):
            desc = layout(draw, dtype, shape, "broadcast" if choice == "scalar" else "packed")
            if choice == "scalar":
                desc = TensorDesc(dtype, shape, (0,) * len(shape))
            elements = 1 if choice == "scalar" else int(np.prod(shape))
            data = testing.sample(dtype, (elements,), np.random.default_rng(draw(st.integers(0, 2**16))))
            nodes.append(("constant", ConstantDataGraphNodeDesc(data.tobytes())))
            inter.append(("constant", len(nodes) - 1, to, j))
            return desc
        same = [k for k, (t, _) in enumerate(inputs) if t == dtype]
        kind = draw(st.sampled_from(["packed", "packed", "broadcast", "padded"]))
        desc = layout(draw, dtype, shape, kind)
        if choice == "old input" and same:
            k = draw(st.sampled_from(same))
        else:
            k = len(inputs)
            inputs.append((dtype, []))
        inputs[k][1].append(desc)
        input_edges.append(InputGraphEdgeDesc(k, to, j))
        return desc

    ops = []
    for _ in range(count):
        dtype = draw(st.sampled_from(sorted(pool, key=lambda t: t.value)))
        allowed = [op for op in OPERATORS if dtype in op.newest.input_types]
        op = draw(st.sampled_from(allowed))
        out_type = dtype if op.same_type else draw(st.sampled_from(op.newest.output_types))
        to = len(nodes)
        nodes.append(None)
        descs = [operand(dtype, to, j) for j in range(len(op.inputs))]
        nodes[to] = ("op", op, descs, TensorDesc(out_type, shape))
        ops.append(to)
        pool.setdefault(out_type, []).append(to)
    # Renumber: constants were appended while their consumer's slot was reserved, so indices hold.
    sinks = [n for n in ops if n not in users]
    extra = [n for n in ops if n in users and draw(st.integers(0, 9)) == 0]
    outs = sinks + extra
    final = []
    for n, item in enumerate(nodes):
        if item[0] == "constant":
            final.append(item[1])
            continue
        _, op, descs, out = item
        if n in sinks and draw(st.integers(0, 3)) == 0:
            out = layout(draw, out.data_type, shape, "padded")
        final.append(node(op.short, *descs, out))
    edges = [IntermediateGraphEdgeDesc(e[1], 0, e[2], e[3]) if isinstance(e, tuple) else e for e in inter]
    desc = GraphDesc(len(inputs), len(outs), final, input_edges, [OutputGraphEdgeDesc(n, 0, j) for j, n in enumerate(outs)],
                     edges)
    # In place: an output over an input of the same width read only in the output's (packed) layout.
    alias = {}
    if draw(st.integers(0, 2)) == 0:
        for j, n in enumerate(outs):
            out_desc = getattr(final[n], field_name(nodes[n][1].output))
            for k, (dtype, reads) in enumerate(inputs):
                if (k not in alias.values() and out_desc.is_packed and dtype.bits == out_desc.data_type.bits
                        and all(r.is_packed for r in reads)):
                    alias[j] = k
                    break
            if alias:
                break
    seed = draw(st.integers(0, 2**32 - 1))
    return desc, inputs, shape, alias, seed


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(graphs())
def test_random_graph_matches_nodes_run_one_by_one(device, case):
    desc, inputs, shape, alias, seed = case
    note(f"shape {shape}, alias {alias}, {len(desc.nodes)} nodes")
    rng = np.random.default_rng(seed)
    data = []
    for dtype, reads in inputs:
        size = max(r.total_size for r in reads) if reads else 4
        data.append(testing.sample(dtype, (size // dtype.size,), rng).view(np.uint8))
    compiled = device.compile_graph(desc)
    if compiled.dispatches > 1:  # one shape split over dispatches (more than 8 outputs): never in place
        alias = {}
    got, expected = run(device, compiled, desc, data, alias=alias)
    for j, (g, e) in enumerate(zip(got, expected)):
        assert np.array_equal(g, e), f"graph output {j}: bytes {np.flatnonzero(g != e)[:10]} differ"
