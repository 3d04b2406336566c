"""The operator section of the user guide (docs/guide/numpy.md), written from the operator table:
one line of prose per row (its front-end function, what it computes, how it differs from numpy,
what the demo and the benchmarks compare it with) and the support table
(`operators.support_table`). `python -m dmlgpu table` prints it; `python -m dmlgpu table --readme
docs/guide/numpy.md` rewrites it in place between its markers (`PAGE`, the default file);
tests/test_tables.py checks that the page holds it as printed."""
from __future__ import annotations

from pathlib import Path

from dmlgpu.table.operators import OPERATORS, Operator, support_table

#: The page that holds the section, relative to the repository root.
PAGE = "docs/guide/numpy.md"
BEGIN = ("<!-- The operator section: `python -m dmlgpu table` prints it from dmlgpu/table/operators.py "
         f"(`--readme {PAGE}` rewrites it here); tests/test_tables.py checks that it is here as printed. -->")
END = "<!-- End of the operator section. -->"


def _types(types) -> str:
    names = sorted({t.name.rstrip("0123456789") for t in types})
    return "/".join(n.lower() for n in names)


def row_prose(op: Operator) -> str:
    """One markdown bullet for a row."""
    summary, _, notes = op.doc.partition("\n\n")
    text = f"- `dmlgpu.{op.short}` (`{op.name}`): {summary}"
    if notes:
        text += " " + notes
    if op.masks_shift_amount:
        text += (" Amounts are taken modulo the element width (`b & (bits − 1)`), as DirectML masks "
                 "out-of-range amounts; numpy and PyTorch give 0 at or above the width.")
    text += f" Timed against `np.{op.peer.numpy}` on {_types(op.peer.exact_on)} data."
    return text


def section() -> str:
    prose = "\n".join(row_prose(op) for op in OPERATORS)
    return f"{BEGIN}\n{prose}\n\n{support_table()}{END}\n"


def update(path: Path) -> bool:
    """Rewrite the section between the markers of the file at `path`; True if it changed."""
    text = path.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END) + 1
    new = text[:start] + section() + text[end:]
    path.write_text(new)
    return new != text
