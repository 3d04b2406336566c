"""The on-disk kernel cache (dmlgpu/runtime/pipeline_cache.py): a second process seeds its
pipeline cache from the file the first one wrote; corrupt, stale and foreign files are ignored
and rebuilt; an unwritable directory fails nothing; DMLGPU_CACHE_DIR="" turns it off. Processes
run as subprocesses with a timeout."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from dmlgpu.runtime import pipeline_cache
from dmlgpu.runtime.cache_files import open_folder
from dmlgpu.runtime.pipeline_cache import DiskCache

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 300

#: Makes pipelines of a few kinds (operators, a fused graph of two module sizes), closes the
#: device (which saves the cache) and prints pipeline_stats before and after closing.
SCRIPT = r"""
import json, sys
import numpy as np
import dmlgpu
if len(sys.argv) > 1:  # another dmlgpu version: another cache key
    from dmlgpu.runtime import pipeline_cache
    orig = pipeline_cache.DiskCache.__init__
    def init(self, *a, **k):
        k["version"] = sys.argv[1]
        orig(self, *a, **k)
    pipeline_cache.DiskCache.__init__ = init
device = dmlgpu.default_device()
x = np.arange(4096, dtype=np.uint32)
y = x[::-1].copy()
for f in (lambda a, b: a ^ b, lambda a, b: ((a ^ b) << 3) & 0xFF0F,
          lambda a, b: dmlgpu.bit_count(~(((a | b) >> 1) ^ (a << 2) ^ (b & 7) ^ (a >> 5) ^ (b << 9))),
          lambda a, b: dmlgpu.sign(a) ^ b):
    got = dmlgpu.fuse(f)(x, y)
    assert got.size == x.size
dmlgpu.bit_not(x)
before = device.pipeline_stats()
device.close()
after = device.pipeline_stats()
print(json.dumps({"before": before, "after": after}))
"""


def run(cache_dir, *args, **extra_env) -> dict:
    env = {**os.environ, "DMLGPU_CACHE_DIR": str(cache_dir), **extra_env}
    done = subprocess.run([sys.executable, "-c", SCRIPT, *args], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def cache_files(folder) -> list:
    return sorted(Path(folder).glob("pipelines-*.bin"))


def test_a_second_process_loads_what_the_first_saved(tmp_path):
    first = run(tmp_path)
    assert first["before"]["status"] == "missing" and first["before"]["pipelines_created"] >= 5
    # At least VkPipelineCacheHeaderVersionOne (lavapipe keeps no more: its pipeline cache
    # holds nothing; a GPU driver's holds the compiled pipelines).
    assert first["after"]["status"] == "saved" and first["after"]["saved_bytes"] >= 32
    [path] = cache_files(tmp_path)
    assert first["after"]["path"] == str(path)
    assert not list(tmp_path.glob(".pipelines-*"))  # no temporary file left behind
    second = run(tmp_path)
    assert second["before"]["status"] == "loaded"
    assert second["before"]["loaded_bytes"] == path.stat().st_size - pipeline_cache._HEADER.size
    assert second["before"]["pipelines_created"] == first["before"]["pipelines_created"]
    # The driver had every pipeline's data: nothing new to write (a driver may still reorder
    # its data: then it is saved again, to the same file).
    assert second["after"]["status"] in ("loaded", "saved") and cache_files(tmp_path) == [path]


#: The drivers' own on-disk caches off (Mesa's, NVIDIA's): only dmlgpu's can serve.
NO_DRIVER_CACHE = {"MESA_SHADER_CACHE_DISABLE": "true", "__GL_SHADER_DISK_CACHE": "0"}


def test_a_driver_that_keeps_pipelines_makes_them_faster_the_second_time(tmp_path):
    first = run(tmp_path, **NO_DRIVER_CACHE)
    if first["after"]["saved_bytes"] <= 32:
        pytest.skip("this driver keeps nothing in a VkPipelineCache (lavapipe: the header only)")
    second = run(tmp_path, **NO_DRIVER_CACHE)
    assert second["before"]["status"] == "loaded"
    assert second["before"]["pipeline_seconds"] < 0.5 * first["before"]["pipeline_seconds"], (first, second)


def test_a_corrupt_file_is_ignored_and_rebuilt(tmp_path):
    run(tmp_path)
    [path] = cache_files(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # one bit of the driver's data
    path.write_bytes(bytes(raw))
    again = run(tmp_path)
    assert again["before"]["status"].startswith("rejected: MAC")
    assert again["after"]["status"] == "saved"
    assert run(tmp_path)["before"]["status"] == "loaded"


def test_a_truncated_file_is_ignored(tmp_path):
    run(tmp_path)
    [path] = cache_files(tmp_path)
    path.write_bytes(path.read_bytes()[:100])
    assert run(tmp_path)["before"]["status"] == "rejected: truncated"


def test_another_version_uses_its_own_file(tmp_path):
    run(tmp_path)
    [path] = cache_files(tmp_path)
    other = run(tmp_path, "0.0.0-other")
    assert other["before"]["status"] == "missing"  # never the other version's file
    assert len(cache_files(tmp_path)) == 2 and path.exists()


def test_a_file_under_another_key_is_stale(tmp_path):
    """A file renamed to this key's name (or a key collision) is still refused: the key is
    inside the file too."""
    run(tmp_path, "0.0.0-other")
    [stale] = cache_files(tmp_path)
    run(tmp_path)
    mine = [p for p in cache_files(tmp_path) if p != stale][0]
    mine.write_bytes(stale.read_bytes())
    assert run(tmp_path)["before"]["status"].startswith("rejected: stale")


def test_an_unwritable_directory_fails_nothing(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a directory")
    result = run(blocker / "cache")  # (permissions would not stop root: a file in the way does)
    assert result["before"]["status"].startswith("rejected: unreadable (Not a directory")
    assert result["after"]["status"].startswith("save failed")


def test_an_empty_cache_dir_turns_it_off(tmp_path):
    result = run("")
    assert result["before"]["status"] == "disabled" and result["after"]["status"] == "disabled"
    assert result["before"]["path"] is None


UUID = bytes(range(16))


def vk_data(vendor=0x10DE, device=0x2335, uuid=UUID, version=1, body=b"x" * 64) -> bytes:
    return struct.pack("<IIII16s", 32, version, vendor, device, uuid) + body


@pytest.mark.parametrize("data,why", [
    (vk_data(vendor=1), "made by another device or driver"),
    (vk_data(uuid=bytes(16)), "made by another device or driver"),
    (vk_data(version=2), "no VkPipelineCacheHeaderVersionOne"),
    (b"short", "no VkPipelineCacheHeaderVersionOne"),
], ids=["vendor", "uuid", "header-version", "short"])
def test_the_vulkan_header_is_checked_before_the_driver_sees_it(tmp_path, data, why):
    cache = DiskCache(UUID, 0x10DE, 0x2335, 1, folder=tmp_path, modules="m")
    # Written by hand with a valid MAC: only the Vulkan header is wrong.
    head = pipeline_cache._HEADER.pack(pipeline_cache.MAGIC, pipeline_cache.FORMAT, cache.key, len(data),
                                       bytes(32))[:-32]
    with open_folder(path=tmp_path) as folder:
        folder.write(cache.name, head, folder.mac(head, data), data)
    assert cache.load() == b"" and cache.status == f"rejected: {why}"


def test_save_then_load_round_trip_and_bound(tmp_path, monkeypatch):
    cache = DiskCache(UUID, 0x10DE, 0x2335, 1, folder=tmp_path / "new", modules="m")
    assert cache.load() == b"" and cache.status == "missing"
    assert cache.save(vk_data()) and cache.status == "saved"
    again = DiskCache(UUID, 0x10DE, 0x2335, 1, folder=tmp_path / "new", modules="m")
    assert again.load() == vk_data() and again.status == "loaded"
    assert not DiskCache(UUID, 0x10DE, 0x2335, 2, folder=tmp_path / "new", modules="m").load()  # other driver
    assert not DiskCache(UUID, 0x10DE, 0x2335, 1, folder=tmp_path / "new", modules="n").load()  # other modules
    monkeypatch.setattr(pipeline_cache, "MAX_BYTES", 50)
    assert not cache.save(vk_data(body=b"y" * 64)) and "bound" in cache.status
    assert not cache.save(vk_data(vendor=7)) and cache.status.startswith("save failed")


def test_the_directory_keeps_at_most_max_files(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline_cache, "MAX_FILES", 3)
    for driver in range(6):
        cache = DiskCache(UUID, 0x10DE, 0x2335, driver, folder=tmp_path, modules="m")
        assert cache.save(vk_data())
        os.utime(cache.path, (1000 + driver, 1000 + driver))  # distinct ages, oldest first
    assert len(cache_files(tmp_path)) == 3 and cache.path.exists()


def test_saved_at_exit_without_close(tmp_path):
    script = ("import numpy as np, dmlgpu\n"
              "dmlgpu.bit_not(np.arange(64, dtype=np.uint32))\n")  # the default device closes at exit
    env = {**os.environ, "DMLGPU_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S, cwd="/")
    assert done.returncode == 0, done.stderr
    [path] = cache_files(tmp_path)
    assert path.stat().st_size >= pipeline_cache._HEADER.size + 32
