"""A device's compute pipelines: one per program x grid x the arenas it binds, least recently
used dropped past `CACHE_LIMITS["pipelines"]`, except those a recorded command buffer uses
(pinned), and destroyed only once the work queued before their retirement has finished.

Callers hold the device's lock.
"""
from __future__ import annotations

from collections import OrderedDict

from . import limits, vulkan


class PipelineCache:
    """The pipelines of one device (`context`), retired behind the work of its `stream`."""

    def __init__(self, context, stream):
        self._context = context
        self._stream = stream
        self._pipelines: OrderedDict = OrderedDict()  # key -> Pipeline, least recently made first
        self._pins: dict = {}  # pipeline key -> recorded command buffers using it
        self._retired: list = []  # (stream position, Pipeline): destroyed once work passes it

    def __len__(self) -> int:
        return len(self._pipelines)

    @property
    def pinned(self) -> int:
        """Pipelines a recorded command buffer uses."""
        return len(self._pins)

    def get(self, program, grid: tuple, arenas):
        """(key, pipeline) of `program` over `grid` binding `arenas` in order: made once per
        program, grid and arenas, and kept until one of them is released or it is the least
        recently made or looked up of more than CACHE_LIMITS["pipelines"] (then made again
        when needed: a Launch of it is remade by its user, `Launch.valid` turns False)."""
        key = (program.key, grid, tuple(a.id for a in arenas))
        pipeline = self._pipelines.get(key)
        if pipeline is None:
            pipeline = self._pipelines[key] = self._context.pipeline(
                program.spirv, grid, program.spec, program.push_words, [a.memory for a in arenas])
            if len(self._pipelines) > limits.CACHE_LIMITS["pipelines"]:
                self._evict(limits.CACHE_LIMITS["pipelines"])
        else:
            self._pipelines.move_to_end(key)
        return key, pipeline

    def _evict(self, limit: int) -> None:
        """Retire the least recently made unpinned pipelines until at most `limit` are kept
        (pinned ones count, and are never retired)."""
        excess = len(self._pipelines) - limit
        for key in list(self._pipelines):
            if excess <= 0:
                break
            if key not in self._pins:
                self._retire(key)
                excess -= 1

    def retire_unpinned(self) -> None:
        """Retire every pipeline no recorded command buffer uses (`empty_cache`)."""
        for key in [k for k in self._pipelines if k not in self._pins]:
            self._retire(key)

    def _retire(self, key) -> None:
        """Drop a pipeline from the cache now (every Launch of it is invalid from here) and
        destroy it once the work queued so far, which may use it, has finished."""
        pipeline = self._pipelines.pop(key)
        self._retired.append((self._stream.position, vulkan.Pipeline(pipeline.handle)))
        pipeline.handle = None

    def reclaim(self, completed: int) -> None:
        """Destroy retired pipelines whose work has completed."""
        if self._retired and self._retired[0][0] <= completed:
            keep = []
            for position, pipeline in self._retired:
                if position <= completed:
                    pipeline.destroy()
                else:
                    keep.append((position, pipeline))
            self._retired = keep

    def pin(self, keys) -> None:
        """Keep the pipelines of `keys` (a recorded command buffer uses them) out of eviction."""
        for key in keys:
            self._pins[key] = self._pins.get(key, 0) + 1

    def unpin(self, keys) -> None:
        for key in keys:
            count = self._pins.get(key, 0) - 1
            if count > 0:
                self._pins[key] = count
            else:
                self._pins.pop(key, None)

    def drop_arena(self, arena) -> None:
        """Destroy the pipelines binding `arena` (its memory is about to be destroyed)."""
        for key in [k for k in self._pipelines if arena.id in k[2]]:
            pipeline = self._pipelines.pop(key)
            pipeline.destroy()
            pipeline.handle = None

    def destroy(self) -> None:
        """Destroy every pipeline, cached and retired (the device is closing)."""
        for pipeline in self._pipelines.values():
            pipeline.destroy()
            pipeline.handle = None
        self._pipelines.clear()
        for _, pipeline in self._retired:
            pipeline.destroy()
        self._retired.clear()
