"""Kernels: shader variants chosen from the table, the SPIR-V installed with the package, the graph module's ABI, the search programs, how a REDUCE is cut, and the compiled launchables (`CompiledOperator`, `CompiledSelection`).

Imports `runtime`, `table`, `describe`, `layout`.
"""
from . import (compiled_operator, compiled_selection, graph_abi, reduce_shapes, search_programs, selection_plans,  # noqa: F401
               spirv, variants)

__all__ = ["compiled_operator", "compiled_selection", "graph_abi", "reduce_shapes", "search_programs", "selection_plans", "spirv",
           "variants"]
