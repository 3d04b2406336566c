"""The device's compiled operators: a kernel-level compiled operator that also executes
bindings of memory spanning several buffers (a spanning Tensor's `.buffer`, a `Pieces`).

`Device.create_operator` returns these. An execution whose bindings are all single buffers is
the kernel's own; one with a spanning binding runs as a CommandList records it: element-wise
operators per piece (`span_plan`), REDUCE and TOP_K1 per piece then combined
(`selection_spans`)."""
from __future__ import annotations

from ..kernels.compiled_operator import CompiledOperator, spanning
from ..kernels.compiled_selection import CompiledSelection
from . import selection_spans, span_plan

__all__ = ["SpanningOperator", "SpanningSelection"]


class SpanningOperator(CompiledOperator):
    """An element-wise operator whose bindings may span several buffers."""

    def execute(self, inputs, outputs, out_shift: int = 0) -> None:
        """As `CompiledOperator.execute`; bindings of memory over several buffers run per piece."""
        if not out_shift and spanning(inputs, outputs):
            span_plan.execute(self, inputs, outputs)
            return
        super().execute(inputs, outputs, out_shift)


class SpanningSelection(CompiledSelection):
    """A REDUCE or TOP_K1 whose bindings may span several buffers."""

    def execute(self, inputs, outputs) -> None:
        """As `CompiledSelection.execute`; bindings of memory over several buffers run per
        piece, then the pieces' partial results are combined."""
        if spanning(inputs, outputs):
            selection_spans.execute(self, inputs, outputs)
            return
        super().execute(inputs, outputs)
