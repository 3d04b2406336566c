"""DirectML's API face: `Device` (create_operator, compile_graph), command lists, and the plans of calls whose data spans several buffers.

Imports the layers below it (`compiler` and down).
"""
from . import command_list, device, span_plan  # noqa: F401

__all__ = ["command_list", "device", "span_plan"]
