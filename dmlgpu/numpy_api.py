"""The numpy front end: one function per operator of the table, on the default device.

The functions are `dmlgpu.functions` (generated from the table with real signatures); this
module gathers them (`FUNCTIONS`, by `short` name). A call's path: `dmlgpu.front_end.apply`
(memos: `dmlgpu.memo`) -> `dmlgpu.call_plan` (operands by `dmlgpu.operands`, `out`, validation,
pieces) -> `dmlgpu.host_pieces` or one dispatch over Tensors. Tensor's own operators call
`dmlgpu.ops` directly, as the front end does for Tensor operands.
"""
from __future__ import annotations

from . import functions
from .functions import *  # noqa: F401,F403 -- one function per table row (functions.__all__)
from .operators import OPERATORS


#: Operator short name -> public function.
FUNCTIONS = {op.short: getattr(functions, op.short) for op in OPERATORS}
__all__ = ["FUNCTIONS", *functions.__all__]
