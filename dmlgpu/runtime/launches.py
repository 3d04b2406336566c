"""What the device runs: `Program`s, prepared dispatches (`Launch`), repeated dispatches into
fresh outputs (`Results`), dispatches re-aimed at other buffers of one layout (`Rebound`) and
command buffers recorded once (`Recorded`).

Pipelines: one per program (a shader variant with its specialization) x grid x the arenas it
binds, so creating buffers or results never compiles one in steady state. Offsets into the
arenas travel as push constants.
"""
from __future__ import annotations

import weakref

import numpy as np

from . import fork, threads
from .buffers import Buffer
from .stream import replay_key


class Program:
    """What a dispatch runs: SPIR-V with its specialization constants and push-constant size."""

    __slots__ = ("name", "spirv", "spec", "push_words", "key")

    def __init__(self, name: str, spirv: bytes, spec: np.ndarray, push_words: int):
        self.name = name
        self.spirv = spirv
        self.spec = spec
        self.push_words = push_words
        self.key = (name, spec.tobytes())


class Launch:
    """One dispatch ready to queue: pipeline, push constants and the ranges it reads and writes.

    Made once per operator and binding list (the blocks of live buffers never move), so a
    repeated execution costs a dependency check and one recorded dispatch. It holds its
    buffers weakly: a remembered launch never keeps memory alive.
    """

    __slots__ = ("device", "name", "pipeline", "push", "reads", "writes", "buffers", "key", "replay_key",
                 "program", "traffic")

    def __init__(self, device, name, pipeline, push, reads, writes, buffers, key, program, traffic: int):
        self.device = device
        self.program = program
        self.name = name
        self.pipeline = pipeline
        self.push = push
        self.reads = reads
        self.writes = writes
        self.buffers = tuple(weakref.ref(b) for b in buffers)
        self.key = key  # (program key, grid, arena ids): what the pipeline was made for
        self.replay_key = replay_key(pipeline, push)  # the stream's kept command buffer for it
        # The bytes its ranges span, read and written (when the stream submits; the spans above may
        # be whole arenas, as under the validation layer).
        self.traffic = traffic

    def derived(self, pipeline, push, reads, writes, buffer_refs, key) -> "Launch":
        """A launch of the same device and name from parts already made (no checks, no copies):
        other buffers' in the same blocks (`Device.rebind`)."""
        launch = Launch.__new__(Launch)
        launch.device, launch.name, launch.pipeline, launch.push = self.device, self.name, pipeline, push
        launch.reads, launch.writes, launch.buffers, launch.key = reads, writes, buffer_refs, key
        launch.replay_key = replay_key(pipeline, push)
        launch.traffic = self.traffic  # (the same blocks: the same ranges)
        launch.program = self.program
        return launch

    @property
    def arena_ids(self) -> tuple:
        """The arena each binding lies in, in binding order."""
        return self.key[2]

    @property
    def valid(self) -> bool:
        if self.pipeline.handle is None:
            return False
        for ref in self.buffers:
            buffer = ref()
            if buffer is None or buffer.released:
                return False
        return True


def prepare(device, resources, program: Program, grid, bindings, push, reads, writes, name: str) -> Launch:
    """`Device.launch`: a Launch of `program` over `grid` binding the Buffers `bindings`."""
    with resources.lock:
        resources.check_open()
        key, pipeline = resources.pipelines.get(program, tuple(grid), [b.block.arena for b in bindings])
        return Launch(device, name, pipeline, np.ascontiguousarray(push, np.uint32),
                      [resources.span(b.block, s, e) for b, s, e in reads],
                      [resources.span(b.block, s, e) for b, s, e in writes],
                      tuple({id(b): b for b in bindings}.values()), key, program,
                      sum([e - s for _, s, e in reads]) + sum([e - s for _, s, e in writes]))


def enqueue(resources, launch: Launch) -> bool:
    """`Device.enqueue`: queue `launch`, or False (nothing queued) if it is no longer valid."""
    threads.entered()  # (SystemExit in a daemon thread once the interpreter's exit began)
    lock = resources.lock  # acquire/release: half the cost of `with` on this hot path
    lock.acquire()
    try:
        if resources.closed:
            if resources.forked:
                fork.check()
            return False
        buffers = []
        for ref in launch.buffers:
            buffer = ref()
            if buffer is None or buffer.block is None:
                return False
            buffers.append(buffer)
        if launch.pipeline.handle is None:  # retired from the cache: made again
            resources.current(launch)
        stream = resources.stream
        position = stream.position
        stream.dispatch(launch.pipeline, launch.push, launch.reads, launch.writes, launch.name,
                        launch.replay_key, launch.traffic)
        for buffer in buffers:
            buffer.last_use = position
        return True
    finally:
        lock.release()


def record(resources, steps, name: str) -> "Recorded":
    """`Device.record`: `steps` (launches, None for a barrier) in one reusable command buffer."""
    with resources.lock:
        resources.check_open()
        commands = resources.context.commands()
        commands.barrier()  # earlier work in the stream -> this list
        for step in steps:
            if step is None:
                commands.compute_barrier()
            else:
                commands.dispatch(resources.current(step).handle, step.push)
        commands.host_barrier()
        return Recorded(resources, commands, name, [step.key for step in steps if step is not None])


class Results:
    """Repeats of one call's dispatches, each repeat writing fresh output buffers (`u = ~t` in
    a loop; a fused graph's outputs).

    The pool hands a loop the same few blocks again and again, so each dispatch's pipeline, push
    constants and written spans are remembered per set of output blocks it writes: a call takes
    the blocks, makes their Buffers and queues the dispatches, under one hold of the device's
    lock, and makes no Launch and checks nothing but that the inputs are still live.

    Args:
        templates: the call's launches, in order (made for its first outputs).
        ends: per fresh output, its size in bytes (the dispatches write bytes [0, end)).
        writes: per template, its fresh outputs in the order of its `writes`: (output index,
            push-constant word of its word offset, binding positions that bind it).
        inputs: weak references to every other buffer the templates bind (kept bound).
    """

    __slots__ = ("device", "templates", "ends", "_resources", "_inputs", "_writes", "_steps")
    #: Output block sets remembered per dispatch (then forgotten all at once): a loop uses two or three.
    BLOCKS = 64

    def __init__(self, device, resources, templates, ends, writes, inputs):
        self.device = device
        self.templates = tuple(templates)
        self.ends = tuple(ends)
        self._resources = resources
        self._inputs = tuple(inputs)
        self._writes = tuple(tuple(w) for w in writes)
        # Per template: (its index, the fresh outputs it writes, block keys -> (pipeline, push,
        # written spans, replay key, traffic)).
        self._steps = tuple((t, tuple(k for k, _, _ in w), {}) for t, w in enumerate(self._writes))

    def __call__(self) -> list | None:
        """New output buffers (one per `ends`) with the dispatches writing them queued; None,
        queuing nothing, if an input buffer was released."""
        resources = self._resources
        with resources.lock:
            resources.check_open()
            for ref in self._inputs:
                buffer = ref()
                if buffer is None or buffer.block is None:
                    return None
            memory, device = resources.memory, self.device
            blocks, buffers = [], []
            for end in self.ends:
                block = resources.take(memory, end, device_writes_first=True)
                blocks.append((block.arena.id, block.offset))
                buffers.append(Buffer(device, resources, end, block))
            stream, templates = resources.stream, self.templates
            for t, outputs, remembered in self._steps:
                key = blocks[outputs[0]] if len(outputs) == 1 else tuple([blocks[k] for k in outputs])
                entry = remembered.get(key)
                if entry is None or entry[0].handle is None:  # (arena ids are never reused)
                    entry = self._remember(t, key, buffers)
                template = templates[t]
                position = stream.position
                stream.dispatch(entry[0], entry[1], template.reads, entry[2], template.name, entry[3], entry[4])
            for ref in self._inputs:
                ref().last_use = position
            for buffer in buffers:
                buffer.last_use = position
            return buffers

    def _remember(self, t, key, buffers):
        resources, template = self._resources, self.templates[t]
        _, grid, arena_ids = template.key
        fresh = {position: buffers[k].block.arena for k, _, positions in self._writes[t] for position in positions}
        kept = iter(resources.arenas_by_id([i for p, i in enumerate(arena_ids) if p not in fresh]))
        arenas = [fresh[p] if p in fresh else next(kept) for p in range(len(arena_ids))]
        push = template.push.copy()
        spans = []
        for k, word, _ in self._writes[t]:
            block = buffers[k].block
            push[word] = block.offset // 4
            spans.append(resources.span(block, 0, self.ends[k]))
        _, pipeline = resources.pipelines.get(template.program, grid, arenas)
        remembered = self._steps[t][2]
        if len(remembered) >= self.BLOCKS:
            remembered.clear()
        entry = remembered[key] = (pipeline, push, spans, replay_key(pipeline, push), template.traffic)
        return entry


def _enter(resources) -> None:
    """A device call starts (`threads.entered`: SystemExit in a daemon thread once the
    interpreter's exit began), holding the device's lock; ValidationError, the lock released
    again, where the device was closed. The caller releases the lock."""
    threads.entered()
    resources.lock.acquire()
    if resources.closed:
        resources.lock.release()
        resources.check_open()


class Rebound:
    """One prepared dispatch aimed, call after call, at other buffers laid out as its template's
    were (`u = ~u` in a loop: a new operand and a new result every call).

    What a call of one layout needs is fixed by its first call: the program, the grid, the push
    constants but the bindings' offsets, and the size of each binding's range. A call names its
    buffers and the byte where each binding starts; the output may be a fresh buffer of `fresh`
    bytes, taken from the pool here. Under one hold of the device's lock it checks that every
    buffer is live, finds what it queues for their blocks (remembered per block set: a loop of
    temporaries cycles through a few), and queues the dispatch: no Launch is made and nothing is
    checked again (the caller planned the layout once and checked it then).

    Args:
        template: the first call's Launch.
        words: per binding, the push-constant word that holds its offset.
        units: per binding, the unit that offset counts in bytes (4: words; the element size
            for the strided kernel's output, which may start at any element).
        sizes: per binding, the bytes its range spans from its start.
        fresh: bytes of a new output buffer (the last binding), or None when the output is given.
    """

    __slots__ = ("device", "_resources", "_template", "_words", "_units", "_sizes", "_fresh", "_pipelines", "_made")
    #: Arena sets remembered (then forgotten all at once): a loop uses a few.
    ARENA_SETS = 64
    #: Block sets remembered with what a call over them queues (then forgotten all at once):
    #: `u = ~u` alternates two, `u = (u ^ k) >> 3` and `u = ~t ^ u` cycle through three per
    #: operator; results kept alive take a new block every call, and a new entry.
    BLOCK_SETS = 16

    def __init__(self, device, resources, template, words, units, sizes, fresh):
        self.device = device
        self._resources = resources
        self._template = template
        self._words, self._units, self._sizes = tuple(words), tuple(units), tuple(sizes)
        self._fresh = fresh
        self._pipelines: dict = {}
        # (the blocks, each binding's start, the shift) -> (pipeline, push constants, read spans,
        # written spans, replay key, traffic). A Block keeps its arena and offset for life, so the same
        # Block objects (held here, which keeps their ids unique) give the same push constants
        # and spans; a retired pipeline (its handle None) is looked up again.
        self._made: dict = {}

    @property
    def fresh_bytes(self):
        """Bytes of a new output buffer per call, or None when the output is given."""
        return self._fresh

    def __call__(self, buffers, starts, shift: int = 0):
        """Queue the dispatch over `buffers` (the output last; None there for a fresh one)
        from byte `starts` (`shift` elements more for a strided output); returns the output
        Buffer, or None, queuing nothing, if a buffer was released or belongs to another device."""
        resources, device = self._resources, self.device
        _enter(resources)
        try:
            fresh = self._fresh
            if fresh is not None:  # a block parked on this stream first: the dispatch writes it first
                memory = resources.memory
                block = (resources.take_dropped(fresh) if resources.dropped else None) \
                    or memory.take_parked(fresh) or resources.take(memory, fresh)
                buffers[-1] = Buffer(device, resources, fresh, block)
            blocks = []
            for buffer in buffers:
                block = buffer.block
                if block is None or buffer.device is not device:
                    return None
                blocks.append(block)
            key = (*blocks, *starts, shift)
            made = self._made.get(key)
            if made is None or made[0].handle is None:
                made = self._prepare(key, blocks, starts, shift)
            stream = resources.stream
            position = stream.position
            stream.dispatch(made[0], made[1], made[2], made[3], self._template.name, made[4], made[5])
            for buffer in buffers:
                buffer.last_use = position
            return buffers[-1]
        finally:
            resources.lock.release()

    def fresh(self, first, first_start: int, second=None, second_start: int = 0):
        """`self([first, second, None], [first_start, second_start, 0])` for a call of one or two
        inputs and a fresh output (`~t`, `t ^ u`, `t >> 3`: the common Tensor call), with no lists
        made: the new output Buffer, or None, queuing nothing, if an input was released or
        belongs to another device."""
        resources, device = self._resources, self.device
        threads.entered()  # (SystemExit in a daemon thread once the interpreter's exit began)
        lock = resources.lock  # (inline, not `_enter`: the hot path of `u = ~u`)
        lock.acquire()
        try:
            if resources.closed:
                resources.check_open()
            block, other = first.block, None
            if block is None or first.device is not device:
                return None
            if second is not None:
                other = second.block
                if other is None or second.device is not device:
                    return None
            memory, fresh = resources.memory, self._fresh
            # (the block of a result just dropped, or one parked on this stream, first: the
            # dispatch writes it first)
            written = (resources.take_dropped(fresh) if resources.dropped else None) \
                or memory.take_parked(fresh) or resources.take(memory, fresh)
            result = Buffer(device, resources, fresh, written)
            return self._queue(first, second, result, block, other, written, first_start, second_start, 0)
        finally:
            lock.release()

    def given(self, first, first_start: int, out, out_start: int, second=None, second_start: int = 0):
        """`self([first, second, out], [first_start, second_start, out_start])` for a call of one
        or two inputs into a given output (`bit_not(o, out=o)`), with no lists made: `out`, or
        None, queuing nothing, if a buffer was released or belongs to another device."""
        resources, device = self._resources, self.device
        threads.entered()
        lock = resources.lock  # (inline, as `fresh`)
        lock.acquire()
        try:
            if resources.closed:
                resources.check_open()
            block, written, other = first.block, out.block, None
            if block is None or written is None or first.device is not device or out.device is not device:
                return None
            if second is not None:
                other = second.block
                if other is None or second.device is not device:
                    return None
            return self._queue(first, second, out, block, other, written, first_start, second_start, out_start)
        finally:
            lock.release()

    def _queue(self, first, second, result, block, other, written, first_start, second_start, out_start):
        """`fresh`'s and `given`'s dispatch over these blocks (`other` None for one input), under
        the device's lock: queued, the buffers' last use set; returns `result`. Its entries are
        `__call__`'s (the same keys)."""
        if other is None:
            key = (block, written, first_start, out_start, 0)
        else:
            key = (block, other, written, first_start, second_start, out_start, 0)
        made = self._made.get(key)
        if made is None or made[0].handle is None:
            if other is None:
                made = self._prepare(key, [block, written], [first_start, out_start], 0)
            else:
                made = self._prepare(key, [block, other, written], [first_start, second_start, out_start], 0)
        stream = self._resources.stream
        position = stream.position
        stream.dispatch(made[0], made[1], made[2], made[3], self._template.name, made[4], made[5])
        first.last_use = result.last_use = position
        if second is not None:
            second.last_use = position
        return result

    def _prepare(self, key, blocks, starts, shift):
        """Pipeline, push constants, read and written spans and replay key of a call over
        `blocks` from `starts`, remembered under `key`."""
        resources = self._resources
        arena_ids = tuple([block.arena.id for block in blocks])
        pipeline = self._pipelines.get(arena_ids)
        if pipeline is None or pipeline.handle is None:
            pipeline = self._pipeline(arena_ids, blocks)
        push = self._template.push.copy()
        spans = []
        whole = resources.whole_arenas
        for word, unit, size, block, start in zip(self._words, self._units, self._sizes, blocks, starts):
            offset = block.offset + start
            push[word] = offset // unit
            arena = block.arena
            spans.append((arena.id, 0, arena.nbytes) if whole else (arena.id, offset, offset + size))
        if shift:
            push[self._words[-1]] += shift
        made = (pipeline, push, spans[:-1], spans[-1:], replay_key(pipeline, push), sum(self._sizes))
        if len(self._made) >= self.BLOCK_SETS:
            self._made.clear()
        self._made[key] = made
        return made

    def _pipeline(self, arena_ids, blocks):
        """The pipeline of this program over these arenas (remembered per arena set)."""
        _, grid, _ = self._template.key
        _, pipeline = self._resources.pipelines.get(self._template.program, grid, [b.arena for b in blocks])
        if len(self._pipelines) >= self.ARENA_SETS:
            self._pipelines.clear()
        self._pipelines[arena_ids] = pipeline
        return pipeline


class Recorded:
    """A command buffer recorded once (a command list) and submitted on the stream on demand.

    The pipelines it dispatches (`keys`) are pinned in the device's cache until `destroy`."""

    def __init__(self, resources, commands, name, keys=()):
        self._resources = resources
        self._commands = commands
        self.name = name
        self._keys = list(keys)
        with resources.lock:
            resources.pipelines.pin(self._keys)

    def submit(self, buffers) -> int:
        """Queue it after everything queued; `buffers` (what it uses) are in use until it ends.
        Returns its stream position."""
        resources = self._resources
        with resources.lock:
            resources.stream.submit_recorded(self._commands, self.name)
            position = resources.stream.position - 1
            for buffer in buffers:
                buffer.last_use = position
            return position

    def destroy(self) -> None:
        resources = self._resources
        with resources.lock:
            keys, self._keys = self._keys, []
            if resources.closed:
                return
            resources.pipelines.unpin(keys)
            if self._commands is None:
                return
            resources.stream.synchronize()
            self._commands.destroy()
            self._commands = None
