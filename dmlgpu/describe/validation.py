"""The one place that decides whether an operator descriptor is valid at a feature level.

Rules come from the operator table and DirectML's buffer-tensor rules (`docs/guide/semantics.md`
§1-2); each rejection raises `ValidationError` naming operator, tensor, field, value and what is
allowed. Binding-time rules live in `dmlgpu.describe.bindings`, driven by the same table.

Longer than 500 lines on purpose: it is the one place validation lives, for operator
descriptors, graphs (`validate_graph`) and the fused shape of a graph that ends in a reduction
(`validate_fused_reduction`); splitting it would put validation in two places.
"""
from __future__ import annotations

import numpy as np

from .operator_descs import DESC_CLASSES, OperatorDesc
from ..table.dtypes import DataType
from ..errors import DataTypeError, ValidationError
from ..table.feature_levels import FeatureLevel
from .graph_descs import MAX_CONSTANT_BYTES, ConstantDataGraphNodeDesc, FusedReduction, GraphDesc, InputGraphEdgeDesc, IntermediateGraphEdgeDesc, OperatorGraphNodeDesc, OutputGraphEdgeDesc, ValidGraph, ValidNode
from ..table.operators import ELEMENT_WISE, REDUCE_FAMILY, TOP_K_FAMILY, Operator
from .tensor_desc import MAX_ELEMENTS, UINT32_MAX, UINT64_MAX, TensorDesc

__all__ = ["checked_axes", "is_int", "resolve_feature_level", "support_row", "validate", "validate_fused_reduction", "validate_graph"]

#: Outputs whose layout fails the quick non-overlap proof are enumerated up to this many elements.
_OVERLAP_ENUMERATION_LIMIT = 1 << 22


def is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _names(items) -> str:
    return ", ".join(getattr(i, "name", str(i)) for i in items)


def checked_axes(axis, ndim: int, name: str) -> tuple[int, ...]:
    """A front-end `axis` argument (None: every axis; an int; a tuple of ints, negative counting
    from the end) as axes in [0, ndim), each once; else ValidationError naming `name`'s axis."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not -ndim <= a < ndim:
            raise ValidationError(name, None, "axis", axis, f"allowed: None, or integers in [{-ndim}, {ndim - 1}]")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValidationError(name, None, "axis", axis, "allowed: each axis at most once")
    return tuple(out)


def resolve_feature_level(feature_level, operator: str = "dmlgpu") -> FeatureLevel:
    """None means the newest level; otherwise a FeatureLevel or its DirectML value."""
    if feature_level is None:
        return FeatureLevel.newest()
    if is_int(feature_level):
        try:
            return FeatureLevel(int(feature_level))
        except ValueError:
            pass
    raise ValidationError(operator, None, "feature_level", feature_level,
                          f"allowed: None or one of {_names(FeatureLevel)}")


def support_row(op: Operator, level: FeatureLevel, function=None):
    """The operator's tensor-support table at `level` (for enum member `function`, where its
    tables depend on one); an error if it does not exist there."""
    row = op.support_at(level, function)
    if row is None:
        if op.support_at(level) is not None:
            raise ValidationError(op.dml_name, None, "Function", function,
                                  f"not available at {level.dml_name}")
        raise ValidationError(op.dml_name, None, "feature_level", level,
                              f"the operator was introduced in {op.introduced.dml_name}")
    return row


def _enum_member(op: Operator, attribute, value):
    members = list(attribute.enum)
    if isinstance(value, bool) or not is_int(value) or int(value) not in [int(m) for m in members]:
        raise ValidationError(op.dml_name, None, attribute.name, value,
                              f"allowed: one of {', '.join(m.dml_name for m in members)}")
    return attribute.enum(int(value))


def _check_attributes(op: Operator, values: dict, sizes: tuple) -> dict:
    """The row's non-tensor members, checked against the input's `sizes` and normalised
    (enum members, axes as a tuple of ints)."""
    rank = len(sizes)
    checked = {}
    for attribute in op.attributes:
        value = values[attribute.name]

        def fail(allowed, given=value):
            raise ValidationError(op.dml_name, None, attribute.name, given, allowed)

        if attribute.kind == "enum":
            checked[attribute.name] = _enum_member(op, attribute, value)
        elif attribute.kind == "axes":
            if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                fail("allowed: a sequence of dimension indices (AxisCount is its length)")
            axes = tuple(value)
            if not axes or any(not is_int(a) or not 0 <= a < rank for a in axes):
                fail(f"allowed: 1 to {rank} integers in [0, {rank - 1}] (InputTensor.DimensionCount - 1)", axes)
            if len(set(int(a) for a in axes)) != len(axes):
                fail("allowed: distinct axes (each at most once)", axes)
            checked[attribute.name] = tuple(int(a) for a in axes)
        elif attribute.kind == "axis":
            if not is_int(value) or not 0 <= value < rank:
                fail(f"allowed: an integer in [0, {rank - 1}] (less than InputTensor.DimensionCount)")
            checked[attribute.name] = int(value)
        else:  # count: K, "greater than 0, but less than" the input's size along Axis (TOP_K1's page)
            size = sizes[checked["Axis"]]
            if not is_int(value) or not 0 < value < size:
                fail(f"allowed: an integer greater than 0 and less than the input's size along Axis ({size})"
                     if size > 1 else "none: the input's size along Axis is 1, and K must be greater than 0 "
                     "and less than it")
            checked[attribute.name] = int(value)
    return checked


def validate(operator_desc, feature_level=None) -> Operator:
    """Check an operator descriptor against DirectML's rules at `feature_level`.

    Args:
        operator_desc: one of the `ElementWise*OperatorDesc` classes.
        feature_level: a `FeatureLevel` (or its value); None means the newest.

    Returns:
        The operator's table row.

    Raises:
        ValidationError: naming operator, tensor, field, value given and what is allowed.
    """
    if not isinstance(operator_desc, OperatorDesc):
        raise ValidationError("dmlgpu", None, "operator_desc", type(operator_desc).__name__,
                              f"allowed: {', '.join(c.__name__ for c in DESC_CLASSES.values())}")
    op = operator_desc.OPERATOR
    level = resolve_feature_level(feature_level, op.dml_name)
    checked_attributes(operator_desc, level)
    return op


def checked_attributes(operator_desc, level: FeatureLevel) -> dict:
    """`validate`'s work for a descriptor at a resolved level: the row's non-tensor members,
    checked and normalised (an empty dict for element-wise rows)."""
    op = operator_desc.OPERATOR
    raw = operator_desc.attribute_values()
    function = None
    for attribute in op.attributes:  # tables that depend on an enum member: pick by its value
        if attribute.name == "Function" and any(r.functions for r in op.support):
            function = _enum_member(op, attribute, raw["Function"])
    row = support_row(op, level, function)
    tensors = operator_desc.tensor_descs()
    index_output = function in op.index_functions
    for name, desc in tensors.items():
        # Inputs, values (the table's output types) and indices (TOP_K1's second output).
        allowed_types = row.input_types if name in op.inputs else \
            row.output_types if name == op.output else row.index_types
        _check_tensor(op, level, name, desc, row.dims, allowed_types, name in op.outputs, function)
    if op.family == ELEMENT_WISE:
        _check_agreement(op, tensors)
        return {}
    source = tensors[op.inputs[0]]
    attributes = _check_attributes(op, raw, source.sizes)
    if not index_output and op.same_type:
        for name in op.outputs[:1]:
            if tensors[name].data_type != source.data_type:
                raise ValidationError(op.dml_name, name, "DataType", tensors[name].data_type,
                                      f"must equal {op.inputs[0]}.DataType ({source.data_type.name})")
    why = op.computed(attributes.get("Function"), source.data_type)
    if why is not None:
        raise ValidationError(op.dml_name, op.inputs[0], "DataType", source.data_type, why)
    if op.family == REDUCE_FAMILY:
        expected = tuple(1 if d in attributes["Axes"] else s for d, s in enumerate(source.sizes))
    else:  # TOP_K_FAMILY: K along Axis
        expected = tuple(attributes["K"] if d == attributes["Axis"] else s for d, s in enumerate(source.sizes))
    for name in op.outputs:
        sizes = tensors[name].sizes
        if len(sizes) != len(source.sizes):
            raise ValidationError(op.dml_name, name, "DimensionCount", len(sizes),
                                  f"must equal {op.inputs[0]}.DimensionCount ({len(source.sizes)})")
        if sizes != expected:
            rule = "the reduced Axes of size 1" if op.family == REDUCE_FAMILY else "size K along Axis"
            raise ValidationError(op.dml_name, name, "Sizes", sizes,
                                  f"must be {expected}: {op.inputs[0]}.Sizes with {rule}")
    return attributes


def _tensor_support(op, name, row) -> tuple:
    """The data types a support row allows for tensor `name` (inputs, values, indices)."""
    return row.input_types if name in op.inputs else row.output_types if name == op.output else row.index_types


def _newer_level(op, level, function, takes):
    """The first level newer than `level` whose support row `takes(row)`, or None."""
    for newer in sorted(lv for lv in FeatureLevel if lv > level):
        row = op.support_at(newer, function)
        if row is not None and takes(row):
            return newer
    return None


def _allowed(level: FeatureLevel) -> str:
    """How a rejection that depends on the level starts: "allowed at <level>" where `level` is
    below the newest, which only a caller who chose it gets (None, the default, means the
    newest); at the newest, "allowed", as no other level takes more and a level the user never
    chose is no help to name."""
    return f"allowed at {level.dml_name}" if level < FeatureLevel.newest() else "allowed"


def _level_hint(newer: FeatureLevel, what: str) -> str:
    return (f"; {newer.dml_name} and newer take {what}: pass "
            f"feature_level=dmlgpu.FeatureLevel.{newer.name} (or newer)")


def _type_hint(op, level, function, name, data_type, allowed_types, is_output) -> str:
    """What the user can change so that `data_type` passes: a newer feature level that takes it,
    else a type to cast to (a reinterpreting `.view` between integers of one width, where only
    the signedness differs, as for the shifts; else `.astype`); for an output, the type to ask for."""
    newer = _newer_level(op, level, function, lambda row: data_type in _tensor_support(op, name, row))
    if newer is not None:
        return _level_hint(newer, data_type.name)
    if not allowed_types:
        return ""
    if is_output:
        return (f"; no feature level takes {data_type.name} here: ask for "
                f"{' or '.join('numpy.' + t.numpy.name for t in allowed_types)} (dtype= or out=)")
    same = [t for t in allowed_types if t.bits == data_type.bits and not t.is_float and not data_type.is_float]
    if same:
        return (f"; no feature level takes {data_type.name} here: reinterpret its bits with "
                f".view(numpy.{same[0].numpy.name})")
    kin = [t for t in allowed_types if t.kind is data_type.kind] or list(allowed_types)
    wider = [t for t in kin if t.bits >= data_type.bits]
    target = min(wider, key=lambda t: t.bits) if wider else max(kin, key=lambda t: t.bits)
    rounds = " (which may round)" if target.is_float and (data_type.bits > target.bits or not data_type.is_float) \
        else ""
    return f"; no feature level takes {data_type.name} here: cast with .astype(numpy.{target.numpy.name}){rounds}"


def _check_tensor(op, level, name, desc, dims, allowed_types, is_output, function=None):
    def fail(field, value, allowed):
        error = DataTypeError if field == "DataType" else ValidationError
        raise error(op.dml_name, name, field, value, allowed)

    if not isinstance(desc, TensorDesc):
        fail("Type", type(desc).__name__, "allowed: dmlgpu.TensorDesc")
    data_type = desc.data_type
    if not isinstance(data_type, DataType) or data_type not in allowed_types:
        hint = _type_hint(op, level, function, name, data_type, allowed_types, is_output) \
            if isinstance(data_type, DataType) and data_type is not DataType.UNKNOWN else ""
        fail("DataType", data_type, f"{_allowed(level)}: {_names(allowed_types)}{hint}")
    sizes = desc.sizes
    if not isinstance(sizes, tuple):
        fail("Sizes", sizes, "allowed: a sequence of integers")
    if len(sizes) not in dims:
        newer = _newer_level(op, level, function, lambda row: len(sizes) in row.dims)
        hint = _level_hint(newer, f"{len(sizes)} dimensions") if newer is not None else ""
        fail("DimensionCount", len(sizes),
             f"{_allowed(level)}: {_range_text(dims)}{hint}")
    for size in sizes:
        if not is_int(size) or not 1 <= size <= UINT32_MAX:
            fail("Sizes", sizes, "each size must be an integer from 1 to 2^32-1")
    if desc.element_count > MAX_ELEMENTS:
        fail("Sizes", sizes, f"a tensor may hold at most 2^32-1 elements, not {desc.element_count}")
    strides = desc.strides
    if strides is not None:
        if not isinstance(strides, tuple) or len(strides) != len(sizes):
            fail("Strides", strides, f"allowed: None or {len(sizes)} integers (one per dimension)")
        for stride in strides:
            if not is_int(stride) or not 0 <= stride <= UINT32_MAX:
                fail("Strides", strides, "each stride must be an integer from 0 to 2^32-1")
        if is_output:
            _check_output_layout(fail, sizes, strides)
    alignment = desc.guaranteed_base_offset_alignment
    if not is_int(alignment) or not 0 <= alignment <= UINT32_MAX or (
            alignment and (alignment & (alignment - 1) or alignment < data_type.size)):
        fail("GuaranteedBaseOffsetAlignment", alignment,
             f"allowed: 0, or a power of two >= the element size ({data_type.size})")
    total = desc.total_tensor_size_in_bytes
    if total is not None:
        minimum = desc.minimum_size
        if not is_int(total) or not minimum <= total <= UINT64_MAX or total % 4:
            fail("TotalTensorSizeInBytes", total,
                 f"allowed: a multiple of 4 and at least {minimum} (DMLCalcBufferTensorSize)")


def _check_output_layout(fail, sizes, strides):
    """Outputs may be strided, but no two output elements may share memory."""
    dims = [(st, s) for s, st in zip(sizes, strides) if s > 1]
    if any(st == 0 for st, _ in dims):
        fail("Strides", strides, "an output may not broadcast: a zero stride needs size 1")
    reach = 0  # one past the furthest element offset reachable by the smaller strides
    for stride, size in sorted(dims):
        if stride <= reach:
            break
        reach += stride * (size - 1)
    else:
        return
    count = 1
    for _, size in dims:
        count *= size
    if count <= _OVERLAP_ENUMERATION_LIMIT:
        offsets = np.zeros(1, dtype=np.uint64)
        for stride, size in dims:
            offsets = (offsets[:, None] + np.arange(size, dtype=np.uint64) * stride).ravel()
        if np.unique(offsets).size == offsets.size:
            return
    fail("Strides", strides, "output elements may not overlap (two elements would share memory)")


def _range_text(dims) -> str:
    if len(dims) == 1:
        return f"exactly {dims[0]}"
    return f"{dims[0]} to {dims[-1]}"


def _check_agreement(op, tensors):
    """DirectML: all tensors have the same DimensionCount and Sizes; same DataType if required."""
    items = list(tensors.items())
    first_name, first = items[0]
    for name, desc in items[1:]:
        if len(desc.sizes) != len(first.sizes):
            raise ValidationError(op.dml_name, name, "DimensionCount", len(desc.sizes),
                                  f"must equal {first_name}.DimensionCount ({len(first.sizes)})")
        if desc.sizes != first.sizes:
            raise ValidationError(op.dml_name, name, "Sizes", desc.sizes,
                                  f"must equal {first_name}.Sizes {first.sizes}")
        if op.same_type and desc.data_type != first.data_type:
            raise DataTypeError(op.dml_name, name, "DataType", desc.data_type,
                                  f"must equal {first_name}.DataType ({first.data_type.name})")


GRAPH = "DML_GRAPH_DESC"


def validate_graph(graph_desc, feature_level=None):
    """Check a `GraphDesc` (`DML_GRAPH_DESC`) against DirectML's graph rules at `feature_level`.

    Every node is valid at the level; every edge names existing graph inputs/outputs and node
    tensors; every node input is fed exactly once and every graph output exactly once; an
    intermediate edge joins tensors of one data type, sizes and layout; a constant holds at
    least the bytes its consumer reads; the graph is acyclic and every node reaches an output.

    Returns:
        A `dmlgpu.describe.graph_descs.ValidGraph`.

    Raises:
        ValidationError: naming the node (index and name) or edge, the field, the value given
            and what is allowed.
    """
    if not isinstance(graph_desc, GraphDesc):
        raise ValidationError(GRAPH, None, "graph_desc", type(graph_desc).__name__, "allowed: dmlgpu.GraphDesc")
    level = resolve_feature_level(feature_level, GRAPH)
    for name, low in (("InputCount", 0), ("OutputCount", 1)):
        count = getattr(graph_desc, _snake(name))
        if not is_int(count) or count < low:
            raise ValidationError(GRAPH, None, name, count, f"allowed: an integer >= {low}")
    nodes = _graph_nodes(graph_desc.nodes, level)
    feeds: dict = {}
    ports: dict = {}
    outputs: dict = {}
    output_ports: dict = {}

    def edge_fail(kind, i, edge, field, value, allowed):
        label = f"{kind}[{i}]" + (f" ({edge.name!r})" if getattr(edge, "name", None) else "")
        raise ValidationError(GRAPH, label, field, value, allowed)

    def check_index(kind, i, edge, field, value, count, what):
        if not is_int(value) or not 0 <= value < count:
            edge_fail(kind, i, edge, field, value, f"allowed: {what} index from 0 to {count - 1}"
                      if count else f"allowed: none ({what} count is 0)")

    def check_to(kind, i, edge, source):
        check_index(kind, i, edge, "ToNodeIndex", edge.to_node_index, len(nodes), "a node")
        node = nodes[edge.to_node_index]
        check_index(kind, i, edge, "ToNodeInputIndex", edge.to_node_input_index, len(node.input_descs),
                    f"{node.label}'s input")
        key = (edge.to_node_index, edge.to_node_input_index)
        if key in feeds:
            edge_fail(kind, i, edge, "ToNodeInputIndex", edge.to_node_input_index,
                      f"{node.label} {node.op.inputs[key[1]]} is already fed by another edge")
        feeds[key] = source

    def check_from(kind, i, edge):
        check_index(kind, i, edge, "FromNodeIndex", edge.from_node_index, len(nodes), "a node")
        source = nodes[edge.from_node_index]
        check_index(kind, i, edge, "FromNodeOutputIndex", edge.from_node_output_index,
                    len(source.op.outputs) if source.op else 1, f"{source.label}'s output")

    for kind, edges, cls in (("InputEdges", graph_desc.input_edges, InputGraphEdgeDesc),
                             ("IntermediateEdges", graph_desc.intermediate_edges, IntermediateGraphEdgeDesc),
                             ("OutputEdges", graph_desc.output_edges, OutputGraphEdgeDesc)):
        if not isinstance(edges, tuple):
            raise ValidationError(GRAPH, None, kind, edges, f"allowed: a sequence of {cls.__name__}")
        for i, edge in enumerate(edges):
            if not isinstance(edge, cls):
                edge_fail(kind, i, edge, "Type", type(edge).__name__, f"allowed: dmlgpu.{cls.__name__}")
            if cls is InputGraphEdgeDesc:
                check_index(kind, i, edge, "GraphInputIndex", edge.graph_input_index, graph_desc.input_count,
                            "a graph input")
                check_to(kind, i, edge, ("input", edge.graph_input_index))
            elif cls is IntermediateGraphEdgeDesc:
                check_from(kind, i, edge)
                check_to(kind, i, edge, ("node", edge.from_node_index))
                ports[(edge.to_node_index, edge.to_node_input_index)] = edge.from_node_output_index
                _check_intermediate(nodes[edge.from_node_index], edge.from_node_output_index, nodes[edge.to_node_index],
                                    edge.to_node_input_index, lambda f, v, a: edge_fail(kind, i, edge, f, v, a))
            else:
                check_from(kind, i, edge)
                if nodes[edge.from_node_index].op is None:
                    edge_fail(kind, i, edge, "FromNodeIndex", edge.from_node_index,
                              "allowed: an operator node (a constant node feeds node inputs only)")
                check_index(kind, i, edge, "GraphOutputIndex", edge.graph_output_index, graph_desc.output_count,
                            "a graph output")
                if edge.graph_output_index in outputs:
                    edge_fail(kind, i, edge, "GraphOutputIndex", edge.graph_output_index,
                              "each graph output is written by exactly one edge")
                outputs[edge.graph_output_index] = edge.from_node_index
                output_ports[edge.graph_output_index] = edge.from_node_output_index
    for node in nodes:
        for j, name in enumerate(node.op.inputs if node.op else ()):
            if (node.index, j) not in feeds:
                raise ValidationError(f"{GRAPH} {node.label}", name, "edge", None,
                                      "every node input is fed by exactly one edge")
    for j in range(graph_desc.output_count):
        if j not in outputs:
            raise ValidationError(GRAPH, f"graph output {j}", "OutputEdges", None,
                                  "every graph output is written by exactly one edge")
    input_reads = [[] for _ in range(graph_desc.input_count)]
    for (n, j), (kind, k) in sorted(feeds.items()):
        if kind == "input":
            input_reads[k].append((n, j))
    for k, reads in enumerate(input_reads):
        types = {nodes[n].input_descs[j].data_type for n, j in reads}
        if len(types) > 1:
            raise ValidationError(GRAPH, f"graph input {k}", "DataType", _names(sorted(types)),
                                  "every node input fed by one graph input has one data type")
    order = _topological_order(nodes, feeds)
    _check_reach(nodes, feeds, outputs)
    return ValidGraph(tuple(nodes), feeds, tuple(outputs[j] for j in range(graph_desc.output_count)), order,
                      tuple(tuple(r) for r in input_reads), ports,
                      tuple(output_ports[j] for j in range(graph_desc.output_count)))


def _snake(name: str) -> str:
    return {"InputCount": "input_count", "OutputCount": "output_count"}[name]


def _graph_nodes(items, level) -> list:
    if not isinstance(items, tuple) or not items:
        raise ValidationError(GRAPH, None, "Nodes", items, "allowed: a non-empty sequence of node descriptors")
    nodes = []
    for i, item in enumerate(items):
        name = getattr(item, "name", None)
        label = f"node {i}" + (f" ({name!r})" if name else "")
        if isinstance(item, OperatorDesc):
            item = OperatorGraphNodeDesc(item)
        if isinstance(item, ConstantDataGraphNodeDesc):
            if not isinstance(item.data, (bytes, bytearray)) or not item.data:
                raise ValidationError(f"{GRAPH} {label}", None, "Data", item.data, "allowed: non-empty bytes")
            if len(item.data) > MAX_CONSTANT_BYTES:
                raise ValidationError(f"{GRAPH} {label}", None, "Data", f"{len(item.data)} bytes",
                                      f"allowed: at most {MAX_CONSTANT_BYTES} bytes (MAX_CONSTANT_BYTES); "
                                      "bind larger data as a graph input instead")
            nodes.append(ValidNode(i, label, None, None, bytes(item.data), (), None))
            continue
        if not isinstance(item, OperatorGraphNodeDesc):
            raise ValidationError(f"{GRAPH} {label}", None, "Type", type(item).__name__,
                                  "allowed: OperatorGraphNodeDesc, ConstantDataGraphNodeDesc or an operator descriptor")
        try:
            op = validate(item.operator_desc, level)
        except ValidationError as exc:
            raise ValidationError(f"{GRAPH} {label}: {exc.operator}", exc.tensor, exc.field, exc.value,
                                  exc.allowed) from None
        tensors = list(item.operator_desc.tensor_descs().values())
        count = len(op.inputs)
        nodes.append(ValidNode(i, label, op, item.operator_desc, None, tuple(tensors[:count]), tensors[count],
                               tuple(tensors[count:])))
    return nodes


def _check_intermediate(source, port, target, j, fail):
    want = target.input_descs[j]
    if source.op is None:
        last = sum((size - 1) * stride for size, stride in zip(want.sizes, want.effective_strides))
        needed = (last + 1) * want.data_type.size
        if len(source.data) < needed:
            fail("FromNodeIndex", source.label, f"{source.label} holds {len(source.data)} bytes; "
                 f"{target.label} {target.op.inputs[j]} reads {needed}")
        return
    have = source.output_descs[port]
    for field, a, b in (("DataType", have.data_type, want.data_type), ("Sizes", have.sizes, want.sizes)):
        if a != b:
            fail(field, _show_value(a), f"must equal {target.label} {target.op.inputs[j]}.{field} "
                 f"({_show_value(b)}), the tensor it feeds")
    if any(sa != sb for size, sa, sb in zip(have.sizes, have.effective_strides, want.effective_strides) if size > 1):
        fail("Strides", have.strides, f"must match {target.label} {target.op.inputs[j]}.Strides "
             f"({want.strides}): an intermediate is read in the order it is written")


def _show_value(v):
    return v.name if isinstance(v, DataType) else v


def _topological_order(nodes, feeds) -> tuple:
    users = {n.index: [] for n in nodes}
    pending = {n.index: 0 for n in nodes}
    for (n, _), (kind, k) in feeds.items():
        if kind == "node":
            users[k].append(n)
            pending[n] += 1
    ready = [i for i, c in pending.items() if c == 0]
    order = []
    while ready:
        i = ready.pop()
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                ready.append(u)
    if len(order) != len(nodes):
        stuck = min(i for i, c in pending.items() if c)
        raise ValidationError(f"{GRAPH} {nodes[stuck].label}", None, "IntermediateEdges", "a cycle",
                              "allowed: an acyclic graph")
    return tuple(order)


def _check_reach(nodes, feeds, outputs):
    sources = {}
    for (m, _), (kind, k) in feeds.items():
        if kind == "node":
            sources.setdefault(m, []).append(k)
    live = set(outputs.values())
    stack = list(live)
    while stack:
        for k in sources.get(stack.pop(), ()):
            if k not in live:
                live.add(k)
                stack.append(k)
    for node in nodes:
        if node.index not in live:
            raise ValidationError(f"{GRAPH} {node.label}", None, "edges", "dangling",
                                  "every node must contribute to a graph output")


#: What a graph with a REDUCE or TOP_K1 node may be (the fused reduction's shape).
FUSED_SHAPE = ("the fused shape: element-wise nodes ending in one REDUCE over trailing axes, optionally "
               "followed by one TOP_K1 of the REDUCE's output")


def validate_fused_reduction(graph: ValidGraph) -> FusedReduction:
    """Check that a valid graph with REDUCE or TOP_K1 nodes has the shape the compiler fuses:
    element-wise nodes (never stored) ending in one REDUCE over its input's trailing axes,
    optionally followed by one TOP_K1 of the REDUCE's output; graph outputs come from those two.

    Raises:
        ValidationError: naming the node (index and name) that breaks the shape, the field, and
            what is supported.
    """
    nodes = graph.nodes

    def fail(n, field, value, allowed):
        raise ValidationError(f"{GRAPH} {nodes[n].label}", None, field, value, allowed)

    reduces = [n.index for n in nodes if n.op is not None and n.op.family == REDUCE_FAMILY]
    tops = [n.index for n in nodes if n.op is not None and n.op.family == TOP_K_FAMILY]
    if not reduces:
        fail(tops[0], "operator", nodes[tops[0]].op.dml_name, "allowed: a TOP_K1 of a REDUCE node's output; "
             + FUSED_SHAPE)
    for extra, what in ((reduces[1:], "one REDUCE node"), (tops[1:], "one TOP_K1 node")):
        if extra:
            fail(extra[0], "operator", nodes[extra[0]].op.dml_name, f"allowed: {what} per graph; " + FUSED_SHAPE)
    reduce, top = reduces[0], (tops[0] if tops else None)
    users: dict = {}
    for (n, _), (kind, k) in sorted(graph.feeds.items()):
        if kind == "node":
            users.setdefault(k, []).append(n)
    if top is not None and graph.feeds[(top, 0)] != ("node", reduce):
        kind, k = graph.feeds[(top, 0)]
        fail(top, "InputTensor", f"{kind} {k}", f"allowed: fed by {nodes[reduce].label}'s output; " + FUSED_SHAPE)
    for n in users.get(reduce, ()):
        if n != top:
            fail(n, "operator", nodes[n].op.dml_name, f"allowed after {nodes[reduce].label}: only a TOP_K1 of "
                 "its output; " + FUSED_SHAPE)
    for n in users.get(top, ()):
        fail(n, "operator", nodes[n].op.dml_name, f"allowed: nothing after {nodes[top].label}; " + FUSED_SHAPE)
    prefix = tuple(n for n in graph.order if nodes[n].op is not None and n not in (reduce, top))
    for j, n in enumerate(graph.outputs):
        if n in prefix:
            fail(n, "OutputEdges", f"graph output {j}",
                 f"allowed: graph outputs of {nodes[reduce].label}"
                 + (f" or {nodes[top].label}" if top is not None else "")
                 + ": the element-wise nodes before a REDUCE are fused into it and their results never stored")
    source = nodes[reduce].input_descs[0]
    axes = sorted(int(a) for a in nodes[reduce].operator_desc.attribute_values()["Axes"])
    rank = len(source.sizes)
    if axes != list(range(rank - len(axes), rank)):
        fail(reduce, "Axes", tuple(axes), f"allowed: trailing axes ({tuple(range(rank - len(axes), rank))} for "
             f"{len(axes)} of {rank} dimensions): the fused kernel reduces the innermost elements of each "
             "output element; " + FUSED_SHAPE)
    return FusedReduction(prefix, reduce, top)
