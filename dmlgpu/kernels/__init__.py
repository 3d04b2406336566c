"""Kernels: shader variants chosen from the table, the SPIR-V installed with the package, the graph module's ABI, the search programs, and the compiled launchables (`CompiledOperator`, `CompiledSelection`).

Imports `runtime`, `table`, `describe`, `layout`.
"""
from . import compiled_operator, compiled_selection, graph_abi, search_programs, selection_plans, spirv, variants  # noqa: F401

__all__ = ["compiled_operator", "compiled_selection", "graph_abi", "search_programs", "selection_plans", "spirv", "variants"]
