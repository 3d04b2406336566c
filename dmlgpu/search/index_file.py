"""The file format of a saved `HammingIndex`: one file, a versioned header, then the ids and codes.

    offset  size  field
    0       8     magic b"DMLGPUHX"
    8       4     version (uint32, little-endian): FORMAT_VERSION
    12      4     metric (uint32): 0 Hamming, 1 Tanimoto
    16      8     bits per code (uint64)
    24      8     count of codes (uint64)
    32      8     the codes' numpy dtype, ASCII, NUL-padded (what `reconstruct` returns)
    40      32    SHA-256 of everything after the header
    72            ids: count int64, little-endian; then codes: count x bits / 8 bytes

A file is written to a temporary file beside it and renamed over it, so a reader finds the old
file or the whole new one. Reading checks the magic, the version (a newer file is refused), the
sizes against the file's length and the checksum, and raises ValidationError otherwise: a
truncated, foreign or corrupted file never becomes a partial index.
"""
from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from pathlib import Path

import numpy as np

from ..errors import ValidationError

__all__ = ["FORMAT_VERSION", "MAGIC", "read", "write"]

MAGIC = b"DMLGPUHX"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sIIQQ8s32s")
#: Bytes read or written at a time.
CHUNK = 64 << 20


def write(target, metric: int, bits: int, dtype: np.dtype, ids: np.ndarray, code_chunks) -> None:
    """Write an index to `target` (a path, atomically, or a binary file object): `code_chunks`
    yields uint8 arrays of whole codes, in id order."""
    digest = hashlib.sha256()
    if isinstance(target, (str, os.PathLike)):
        path = Path(target)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent or ".")
        try:
            with os.fdopen(fd, "wb") as f:
                _write(f, metric, bits, dtype, ids, code_chunks, digest)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, path)
            temp = None
        finally:
            if temp is not None:
                os.unlink(temp)
    else:
        _write(target, metric, bits, dtype, ids, code_chunks, digest)


def _write(f, metric, bits, dtype, ids, code_chunks, digest) -> None:
    start = f.tell()
    f.write(b"\0" * _HEADER.size)
    payload = np.ascontiguousarray(ids, dtype="<i8").tobytes()
    digest.update(payload)
    f.write(payload)
    for chunk in code_chunks:
        data = np.ascontiguousarray(chunk).tobytes()
        digest.update(data)
        f.write(data)
    end = f.tell()
    f.seek(start)
    f.write(_HEADER.pack(MAGIC, FORMAT_VERSION, metric, bits, ids.size, np.dtype(dtype).str.encode(), digest.digest()))
    f.seek(end)


def read(source, operator: str):
    """(metric, bits, dtype, ids, codes as uint8 (count, bits / 8)) of a saved index; `source`
    is a path or a binary file object."""
    if isinstance(source, (str, os.PathLike)):
        try:
            with open(source, "rb") as f:
                return _read(f, operator, os.fstat(f.fileno()).st_size)
        except OSError as exc:
            raise ValidationError(operator, None, "path", str(source), f"allowed: a readable index file ({exc.strerror})") \
                from None
    here = source.tell()
    size = source.seek(0, os.SEEK_END)
    source.seek(here)
    return _read(source, operator, size - here)


def _bad(operator: str, why: str):
    return ValidationError(operator, None, "file", why, "allowed: a whole file written by HammingIndex.save")


def _read(f, operator: str, size: int):
    header = f.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise _bad(operator, f"{len(header)} bytes, shorter than the header")
    magic, version, metric, bits, count, dtype, checksum = _HEADER.unpack(header)
    if magic != MAGIC:
        raise _bad(operator, "not a dmlgpu index (its first bytes are not the magic)")
    if version > FORMAT_VERSION:
        raise ValidationError(operator, None, "version", version,
                              f"allowed: format versions up to {FORMAT_VERSION} (written by a newer dmlgpu)")
    if metric not in (0, 1) or bits == 0 or bits % 8:
        raise _bad(operator, f"a header of metric {metric} and {bits} bits")
    try:
        dtype = np.dtype(dtype.rstrip(b"\0").decode())
    except (TypeError, UnicodeDecodeError):
        raise _bad(operator, "an unknown code dtype") from None
    code_bytes = bits // 8
    expected = _HEADER.size + count * 8 + count * code_bytes
    if size != expected:
        raise _bad(operator, f"{size} bytes where its header says {expected} (truncated or appended to)")
    digest = hashlib.sha256()
    raw_ids = f.read(count * 8)
    digest.update(raw_ids)
    codes = np.empty((count, code_bytes), np.uint8)
    flat = codes.reshape(-1)
    done = 0
    while done < flat.size:
        n = f.readinto(memoryview(flat[done:done + CHUNK]))
        if not n:
            raise _bad(operator, "shorter than its header says")
        digest.update(memoryview(flat[done:done + n]))
        done += n
    if digest.digest() != checksum:
        raise _bad(operator, "a checksum that does not match its contents (corrupted)")
    return metric, int(bits), dtype, np.frombuffer(raw_ids, "<i8").astype(np.int64), codes
