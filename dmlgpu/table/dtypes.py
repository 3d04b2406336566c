"""DirectML tensor data types, each with the facts the rest of dmlgpu derives from.

`DataType` mirrors `DML_TENSOR_DATA_TYPE` (values from DirectML.h), so a member's value is what a
DirectML program would pass. Groups are named unions used by the operator table; nothing else
should list data types by hand.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

__all__ = ["ALL", "DataType", "FLOATS", "FLOATS_UP_TO_32", "INTS", "INTS_UP_TO_32", "Kind", "UINTS", "UINTS_UP_TO_32"]


class Kind(enum.Enum):
    """How a shader must read an element's bits (only SIGN cares)."""

    UINT = "uint"
    INT = "int"
    FLOAT = "float"


@dataclass(frozen=True)
class _Facts:
    bits: int
    kind: Kind
    numpy_name: str | None  # None: no numpy dtype (4-bit types)


class DataType(enum.IntEnum):
    """`DML_TENSOR_DATA_TYPE`; member names drop the `DML_TENSOR_DATA_TYPE_` prefix."""

    UNKNOWN = 0
    FLOAT32 = 1
    FLOAT16 = 2
    UINT32 = 3
    UINT16 = 4
    UINT8 = 5
    INT32 = 6
    INT16 = 7
    INT8 = 8
    FLOAT64 = 9
    UINT64 = 10
    INT64 = 11
    UINT4 = 12
    INT4 = 13

    @property
    def _facts(self) -> _Facts:
        return _FACTS[self]

    @property
    def bits(self) -> int:
        """Element width in bits (4 for UINT4/INT4; 0 for UNKNOWN)."""
        return self._facts.bits

    @property
    def size(self) -> int:
        """Element width in bytes; only defined for types of 8 bits or more."""
        if self.bits < 8:
            raise ValueError(f"{self.name} has no whole-byte element size")
        return self.bits // 8

    @property
    def kind(self) -> Kind:
        return self._facts.kind

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_signed(self) -> bool:
        return self.kind is not Kind.UINT

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype with the same encoding (little-endian)."""
        if self._facts.numpy_name is None:
            raise ValueError(f"{self.name} has no numpy dtype")
        return np.dtype(self._facts.numpy_name).newbyteorder("<")

    @property
    def dml_name(self) -> str:
        return f"DML_TENSOR_DATA_TYPE_{self.name}"

    @classmethod
    def from_numpy(cls, dtype) -> "DataType | None":
        """The DataType for a numpy dtype, or None when DirectML has no such type."""
        dt = np.dtype(dtype)
        if dt.byteorder == ">" or dt.kind not in "uif":
            return None
        return _BY_DTYPE.get(dt.newbyteorder("=") if dt.byteorder == "<" else dt)


_FACTS = {
    DataType.UNKNOWN: _Facts(0, Kind.UINT, None),
    DataType.FLOAT32: _Facts(32, Kind.FLOAT, "float32"),
    DataType.FLOAT16: _Facts(16, Kind.FLOAT, "float16"),
    DataType.UINT32: _Facts(32, Kind.UINT, "uint32"),
    DataType.UINT16: _Facts(16, Kind.UINT, "uint16"),
    DataType.UINT8: _Facts(8, Kind.UINT, "uint8"),
    DataType.INT32: _Facts(32, Kind.INT, "int32"),
    DataType.INT16: _Facts(16, Kind.INT, "int16"),
    DataType.INT8: _Facts(8, Kind.INT, "int8"),
    DataType.FLOAT64: _Facts(64, Kind.FLOAT, "float64"),
    DataType.UINT64: _Facts(64, Kind.UINT, "uint64"),
    DataType.INT64: _Facts(64, Kind.INT, "int64"),
    DataType.UINT4: _Facts(4, Kind.UINT, None),
    DataType.INT4: _Facts(4, Kind.INT, None),
}
# By native dtype (a lookup by `dtype.name` took a third of `Tensor.empty`).
_BY_DTYPE = {np.dtype(f.numpy_name): dt for dt, f in _FACTS.items() if f.numpy_name}

# Named groups, in the order DirectML's tables list them.
UINTS_UP_TO_32 = (DataType.UINT32, DataType.UINT16, DataType.UINT8)
INTS_UP_TO_32 = (DataType.INT32, DataType.INT16, DataType.INT8)
FLOATS_UP_TO_32 = (DataType.FLOAT32, DataType.FLOAT16)
UINTS = (DataType.UINT64,) + UINTS_UP_TO_32
INTS = (DataType.INT64,) + INTS_UP_TO_32
FLOATS = (DataType.FLOAT64,) + FLOATS_UP_TO_32
#: The eleven types every dmlgpu operator may meet (DirectML's 4_1 bitwise tables).
ALL = FLOATS + INTS + UINTS
