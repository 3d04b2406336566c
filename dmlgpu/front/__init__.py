"""The front ends: the call pipeline (host data and Tensors), `Tensor` and the functions that make one, the table's functions, reductions and `fuse`.

Imports the layers below it (`api` and down).
"""
from . import call_plan, creation, functions, fuse, host_front, numpy_api, reductions, resident, tensor, tensor_operators  # noqa: F401

__all__ = ["call_plan", "creation", "functions", "fuse", "host_front", "numpy_api", "reductions", "resident", "tensor", "tensor_operators"]
