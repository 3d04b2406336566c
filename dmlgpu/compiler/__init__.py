"""The fusion compiler, one stage per file: generated GLSL for a graph (`graph_source`), its programs (`program`), the plan of a graph ending in a reduction (`reduction_plan`), and the compiled graph (`compiled_graph`).

Imports the layers below it (`kernels` and down).
"""
from . import compiled_graph, graph_source, program, reduction_plan  # noqa: F401

__all__ = ["compiled_graph", "graph_source", "program", "reduction_plan"]
