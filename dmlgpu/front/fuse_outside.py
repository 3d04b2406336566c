"""What a fused function reads from outside its parameters: the Python and numpy scalars in its
closure and in the module globals its code names (its plain helper functions' too). `dmlgpu.fuse`
keys its compiled signatures on their values, so that changing such a scalar traces again instead
of running a graph that baked in the old value."""
from __future__ import annotations

import types

import numpy as np

from ..layout.operands import is_python_scalar

__all__ = ["outside_names", "outside_scalars"]


def _is_scalar(value) -> bool:
    return is_python_scalar(value) or isinstance(value, np.generic)


def outside_names(function) -> tuple:
    """Where `function` reads scalars it is not passed: (a closure cell, None) or (a globals
    dict, name) pairs holding a Python or numpy scalar now, for its closure and the global
    names its code (nested code included) uses, then the same for the plain functions found
    there (helpers), once each."""
    found, seen, todo = [], set(), [function]
    while todo:
        fn = todo.pop()
        code = getattr(fn, "__code__", None)
        if not isinstance(fn, types.FunctionType) or code in seen:
            continue
        seen.add(code)
        for cell in fn.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # not yet assigned
                continue
            if _is_scalar(value):
                found.append((cell, None))
            elif isinstance(value, types.FunctionType):
                todo.append(value)
        names, codes = set(), [code]
        while codes:
            c = codes.pop()
            names.update(c.co_names)
            codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        scope = fn.__globals__
        for name in sorted(names):
            value = scope.get(name)
            if _is_scalar(value):
                found.append((scope, name))
            elif isinstance(value, types.FunctionType):
                todo.append(value)
    return tuple(found)


_ABSENT = object()


def outside_scalars(places) -> tuple:
    """The values at `places` now, as key parts: an int as itself, a float by its bits, a
    numpy scalar by its type and bytes, anything else by its type (on every call of a fused
    function that reads such names: kept to a few operations a name)."""
    key = []
    for place, name in places:
        if name is None:
            try:
                value = place.cell_contents
            except ValueError:
                value = _ABSENT
        else:
            value = place.get(name, _ABSENT)
        kind = type(value)
        if kind is int:
            key.append(value)
        elif kind is float:
            key.append((kind, value.hex()))  # 0.0 and -0.0 are other bits
        elif isinstance(value, np.generic):
            key.append((kind, value.tobytes()))
        elif isinstance(value, int):  # bool (True is not 1 here), IntEnum
            key.append((kind, value))
        else:
            key.append(kind)
    return tuple(key)
