"""A validated operator compiled for one device (DirectML's IDMLCompiledOperator).

Compiling picks the shader variant from the operator's row and the tensors' data types, and the
layout from their strides:
- FLAT: every tensor packed in one element order; 16-byte vector loads and stores;
- ROWS: the output packed and every input contiguous along its rows, each row 16-byte aligned
  (padded rows, a broadcast row): still 16-byte vectors, addressed row by row;
- GATHER: the output packed, inputs otherwise strided or broadcast: each invocation still owns
  16 output bytes and finds each element's inputs through their strides;
- STRIDED: the output strided too (or asked for: `strided_output`): one element per
  invocation; its output may start at any element (`launch`'s `out_shift`), not only at a
  16-byte boundary.
Sizes and strides are fixed as specialization constants after merging dimensions that need no
index arithmetic.
"""
from __future__ import annotations
from ..describe.shapes import coalesce  # noqa: F401 (re-exported)

import math

import numpy as np

from . import variants as kernels, spirv
from ..describe.bindings import check_bindings
from ..errors import ValidationError
from .variants import WORKGROUP_SIZE
from ..runtime import Program
from ..describe.validation import validate

__all__ = ["CompiledOperator", "LaunchMemo", "binding_key", "coalesce"]

_PUSH = {name: i for i, name in enumerate(kernels.PUSH_FIELDS)}

#: Binding lists remembered per operator (as prepared dispatches, which hold no memory).
_MEMO = 64




def binding_key(inputs, outputs):
    """A hashable identity of a binding list by the memory it binds, or None.

    Live buffers never share a block, so the same blocks, buffer sizes, offsets and sizes pass
    the same checks and make the same dispatch: fresh Buffers of every call (the numpy front
    end's) that the pool puts in the same blocks find it too. A released buffer has no block.
    """
    try:
        return tuple((b.buffer.block_key, b.buffer.size_in_bytes, type(b.offset), b.offset,
                      type(b.size_in_bytes), b.size_in_bytes) for b in (*inputs, *outputs))
    except (AttributeError, TypeError):
        return None  # malformed or released: check_bindings explains


class LaunchMemo:
    """A compiled operator's (or graph's) prepared dispatches by `binding_key`: a repeated
    execute with the same memory checks nothing and prepares nothing. At most `_MEMO` entries,
    cleared when full; a None key (bindings that `check` will explain) is never kept."""

    __slots__ = ("_items",)

    def __init__(self):
        self._items: dict = {}

    def get(self, key):
        return self._items.get(key) if key is not None else None

    def put(self, key, value):
        """Keep `value` under `key`; returns `value`."""
        if key is not None:
            if len(self._items) >= _MEMO:
                self._items.clear()
            self._items[key] = value
        return value


def _units_per_invocation(device) -> int:
    return kernels.CPU_UNITS_PER_INVOCATION if device.is_cpu else 1


def _is_scalar(desc) -> bool:
    """A tensor of more than one element that reads one element throughout (a broadcast scalar)."""
    return desc.element_count > 1 and all(
        stride == 0 for size, stride in zip(desc.sizes, desc.effective_strides) if size > 1)


def _rows_fit(sizes, input_strides, in_size, out_size) -> bool:
    """Whether the ROWS layout applies: every input contiguous along the innermost dimension,
    rows a whole number of 16-byte units in and out, and every input row 16-byte aligned."""
    row = sizes[-1]
    return (row * in_size % 16 == 0 and row * out_size % 16 == 0
            and all(st[-1] == 1 and all(s * in_size % 16 == 0 for s in st[:-1]) for st in input_strides))


class CompiledOperator:
    """An operator ready to execute with any bindings that fit its descriptor.

    `strided_output` compiles the STRIDED layout whatever the layouts (one element per
    invocation), whose launches may write their output from any element after the bound
    offset (`launch(ranges, out_shift)`): dmlgpu's way to write a view that does not start at
    a 16-byte boundary."""

    def __init__(self, device, operator_desc, feature_level, strided_output: bool = False):
        self.op = validate(operator_desc, feature_level)
        self.device = device
        self.desc = operator_desc
        self.feature_level = feature_level
        self._descs = operator_desc.tensor_descs()
        tensors = list(self._descs.values())
        in_type, out_type = tensors[0].data_type, tensors[-1].data_type
        # Broadcast scalar operands of two-operand operators (whose flat kernels all read their
        # operands through OPERAND_VEC, elementwise_main.glsl) keep the flat layout.
        scalars = [_is_scalar(t) and len(self.op.inputs) == 2 for t in tensors[:-1]]
        if not strided_output and all(t.is_packed or scalar for t, scalar in zip(tensors, scalars + [False])):
            layout = kernels.FLAT
            spec = [WORKGROUP_SIZE]
            if any(scalars):  # broadcast scalar operands, repeated across vectors by the kernel
                scalars += [False] * (2 - len(scalars))
                spec += [1] * kernels.MAX_DIMS + [0] * (kernels.SPEC_SCALAR_IN0 - kernels.SPEC_STRIDES_IN0)
                spec += [t.data_type.bits if scalar else 0 for t, scalar in zip(tensors + tensors, scalars)]
        else:
            strides = [list(t.effective_strides) for t in tensors]
            sizes, strides = coalesce(tensors[-1].sizes, strides)
            if strided_output or not tensors[-1].is_packed:
                layout = kernels.STRIDED
            elif _rows_fit(sizes, strides[:-1], in_type.size, out_type.size):
                layout = kernels.ROWS
            else:
                layout = kernels.GATHER
            if len(self.op.inputs) == 1:
                strides.insert(1, [0] * len(sizes))  # the unused second input
            pad = kernels.MAX_DIMS - len(sizes)
            spec = [WORKGROUP_SIZE] + [1] * pad + sizes
            for st in strides:
                spec += [0] * pad + st
        self.variant = kernels.variant_for(self.op, in_type, out_type, layout)
        if layout == kernels.STRIDED:
            self._count = self._units = tensors[-1].element_count
        else:
            self._count = tensors[-1].element_count * out_type.size  # output bytes
            self._units = math.ceil(self._count / self.variant.unit_bytes)
        self._program = Program(self.variant.name, spirv.load(self.variant.name),
                                np.array(spec, dtype=np.uint32), len(kernels.PUSH_FIELDS))
        self._grid = kernels.grid(self._units, _units_per_invocation(device))
        self._launches = LaunchMemo()  # binding key -> prepared dispatch

    def __repr__(self):
        return f"<dmlgpu.CompiledOperator {self.op.name} {self.variant.name}>"

    @property
    def layout(self) -> str:
        return self.variant.layout

    def execute(self, inputs, outputs, out_shift: int = 0) -> None:
        """Queue one execution: `inputs` and `outputs` are lists of `Binding`, in the
        descriptor's order (`out_shift`: as `launch`'s). Returns at once; reading an output (or
        `device.synchronize()`) waits for it.

        Raises:
            ValidationError: the bindings break DirectML's rules (nothing is queued).
        """
        key = binding_key(inputs, outputs)
        if out_shift and key is not None:
            key += (out_shift,)
        launch = self._launches.get(key)
        if launch is not None and not launch.valid and launch.pipeline.handle is not None:
            # The same blocks, now of other live Buffers of this device (the key's blocks).
            if all(b.buffer.device is self.device for b in (*inputs, *outputs)):
                launch = self._launches.put(key, self.device.rebind(
                    launch, [b.buffer for b in (*inputs, *outputs)]))
        if launch is None or not launch.valid:
            self.device.check_open(self.op.dml_name)  # DeviceError in a forked child
            launch = self._launches.put(key, self.launch(self.check(inputs, outputs), out_shift))
        self.enqueue(launch)

    def enqueue(self, launch) -> None:
        """Queue `launch` (made by `launch`); ValidationError if another thread released one of
        its buffers (or closed the device) since it was checked."""
        if not self.device.enqueue(launch):
            raise ValidationError(self.op.dml_name, None, "bindings", "a buffer released while queuing",
                                  "allowed: live buffers of an open device")

    def check(self, inputs, outputs):
        """The checked byte ranges of these bindings (`ValidationError` if DirectML rejects them)."""
        return check_bindings(self.op, self._descs, inputs, outputs, self.device)

    def results(self, template, out_bytes: int):
        """Repeats of `template` (a launch of this operator), each writing a new packed output
        buffer of `out_bytes`: call it for the next one, a list of that one buffer, or None if
        an input was released (`runtime.Results`)."""
        last = len(template.arena_ids) - 1  # the output binds last
        return self.device.results([template], [out_bytes], [[(0, _PUSH["out_offset"], (last,))]],
                                   template.buffers[:-1])

    def rebound(self, ranges, fresh: int | None):
        """This operator's dispatch over checked `ranges`, re-aimed per call at other buffers of
        the same layout (`runtime.Rebound`: call it with the buffers, the output last or None
        for a new one of `fresh` bytes, and each binding's start byte)."""
        words = [0, 2] if len(ranges) == 2 else list(range(len(ranges)))
        units = [4] * len(ranges)
        if self.layout == kernels.STRIDED:
            units[-1] = self._descs[list(self._descs)[-1]].data_type.size
        return self.device.rebound(self.launch(ranges), words, units, [r.end - r.start for r in ranges], fresh)

    def launch(self, ranges, out_shift: int = 0):
        """The runtime's prepared dispatch of this operator over checked `ranges`; the STRIDED
        layout writes its output from `out_shift` elements after the output range's start
        (the range must hold them: its end covers the last element written)."""
        offsets = [(r.buffer.arena_offset + r.start) // 4 for r in ranges]
        if self.layout == kernels.STRIDED:  # the strided kernel's output offset counts elements
            out_size = self._descs[list(self._descs)[-1]].data_type.size
            offsets[-1] = (ranges[-1].buffer.arena_offset + ranges[-1].start) // out_size + out_shift
        elif out_shift:
            raise ValidationError(self.op.dml_name, None, "out_shift", out_shift,
                                  "allowed: 0 (only the strided layout writes from any element)")
        if len(ranges) == 2:
            offsets.insert(1, 0)  # the unused second input
        push = np.array(offsets + [self._count], dtype=np.uint32)
        return self.device.launch(self._program, self._grid, [r.buffer for r in ranges], push,
                                  reads=[(r.buffer, r.start, r.end) for r in ranges[:-1]],
                                  writes=[(ranges[-1].buffer, ranges[-1].start, ranges[-1].end)],
                                  name=self.op.dml_name)
