"""How a REDUCE's work is cut into chunks and lanes (`reduce_shape`), by the output's and the
walk's sizes and whether the device is a CPU driver: the cut fixes the order of a float sum's
additions (docs/guide/reductions.md), so it depends on nothing else."""
from __future__ import annotations

import math
import os
from typing import NamedTuple

__all__ = ["DOUBLE_FIRST_WALK", "MAX_STATES", "REDUCE_GROUP", "ReduceShape", "double_first_lanes", "reduce_shape"]

#: Lanes in flight a REDUCE dispatch aims at: on a GPU a quarter of an H100's resident threads
#: (fewer chunks keep the merge short), on a CPU driver a few workgroups per core (lavapipe,
#: 64 MiB: 2^12 as fast as any of 2^10 to 2^16, within its noise).
_TARGET_LANES = {False: 1 << 16, True: 1 << 12}
#: REDUCE's workgroup size by whether the device is a CPU: a chunk's lanes at most (H200 FLOAT32
#: SUM: 64 lanes 82.3 us, 128 77.7, 256 78.4; benchmarks/NOTES.md, sessions 11-12).
REDUCE_GROUP = {False: 128, True: 64}
#: Elements a lane takes per chunk at least (16 blocks of 4): below this, one chunk.
_LANE_ELEMENTS = 64
#: Lanes an output element's walk gets at least where outputs outnumber the lanes (reduce_shape;
#: H200, FLOAT32 sums of 65,536 rows of 1,024: 110 us at 16 lanes, 91 at 4: NOTES, session 12).
_MIN_LANES = 4
#: States a compiled REDUCE keeps between its two dispatches at most (32 bytes each: 2 MiB): a
#: walk `across` output elements of 1,024 wants 64 chunks each on a GPU.
MAX_STATES = 1 << 16
#: Walks (elements an output element) from which a float sum in doubles on a CPU driver runs its
#: first loop in a dispatch of its own (shaders/reduce.comp DOUBLE_PASS; below it the second
#: dispatch's fixed cost outweighs the loop's gain: NOTES, session 28).
DOUBLE_FIRST_WALK = 1 << 18


def double_first_lanes() -> int:
    """The lanes a float sum in doubles whose first loop runs on its own (DOUBLE_FIRST_WALK) aims
    at: two workgroups a host thread, at least 16 (the dispatch after costs a few microseconds a
    lane; lavapipe, 2 threads, 64 MiB: 4,096 lanes 0.34 ms, 1,024 0.17)."""
    return REDUCE_GROUP[True] * max(16, 2 * (os.cpu_count() or 1))


class ReduceShape(NamedTuple):
    """How REDUCE's work is cut: `lanes` lanes (a power of two up to the workgroup) reduce each
    chunk of `chunk` walked elements (a multiple of 4 * lanes), `chunks` per output element;
    `combine_lanes` lanes merge each output element's chunk states."""

    lanes: int
    chunk: int
    chunks: int
    combine_lanes: int


def _floor_pow2(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def reduce_shape(items: int, walked: int, is_cpu: bool, across: bool = False, target: int | None = None) -> ReduceShape:
    """The cut of `items` output elements of `walked` elements each (see ReduceShape).
    `across` (`short_walks.walks_across`): one lane a chunk, so that a workgroup's lanes take
    adjacent output elements, and more chunks to keep as many lanes in flight. `target`: the
    lanes to aim at (default: the device kind's)."""
    group, target = REDUCE_GROUP[bool(is_cpu)], target or _TARGET_LANES[bool(is_cpu)]
    # Lanes share an output element's walk only as far as the outputs leave lanes to fill:
    # many outputs take fewer lanes each, with longer runs of loads (at least _MIN_LANES).
    share = max(_MIN_LANES, _floor_pow2(target // items))
    lanes = 1 if across else min(group, _floor_pow2(walked // _LANE_ELEMENTS), share)
    chunks = math.ceil(target / (lanes * items))
    chunks = max(1, min(chunks, walked // (lanes * _LANE_ELEMENTS), MAX_STATES // items))
    chunk = math.ceil(walked / chunks / (4 * lanes)) * 4 * lanes
    chunks = math.ceil(walked / chunk)
    return ReduceShape(lanes, chunk, chunks, min(group, _floor_pow2(chunks // 4)))
