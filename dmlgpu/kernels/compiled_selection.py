"""A validated REDUCE or TOP_K1 compiled for one device (the table's reduce and top-k families).

The input's dimensions split into the outer ones (one work item each combination: an output
element of REDUCE, a sequence of TOP_K1) and the walked ones (REDUCE's Axes, TOP_K1's Axis);
their sizes and element strides go once into a small parameter buffer (shaders/include/select.glsl
documents its words), so one pipeline per variant serves every shape and layout.
"""
from __future__ import annotations

import math

import numpy as np

from . import variants as kernels, spirv
from ..describe.bindings import check_bindings
from .compiled_operator import LaunchMemo, binding_key
from ..errors import ValidationError
from ..table.operators import REDUCE_FAMILY
from ..runtime import Program
from ..describe.validation import checked_attributes

__all__ = ["CompiledSelection", "selection_params"]

#: Workgroups per dispatch at most: invocations stride over the rest (select.glsl).
_MAX_GROUPS = 1 << 15


def selection_params(op, attributes, descs) -> tuple[np.ndarray, int]:
    """The parameter words for these tensors (see shaders/include/select.glsl) and the number of
    work items."""
    tensors = list(descs.values())
    source, output = tensors[0], tensors[len(op.inputs)]
    if op.family == REDUCE_FAMILY:
        walked = attributes["Axes"]
    else:
        walked = (attributes["Axis"],)
    in_strides, out_strides = source.effective_strides, output.effective_strides
    outer = [d for d in range(len(source.sizes)) if d not in walked]
    walked_dims = sorted(walked)
    words = [0, 0, len(outer), len(walked_dims)]
    items = 1
    for d in reversed(outer):  # innermost first
        words += [source.sizes[d], in_strides[d], out_strides[d]]
        items *= source.sizes[d]
    count = 1
    for d in reversed(walked_dims):
        words += [source.sizes[d], in_strides[d]]
        count *= source.sizes[d]
    words[0], words[1] = items, count
    if op.family != REDUCE_FAMILY:
        index = tensors[len(op.inputs) + 1]
        axis = attributes["Axis"]
        words += [attributes["K"], int(attributes["AxisDirection"]), out_strides[axis],
                  index.effective_strides[axis]]
        words += [index.effective_strides[d] for d in reversed(outer)]
    return np.array(words, dtype=np.uint32), items


class CompiledSelection:
    """A REDUCE or TOP_K1 ready to execute with any bindings that fit its descriptor."""

    def __init__(self, device, operator_desc, feature_level):
        self.op = op = operator_desc.OPERATOR
        self.attributes = checked_attributes(operator_desc, feature_level)
        self.device = device
        self.desc = operator_desc
        self.feature_level = feature_level
        self._descs = operator_desc.tensor_descs()
        tensors = list(self._descs.values())
        in_type, out_type = tensors[0].data_type, tensors[-1].data_type
        self.variant = kernels.selection_variant(op, in_type, out_type, self.attributes.get("Function"))
        params, items = selection_params(op, self.attributes, self._descs)
        self._params = device.upload(params)
        self._items = items
        self._program = Program(self.variant.name, spirv.load(self.variant.name),
                                np.zeros(0, dtype=np.uint32), len(kernels.SELECTION_PUSH_FIELDS))
        groups = min(_MAX_GROUPS, max(1, math.ceil(items / kernels.SELECTION_WORKGROUP_SIZE)))
        self._grid = (groups, 1, 1)
        self._launches = LaunchMemo()  # binding key -> prepared dispatch

    def __repr__(self):
        return f"<dmlgpu.CompiledOperator {self.op.name} {self.variant.name}>"

    @property
    def layout(self) -> str:
        return self.variant.layout

    def check(self, inputs, outputs):
        """The checked byte ranges of these bindings (`ValidationError` if DirectML rejects them)."""
        return check_bindings(self.op, self._descs, inputs, outputs, self.device)

    def launch(self, ranges):
        """The runtime's prepared dispatch over checked `ranges` (inputs, then outputs)."""
        words = [(r.buffer.arena_offset + r.start) // 4 for r in ranges]
        index = words[2] if len(ranges) > 2 else 0
        push = np.array([words[0], words[1], index, self._params.arena_offset // 4, self._items],
                        dtype=np.uint32)
        buffers = [r.buffer for r in ranges] + [self._params]
        return self.device.launch(self._program, self._grid, buffers, push,
                                  reads=[(r.buffer, r.start, r.end) for r in ranges[:len(self.op.inputs)]]
                                  + [(self._params, 0, self._params.size_in_bytes)],
                                  writes=[(r.buffer, r.start, r.end) for r in ranges[len(self.op.inputs):]],
                                  name=self.op.dml_name)

    def execute(self, inputs, outputs) -> None:
        """Queue one execution: `inputs` and `outputs` are lists of `Binding`, in the
        descriptor's order (TOP_K1: values, then indices). Returns at once.

        Raises:
            ValidationError: the bindings break DirectML's rules (nothing is queued).
        """
        key = binding_key(inputs, outputs)
        launch = self._launches.get(key)
        if launch is None or not launch.valid:
            if self.device.closed:
                raise ValidationError(self.op.dml_name, None, "device", "closed",
                                      "allowed: an operator of an open device")
            launch = self._launches.put(key, self.launch(self.check(inputs, outputs)))
        if not self.device.enqueue(launch):
            raise ValidationError(self.op.dml_name, None, "bindings", "a buffer released while queuing",
                                  "allowed: live buffers of an open device")
