"""GLSL compiled to SPIR-V at run time (glslang, built into dmlgpu.runtime._glsl), remembered in memory
and on disk.

The fused graphs' code is generated per graph (dmlgpu/graph_source.py) and compiled here, in
the calling thread (the GIL is given up meanwhile). glslang builds its tables of built-in
functions at its first compile in a process, which costs as much as the next hundred compiles
(tens of ms); `warm_up()` does that on a thread of its own when a device opens, so that a
first graph finds it done. Results are kept:
- in memory, the `MEMORY_ENTRIES` most recently used;
- on disk, one file per source under `<cache dir>/spirv/` (the cache directory of
  `cache_files`: `DMLGPU_CACHE_DIR`, else `$XDG_CACHE_HOME/dmlgpu`, else `~/.cache/dmlgpu`;
  `""` turns it off; used only when private to the user), named by a SHA-256 of the source,
  glslang's version and dmlgpu's version, holding that key, the SPIR-V's length and a keyed
  MAC of the header and the SPIR-V (HMAC-SHA256 under the directory's secret): a file that is
  not a regular file of the user's of at most `MAX_SPIRV_BYTES` of SPIR-V, or whose key,
  length, MAC or SPIR-V magic does not match, is compiled again and rewritten, never used (the
  name and any unkeyed checksum derive from public data, so anyone could forge those). Written
  to a temporary file and renamed; the newest `DISK_FILES` are kept; a directory that cannot
  be written fails nothing.
  So a new process compiles no source an earlier one compiled, and the driver then finds the
  pipeline in its own cache (dmlgpu/runtime/pipeline_cache.py).
"""
from __future__ import annotations

import hashlib
import hmac
import struct
import threading
from collections import OrderedDict

from .._version import __version__
from ..errors import DeviceError
from . import cache_files, threads
from .installation import missing_extension

try:
    from . import _glsl  # built with dmlgpu (native/glsl.cpp)
except ImportError:  # reported at the first compile, with what to do
    _glsl = None

__all__ = ["DISK_FILES", "MAX_SPIRV_BYTES", "MEMORY_ENTRIES", "spirv", "stats", "warm_up"]

MEMORY_ENTRIES = 256
DISK_FILES = 1024
#: The largest SPIR-V kept on disk (larger modules are compiled in every process), and so the
#: most a read of a cache file takes in.
MAX_SPIRV_BYTES = 16 << 20
MAGIC = b"DMLGPUSV"
FORMAT = 2
_HEADER = struct.Struct("<8sI32sQ32s")  # magic, format, key, length, MAC of the header before it + SPIR-V
_MACED = _HEADER.size - cache_files.MAC_BYTES
_SPIRV_MAGIC = b"\x03\x02\x23\x07"

_lock = threading.Lock()
_memory: OrderedDict = OrderedDict()
_counts = {"compiled": 0, "memory_hits": 0, "disk_hits": 0, "disk_rejected": 0, "disk_writes": 0}
_warm: threading.Thread | None = None
_WARM_SOURCE = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n"


def _compiler():
    if _glsl is None:
        raise missing_extension("runtime._glsl", "the GLSL compiler for fused graphs")
    return _glsl


def _key(source: str) -> bytes:
    return hashlib.sha256(f"{_compiler().GLSLANG_VERSION}\0{__version__}\0{source}".encode()).digest()


def _folder():
    """The checked `spirv/` folder of the cache directory, or None (off, not private, or not
    usable: compiled in memory only)."""
    try:
        return cache_files.open_folder("spirv")
    except OSError:
        return None


def _read(folder, key: bytes) -> bytes | None:
    try:
        raw = folder.read(f"{key.hex()}.spv", _HEADER.size + MAX_SPIRV_BYTES)
    except FileNotFoundError:
        return None
    except (cache_files.Untrusted, OSError):
        raw = b""
    data = raw[_HEADER.size:]
    if len(raw) >= _HEADER.size:
        magic, form, stored, length, mac = _HEADER.unpack_from(raw)
        if (magic == MAGIC and form == FORMAT and stored == key and length == len(data) and length % 4 == 0
                and data[:4] == _SPIRV_MAGIC and hmac.compare_digest(folder.mac(raw[:_MACED], data), mac)):
            return data
    _counts["disk_rejected"] += 1
    return None


def _is_entry(name: str) -> bool:
    return len(name) == 68 and name.endswith(".spv")


def _write(folder, key: bytes, data: bytes) -> None:
    if len(data) > MAX_SPIRV_BYTES:
        return
    name = f"{key.hex()}.spv"
    head = _HEADER.pack(MAGIC, FORMAT, key, len(data), bytes(cache_files.MAC_BYTES))[:_MACED]
    try:
        folder.write(name, head, folder.mac(head, data), data)
        _counts["disk_writes"] += 1
        folder.prune(_is_entry, DISK_FILES, spare=name)
    except OSError:
        pass


def spirv(source: str) -> bytes:
    """SPIR-V of a GLSL compute shader: from memory, from disk, or compiled now.

    Raises:
        DeviceError: glslang refused the source (a dmlgpu defect: the source is generated).
    """
    key = _key(source)
    with _lock:
        data = _memory.get(key)
        if data is not None:
            _memory.move_to_end(key)
            _counts["memory_hits"] += 1
            return data
    folder = _folder()
    try:
        data = None if folder is None else _read(folder, key)
        if data is not None:
            _counts["disk_hits"] += 1
        else:
            try:
                data = _compiler().compile(source)
            except ValueError as error:
                raise DeviceError(f"dmlgpu generated a shader that glslang does not compile ({error})") from None
            _counts["compiled"] += 1
            if folder is not None:
                _write(folder, key, data)
    finally:
        if folder is not None:
            folder.close()
    with _lock:
        _memory[key] = data
        while len(_memory) > MEMORY_ENTRIES:
            _memory.popitem(last=False)
    return data


def warm_up() -> None:
    """Start glslang's first compile (its built-in tables) on a thread of its own, once per
    process; the exit handler and a fork wait for it (`threads.join_helper`)."""
    global _warm
    with _lock:
        if _warm is not None or _glsl is None:
            return
        _warm = threading.Thread(target=_glsl.compile, args=(_WARM_SOURCE,), name="dmlgpu-glslang-warm-up",
                                 daemon=True)
        _warm.start()
    threads.join_helper(_warm)


def stats() -> dict:
    """Counts since the process started: sources compiled, found in memory, found on disk, disk
    files rejected (and compiled again), files written; entries in memory."""
    with _lock:
        return {**_counts, "memory_entries": len(_memory)}
