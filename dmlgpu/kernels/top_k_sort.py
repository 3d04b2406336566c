"""TOP_K1's sorting passes (shaders/top_k.comp TOP_K_SORT): the steps of a bitonic sort into runs
of K, then rounds that halve the runs' pairs, each step a dispatch over a scratch buffer of two
regions (compiled_selection.CompiledSelection.top_k_passes launches them)."""
from __future__ import annotations

from . import variants as kernels

__all__ = ["top_k_sort_steps"]

_SORT_BLOCK = kernels.TOP_K_GROUP_SLOTS
_STEPS = kernels.TOP_K_SORT_STEPS


def top_k_sort_steps(items: int, walked: int, k: int) -> tuple[list, int]:
    """TOP_K_SORT's passes for `items` sequences of `walked` elements: a list of (SELECT_HEADER
    words, invocations or workgroups, whether per pair) and the scratch's length in entries.
    Two regions: R0 holds each sequence's M entries (M: `walked` to a power of two), R1 half
    that; a pass reads one region and writes one (the first pass of a halving round reads pairs
    of runs from one and writes their better halves, merged, to the other); shaders/top_k.comp
    says what each step does."""
    m = kernels.ceil_pow2(walked)
    run = min(kernels.ceil_pow2(k), m)
    block = min(_SORT_BLOCK, m)
    regions = (0, items * m)
    steps = []

    def add(step, entries, source, target, *, stage=0, stride=0, out=False, halve=False):
        (source_region, source_step), (target_region, target_step) = source, target
        words = dict(sort_step=_STEPS[step], sort_run=run, sort_stage=stage, sort_stride=stride, sort_entries=entries,
                     sort_from=regions[source_region], sort_from_step=source_step, sort_to=regions[target_region],
                     sort_to_step=target_step, sort_halve=int(halve))
        pairs = step == "TOP_K_EXCHANGE"
        steps.append((words, items * (entries // 2 if pairs else entries // min(entries, _SORT_BLOCK)), pairs, out))

    if run < block:  # runs of the block fold into one: each pass keeps `run` of every block
        entries = m
        source = (0, 0)
        target = (1, (m // block) * run) if m > block else (0, m)
        add("TOP_K_FIRST", m, source, target, out=m <= block)
        entries = (m // block) * run
        while m > block:
            source, out = target, entries <= block
            target = (1 - source[0], max(run, entries // _SORT_BLOCK * run))
            add("TOP_K_FOLD", entries, source, target, out=out)
            if out:
                break
            entries = entries // _SORT_BLOCK * run
        return steps, items * (m + m // 2)
    add("TOP_K_FIRST", m, (0, m), (0, m), out=run == m == block)
    stage = 2 * block
    while stage <= run:  # the bitonic sort's later stages: into runs of `run`
        stride = stage // 2
        while stride >= block:
            add("TOP_K_EXCHANGE", m, (0, m), (0, m), stage=stage, stride=stride)
            stride //= 2
        add("TOP_K_MERGE", m, (0, m), (0, m), stage=stage, out=stage == run == m)
        stage *= 2
    entries, source = m, (0, m)
    while entries > run:  # pairs of runs halved as the round's first pass reads, merged into runs
        target = (1 - source[0], entries // 2)
        entries //= 2
        stride, halve = run // 2, True  # the round's first pass reads the pairs from `source`
        while stride >= block:
            add("TOP_K_EXCHANGE", entries, source if halve else target, target, stage=run, stride=stride, halve=halve)
            stride, halve = stride // 2, False
        add("TOP_K_MERGE", entries, source if halve else target, target, stage=run, out=entries == run, halve=halve)
        source = target
    return steps, items * (m + m // 2)
