"""The on-disk kernel cache: a device's VkPipelineCache data, kept between processes.

dmlgpu's kernels are build-time SPIR-V specialised by constants (fused graphs included), so the
expensive step of a new kernel is the driver's pipeline compilation. Every pipeline of a device
is made through one VkPipelineCache; its contents (vkGetPipelineCacheData) are saved here and
handed back to the driver by the next process that opens the same device, which then compiles
nothing it compiled before.

One file per (pipelineCacheUUID, vendorID, deviceID, driverVersion, dmlgpu version, hash of
the installed SPIR-V modules), in the cache directory (`cache_files`: `DMLGPU_CACHE_DIR`, else
`$XDG_CACHE_HOME/dmlgpu`, else `~/.cache/dmlgpu`; `DMLGPU_CACHE_DIR=""` turns the cache off;
used only when private to the user). The driver's data is code, so a file is trusted only when
it is a regular file of the user's of at most `MAX_BYTES` of data, its header (magic, format,
key, length) is this device's, its keyed MAC (HMAC-SHA256 under the directory's secret, over
the header and the data) matches, and the data's VkPipelineCacheHeaderVersionOne (header
version, vendor, device, UUID) is this device's: anything else is ignored, and replaced at the
next save. Files are written to a temporary name and renamed (another process never reads half
a file); at most `MAX_FILES` files (the newest) are kept. Errors of the cache directory (not
writable, full, not private) never fail the caller: `status` says what happened.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import struct
from importlib import resources
from pathlib import Path

from .._version import __version__
from . import cache_files

__all__ = ["MAX_BYTES", "MAX_FILES", "DiskCache", "vulkan_header"]

MAGIC = b"DMLGPUPC"
FORMAT = 2
#: Our header: magic, format, key (32 bytes), data length, MAC of the header before it and the data.
_HEADER = struct.Struct("<8sI32sQ32s")
_MACED = _HEADER.size - cache_files.MAC_BYTES  # the header's bytes under the MAC
#: VkPipelineCacheHeaderVersionOne: headerSize, headerVersion, vendorID, deviceID, UUID.
_VK_HEADER = struct.Struct("<IIII16s")
VK_PIPELINE_CACHE_HEADER_VERSION_ONE = 1
#: Bounds: files kept in the directory (the newest), and bytes of one device's data.
MAX_FILES = 16
MAX_BYTES = 256 << 20


@functools.lru_cache(maxsize=None)
def modules_hash() -> str:
    """SHA-256 over the installed SPIR-V modules (names and contents)."""
    digest = hashlib.sha256()
    folder = resources.files("dmlgpu") / "spirv"
    try:
        entries = sorted((e for e in folder.iterdir() if e.name.endswith(".spv")), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        entries = []
    for entry in entries:
        data = entry.read_bytes()
        digest.update(entry.name.encode() + b"\0" + struct.pack("<Q", len(data)) + data)
    return digest.hexdigest()


def vulkan_header(data: bytes):
    """(headerVersion, vendorID, deviceID, UUID) of pipeline-cache data, or None if too short."""
    if len(data) < _VK_HEADER.size:
        return None
    size, version, vendor, device, uuid = _VK_HEADER.unpack_from(data)
    if size < _VK_HEADER.size or size > len(data):
        return None
    return version, vendor, device, uuid


class DiskCache:
    """The cache file of one device: `load()` once before its first pipeline, `save(data)` at
    close and after bursts of new pipelines."""

    def __init__(self, uuid: bytes, vendor: int, device: int, driver: int, version: str = __version__,
                 folder: Path | None = None, modules: str | None = None):
        self.uuid, self.vendor, self.device = bytes(uuid), int(vendor), int(device)
        parts = [self.uuid.hex(), f"{self.vendor:08x}", f"{self.device:08x}", f"{int(driver):08x}", version,
                 modules_hash() if modules is None else modules]
        self.key = hashlib.sha256("|".join(parts).encode()).digest()
        self.folder = folder
        self.name = f"pipelines-{self.key.hex()[:32]}.bin"
        self.path = None if folder is None else folder / self.name
        #: What happened: "disabled", "missing", "loaded", "rejected: <why>" (the file, or the
        #: directory); then "saved" or "save failed: <why>" after a save.
        self.status = "disabled" if folder is None else "new"
        self.loaded_bytes = 0
        self.saved_bytes = 0
        self._saved_digest = None

    @classmethod
    def for_device(cls, uuid: bytes, vendor: int, device: int, driver: int) -> "DiskCache":
        return cls(uuid, vendor, device, driver, folder=cache_files.cache_dir())

    def _open(self, failed: str):
        """The checked cache directory, or None with `status` saying why (`failed`: the
        status's first words)."""
        try:
            folder = cache_files.open_folder(path=self.folder)
        except OSError as exc:
            self.status = f"{failed}: unreadable ({exc.strerror or exc})"
            return None
        if folder is None:
            self.status = f"{failed}: the directory is not private to this user (see the CacheWarning)"
        return folder

    def load(self) -> bytes:
        """Data to seed the device's pipeline cache with: b"" unless the file is whole, ours
        and made by this device, driver, dmlgpu version and modules."""
        if self.path is None:
            return b""
        folder = self._open("rejected")
        if folder is None:
            return b""
        with folder:
            try:
                raw = folder.read(self.name, _HEADER.size + MAX_BYTES)
            except FileNotFoundError:
                self.status = "missing"
                return b""
            except cache_files.Untrusted as why:
                self.status = f"rejected: {why}"
                return b""
            except OSError as exc:
                self.status = f"rejected: unreadable ({exc.strerror or exc})"
                return b""
            why = self._check(raw, folder)
        if why is not None:
            self.status = f"rejected: {why}"
            return b""
        data = raw[_HEADER.size:]
        self.status, self.loaded_bytes = "loaded", len(data)
        self._saved_digest = hashlib.sha256(data).digest()
        return data

    def _check(self, raw: bytes, folder) -> str | None:
        if len(raw) < _HEADER.size:
            return "truncated"
        magic, form, key, length, mac = _HEADER.unpack_from(raw)
        data = memoryview(raw)[_HEADER.size:]
        if magic != MAGIC or form != FORMAT:
            return "not a dmlgpu pipeline cache of this format"
        if key != self.key:
            return "stale (another device, driver, dmlgpu version or set of modules)"
        if length != len(data) or length > MAX_BYTES:
            return "truncated"
        if not hmac.compare_digest(folder.mac(raw[:_MACED], data), mac):
            return "MAC (damaged, or not written by this user's dmlgpu)"
        header = vulkan_header(data)
        if header is None or header[0] != VK_PIPELINE_CACHE_HEADER_VERSION_ONE:
            return "no VkPipelineCacheHeaderVersionOne"
        if header[1:] != (self.vendor, self.device, self.uuid):
            return "made by another device or driver"
        return None

    def save(self, data: bytes) -> bool:
        """Write `data` (vkGetPipelineCacheData) atomically; False (and `status` says why) when
        it is not worth keeping or the directory refuses it. Never raises for the directory."""
        if self.path is None:
            return False
        header = vulkan_header(data)
        if header is None or header[1:] != (self.vendor, self.device, self.uuid):
            self.status = "save failed: the driver's data has no header of this device"
            return False
        if len(data) > MAX_BYTES:
            self.status = f"save failed: {len(data)} bytes, more than the bound {MAX_BYTES}"
            return False
        digest = hashlib.sha256(data).digest()
        if digest == self._saved_digest:
            return True  # nothing new
        folder = self._open("save failed")
        if folder is None:
            return False
        with folder:
            head = _HEADER.pack(MAGIC, FORMAT, self.key, len(data), bytes(cache_files.MAC_BYTES))[:_MACED]
            try:
                folder.write(self.name, head, folder.mac(head, data), data)
            except OSError as exc:
                self.status = f"save failed: {exc.strerror or exc}"
                return False
            self.status, self.saved_bytes, self._saved_digest = "saved", len(data), digest
            try:  # the newest MAX_FILES of the directory (other devices and versions)
                folder.prune(_is_cache_file, MAX_FILES, spare=self.name)
            except OSError:
                pass
        return True

    def info(self) -> dict:
        return {"path": None if self.path is None else str(self.path), "status": self.status,
                "loaded_bytes": self.loaded_bytes, "saved_bytes": self.saved_bytes}


def _is_cache_file(name: str) -> bool:
    return name.startswith("pipelines-") and name.endswith(".bin")
