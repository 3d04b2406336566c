"""DirectML feature levels (`DML_FEATURE_LEVEL`), values as in DirectML.h.

Levels are strict supersets, so "supported at level L" means "declared at some level <= L".
"""
from __future__ import annotations

import enum

__all__ = ["FeatureLevel"]


class FeatureLevel(enum.IntEnum):
    """`DML_FEATURE_LEVEL`; members are named `LEVEL_<major>_<minor>`."""

    LEVEL_1_0 = 0x1000
    LEVEL_2_0 = 0x2000
    LEVEL_2_1 = 0x2100
    LEVEL_3_0 = 0x3000
    LEVEL_3_1 = 0x3100
    LEVEL_4_0 = 0x4000
    LEVEL_4_1 = 0x4100
    LEVEL_5_0 = 0x5000
    LEVEL_5_1 = 0x5100
    LEVEL_5_2 = 0x5200
    LEVEL_6_0 = 0x6000
    LEVEL_6_1 = 0x6100
    LEVEL_6_2 = 0x6200
    LEVEL_6_3 = 0x6300
    LEVEL_6_4 = 0x6400

    @property
    def dml_name(self) -> str:
        return "DML_FEATURE_" + self.name

    @classmethod
    def newest(cls) -> "FeatureLevel":
        return max(cls)

