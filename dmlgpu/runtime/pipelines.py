"""A device's compute pipelines: one per program x grid x the arenas it binds, least recently
used dropped past `CACHE_LIMITS["pipelines"]`, except those a recorded command buffer uses
(pinned), and destroyed only once the work queued before their retirement has finished. All
are made through the device's VkPipelineCache, seeded from and saved to the on-disk cache
(`pipeline_cache.DiskCache`) after bursts of new pipelines and at close.

Callers hold the device's lock.
"""
from __future__ import annotations

import time
from collections import OrderedDict

from ..errors import DeviceError
from . import limits, vulkan
from .pipeline_cache import DiskCache

#: The pipeline cache goes to disk at close, and after this many new pipelines if the last
#: write is this old (a burst of compiles; never per dispatch).
SAVE_AFTER_PIPELINES = 32
SAVE_INTERVAL_S = 10.0


def seeded_disk_cache(context, properties: dict) -> DiskCache:
    """The on-disk cache of the device `context` opened (`properties`: its list_devices entry),
    its data handed to the driver's pipeline cache before the first pipeline is made."""
    disk_cache = DiskCache.for_device(context.pipeline_cache_uuid(), properties["vendor_id"],
                                      properties["device_id"], properties["driver_version"])
    try:
        context.seed_pipeline_cache(disk_cache.load())
    except DeviceError:  # the driver refused the data: an empty cache, the file rebuilt
        disk_cache.status = "rejected: by the driver"
        context.seed_pipeline_cache(b"")
    return disk_cache


class PipelineCache:
    """The pipelines of one device (`context`), retired behind the work of its `stream`, kept
    on disk by `disk_cache`."""

    def __init__(self, context, stream, disk_cache: DiskCache):
        self._context = context
        self._stream = stream
        self._disk_cache = disk_cache
        self.from_fields = 0  # pipelines created by this device (compiled or from the cache)
        self._seconds = 0.0  # time spent creating them
        self._unsaved = 0  # pipelines made since the cache file was last written
        self._saved_at = time.monotonic()
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
            start = time.perf_counter()
            pipeline = self._pipelines[key] = self._context.pipeline(
                program.spirv, grid, program.spec, program.push_words, [a.memory for a in arenas])
            self._seconds += time.perf_counter() - start
            self.from_fields += 1
            self._unsaved += 1
            if len(self._pipelines) > limits.CACHE_LIMITS["pipelines"]:
                self._evict(limits.CACHE_LIMITS["pipelines"])
            if self._unsaved >= SAVE_AFTER_PIPELINES and time.monotonic() - self._saved_at >= SAVE_INTERVAL_S:
                self._save()
        else:
            self._pipelines.move_to_end(key)
        return key, pipeline

    def _save(self) -> None:
        """Write the pipeline cache to disk (a new process then compiles none of these)."""
        self._unsaved, self._saved_at = 0, time.monotonic()
        self._disk_cache.save(self._context.pipeline_cache_data())

    def stats(self) -> dict:
        """`Device.pipeline_stats`: pipelines created, seconds spent creating them, the disk cache."""
        return {"pipelines_created": self.from_fields, "pipeline_seconds": self._seconds, **self._disk_cache.info()}

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
        """Destroy every pipeline, cached and retired, after saving the pipeline cache to disk
        (the device is closing)."""
        for pipeline in self._pipelines.values():
            pipeline.destroy()
            pipeline.handle = None
        self._pipelines.clear()
        if self.from_fields:
            self._save()
        for _, pipeline in self._retired:
            pipeline.destroy()
        self._retired.clear()
