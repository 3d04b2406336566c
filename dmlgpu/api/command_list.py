"""Command lists: many operator executions recorded once and run any number of times
(DirectML's IDMLCommandRecorder::RecordDispatch into a D3D12 command list, then ExecuteCommandLists).

Dependent executions get a memory barrier between them; independent ones get none, so the GPU
may overlap them. Two executions depend on each other when one writes bytes the other reads or
writes (read-after-write, write-after-read, write-after-write); the planner keeps the spans
since the last barrier as sorted disjoint intervals (`runtime.Spans`), so planning n executions
costs O(n log n). A binding of a Tensor that spans several buffers (`dmlgpu.layout.pieces`) is
recorded as the per-piece executions the same eager call runs (`dmlgpu.api.span_plan`).

Runs of consecutive executions of one output shape are fused through the graph compiler
(`Device.compile_graph`, the same fused kernel as `dmlgpu.fuse`): each run becomes a graph whose
inputs are the bytes it reads before writing them, whose intermediates are what one execution
writes and a later one reads (kept in registers), and whose outputs are the last value written
to each range; an execution whose result is overwritten in the run before anything reads it is
dropped. A run ends where the graph could not say what the executions do: an output that is not
packed, a read or write that partly overlaps bytes of the run, an intermediate read in another
layout, an in-place write over an input read in another layout, or the fused kernel's limits.
"""
from __future__ import annotations

from typing import NamedTuple

from ..kernels import graph_abi as graph_kernel
from . import selection_spans, span_plan
from ..describe.bindings import Binding, BoundRange
from ..kernels.compiled_operator import CompiledOperator
from ..kernels.compiled_operator import spanning
from ..kernels.compiled_selection import CompiledSelection
from ..compiler.compiled_graph import CompiledGraph
from ..errors import ValidationError
from ..kernels.variants import STRIDED
from ..describe.graph_descs import GraphDesc, InputGraphEdgeDesc, IntermediateGraphEdgeDesc, OperatorGraphNodeDesc, OutputGraphEdgeDesc
from ..runtime import Spans

#: A fused run's budget: loads plus nodes (one load per graph input and layout it is read in).
_RUN_SLOTS = graph_kernel.MAX_SLOTS
_RUN_INPUTS = graph_kernel.MAX_INPUTS
_RUN_OUTPUTS = graph_kernel.MAX_OUTPUTS

__all__ = ["CommandList"]


def _key(bound) -> tuple:
    return (id(bound.buffer), bound.start, bound.end)


def _partly(a, b) -> bool:
    """Two range keys that share bytes without being the same range."""
    return a[0] == b[0] and a != b and a[1] < b[2] and b[1] < a[2]


class _Run:
    """Consecutive executions of one output shape being gathered into one graph."""

    def __init__(self, sizes):
        self.sizes = sizes
        self.steps: list = []  # indices of the list's steps
        self.nodes: list = []  # (operator desc, [("input", k) | ("node", n)]) per step
        self.inputs: dict = {}  # range key -> (graph input index, BoundRange)
        self.reads: dict = {}  # graph input index -> set of read layouts (strides)
        self.written: dict = {}  # range key -> (node index, BoundRange) of the last write

    def _layouts(self) -> int:
        return sum(len(v) for v in self.reads.values())

    def admits(self, compiled, ranges) -> bool:
        descs = list(compiled.desc.tensor_descs().values())
        out_desc, out_key = descs[-1], _key(ranges[-1])
        if out_desc.sizes != self.sizes or not out_desc.is_packed or compiled.layout == STRIDED:
            return False  # (a strided kernel's output may start after its binding's start)
        known = list(self.inputs) + list(self.written)
        if any(_partly(out_key, k) for k in known):
            return False
        new_inputs, new_layouts = set(), 0
        for desc, bound in zip(descs[:-1], ranges[:-1]):
            key = _key(bound)
            if key in self.written:
                if not desc.is_packed:
                    return False
                continue
            if any(_partly(key, k) for k in self.written):
                return False
            if key not in self.inputs:
                new_inputs.add(key)
                new_layouts += 1
            elif desc.effective_strides not in self.reads[self.inputs[key][0]]:
                new_layouts += 1
        if out_key in self.inputs and out_key not in self.written:  # in place over a graph input
            k = self.inputs[out_key][0]
            if self.reads[k] != {out_desc.effective_strides}:
                return False
        if out_key in new_inputs and not all(d.is_packed for d in descs):
            return False
        outputs = len(self.written) + (out_key not in self.written)
        return (len(self.inputs) + len(new_inputs) <= _RUN_INPUTS and outputs <= _RUN_OUTPUTS
                and self._layouts() + new_layouts + len(self.nodes) + 1 <= _RUN_SLOTS)

    def add(self, index, compiled, ranges) -> None:
        descs = list(compiled.desc.tensor_descs().values())
        sources = []
        for desc, bound in zip(descs[:-1], ranges[:-1]):
            key = _key(bound)
            if key in self.written:
                sources.append(("node", self.written[key][0]))
                continue
            if key not in self.inputs:
                self.inputs[key] = (len(self.inputs), bound)
                self.reads[self.inputs[key][0]] = set()
            k = self.inputs[key][0]
            self.reads[k].add(desc.effective_strides)
            sources.append(("input", k))
        self.written[_key(ranges[-1])] = (len(self.nodes), ranges[-1])
        self.nodes.append((compiled.desc, sources))
        self.steps.append(index)

    def compile(self, device):
        """The run's compiled graph and its checked (input ranges, output ranges)."""
        live = {n for n, _ in self.written.values()}
        for n in range(len(self.nodes) - 1, -1, -1):
            if n in live:
                live.update(k for kind, k in self.nodes[n][1] if kind == "node")
        number = {n: i for i, n in enumerate(sorted(live))}
        used = sorted({k for n in live for kind, k in self.nodes[n][1] if kind == "input"})
        input_number = {k: i for i, k in enumerate(used)}
        nodes, input_edges, inter_edges = [], [], []
        for n in sorted(live):
            desc, sources = self.nodes[n]
            nodes.append(OperatorGraphNodeDesc(desc))
            for j, (kind, k) in enumerate(sources):
                if kind == "input":
                    input_edges.append(InputGraphEdgeDesc(input_number[k], number[n], j))
                else:
                    inter_edges.append(IntermediateGraphEdgeDesc(number[k], 0, number[n], j))
        outputs = list(self.written.values())
        graph = device.compile_graph(GraphDesc(len(used), len(outputs), nodes, input_edges,
                                               [OutputGraphEdgeDesc(number[n], 0, j) for j, (n, _) in enumerate(outputs)],
                                               inter_edges))
        by_index = {k: bound for k, bound in self.inputs.values()}
        bindings = [Binding(by_index[k].buffer, by_index[k].start, by_index[k].end - by_index[k].start) for k in used]
        out_bindings = [Binding(b.buffer, b.start, b.end - b.start) for _, b in outputs]
        return graph, graph.check(bindings, out_bindings)


class _Unit(NamedTuple):
    """Dispatches of the recorded command buffer for one execution or one fused run."""

    steps: list  # indices into CommandList._steps
    launches: list  # its prepared dispatches (one, unless a fused run exceeds one dispatch's limits)
    barrier: bool  # a barrier before it (it depends on earlier work of the list)


class CommandList:
    """An ordered list of operator executions on one device; `execute()` queues it once.

    Buffers bound in a recorded list stay alive with the list; releasing one makes the list
    unusable (executing it then raises ValidationError). Dependencies are judged on the spans
    the runtime tracks (byte ranges; whole arenas under DMLGPU_VALIDATION, as the validation
    layer sees them).

    Args:
        device: the device whose operators it records.
        fuse: fuse runs of executions into one dispatch through the graph compiler (the
            default); False records one dispatch per execution, as DirectML does.
    """

    def __init__(self, device, *, fuse: bool = True):
        self.device = device
        self.fuse = fuse
        self._steps: list = []  # (compiled, ranges, launches) per recorded execution (a graph: per dispatch)
        self._units: list | None = None  # the planned dispatches, made on demand
        self._recorded = None
        self._bound: tuple | None = None  # the distinct buffers the steps bind, found once
        self._graphs: list = []  # compiled graphs of fused runs (kept with the list)
        self.dispatches = 0  # executions recorded

    def record(self, compiled, inputs, outputs) -> None:
        """Append one execution of `compiled` (a compiled operator or graph) with these bindings
        (checked now).

        A binding of a Tensor that spans several buffers (its `.buffer`, a `dmlgpu.layout.pieces.Pieces`)
        records the per-piece steps the same call runs eagerly (`dmlgpu.api.span_plan`: one
        execution per chunk whose every tensor lies in one buffer, with any copy of an input
        that does not start at a 16-byte boundary of its buffer into a temporary the list keeps;
        a REDUCE or TOP_K1: `dmlgpu.api.selection_spans`' dispatches, each piece's then their
        merge), so they are planned, barriered and fused as any other executions.

        Raises:
            ValidationError: bindings DirectML would reject, or a spanning binding of a graph
                (a graph binds one Buffer per input and output); nothing is recorded.
        """
        if compiled.device is not self.device:
            raise ValidationError(getattr(getattr(compiled, "op", None), "dml_name", "DML_GRAPH_DESC"), None,
                                  "device", compiled.device.label, f"allowed: operators of the list's {self.device.label}")
        if not spanning(inputs, outputs):
            executions = [(compiled, inputs, outputs)]
        elif isinstance(compiled, CompiledOperator):
            executions = span_plan.executions(compiled, inputs, outputs)
        elif isinstance(compiled, CompiledSelection):
            self._record_selection_spans(compiled, inputs, outputs)
            return
        else:
            raise ValidationError("DML_GRAPH_DESC", None, "Binding.Buffer", "Pieces of a spanning Tensor",
                                  "allowed: one Buffer per binding of a graph (operators record over Tensors "
                                  "that span several buffers)")
        steps = [step for execution in executions for step in self._checked(*execution)]
        self._steps.extend(steps)
        self.dispatches += len(executions)
        self._drop_recorded()

    def _record_selection_spans(self, compiled, inputs, outputs) -> None:
        """A REDUCE or TOP_K1 over Pieces: the dispatches of its per-piece plan
        (`selection_spans`), one step each; the first step's ranges hold its temporaries."""
        views = span_plan.binding_views(compiled, inputs, outputs)
        made, keep = selection_spans.launches(compiled, views)
        memory = [BoundRange(b, 0, b.size_in_bytes) for b in keep]
        memory += [BoundRange(piece, 0, piece.size_in_bytes) for v in views
                   for piece in getattr(v.buffer, "buffers", [v.buffer])]
        self._steps.extend((compiled, memory if i == 0 else memory[-len(views):], [launch])
                           for i, launch in enumerate(made))
        self.dispatches += 1
        self._drop_recorded()

    @staticmethod
    def _checked(compiled, inputs, outputs, out_shift: int = 0) -> list:
        """The steps of one execution: (compiled, checked ranges, prepared dispatches), one per
        dispatch of a graph (its output written from `out_shift` elements after its binding:
        `CompiledOperator.launch`)."""
        if isinstance(compiled, CompiledGraph):  # its own dispatches, never fused further
            in_ranges, out_ranges = compiled.check(inputs, outputs)
            ranges = [r for r in (*in_ranges, *out_ranges) if r is not None]
            # One step per dispatch: a graph that ends in a reduction reads what its earlier
            # dispatches wrote (the planner puts a barrier between them; none between the
            # independent dispatches of an element-wise graph).
            return [(compiled, ranges, [launch]) for launch in compiled.launches(in_ranges, out_ranges)]
        ranges = compiled.check(inputs, outputs)  # an element-wise operator may join a fused run
        if isinstance(compiled, CompiledSelection):  # a REDUCE of two dispatches: one step each
            return [(compiled, ranges, [launch]) for launch in compiled.launches(ranges)]
        # (only element-wise operators' outputs are ever shifted)
        launch = compiled.launch(ranges, out_shift) if out_shift else compiled.launch(ranges)
        return [(compiled, ranges, [launch])]

    @property
    def barriers(self) -> int:
        """Barriers between the dispatches of the recorded command buffer."""
        return sum(unit.barrier for unit in self._plan())

    @property
    def gpu_dispatches(self) -> int:
        """Dispatches in the recorded command buffer (fewer than `dispatches` where fused)."""
        return sum(len(unit.launches) for unit in self._plan())

    def recorded_launches(self) -> list:
        """The prepared dispatches of the recorded command buffer, in order (one per fused run or
        unfused execution; for timing each on the GPU with `Device.time_dispatches`)."""
        return [launch for unit in self._plan() for launch in unit.launches]

    def _runs(self) -> list:
        """Consecutive steps grouped: a list of step indices, or a `_Run`."""
        steps, groups, i = self._steps, [], 0
        while i < len(steps):
            compiled, ranges, _ = steps[i]
            run = None
            if self.fuse and isinstance(compiled, CompiledOperator):
                run = _Run(list(compiled.desc.tensor_descs().values())[-1].sizes)
            if run is None or not run.admits(compiled, ranges):
                groups.append([i])
                i += 1
                continue
            j = i
            while j < len(steps) and isinstance(steps[j][0], CompiledOperator) and run.admits(*steps[j][:2]):
                run.add(j, *steps[j][:2])
                j += 1
            length = self._periodic_length(i, j)
            if length < j - i:  # the run again from its start, cut where the period allows
                run = _Run(run.sizes)
                for k in range(i, i + length):
                    run.add(k, *steps[k][:2])
            groups.append(run if len(run.steps) > 1 else run.steps)
            i += len(run.steps)
        return groups

    def _periodic_length(self, i, j) -> int:
        """How many of steps i..j-1 (a full run, cut before step j) to keep: where the steps
        repeat with a period p and step j continues it, a multiple of p, so that the next run
        starts at the same phase and compiles to the same program (one pipeline for every run
        of a repeating list instead of one per phase)."""
        n = j - i
        if j >= len(self._steps) or n < 2:
            return n
        sig = [(id(c), tuple(_key(r) for r in ranges)) for c, ranges, _ in self._steps[i:j + 1]]
        for p in range(1, n // 2 + 1):
            if all(sig[k] == sig[k + p] for k in range(n + 1 - p)):
                return n // p * p
        return n

    def _plan(self) -> list:
        if self._units is not None:
            return self._units
        units, reads, writes = [], Spans(), Spans()
        for group in self._runs():
            if isinstance(group, _Run):
                indices = group.steps
                graph, (in_ranges, out_ranges) = group.compile(self.device)
                self._graphs.append(graph)
                launches = graph.launches(in_ranges, out_ranges)
            else:
                indices = group
                launches = self._steps[group[0]][2]
            members = [launch for i in indices for launch in self._steps[i][2]]
            unit_reads = [r for launch in members for r in launch.reads]
            unit_writes = [w for launch in members for w in launch.writes]
            dependent = any(writes.overlaps(s) for s in (*unit_reads, *unit_writes)) or \
                any(reads.overlaps(w) for w in unit_writes)
            if dependent:
                reads.clear()
                writes.clear()
            units.append(_Unit(indices, launches, dependent))
            for r in unit_reads:
                reads.add(r)
            for w in unit_writes:
                writes.add(w)
        self._units = units
        return units

    def _buffers(self) -> tuple:
        """The distinct buffers the steps bind (found once per recording, not per execute: a
        replay's checks and bookkeeping cost one step per buffer, not per execution)."""
        if self._bound is None:
            self._bound = tuple({id(r.buffer): r.buffer for _, ranges, _ in self._steps for r in ranges}.values())
        return self._bound

    def execute(self) -> None:
        """Queue every recorded execution, in order, behind the device's queued work.

        Returns at once; reading an output (or `device.synchronize()`) waits for it.
        """
        buffers = self._buffers()
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
                steps.extend(unit.launches)
            self._recorded = self.device.record(steps, f"a command list of {self.dispatches} executions")
        self._recorded.submit(buffers)

    def _drop_recorded(self):
        self._units = None
        self._bound = None
        if self._recorded is not None:
            self._recorded.destroy()
        self._recorded = None
        self._graphs.clear()

    def release(self) -> None:
        """Free the recorded command buffer now (a closed device freed it)."""
        self._drop_recorded()
        self._steps.clear()

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass
