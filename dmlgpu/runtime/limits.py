"""Bounds of the caches every device keeps, and the runtime's own integer test.

The runtime imports nothing from the table layers above it, so it checks its own arguments
with `is_int` here rather than `dmlgpu.describe.validation`'s.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import ValidationError

#: Bounds of the caches a device keeps, least recently used dropped first; settable with
#: `set_cache_limits` or, at import, the environment (DMLGPU_CACHE_PIPELINES, ...):
#: - "pipelines": compute pipelines (program x grid x arenas). A pipeline costs lavapipe
#:   ~1 MB of compiled code, a GPU driver far less; ones a recorded command buffer uses (a
#:   command list, a host call) are kept besides, until it goes.
#: - "host_calls": kept calls on host data (`host_call`): at most host_calls x HOST_CALL_BYTES
#:   of device memory and as much staging.
CACHE_LIMITS = {"pipelines": int(os.environ.get("DMLGPU_CACHE_PIPELINES", 256)),
                "host_calls": int(os.environ.get("DMLGPU_CACHE_HOST_CALLS", 16))}


def is_int(value) -> bool:
    """An int or numpy integer, not a bool (the runtime's own test: it imports nothing from the
    table layers above it)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def set_cache_limits(**limits) -> dict:
    """Set cache bounds (`CACHE_LIMITS` names them; each at least 1) for every device; returns
    the bounds now in force. Caches over a new bound shrink at their next insertion."""
    for name, value in limits.items():
        if name not in CACHE_LIMITS:
            raise ValidationError("dmlgpu", None, "cache limit", name, f"allowed: {', '.join(CACHE_LIMITS)}")
        if not is_int(value) or value < 1:
            raise ValidationError("dmlgpu", None, name, value, "allowed: an int of at least 1")
    CACHE_LIMITS.update({name: int(value) for name, value in limits.items()})
    return dict(CACHE_LIMITS)
