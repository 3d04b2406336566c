"""`DML_BUFFER_TENSOR_DESC` and DirectML's buffer-size helper.

A TensorDesc stores what it is given; `dmlgpu.validate` decides whether it is acceptable, so that
every rejection comes from one place with one kind of message.
"""
from __future__ import annotations
from .shapes import packed_strides  # noqa: F401 (re-exported)

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..table.dtypes import DataType
from ..errors import ValidationError

__all__ = ["MAX_ELEMENTS", "MINIMUM_BUFFER_TENSOR_ALIGNMENT", "TensorDesc", "UINT32_MAX", "UINT64_MAX",
           "calc_buffer_tensor_size", "packed_strides"]

#: DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT: every buffer tensor binding is at least this aligned.
MINIMUM_BUFFER_TENSOR_ALIGNMENT = 16
#: A buffer tensor may hold at most this many elements (Sizes and Strides are 32-bit UINTs).
MAX_ELEMENTS = 2**32 - 1
UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1




def calc_buffer_tensor_size(data_type, sizes: Sequence[int], strides: Sequence[int] | None = None) -> int:
    """DMLCalcBufferTensorSize: the minimum TotalTensorSizeInBytes of a buffer tensor.

    `roundup((dot(sizes - 1, strides) + 1) * element_size, 4)`, computed in bits as DirectMLX
    does so that 4-bit types round up to whole bytes first. Like DirectML, an unknown data type
    gives 0; so does a tensor with no elements. A size of 2**64 bytes or more raises
    ValidationError (DirectML's sizes are UINT64).
    """
    try:
        bits = DataType(data_type).bits
    except ValueError:
        return 0
    sizes = tuple(sizes)
    if bits == 0 or any(s == 0 for s in sizes):
        return 0
    strides = packed_strides(sizes) if strides is None else tuple(strides)
    last = sum((s - 1) * st for s, st in zip(sizes, strides))
    size_bytes = ((last + 1) * bits + 7) // 8
    total = (size_bytes + 3) // 4 * 4
    if total >= 1 << 64:  # DirectML's sizes are UINT64: no buffer tensor is this large
        raise ValidationError("DMLCalcBufferTensorSize", None, "sizes", sizes,
                              f"allowed: a tensor of fewer than 2**64 bytes (this one needs {total})")
    return total


def _plain(value):
    """numpy integers as Python ints; anything else unchanged."""
    if isinstance(value, np.integer) and not isinstance(value, np.bool_):
        return int(value)
    return value


@dataclass(frozen=True, eq=True)
class TensorDesc:
    """`DML_BUFFER_TENSOR_DESC` (flags are NONE: dmlgpu has no OWNED_BY_DML tensors).

    Args:
        data_type: a `DataType` (or its DirectML value).
        sizes: elements per dimension, outermost first (1 to 8 dimensions).
        strides: elements between neighbours per dimension; None means packed row-major,
            0 broadcasts (inputs only).
        total_tensor_size_in_bytes: None means `calc_buffer_tensor_size(...)`; a larger value
            is allowed and must be a multiple of 4.
        guaranteed_base_offset_alignment: 0, or a power of two >= the element size that every
            binding offset of this tensor is a multiple of.
    """

    data_type: DataType
    sizes: tuple
    strides: tuple | None = None
    total_tensor_size_in_bytes: int | None = None
    guaranteed_base_offset_alignment: int = 0

    def __post_init__(self):
        # Normalise without judging: validate() reports what is wrong with what remains. numpy
        # integers become Python ints, so that size arithmetic never wraps in a numpy type.
        for name in ("sizes", "strides"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, (str, bytes)):
                try:
                    object.__setattr__(self, name, tuple(_plain(v) for v in value))
                except TypeError:
                    pass
        for name in ("total_tensor_size_in_bytes", "guaranteed_base_offset_alignment"):
            object.__setattr__(self, name, _plain(getattr(self, name)))
        try:
            object.__setattr__(self, "data_type", DataType(self.data_type))
        except (ValueError, TypeError):
            pass

    @property
    def element_count(self) -> int:
        count = 1
        for s in self.sizes:
            count *= s
        return count

    @property
    def effective_strides(self) -> tuple[int, ...]:
        return packed_strides(self.sizes) if self.strides is None else self.strides

    @property
    def minimum_size(self) -> int:
        return calc_buffer_tensor_size(self.data_type, self.sizes, self.strides)

    @property
    def total_size(self) -> int:
        """TotalTensorSizeInBytes as DirectML would see it."""
        if self.total_tensor_size_in_bytes is None:
            return self.minimum_size
        return self.total_tensor_size_in_bytes

    @property
    def is_packed(self) -> bool:
        """Elements lie in row-major order with no gaps (size-1 dimensions' strides ignored)."""
        return all(
            size == 1 or stride == packed
            for size, stride, packed in zip(self.sizes, self.effective_strides, packed_strides(self.sizes))
        )
