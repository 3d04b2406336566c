"""The numpy front end: one function per operator of the table, on the default device.

The functions are `dmlgpu.front.functions` (generated from the table with real signatures); this
module gathers them (`FUNCTIONS`, by `short` name). A call's path: `dmlgpu.front.host_front.apply`
(memos: `dmlgpu.layout.memo`) -> `dmlgpu.front.call_plan` (operands by `dmlgpu.layout.operands`, `out`, validation,
pieces) -> `dmlgpu.layout.host_chunks` or one dispatch over Tensors. Tensor's own operators call
`dmlgpu.front.resident` directly, as the front end does for Tensor operands.
"""
from __future__ import annotations

from . import functions
from .functions import *  # noqa: F401,F403 -- one function per table row (functions.__all__)
from ..table.operators import OPERATORS


#: Operator short name -> public function.
FUNCTIONS = {op.short: getattr(functions, op.short) for op in OPERATORS}
__all__ = ["FUNCTIONS", *functions.__all__]
