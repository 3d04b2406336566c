"""Command lists: many operator executions recorded once and run any number of times
(DirectML's IDMLCommandRecorder::RecordDispatch into a D3D12 command list, then ExecuteCommandLists).

Dependent executions get a memory barrier between them; independent ones get none, so the GPU
may overlap them. Two executions depend on each other when one writes bytes the other reads or
writes (read-after-write, write-after-read, write-after-write).

Runs of consecutive executions that `compiled.Chain` admits (width-independent bitwise
operators on packed tensors of one size whose tensors are the same bytes or disjoint) are fused
into one dispatch: a dependent step then costs a few instructions instead of a dispatch behind a
barrier, the cost that keeps an unfused list above a CUDA graph replay.
"""
from __future__ import annotations

from typing import NamedTuple

from .compiled import Chain
from .errors import ValidationError

__all__ = ["CommandList"]


def _overlap(a, b) -> bool:
    """Whether two (memory, start, end) spans, as the runtime tracks them, share bytes."""
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


class _Unit(NamedTuple):
    """One dispatch of the recorded command buffer: a step, or a chain of fused steps."""

    steps: list  # indices into CommandList._steps
    chain: Chain | None  # when more than one step
    barrier: bool  # a barrier before it (it depends on earlier work of the list)


class CommandList:
    """An ordered list of operator executions on one device; `execute()` queues it once.

    Buffers bound in a recorded list stay alive with the list; releasing one makes the list
    unusable (executing it then raises ValidationError). Dependencies are judged on the spans
    the runtime tracks (byte ranges; whole arenas under DMLGPU_VALIDATION, as the validation
    layer sees them).

    Args:
        device: the device whose operators it records.
        fuse: fuse runs of executions into one dispatch where the module's rule allows (the
            default); False records one dispatch per execution, as DirectML does.
    """

    def __init__(self, device, *, fuse: bool = True):
        self.device = device
        self.fuse = fuse
        self._steps: list = []  # (compiled, ranges, launch) per recorded execution
        self._units: list | None = None  # the planned dispatches, made on demand
        self._recorded = None
        self._programs: list = []  # buffers holding fused chains' programs
        self.dispatches = 0  # executions recorded

    def record(self, compiled, inputs, outputs) -> None:
        """Append one execution of `compiled` with these bindings (checked now)."""
        if compiled.device is not self.device:
            raise ValidationError(compiled.op.dml_name, None, "device", compiled.device.label,
                                  f"allowed: operators of the list's {self.device.label}")
        ranges = compiled.check(inputs, outputs)
        self._steps.append((compiled, ranges, compiled.launch(ranges)))
        self.dispatches += 1
        self._drop_recorded()

    @property
    def barriers(self) -> int:
        """Barriers between the dispatches of the recorded command buffer."""
        return sum(unit.barrier for unit in self._plan())

    @property
    def gpu_dispatches(self) -> int:
        """Dispatches in the recorded command buffer (fewer than `dispatches` where fused)."""
        return len(self._plan())

    def _plan(self) -> list:
        if self._units is not None:
            return self._units
        groups: list = []  # [indices, chain or None]
        for i, (compiled, _, launch) in enumerate(self._steps):
            step = compiled.chain_step(launch) if self.fuse else None
            chain = groups[-1][1] if groups else None
            if step is not None and chain is not None and chain.admits(step):
                chain.add(step)
                groups[-1][0].append(i)
            else:
                groups.append([[i], Chain(step) if step is not None else None])
        units, reads, writes = [], [], []
        for indices, chain in groups:
            launches = [self._steps[i][2] for i in indices]
            unit_reads = [r for launch in launches for r in launch.reads]
            unit_writes = [w for launch in launches for w in launch.writes]
            dependent = any(_overlap(r, w) for r in (*unit_reads, *unit_writes) for w in writes) or \
                any(_overlap(w, r) for w in unit_writes for r in reads)
            if dependent:
                reads, writes = [], []
            units.append(_Unit(indices, chain if len(indices) > 1 else None, dependent))
            reads.extend(unit_reads)
            writes.extend(unit_writes)
        self._units = units
        return units

    def _buffers(self):
        return {id(r.buffer): r.buffer for _, ranges, _ in self._steps for r in ranges}.values()

    def _launch(self, unit: _Unit):
        if unit.chain is None:
            return self._steps[unit.steps[0]][2]
        ranges = [self._steps[i][1] for i in unit.steps]
        launch, program = unit.chain.launch(
            self.device, ranges[0][-1].buffer,
            reads=[(r.buffer, r.start, r.end) for rs in ranges for r in rs[:-1]],
            writes=[(rs[-1].buffer, rs[-1].start, rs[-1].end) for rs in ranges])
        self._programs.append(program)
        return launch

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
            steps = []
            for unit in self._plan():
                if unit.barrier:
                    steps.append(None)
                steps.append(self._launch(unit))
            self._recorded = self.device.record(steps, f"a command list of {self.dispatches} executions")
        self._recorded.submit(buffers + self._programs)

    def _drop_recorded(self):
        self._units = None
        if self._recorded is not None:
            self._recorded.destroy()
        self._recorded = None
        for program in self._programs:
            program.release()
        self._programs.clear()

    def release(self) -> None:
        """Free the recorded command buffer now (a closed device freed it)."""
        self._drop_recorded()
        self._steps.clear()

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass
