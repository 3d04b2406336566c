"""Write the modules made from the operator table: dmlgpu/front/functions.py (the numpy front end's
functions) and dmlgpu/front/tensor_operators.py (Tensor's Python operators). They are build products,
not sources: git ignores them, and the build (CMakeLists.txt, at configure time, before anything
imports the package) runs this script, then installs what it wrote with the package.

    python tools/generate_functions.py              # write both into dmlgpu/front/ (where changed); print their paths
    python tools/generate_functions.py --check DIR  # exit 1 (and say so) if DIR's are not what the table gives

functions.py: one function per row of `dmlgpu.table.operators.OPERATORS`, named after its `short`,
with a real signature, annotations (overloads: a Tensor operand or `out` gives a Tensor, a numpy
array operand or `out` a numpy array, scalars alone a numpy scalar) and a docstring made from the row. tensor_operators.py: `TensorOperators`, Tensor's base, with
`__op__`, `__rop__` and `__iop__` (unary: `__op__`) for each row's `python_operator`, declared
with their types. Type checkers and IDEs read the generated source; tests/test_typing.py
checks that the modules Python imports are what this script writes from today's table.
"""
from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The table's modules without the package's __init__, which imports the files this script writes
# (absent in a fresh clone, stale after a row changed: either would stop the import needed to write them).
import types  # noqa: E402

_package = types.ModuleType("dmlgpu")
_package.__path__ = [str(ROOT / "dmlgpu")]
sys.modules.setdefault("dmlgpu", _package)

from dmlgpu.table.operators import OPERATORS, Operator, level_texts  # noqa: E402

PACKAGE = ROOT / "dmlgpu"
#: Where the generated modules live: the front ends' subpackage.
FRONT = PACKAGE / "front"
#: Operand names by operator arity.
OPERANDS = {1: ("x",), 2: ("a", "b")}

HEADER = '''"""The numpy front end's functions, one per row of the operator table (`dmlgpu.table.operators`).

Written by tools/generate_functions.py from the table when dmlgpu is built; not kept in git
(tests/test_typing.py checks that the installed file is what the table gives). Each function calls
`dmlgpu.front.host_front.apply`, which validates the call before any work and runs it on the default
device (or the device of its Tensors). It grows by one function (some 45 lines with its overloads
and docstring) per row, so it may pass 500 lines: one job, written by a script, not worth splitting.
"""
from __future__ import annotations

from typing import Any, Union, overload

import numpy as np
import numpy.typing as npt

from ..layout.operands import HostOperand
from ..table.feature_levels import FeatureLevel
from ..table.operators import BY_SHORT
from .host_front import apply
from .tensor import Tensor

#: Any operand: numpy data or a Tensor.
Operand = Union[Tensor, HostOperand]
#: A scalar operand: numpy's, or a Python int, float or bool (NEP 50: it takes the other's dtype).
Scalar = Union[np.generic, int, float]
#: A feature level, its value, or None for the newest.
Level = Union[FeatureLevel, int, None]

'''


def _paragraph(text: str, indent: str = "") -> str:
    return textwrap.fill(text, 92, initial_indent=indent, subsequent_indent=indent + "    " if indent else "")


def docstring(op: Operator) -> str:
    """Google-style docstring from the row: its text, DirectML's tables, the argument rules."""
    summary, _, notes = op.doc.partition("\n\n")
    operands = OPERANDS[len(op.inputs)]
    parts = [f"{summary[:-1]} (DML_{op.name})."]
    if notes:
        parts.append(_paragraph(notes))
    if op.masks_shift_amount:
        parts.append(_paragraph(
            f"Shift amounts are taken modulo the element width, `{operands[-1]} & (bits - 1)` (8-bit amounts "
            "by 7, 16-bit by 15, 32-bit by 31, 64-bit by 63), as DirectML does; numpy gives 0 for amounts at "
            "or above the width."))
    tables = "DirectML's tables: " + "; ".join(level_texts(op)) + "."
    if len(operands) == 1:
        args = [_paragraph(f"x: numpy array (or dmlgpu.Tensor). {tables}", "    ")]
    else:
        args = [_paragraph(f"{operands[0]}: a numpy array (or dmlgpu.Tensor). {tables}", "    "),
                _paragraph(f"{operands[1]}: of {operands[0]}'s dtype (DirectML does not promote), its shape "
                           f"broadcasting with {operands[0]}'s by numpy's rules; either may be a Python int, float "
                           "or bool, which takes the other's dtype (NEP 50).", "    ")]
    if op.in_place:
        in_place = " or ".join(f"`out={name}`" for name in operands) + " runs in place."
    else:
        in_place = f"never an input (DirectML does not allow {op.name} in place)."
    args.append(_paragraph(f"out: optional array of the result's dtype and shape; {in_place}", "    "))
    if not op.same_type:
        names = " or ".join(t.numpy.name for t in op.newest.output_types)
        args.append(_paragraph(f"dtype: the output dtype, {names}; None: `out`'s dtype, else "
                               f"{op.default_output.numpy.name} (DirectMLX's default). Given with `out`, they "
                               "must agree.", "    "))
    args.append(_paragraph("feature_level: a `FeatureLevel` (or its value); None means the newest. Dimensions "
                           "beyond the level's are merged where contiguous; missing ones are added as 1s.", "    "))
    parts += ["Args:\n" + "\n".join(args),
              "Returns:\n" + _paragraph("A new numpy array (a numpy scalar for numpy scalar or 0-d operands); a "
                                         "Tensor when an operand or `out` is a Tensor; or `out`.", "    "),
              "Raises:\n" + _paragraph("DataTypeError: a dtype DirectML does not allow (both a ValidationError "
                                       "and a TypeError, as numpy's UFuncTypeError); nothing runs.", "    ")
              + "\n" + _paragraph("ValidationError: a shape, `out` or level that DirectML does not allow, a "
                                   "Python scalar that does not fit, or an ndarray subclass (masked array, "
                                   "matrix); nothing runs.", "    ")]
    return "\n\n".join(parts)


def _signature(name: str, params: str, result: str) -> str:
    """`def name(params) -> result:` on one line, or with the parameters on their own lines."""
    line = f"def {name}({params}) -> {result}:"
    if len(line) <= 110:
        return line
    return f"def {name}(\n    {params},\n) -> {result}:" if len(params) <= 106 else \
        f"def {name}(\n" + "".join(f"    {p.strip()},\n" for p in _split(params)) + f") -> {result}:"


def _split(params: str) -> list[str]:
    """The parameters of `params`, split at top-level commas."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(params):
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(params[start:i])
            start = i + 1
    return parts + [params[start:]]


def _function(op: Operator) -> str:
    """Overloads (a Tensor operand or `out`: a Tensor; else a numpy array operand or `out`: a numpy
    array; scalars alone: a numpy scalar, typed Any as numpy's own stubs type it) and the function."""
    names = OPERANDS[len(op.inputs)]
    n = len(names)
    tail = "*, " + ("dtype: npt.DTypeLike | None = None, " if not op.same_type else "") + "feature_level: Level = None"
    array = "npt.NDArray[Any]"
    variants = []  # (operand annotations, out annotation and default, return)
    for i in range(n):  # a Tensor in position i, numpy data before it
        variants.append((["HostOperand"] * i + ["Tensor"] + ["Operand"] * (n - i - 1), "Tensor | None = None", "Tensor"))
    variants.append((["HostOperand"] * n, "Tensor", "Tensor"))
    for i in range(n):  # an array in position i, scalars before it, no Tensor
        variants.append((["Scalar"] * i + [array] + ["HostOperand"] * (n - i - 1), f"{array} | None = None", array))
    variants.append((["HostOperand"] * n, array, array))
    variants.append((["Scalar"] * n, "None = None", "Any"))
    constant = f"_{op.short.upper()}"
    lines = [f"{constant} = BY_SHORT[{op.short!r}]", ""]
    for kinds, out, result in variants:
        params = ", ".join(f"{n}: {t}" for n, t in zip(names, kinds))
        lines += ["@overload", _signature(op.short, f"{params}, out: {out}, {tail}", result) + " ..."]
    params = ", ".join(f"{n}: Operand" for n in names)
    lines.append(_signature(op.short, f"{params}, out: Tensor | npt.NDArray[Any] | None = None, {tail}", "Any"))
    body = textwrap.indent(docstring(op), "    ").strip()
    lines.append(f'    """{body}\n    """')
    dtype = "dtype" if not op.same_type else "None"
    operands = names[0] + "," if len(names) == 1 else ", ".join(names)
    lines.append(f"    return apply({constant}, ({operands}), out, {dtype}, feature_level)")
    return "\n".join(lines)


def source() -> str:
    shorts = [op.short for op in OPERATORS]
    parts = [HEADER + "__all__ = [" + ", ".join(f'"{s}"' for s in shorts) + "]"]
    parts += [_function(op) for op in OPERATORS]
    return "\n\n\n".join(parts) + "\n"


TENSOR_HEADER = '''"""Tensor's Python operators, from each row of the operator table with a `python_operator`.

Written by tools/generate_functions.py from the table when dmlgpu is built; not kept in git
(tests/test_typing.py checks that the installed file is what the table gives). `dmlgpu.Tensor` takes
`TensorOperators` as a base: `t ^ u`, `u ^ t` and `t ^= u` call `dmlgpu.front.resident` as the row's
function (`dmlgpu.bit_xor`) would, and type checkers see each operator with its types.
"""
from __future__ import annotations

from typing import TypeVar, Union

from ..layout.operands import HostOperand
from ..table.operators import BY_SHORT
from . import resident as ops

__all__ = ["Other", "TensorOperators"]

_Self = TypeVar("_Self", bound="TensorOperators")
#: The other operand of a binary operator: a Tensor, numpy data or a Python scalar.
Other = Union["TensorOperators", HostOperand]
'''


def _operator_methods(op: Operator) -> list[str]:
    """`__op__` (unary), or `__op__`, `__rop__` and `__iop__`: each a call of `dmlgpu.front.resident`."""
    constant, name = f"_{op.short.upper()}", op.python_operator
    call = f"ops.apply({constant}, {{}}, {{}}, {constant}_DTYPE, None)"
    doc = f"`dmlgpu.{op.short}` as a Python operator"
    if len(op.inputs) == 1:
        forms = [(f"__{name}__", "self: _Self", "(self,)", "None", doc + ".")]
    else:
        forms = [(f"__{name}__", "self: _Self, other: Other", "(self, other)", "None", doc + "."),
                 (f"__r{name}__", "self: _Self, other: Other", "(other, self)", "None", doc + " (reflected)."),
                 (f"__i{name}__", "self: _Self, other: Other", "(self, other)", "self",
                  doc + " (in place: `out` is this Tensor).")]
    return [f"    def {method}({params}) -> _Self:\n"
            f'        """{text}"""\n'
            f"        result: _Self = {call.format(operands, out)}  # (no cast(): a call on every operator)\n"
            f"        return result"
            for method, params, operands, out, text in forms]


def tensor_source() -> str:
    rows = [op for op in OPERATORS if op.python_operator]
    constants = [f"_{op.short.upper()} = BY_SHORT[{op.short!r}]\n"
                 f"_{op.short.upper()}_DTYPE = ops.output_dtype(_{op.short.upper()}, None, None)" for op in rows]
    methods = "\n\n".join(m for op in rows for m in _operator_methods(op))
    body = ('class TensorOperators:\n'
            '    """The table\'s Python operators, as a base of `dmlgpu.Tensor`."""\n\n'
            '    __slots__ = ()\n\n' + methods)
    return TENSOR_HEADER + "\n" + "\n".join(constants) + "\n\n\n" + body + "\n"


#: Each generated module's file name and the function writing its text.
TARGETS = {"functions.py": source, "tensor_operators.py": tensor_source}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", metavar="DIR", type=Path,
                        help="only say whether the modules in DIR (a dmlgpu package folder) are current")
    args = parser.parse_args(argv)
    stale = 0
    for name, make in TARGETS.items():
        text = make()
        if args.check is None:
            target = FRONT / name
            if not target.is_file() or target.read_text() != text:  # unchanged: left alone, as CMake does
                target.write_text(text)
            print(target)
        elif not (args.check / "front" / name).is_file() or (args.check / "front" / name).read_text() != text:
            print(f"{args.check / 'front' / name} is not what the operator table gives: rebuild dmlgpu "
                  "(pip install ., tools/bootstrap.sh setup), or python tools/generate_functions.py for the source tree")
            stale = 1
    return stale


if __name__ == "__main__":
    sys.exit(main())
