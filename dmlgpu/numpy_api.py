"""The numpy front end: one function per operator of the table, on the default device.

The functions are `dmlgpu.functions` (generated from the table with real signatures); this
module gathers them (`FUNCTIONS`, by `short` name). A call's path: `dmlgpu.front_end.apply`
(memos: `dmlgpu.memo`) -> `dmlgpu.call_plan` (operands by `dmlgpu.operands`, `out`, validation,
pieces) -> `dmlgpu.host_pieces` or one dispatch over Tensors. Tensor's Python operators (from
each row's `python_operator`) are installed at the end of this module.
"""
from __future__ import annotations

from . import functions
from . import tensor as tensor_module
from .front_end import apply as _apply
from .functions import *  # noqa: F401,F403 -- one function per table row (functions.__all__)
from .operators import OPERATORS
from .tensor import Tensor


def _tensor_methods(function, arity: int) -> dict:
    """Tensor's methods for a Python operator: `__op__`, plus `__rop__` and `__iop__` for binary ones."""
    if arity == 1:
        return {"": lambda self: function(self)}
    return {"": lambda self, other: function(self, other),
            "r": lambda self, other: function(other, self),
            "i": lambda self, other: function(self, other, out=self)}


#: Operator short name -> public function.
FUNCTIONS = {op.short: getattr(functions, op.short) for op in OPERATORS}
__all__ = ["FUNCTIONS", *functions.__all__]


def _install_tensor_operators() -> None:
    """Tensor's Python operators, from each row's `python_operator` ("xor": `t ^ u`, `u ^ t`, `t ^= u`)."""
    for op in OPERATORS:
        if op.python_operator:
            for prefix, method in _tensor_methods(FUNCTIONS[op.short], len(op.inputs)).items():
                method.__name__ = f"__{prefix}{op.python_operator}__"
                method.__qualname__ = f"Tensor.{method.__name__}"
                method.__doc__ = f"`{op.short}` as a Python operator."
                setattr(Tensor, method.__name__, method)


_install_tensor_operators()
tensor_module.install_front_end(_apply)
