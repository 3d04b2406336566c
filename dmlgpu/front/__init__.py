"""The front ends: the call pipeline (host data and Tensors), `Tensor`, the table's functions, reductions and `fuse`.

Imports the layers below it (`api` and down).
"""
from . import call_plan, functions, fuse, host_front, numpy_api, reductions, resident, tensor, tensor_operators  # noqa: F401

__all__ = ["call_plan", "functions", "fuse", "host_front", "numpy_api", "reductions", "resident", "tensor", "tensor_operators"]
