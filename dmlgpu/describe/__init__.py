"""DirectML's descriptions and their validation: TensorDesc, the operator descriptors made from the table, DML_GRAPH_DESC's nodes and edges, `validate` and the binding checks.

Imports only `table` (and `errors`).
"""
from . import bindings, graph_descs, operator_descs, shapes, tensor_desc, validation  # noqa: F401

__all__ = ["bindings", "graph_descs", "operator_descs", "shapes", "tensor_desc", "validation"]
