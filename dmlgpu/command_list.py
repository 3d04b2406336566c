"""Command lists: many operator executions recorded once and run any number of times
(DirectML's IDMLCommandRecorder::RecordDispatch into a D3D12 command list, then ExecuteCommandLists).

Dependent executions get a memory barrier between them; independent ones get none, so the GPU
may overlap them. Two executions depend on each other when one writes bytes the other reads or
writes (read-after-write, write-after-read, write-after-write).
"""
from __future__ import annotations

from .errors import ValidationError


def _overlap(a, b) -> bool:
    """Whether two (memory, start, end) spans, as the runtime tracks them, share bytes."""
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


class CommandList:
    """An ordered list of operator executions on one device; `execute()` queues it once.

    Buffers bound in a recorded list stay alive with the list; releasing one makes the list
    unusable (executing it then raises ValidationError). Dependencies are judged on the spans
    the runtime tracks (byte ranges; whole arenas under DMLGPU_VALIDATION, as the validation
    layer sees them).
    """

    def __init__(self, device):
        self.device = device
        self._steps: list = []  # ("dispatch", ranges, launch) or ("barrier",)
        self._reads: list = []  # ranges read and written since the last barrier
        self._writes: list = []
        self._recorded = None
        self.barriers = 0
        self.dispatches = 0

    def record(self, compiled, inputs, outputs) -> None:
        """Append one execution of `compiled` with these bindings (checked now)."""
        if compiled.device is not self.device:
            raise ValidationError(compiled.op.dml_name, None, "device", compiled.device.label,
                                  f"allowed: operators of the list's {self.device.label}")
        ranges = compiled.check(inputs, outputs)
        launch = compiled.launch(ranges)
        reads, writes = launch.reads, launch.writes
        dependent = any(_overlap(r, w) for r in (*reads, *writes) for w in self._writes) or \
            any(_overlap(w, r) for w in writes for r in self._reads)
        if dependent:
            self._steps.append(("barrier",))
            self._reads, self._writes = [], []
            self.barriers += 1
        self._steps.append(("dispatch", ranges, launch))
        self._reads.extend(reads)
        self._writes.extend(writes)
        self.dispatches += 1
        self._drop_recorded()

    def _buffers(self):
        return {id(r.buffer): r.buffer for step in self._steps if step[0] == "dispatch"
                for r in step[1]}.values()

    def execute(self) -> None:
        """Queue every recorded execution, in order, behind the device's queued work.

        Returns at once; reading an output (or `device.synchronize()`) waits for it.
        """
        buffers = list(self._buffers())
        if self.device.closed or any(b.released for b in buffers):
            raise ValidationError("dmlgpu", None, "CommandList", "a released buffer",
                                  "allowed: only live buffers in a recorded command list")
        if not self._steps:
            return
        if self._recorded is None:
            steps = [None if step[0] == "barrier" else step[2] for step in self._steps]
            self._recorded = self.device.record(steps, f"a command list of {self.dispatches} executions")
        self._recorded.submit(buffers)

    def _drop_recorded(self):
        if self._recorded is not None:
            self._recorded.destroy()
        self._recorded = None

    def release(self) -> None:
        """Free the recorded command buffer now (a closed device freed it)."""
        self._drop_recorded()
        self._steps.clear()

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass
