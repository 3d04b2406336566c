"""`DML_GRAPH_DESC` and its parts: nodes and the three kinds of edges (DirectML's graph API).

A graph is compiled with `Device.compile_graph(desc, feature_level)`
(`IDMLDevice1::CompileGraph`); `dmlgpu.describe.validation.validate_graph` decides whether it is valid.
Nodes are operator nodes (`OperatorGraphNodeDesc`, any descriptor of the table; a bare
descriptor is accepted as the same) or constant nodes (`ConstantDataGraphNodeDesc`, small
immutable operands: a shift amount, a mask; at most `MAX_CONSTANT_BYTES`). A constant's bytes
are read through the tensor description of the node input it feeds, as if they were bound there.

A description's `repr` shows a constant of more than `SHOWN_BYTES` by its length and SHA-256
(hashed once per node: its `bytes` never change), so `Device.compile_graph` keys its cache by a
digest of the repr: a cache hit costs the same whatever the constants' size.
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any, Sequence

#: The most bytes a constant node may hold (`validate_graph` refuses more): a constant is part
#: of the compiled graph, kept and keyed with it; larger data is bound as a graph input.
MAX_CONSTANT_BYTES = 1 << 20
#: Constants up to this many bytes show their bytes in a repr; longer ones their SHA-256.
SHOWN_BYTES = 64


@dataclass(frozen=True)
class OperatorGraphNodeDesc:
    """`DML_OPERATOR_GRAPH_NODE_DESC`: an operator descriptor of the table, and a name."""

    operator_desc: object
    name: str | None = None


@dataclass(frozen=True)
class ConstantDataGraphNodeDesc:
    """`DML_CONSTANT_DATA_GRAPH_NODE_DESC`: immutable bytes (at most `MAX_CONSTANT_BYTES`), one
    output (index 0)."""

    data: bytes
    name: str | None = None

    def __repr__(self):
        return f"ConstantDataGraphNodeDesc(data={self._shown}, name={self.name!r})"

    @property
    def _shown(self) -> str:
        data = self.data
        if not isinstance(data, (bytes, bytearray)) or len(data) <= SHOWN_BYTES:
            return repr(data)
        if len(data) > MAX_CONSTANT_BYTES:  # refused by validation: never compiled nor cached
            return f"<{type(data).__name__} of {len(data)} bytes, more than MAX_CONSTANT_BYTES>"
        digest = self._digest if type(data) is bytes else hashlib.sha256(data).hexdigest()
        return f"<{type(data).__name__} of {len(data)} bytes, sha256 {digest}>"

    @functools.cached_property
    def _digest(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class InputGraphEdgeDesc:
    """`DML_INPUT_GRAPH_EDGE_DESC`: graph input -> a node's input."""

    graph_input_index: int
    to_node_index: int
    to_node_input_index: int
    name: str | None = None


@dataclass(frozen=True)
class OutputGraphEdgeDesc:
    """`DML_OUTPUT_GRAPH_EDGE_DESC`: a node's output -> graph output."""

    from_node_index: int
    from_node_output_index: int
    graph_output_index: int
    name: str | None = None


@dataclass(frozen=True)
class IntermediateGraphEdgeDesc:
    """`DML_INTERMEDIATE_GRAPH_EDGE_DESC`: a node's output -> another node's input."""

    from_node_index: int
    from_node_output_index: int
    to_node_index: int
    to_node_input_index: int
    name: str | None = None


@dataclass(frozen=True)
class GraphDesc:
    """`DML_GRAPH_DESC`: counts of graph inputs and outputs, nodes and edges.

    Args:
        input_count: graph inputs, bound in this order by `execute(inputs=...)`.
        output_count: graph outputs, bound by `execute(outputs=...)`.
        nodes: `OperatorGraphNodeDesc`, `ConstantDataGraphNodeDesc` (or a bare operator descriptor).
        input_edges: `InputGraphEdgeDesc`s: graph input -> node input.
        output_edges: `OutputGraphEdgeDesc`s: node output -> graph output.
        intermediate_edges: `IntermediateGraphEdgeDesc`s: node output -> node input.
    """

    input_count: int
    output_count: int
    # Lists or tuples given; tuples once made.
    nodes: Sequence[Any] = field(default=())
    input_edges: Sequence[InputGraphEdgeDesc] = field(default=())
    output_edges: Sequence[OutputGraphEdgeDesc] = field(default=())
    intermediate_edges: Sequence[IntermediateGraphEdgeDesc] = field(default=())

    def __post_init__(self):
        for name in ("nodes", "input_edges", "output_edges", "intermediate_edges"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))




@dataclass(frozen=True)
class ValidNode:
    """A validated node: its table row (None for a constant), descriptor or bytes, and label."""

    index: int
    label: str  # "node 3 ('mask')", for messages
    op: object  # operators.Operator, or None for a constant node
    operator_desc: object  # the operator descriptor, or None
    data: bytes | None  # a constant node's bytes
    input_descs: tuple  # TensorDesc per input (operator nodes)
    output_desc: object  # TensorDesc of the (first) output (operator nodes), else None
    output_descs: tuple = ()  # TensorDesc per output, in the row's order (TOP_K1: values, indices)


@dataclass(frozen=True)
class ValidGraph:
    """What `validate_graph` proved about a graph, for the compiler.

    `feeds[(node, input)]` is ("input", graph input index) or ("node", node index), and
    `ports[(node, input)]` the feeding node's output index (0 but for a TOP_K1's indices);
    `outputs[j]` is the node computing graph output j and `output_ports[j]` its output index;
    `order` is a topological order of the nodes; `input_reads[k]` lists the (node, input) pairs
    reading graph input k.
    """

    nodes: tuple
    feeds: dict
    outputs: tuple
    order: tuple
    input_reads: tuple
    ports: dict = field(default_factory=dict)
    output_ports: tuple = ()

    def output_desc(self, j: int):
        """Graph output j's tensor description."""
        return self.nodes[self.outputs[j]].output_descs[self.output_ports[j]]


@dataclass(frozen=True)
class FusedReduction:
    """What `validate_fused_reduction` proved: a graph of element-wise nodes (`prefix`, in
    topological order) ending in the REDUCE node `reduce` over its input's trailing `axes`,
    optionally followed by the TOP_K1 node `top_k` (None) of the REDUCE's output."""

    prefix: tuple
    reduce: int
    top_k: int | None

__all__ = ["ConstantDataGraphNodeDesc", "FusedReduction", "GraphDesc", "InputGraphEdgeDesc", "IntermediateGraphEdgeDesc",
           "OperatorGraphNodeDesc", "OutputGraphEdgeDesc"]
