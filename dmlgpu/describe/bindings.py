"""`DML_BUFFER_BINDING` and the binding-time rules: counts, alignment, ranges and hazards.

The second of dmlgpu's two checking functions (the first, `validate`, judges descriptors). Both
read the operator table: whether an output may alias an input comes from the operator's row.
Rules: `docs/guide/semantics.md` §4.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from .tensor_desc import MINIMUM_BUFFER_TENSOR_ALIGNMENT
from .validation import is_int

__all__ = ["Binding", "BoundRange", "check_bindings"]


@dataclass(frozen=True)
class Binding:
    """`DML_BUFFER_BINDING`: a byte range of a device buffer.

    Args:
        buffer: a `dmlgpu.Buffer` from `Device.allocate` or `Device.upload`.
        offset: start of the range in bytes; a multiple of 16 (and of the tensor's
            GuaranteedBaseOffsetAlignment).
        size_in_bytes: length of the range; None means up to the end of the buffer.
    """

    buffer: object
    offset: int = 0
    size_in_bytes: int | None = None


@dataclass(frozen=True)
class BoundRange:
    """A checked binding: the buffer and its byte range [start, end)."""

    buffer: object
    start: int
    end: int


def check_bindings(op, descs: dict, inputs, outputs, device) -> list[BoundRange]:
    """Check bindings for one execution; returns the bound ranges, inputs first, output last.

    Raises:
        ValidationError: wrong count, not a Binding, foreign or released buffer, misaligned
            offset, range outside the buffer or smaller than the tensor, or a hazard (an output
            sharing bytes with an input other than an identical range of an in-place operator
            with the same layout).
    """
    names = list(descs)
    given = {"inputs": inputs, "outputs": outputs}
    expected = {"inputs": list(op.inputs), "outputs": list(op.outputs)}
    ranges = []
    for group in ("inputs", "outputs"):
        bindings = given[group]
        if not isinstance(bindings, (list, tuple)) or len(bindings) != len(expected[group]):
            count = len(bindings) if isinstance(bindings, (list, tuple)) else bindings
            raise ValidationError(op.dml_name, None, group, count,
                                  f"expected a list of {len(expected[group])} Binding "
                                  f"({', '.join(expected[group])})")
        for name, binding in zip(expected[group], bindings):
            ranges.append(_check_one(op, name, descs[name], binding, device))
    _check_hazards(op, names, descs, ranges)
    return ranges


def _check_one(op, name, desc, binding, device) -> BoundRange:
    def fail(field, value, allowed):
        raise ValidationError(op.dml_name, name, field, value, allowed)

    if not isinstance(binding, Binding):
        fail("Binding", type(binding).__name__, "allowed: dmlgpu.Binding")
    buffer = binding.buffer
    if getattr(buffer, "device", None) is not device:
        fail("Binding.Buffer", type(buffer).__name__, "allowed: a live Buffer of the operator's device")
    if buffer.released:
        fail("Binding.Buffer", "released buffer", "allowed: a live Buffer of the operator's device")
    alignment = max(MINIMUM_BUFFER_TENSOR_ALIGNMENT, desc.guaranteed_base_offset_alignment)
    offset = binding.offset
    if not is_int(offset) or offset < 0 or offset % alignment:
        fail("Binding.Offset", offset, f"allowed: a multiple of {alignment} bytes")
    size = binding.size_in_bytes
    if size is None:
        size = buffer.size_in_bytes - offset
    if not is_int(size) or size < desc.total_size or offset + size > buffer.size_in_bytes:
        fail("Binding.SizeInBytes", binding.size_in_bytes,
             f"allowed: at least TotalTensorSizeInBytes ({desc.total_size}) and within the "
             f"buffer ({buffer.size_in_bytes} bytes, offset {offset})")
    return BoundRange(buffer, int(offset), int(offset + size))


def _check_hazards(op, names, descs, ranges):
    inputs = len(op.inputs)
    for k in range(inputs, len(names)):  # each output against the inputs and the earlier outputs
        _check_output_hazards(op, names[:k + 1], descs, ranges[:k + 1], inputs)


def _check_output_hazards(op, names, descs, ranges, inputs):
    out_name, out = names[-1], ranges[-1]
    for position, (name, bound) in enumerate(zip(names[:-1], ranges[:-1])):
        if bound.buffer is not out.buffer or bound.end <= out.start or out.end <= bound.start:
            continue
        identical = (bound.start, bound.end) == (out.start, out.end)
        if position >= inputs:
            allowed = "two outputs may not share bytes"
        elif not identical:
            allowed = "an output may share bytes with an input only over an identical range"
        elif not op.in_place:
            allowed = f"{op.dml_name} does not support in-place execution"
        elif not _same_layout(descs[name], descs[out_name]):
            allowed = "in-place execution needs the input and output to have the same strides"
        else:
            continue
        raise ValidationError(op.dml_name, out_name, "Binding", f"[{out.start}, {out.end}) overlaps "
                              f"{name} [{bound.start}, {bound.end})", allowed)


def _same_layout(a, b) -> bool:
    """Element i of both tensors lies at the same bytes (strides of size-1 dimensions don't count)."""
    return a.data_type.bits == b.data_type.bits and all(
        sa == sb for size, sa, sb in zip(a.sizes, a.effective_strides, b.effective_strides) if size > 1)


class _GraphLabel:
    """What `_check_one` names in its messages for a graph's tensors."""

    def __init__(self, name: str):
        self.dml_name = name


def check_graph_bindings(label: str, input_descs, output_descs, inputs, outputs, device, in_place=True,
                         no_alias="no output may alias an input"):
    """Check bindings for one execution of a compiled graph.

    `input_descs[k]` lists the tensor descriptions graph input k is read through (one per node
    input it feeds; empty for an unused input), `output_descs[j]` is graph output j's. Returns
    (input ranges, output ranges); an unused input's range is None. `in_place` False: no
    output may share bytes with an input at all (`no_alias` says why).

    Raises:
        ValidationError: a count, type, buffer, alignment or size rule broken, two outputs
            sharing bytes, or an output sharing bytes with an input other than over an identical
            range read everywhere in the output's own layout.
    """
    named = _GraphLabel(label)
    given = {"inputs": inputs, "outputs": outputs}
    counts = {"inputs": len(input_descs), "outputs": len(output_descs)}
    for group, bindings in given.items():
        if not isinstance(bindings, (list, tuple)) or len(bindings) != counts[group]:
            count = len(bindings) if isinstance(bindings, (list, tuple)) else bindings
            raise ValidationError(label, None, group, count, f"expected a list of {counts[group]} Binding")
    in_ranges = []
    for k, (descs, binding) in enumerate(zip(input_descs, inputs)):
        if not descs:
            if not isinstance(binding, Binding):
                raise ValidationError(label, f"graph input {k}", "Binding", type(binding).__name__,
                                      "allowed: dmlgpu.Binding")
            in_ranges.append(None)
            continue
        biggest = max(descs, key=lambda d: (d.total_size, d.guaranteed_base_offset_alignment))
        in_ranges.append(_check_one(named, f"graph input {k}", biggest, binding, device))
        for desc in descs:
            _check_one(named, f"graph input {k}", desc, binding, device)
    out_ranges = [_check_one(named, f"graph output {j}", desc, binding, device)
                  for j, (desc, binding) in enumerate(zip(output_descs, outputs))]
    for j, out in enumerate(out_ranges):
        for i, other in enumerate(out_ranges[:j]):
            if other.buffer is out.buffer and other.start < out.end and out.start < other.end:
                raise ValidationError(label, f"graph output {j}", "Binding",
                                      f"[{out.start}, {out.end}) overlaps graph output {i} "
                                      f"[{other.start}, {other.end})", "allowed: outputs that share no byte")
        for k, bound in enumerate(in_ranges):
            if bound is None or bound.buffer is not out.buffer or bound.end <= out.start or out.end <= bound.start:
                continue
            if (bound.start, bound.end) != (out.start, out.end):
                allowed = "an output may share bytes with an input only over an identical range"
            elif not in_place:
                allowed = no_alias
            elif not all(d.sizes == output_descs[j].sizes and _same_layout(d, output_descs[j])
                         for d in input_descs[k]):
                allowed = "in-place execution needs every read of the input to have the output's layout"
            else:
                continue
            raise ValidationError(label, f"graph output {j}", "Binding", f"[{out.start}, {out.end}) overlaps "
                                  f"graph input {k} [{bound.start}, {bound.end})", allowed)
    return in_ranges, out_ranges
