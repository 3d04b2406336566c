"""Graphs for the graph tests: a reference that runs a graph's nodes one by one through
`dmlgpu.table.reference` on the raw bytes of its bindings, and helpers that build graphs."""
from __future__ import annotations

import numpy as np

import dmlgpu
from dmlgpu import Binding, DataType, ConstantDataGraphNodeDesc, GraphDesc, InputGraphEdgeDesc, IntermediateGraphEdgeDesc, OutputGraphEdgeDesc, TensorDesc
from dmlgpu.describe.operator_descs import DESC_CLASSES
from dmlgpu.table.operators import BY_SHORT, REDUCE_FAMILY, TOP_K_FAMILY, AxisDirection, ReduceFunction
from dmlgpu.table.reference import REFERENCES
from dmlgpu.table.reference import reduce as reference_reduce
from dmlgpu.table.reference import top_k as reference_top_k
from dmlgpu.describe.validation import validate_graph

from conftest import POISON

GUARD = 32  # poisoned bytes before and after every output range


def view(data: np.ndarray, desc: TensorDesc, offset: int = 0) -> np.ndarray:
    """The elements `desc` reads from the bytes `data` (starting at byte `offset`)."""
    dtype = desc.data_type.numpy
    span = data[offset:]
    span = span[:span.size // dtype.itemsize * dtype.itemsize].view(dtype)
    return np.lib.stride_tricks.as_strided(span, desc.sizes, [s * dtype.itemsize for s in desc.effective_strides],
                                           writeable=False)


def reference(graph_desc: GraphDesc, inputs: list, outputs: list) -> list:
    """Graph outputs' bytes after running the nodes one by one: `inputs` are the bytes bound to
    each graph input, `outputs` the bytes bound to each output before (returned changed copies)."""
    graph = validate_graph(graph_desc)
    values = {}
    for n in graph.order:
        node = graph.nodes[n]
        if node.op is None:
            continue
        args = []
        for j, desc in enumerate(node.input_descs):
            kind, k = graph.feeds[(n, j)]
            if kind == "input":
                args.append(np.array(view(inputs[k], desc)))
            elif graph.nodes[k].op is None:
                data = np.frombuffer(graph.nodes[k].data + bytes(8), dtype=np.uint8)
                args.append(np.array(view(data, desc)))
            else:
                args.append(values[k][graph.ports.get((n, j), 0)])
        out_type = node.output_desc.data_type
        attributes = node.operator_desc.attribute_values()
        if node.op.family == REDUCE_FAMILY:
            values[n] = (reference_reduce(args[0], ReduceFunction(attributes["Function"]), tuple(attributes["Axes"]),
                                          out_type.numpy),)
        elif node.op.family == TOP_K_FAMILY:
            values[n] = reference_top_k(args[0], attributes["Axis"], attributes["K"],
                                        AxisDirection(attributes["AxisDirection"]),
                                        node.output_descs[1].data_type.numpy)
        else:
            function = REFERENCES[node.op.short]
            values[n] = (np.asarray(function(*args) if node.op.same_type else function(*args, out_type.numpy)),)
    results = []
    for j, n in enumerate(graph.outputs):
        out = outputs[j].copy()
        desc = graph.output_desc(j)
        dtype = desc.data_type.numpy
        target = np.lib.stride_tricks.as_strided(out[:out.size // dtype.itemsize * dtype.itemsize].view(dtype),
                                                 desc.sizes, [s * dtype.itemsize for s in desc.effective_strides])
        target[...] = values[n][graph.output_ports[j]]
        results.append(out)
    return results


def output_sizes(graph_desc) -> list:
    """Bytes bound to each graph output: its TotalTensorSizeInBytes."""
    graph = validate_graph(graph_desc)
    return [graph.output_desc(j).total_size for j in range(len(graph.outputs))]


def run(device, compiled, graph_desc, input_data: list, alias=None, repeat=1):
    """Execute a compiled graph on fresh buffers; each output range is poisoned and has GUARD
    poisoned bytes on both sides. `alias[j] = k` binds output j to graph input k's range.
    Returns (outputs' bytes from the device, the reference's)."""
    alias = alias or {}
    input_data = [np.concatenate([d, np.zeros(-len(d) % 4, np.uint8)]) for d in input_data]
    in_buffers = [device.upload(d) for d in input_data]
    in_bindings = [Binding(b) for b in in_buffers]
    out_bindings, before = [], []
    for j, size in enumerate(output_sizes(graph_desc)):
        if j in alias:
            out_bindings.append(in_bindings[alias[j]])
            before.append(np.array(input_data[alias[j]]))
            continue
        buffer = device.upload(np.full(size + 2 * GUARD, POISON, dtype=np.uint8))
        out_bindings.append(Binding(buffer, GUARD, size))
        before.append(np.full(size, POISON, dtype=np.uint8))
    expected = reference(graph_desc, [np.array(d) for d in input_data], before)
    for _ in range(repeat):
        compiled.execute(in_bindings, out_bindings)
    got = []
    for j, binding in enumerate(out_bindings):
        whole = binding.buffer.read()
        if j in alias:
            got.append(whole[:len(input_data[alias[j]])])
        else:
            size = binding.size_in_bytes
            assert (whole[:GUARD] == POISON).all() and (whole[GUARD + size:] == POISON).all(), \
                f"output {j} wrote outside its range"
            got.append(whole[GUARD:GUARD + size])
    return got, expected


def node(op_short: str, *descs) -> object:
    """An operator descriptor of the table by short name, from its tensors' descriptions."""
    return DESC_CLASSES[BY_SHORT[op_short].name](*descs)


def scalar(value: int, data_type, name=None) -> ConstantDataGraphNodeDesc:
    """A constant node holding one element of `data_type` (read through a broadcast description)."""
    size = data_type.size
    return ConstantDataGraphNodeDesc(int(value % (1 << (8 * size))).to_bytes(size, "little"), name)


U8, U32 = DataType.UINT8, DataType.UINT32


def int4_unpack(n):
    t, c = TensorDesc(U8, (n,)), TensorDesc(U8, (n,), (0,))
    nodes = [scalar(15, U8, "mask"), scalar(4, U8, "four"), node("bit_and", t, c, t), node("bit_shift_right", t, c, t)]
    return GraphDesc(1, 2, nodes, [InputGraphEdgeDesc(0, 2, 0), InputGraphEdgeDesc(0, 3, 0)],
                     [OutputGraphEdgeDesc(2, 0, 0), OutputGraphEdgeDesc(3, 0, 1)],
                     [IntermediateGraphEdgeDesc(0, 0, 2, 1), IntermediateGraphEdgeDesc(1, 0, 3, 1)])

def seven_step_chain(n, dtype=U32):
    """x^y, <<3, &m, |k, ~, >>1, ^x, then BIT_COUNT -> uint8 as a second output."""
    t, c = TensorDesc(dtype, (n,)), TensorDesc(dtype, (n,), (0,))
    nodes = [node("bit_xor", t, t, t), scalar(3, dtype), node("bit_shift_left", t, c, t),
             scalar(0x0F0F0F0F, dtype), node("bit_and", t, c, t), scalar(0x10101010, dtype), node("bit_or", t, c, t),
             node("bit_not", t, t), scalar(1, dtype), node("bit_shift_right", t, c, t), node("bit_xor", t, t, t),
             node("bit_count", t, TensorDesc(U8, (n,)))]
    inter = [(0, 2, 0), (1, 2, 1), (2, 4, 0), (3, 4, 1), (4, 6, 0), (5, 6, 1), (6, 7, 0), (7, 9, 0), (8, 9, 1),
             (9, 10, 0), (10, 11, 0)]
    return GraphDesc(2, 2, nodes, [InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 0, 1), InputGraphEdgeDesc(0, 10, 1)],
                     [OutputGraphEdgeDesc(10, 0, 0), OutputGraphEdgeDesc(11, 0, 1)],
                     [IntermediateGraphEdgeDesc(a, 0, b, j) for a, b, j in inter])


__all__ = ["GUARD", "int4_unpack", "seven_step_chain", "reference", "run", "node", "scalar", "view", "GraphDesc", "InputGraphEdgeDesc",
           "IntermediateGraphEdgeDesc", "OutputGraphEdgeDesc", "dmlgpu"]
