"""Shapes, views and pieces: strided views of device buffers, data spanning several buffers, host data cut into chunks, the operand rules (NEP 50 scalars) and the bounded memos calls are planned into.

Imports only `table` and `describe`.
"""
from . import host_chunks, memo, operands, pieces, views  # noqa: F401

__all__ = ["host_chunks", "memo", "operands", "pieces", "views"]
