"""Binary codes as the search kernels read them, and the index's ids: conversion and checks.

A code is a row of any integer dtype taken as raw bits (uint8 from `np.packbits`, int8 from
sentence-transformers' binary quantisation, uint64 words...): its bytes in memory order, padded
with zero bytes to whole 32-bit words on the device (zero bits change no distance and no
Tanimoto count). Every check raises `ValidationError` naming the caller (`operator`).
"""
from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from ..front.tensor import Tensor
from ..layout.operands import host_array

__all__ = ["code_bytes", "ids_array", "words_of"]

_CODES_ALLOWED = ("allowed: a 2-D numpy array or dmlgpu.Tensor of integer codes (any integer dtype; "
                  "its bits are the code: np.packbits output, int8 binary embeddings, uint64 words)")


def code_bytes(value, operator: str, tensor: str) -> np.ndarray:
    """Codes as a 2-D C-ordered uint8 array of their bytes (a view where it can be)."""
    if isinstance(value, Tensor):
        value = value.numpy()
    value = host_array(value, operator, tensor, "type")
    if not isinstance(value, np.ndarray):
        raise ValidationError(operator, tensor, "type", type(value).__name__, _CODES_ALLOWED)
    if value.dtype.kind not in "iu":
        raise ValidationError(operator, tensor, "dtype", value.dtype, _CODES_ALLOWED)
    if value.ndim != 2 or value.shape[1] == 0:
        raise ValidationError(operator, tensor, "shape", value.shape,
                              "allowed: (codes, words), words >= 1 (one code per row)")
    row_bytes = value.shape[1] * value.dtype.itemsize
    return np.ascontiguousarray(value).view(np.uint8).reshape(value.shape[0], row_bytes)


def words_of(as_bytes: np.ndarray) -> np.ndarray:
    """uint8 codes (rows, bytes) as uint32 words, rows zero-padded to whole words."""
    rows, width = as_bytes.shape
    words = -(-width // 4)
    if words * 4 != width:
        padded = np.zeros((rows, words * 4), np.uint8)
        padded[:, :width] = as_bytes
        as_bytes = padded
    return np.ascontiguousarray(as_bytes).view(np.uint32).reshape(rows, words)


def ids_array(ids, count: int, operator: str) -> np.ndarray:
    """`ids` as a 1-D int64 array of `count` distinct values (any integer array-like)."""
    try:
        array = np.asarray(ids)
    except Exception:  # noqa: BLE001 -- whatever numpy cannot take is a bad argument
        raise ValidationError(operator, "ids", "type", type(ids).__name__, "allowed: integers") from None
    if array.dtype == object or array.dtype.kind not in "iu" or array.ndim != 1:
        raise ValidationError(operator, "ids", "dtype", f"{array.dtype} of shape {array.shape}",
                              "allowed: a 1-D array of integers convertible to int64")
    if array.dtype.kind == "u" and array.size and int(array.max()) > np.iinfo(np.int64).max:
        raise ValidationError(operator, "ids", "value", int(array.max()), "allowed: ids that fit int64")
    if array.shape[0] != count:
        raise ValidationError(operator, "ids", "shape", array.shape, f"allowed: ({count},), one id per code")
    array = array.astype(np.int64)
    if np.unique(array).size != array.size:
        raise ValidationError(operator, "ids", "value", "duplicated ids", "allowed: distinct ids")
    return array
