"""Which byte spans (memory, start, end) share bytes: the one place the runtime's stream and
the command-list planner ask it.

Two forms, for two sizes of question: `overlap` scans two short lists (the stream tracks at most
`stream.MAX_TRACKED` spans between barriers before it places one anyway); `Spans` keeps any
number of spans as sorted disjoint intervals per memory, so a command list of n executions is
planned in O(n log n).
"""
from __future__ import annotations

import bisect

__all__ = ["Spans", "overlap"]


def overlap(spans, pending) -> bool:
    """Whether any (memory, start, end) span shares bytes with any pending one."""
    for a, s, e in spans:
        for pa, ps, pe in pending:
            if pa == a and s < pe and ps < e:
                return True
    return False


class Spans:
    """Byte spans (memory, start, end) as sorted disjoint intervals per memory."""

    def __init__(self):
        self._by: dict = {}

    def overlaps(self, span) -> bool:
        memory, start, end = span
        found = self._by.get(memory)
        if found is None:
            return False
        starts, ends = found
        i = bisect.bisect_left(starts, end)  # intervals starting before `end`
        return i > 0 and ends[i - 1] > start  # disjoint and sorted: the last of them ends last

    def add(self, span) -> None:
        memory, start, end = span
        starts, ends = self._by.setdefault(memory, ([], []))
        j = bisect.bisect_left(ends, start)  # first interval ending at or after `start`
        k = bisect.bisect_right(starts, end)  # intervals starting at or before `end`
        if j < k:
            start, end = min(start, starts[j]), max(end, ends[k - 1])
        starts[j:k] = [start]
        ends[j:k] = [end]

    def clear(self) -> None:
        self._by.clear()
