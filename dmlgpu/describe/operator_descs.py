"""DirectML operator descriptors (`DML_ELEMENT_WISE_*_OPERATOR_DESC`), one class per table row.

The classes are made from the operator table so that their fields are exactly the operator's
tensors in DirectML's member order, snake-cased, then its other members (the row's
attributes): `ElementWiseBitXorOperatorDesc(a_tensor, b_tensor, output_tensor)`,
`ReduceOperatorDesc(input_tensor, output_tensor, function, axes)` (Axes carries AxisCount),
`TopK1OperatorDesc(input_tensor, output_value_tensor, output_index_tensor, axis, k, axis_direction)`. Each class is a module attribute under its name (`__all__` lists them).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, make_dataclass

from ..table.operators import TABLE, Operator, field_name
from .tensor_desc import TensorDesc


@dataclass(frozen=True)
class OperatorDesc:
    """Base of every operator descriptor; `OPERATOR` is the class's table row."""

    OPERATOR = None  # type: Operator

    def tensor_descs(self) -> dict[str, object]:
        """DirectML tensor name -> the value given for it, inputs first, output last."""
        return {t: getattr(self, field_name(t)) for t in self.OPERATOR.tensors}

    def attribute_values(self) -> dict[str, object]:
        """DirectML member name -> the value given, for the row's non-tensor members."""
        return {a.name: getattr(self, field_name(a.name)) for a in self.OPERATOR.attributes}


def _make(op: Operator) -> type:
    cls = make_dataclass(
        op.desc_class_name,
        [(field_name(t), TensorDesc, field()) for t in op.tensors]
        + [(field_name(a.name), object, field()) for a in op.attributes],
        bases=(OperatorDesc,),
        frozen=True,
        namespace={"OPERATOR": op, "__module__": __name__},
    )
    args = ", ".join(f.name for f in fields(cls))
    cls.__doc__ = f"`DML_{op.name}_OPERATOR_DESC`: {args}."
    return cls


#: Operator name ("ELEMENT_WISE_BIT_XOR") -> its descriptor class.
DESC_CLASSES = {op.name: _make(op) for op in TABLE}
globals().update({cls.__name__: cls for cls in DESC_CLASSES.values()})
__all__ = [cls.__name__ for cls in DESC_CLASSES.values()]
