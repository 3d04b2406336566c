"""A validated graph compiled for one device (`IDMLDevice1::CompileGraph`'s compiled operator).

A graph of element-wise nodes: its nodes are grouped by output shape (an intermediate edge joins
tensors of one shape, so each group is closed under its edges); each group becomes one dispatch
of the fused-graph kernel (dmlgpu/graph_kernel.py, shaders/graph.comp) whose program is a list of
slots (dmlgpu/graph_program.py): a load per distinct way a graph input (or a large constant) is
read, a constant per distinct small constant, then the group's nodes in topological order.
Nothing is stored between nodes. A graph with a REDUCE (and TOP_K1) node is planned by
dmlgpu/compiled_reduction.py: the element-wise nodes fused into the reduction.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..kernels import graph_abi as gk
from ..describe.bindings import check_graph_bindings
from ..kernels.compiled_operator import LaunchMemo, binding_key
from .reduction_plan import plan_reduction
from ..errors import ValidationError
from .program import Kernel, SlotProgram, TooBig, assemble
from ..table.operators import ELEMENT_WISE
from ..describe.validation import GRAPH, resolve_feature_level, validate_fused_reduction, validate_graph

__all__ = ["CompiledGraph"]


def _fail(what, value, allowed):
    raise ValidationError(GRAPH, None, what, value, allowed)


class CompiledGraph:
    """A graph ready to execute with any bindings that fit it (`execute`, like a compiled operator)."""

    def __init__(self, device, graph_desc, feature_level):
        self.graph = validate_graph(graph_desc, feature_level)
        self.device = device
        self.desc = graph_desc
        self.feature_level = feature_level
        nodes = self.graph.nodes
        self._input_descs = [[nodes[n].input_descs[j] for n, j in reads] for reads in self.graph.input_reads]
        self._output_descs = [self.graph.output_desc(j) for j in range(len(self.graph.outputs))]
        self._constants: dict = {}  # constant node index -> uploaded Buffer (non-scalar reads)
        self._scratch: list = []  # buffers of values stored between dispatches (a REDUCE's, for a TOP_K1)
        #: How it runs: "element-wise" (a dispatch per output shape), or for a graph that ends in
        #: a REDUCE (optionally then a TOP_K1) "hamming" or "reduce" (dmlgpu/compiled_reduction.py).
        self.route = "element-wise"
        if any(node.op is not None and node.op.family != ELEMENT_WISE for node in nodes):
            fused = validate_fused_reduction(self.graph)
            plan = plan_reduction(device, self.graph, fused, resolve_feature_level(feature_level, GRAPH))
            self._kernels, self.route = plan.steps, plan.route
            self._scratch = [device.allocate(max(4, size), zero_fill=False) for size in plan.scratch_bytes]
            # Its dispatches read what earlier ones wrote, and the REDUCE never runs in place.
            self._in_place = False
            self._no_alias = (f"a graph that ends in a REDUCE runs as {self.dispatches} dispatch(es) "
                              f"(route {self.route!r}): no output may alias an input")
        else:
            groups: dict = {}
            for n in self.graph.order:
                if nodes[n].op is not None:
                    groups.setdefault(nodes[n].output_desc.sizes, []).append(n)
            self._kernels = []
            for sizes, members in groups.items():
                self._kernels += self._split(sizes, members)
            # In place needs every input element read before its output is written: one dispatch
            # per output shape (a shape split over several dispatches recomputes, and would read
            # an input another dispatch already overwrote).
            self._in_place = len(self._kernels) == len(groups)
            self._no_alias = "this graph runs as several dispatches per output shape: no output may alias an input"
        self._upload_constants([read for step in self._kernels for read in step.reads])
        self._launches = LaunchMemo()

    def _upload_constants(self, reads) -> None:
        for read in reads:
            if read.source == "constant" and read.index not in self._constants:
                data = self.graph.nodes[read.index].data
                self._constants[read.index] = self.device.upload(np.frombuffer(data, dtype=np.uint8))

    @property
    def dispatches(self) -> int:
        """How many dispatches one execution runs: one per output shape of an element-wise
        graph's nodes (more only where one shape's program exceeds the fused kernel's limits);
        for a graph ending in a REDUCE (and TOP_K1), those of its route (`route`)."""
        return sum(step.dispatches for step in self._kernels)

    def __repr__(self):
        return f"<dmlgpu.CompiledGraph {len(self.graph.nodes)} nodes, {self.dispatches} dispatch(es)>"

    def _split(self, sizes, members) -> list:
        """The dispatches of one output shape: one, unless its program exceeds the kernel's
        limits; then the outputs are split greedily and each dispatch recomputes what its
        outputs need (intermediates are still never stored)."""
        outputs = [j for j, n in enumerate(self.graph.outputs) if n in members]
        try:
            return [self._plan(sizes, members, outputs)]
        except TooBig:
            pass
        kernels_, chunk = [], []
        for j in outputs:
            try:
                self._plan(sizes, self._ancestors(members, chunk + [j]), chunk + [j])
                chunk.append(j)
            except TooBig as exc:
                if not chunk:
                    _fail("Nodes", exc.args[0], exc.args[1])
                kernels_.append(self._plan(sizes, self._ancestors(members, chunk), chunk))
                chunk = [j]
        try:
            kernels_.append(self._plan(sizes, self._ancestors(members, chunk), chunk))
        except TooBig as exc:
            _fail("Nodes", exc.args[0], exc.args[1])
        return kernels_

    def _ancestors(self, members, outputs) -> list:
        needed = {self.graph.outputs[j] for j in outputs}
        for n in reversed(members):
            if n in needed:
                for j in range(len(self.graph.nodes[n].input_descs)):
                    kind, k = self.graph.feeds[(n, j)]
                    if kind == "node":
                        needed.add(k)
        return [n for n in members if n in needed]

    def _plan(self, sizes, members, output_indices):
        program = SlotProgram(self.graph)
        for n in members:
            program.add_node(n)
        outputs = [("output", j, self.graph.output_desc(j), program.slot_of[("node", self.graph.outputs[j])])
                   for j in output_indices]
        return assemble(self.device, sizes, program.reads, program.slots, outputs)

    def execute(self, inputs, outputs) -> None:
        """Queue one execution: `inputs` and `outputs` are lists of `Binding`, one per graph
        input and output. Returns at once.

        Raises:
            ValidationError: the bindings break DirectML's rules (nothing is queued).
        """
        key = binding_key(inputs, outputs)
        launches = self._launches.get(key)
        if launches is not None and not all(launch.valid for launch in launches):
            launches = self._rebound(key, launches, inputs, outputs)
        if launches is None:
            if self.device.closed:
                raise ValidationError(GRAPH, None, "device", "closed", "allowed: a graph of an open device")
            launches = self._launches.put(key, self.launches(*self.check(inputs, outputs)))
        for launch in launches:
            if not self.device.enqueue(launch):
                raise ValidationError(GRAPH, None, "bindings", "a buffer released while queuing",
                                      "allowed: live buffers of an open device")

    def _rebound(self, key, launches, inputs, outputs):
        """`launches` (remembered for `key`: the same blocks, offsets and sizes, which pass the
        same checks) for the live buffers of these bindings, or None to check them afresh."""
        if any(launch.pipeline.handle is None for launch in launches) or \
                not all(b.buffer.device is self.device for b in (*inputs, *outputs)):
            return None
        # Every buffer of the execution (each launch is marked in use on all of them: no
        # launch's own list is needed; an unused input's binding is never checked, so not kept).
        buffers = [b.buffer for b, descs in zip(inputs, self._input_descs) if descs]
        buffers += [b.buffer for b in outputs] + list(self._constants.values()) + self._scratch
        return self._launches.put(key, [self.device.rebind(launch, buffers) for launch in launches])

    def check(self, inputs, outputs):
        """(input ranges, output ranges) of these bindings; `ValidationError` if DirectML rejects them."""
        return check_graph_bindings(GRAPH, self._input_descs, self._output_descs, inputs, outputs, self.device,
                                    in_place=self._in_place, no_alias=self._no_alias)

    def launches(self, in_ranges, out_ranges) -> list:
        """The runtime's prepared dispatches over checked ranges, in order."""
        def where(source, index):
            if source in ("input", "output"):
                r = (in_ranges if source == "input" else out_ranges)[index]
                return r.buffer, r.start, r.end
            buffer = self._constants[index] if source == "constant" else self._scratch[index]
            return buffer, 0, buffer.size_in_bytes

        name = f"a fused graph of {len(self.graph.nodes)} nodes"
        return [launch for step in self._kernels for launch in step.launches(self.device, where, name)]

    def results(self, inputs, outputs):
        """Repeats of an execution with these bindings (checked now, as `execute` checks them)
        whose outputs are new buffers each time (`runtime.Results`): each call of the returned
        object queues one execution and returns its output Buffers (one per graph output, the
        sizes of `outputs`' buffers), or None if an input buffer was released since. None instead
        of the object for a graph whose dispatches write more than its outputs (a reduction's
        scratch): such a graph is executed afresh each time.

        `outputs` bind whole buffers that nothing else here binds (as `dmlgpu.fuse` makes them).
        """
        in_ranges, out_ranges = self.check(inputs, outputs)
        fresh = [r.buffer for r in out_ranges]
        if any(r.start or r.end != r.buffer.size_in_bytes for r in out_ranges) or \
                len({id(b) for b in fresh}) < len(fresh) or \
                any(r is not None and any(r.buffer is b for b in fresh) for r in in_ranges):
            raise ValidationError(GRAPH, None, "outputs", "a range of a buffer bound elsewhere",
                                  "allowed: whole buffers of their own (new results)")
        if not all(isinstance(step, Kernel) and all(out[0] == "output" and not sum(out[4:]) for out in step.outputs)
                   for step in self._kernels):
            return None
        launches = self.launches(in_ranges, out_ranges)
        writes, kept = [], {}
        for step, launch in zip(self._kernels, launches):
            bound = [ref() for ref in launch.buffers]
            writes.append([(out[1], gk.MAX_INPUTS + i, tuple(p for p, b in enumerate(bound) if b is fresh[out[1]]))
                           for i, out in enumerate(step.outputs)])
            kept.update((id(b), b) for b in bound if not any(b is f for f in fresh))
        return self.device.results(launches, [r.end for r in out_ranges], writes,
                                   [weakref.ref(b) for b in kept.values()])
