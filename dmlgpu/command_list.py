"""Command lists: many operator executions recorded once and run any number of times
(DirectML's IDMLCommandRecorder::RecordDispatch into a D3D12 command list, then ExecuteCommandLists).

Dependent executions get a compute-to-compute memory barrier between them; independent ones get
none, so the GPU may overlap them. Two executions depend on each other when one writes bytes the
other reads or writes (read-after-write, write-after-read, write-after-write).
"""
from __future__ import annotations

import numpy as np

from . import barriers
from .errors import ValidationError


def _overlap(a, b) -> bool:
    return a.buffer is b.buffer and a.start < b.end and b.start < a.end


class CommandList:
    """An ordered list of operator executions on one device; `execute()` submits it once.

    Buffers bound in a recorded list stay alive with the list; releasing one makes the list
    unusable (executing it then raises ValidationError).
    """

    def __init__(self, device):
        self.device = device
        self._steps: list = []  # ("dispatch", compiled, ranges) or ("barrier", ranges)
        self._reads: list = []  # ranges read and written since the last barrier
        self._writes: list = []
        self._sequence = None
        self._algorithms: dict = {}
        self.barriers = 0
        self.dispatches = 0

    def record(self, compiled, inputs, outputs) -> None:
        """Append one execution of `compiled` with these bindings (checked now)."""
        if compiled.device is not self.device:
            raise ValidationError(compiled.op.dml_name, None, "device", compiled.device.name,
                                  f"allowed: operators of the list's device {self.device.name}")
        with self.device._lock:
            ranges = compiled.check(inputs, outputs)
            reads, write = ranges[:-1], ranges[-1]
            dependent = any(_overlap(r, w) for r in (*reads, write) for w in self._writes) or \
                any(_overlap(write, r) for r in self._reads)
            if dependent:
                self._steps.append(("barrier", tuple(self._reads + self._writes) + tuple(ranges)))
                self._reads, self._writes = [], []
                self.barriers += 1
            self._steps.append(("dispatch", compiled, ranges))
            self._reads.extend(reads)
            self._writes.append(write)
            self.dispatches += 1
            self._drop_sequence()

    def execute(self) -> None:
        """Submit every recorded execution, in order, and wait for them."""
        with self.device._lock:
            buffers = {r.buffer for step in self._steps for r in step[-1]}
            if self.device.closed or any(b.released for b in buffers):
                raise ValidationError("dmlgpu", None, "CommandList", "a released buffer",
                                      "allowed: only live buffers in a recorded command list")
            if self._sequence is None:
                self._sequence = self._record_sequence()
            self._sequence.eval()
            for step in self._steps:
                if step[0] == "dispatch":
                    step[2][-1].buffer._host_current = False

    def _record_sequence(self):
        kp = self.device._kp
        sequence = self.device._manager.sequence()
        sequence.record(barriers.between_submissions(
            kp, [r.buffer._tensor for step in self._steps for r in step[-1]]))
        for step in self._steps:
            if step[0] == "barrier":
                sequence.record(barriers.between_dispatches(kp, [r.buffer._tensor for r in step[1]]))
                continue
            _, compiled, ranges = step
            push = compiled._push(ranges)
            tensors = [r.buffer._tensor for r in ranges]
            grid = self.device._grid(compiled._units)
            key = (compiled.variant.name, compiled._spec.tobytes(), grid, tuple(id(t) for t in tensors))
            # The list owns its algorithms: the device cache may evict and destroy its own.
            if key not in self._algorithms:
                self._algorithms[key] = self.device._manager.algorithm(
                    tensors, compiled._spirv, grid, compiled._spec, np.zeros(len(push), np.uint32))
            sequence.record(kp.OpAlgoDispatch(self._algorithms[key], push))
        return sequence

    def _drop_sequence(self):
        if self._sequence is not None and not self.device.closed:
            self._sequence.destroy()
        self._sequence = None

    def release(self) -> None:
        """Free the recorded command buffer and pipelines now (a closed device freed them)."""
        with self.device._lock:
            self._drop_sequence()
            if not self.device.closed:
                for algorithm in self._algorithms.values():
                    algorithm.destroy()
            self._algorithms.clear()
            self._steps.clear()

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass
