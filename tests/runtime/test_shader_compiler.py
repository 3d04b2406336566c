"""GLSL compiled at run time (dmlgpu.runtime.shader_compiler, glslang in dmlgpu.runtime._glsl): memory and
disk caches, files that must never be trusted, errors, and the warm-up thread at exit."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid

import pytest

from dmlgpu import DeviceError
from dmlgpu.runtime import cache_files, shader_compiler

SPIRV_MAGIC = b"\x03\x02\x23\x07"


def source() -> str:
    """A compute shader no earlier test compiled (its comment is new)."""
    return (f"#version 450\n// {uuid.uuid4()}\nlayout(local_size_x = 1) in;\n"
            "layout(std430, binding = 0) buffer B { uint b[]; };\nvoid main() { b[0] = ~b[0]; }\n")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DMLGPU_CACHE_DIR", str(tmp_path))
    return tmp_path / "spirv"


def files(folder) -> list:
    return sorted(folder.glob("*.spv")) if folder.is_dir() else []


def test_compiled_once_then_from_memory_then_from_disk(cache):
    text = source()
    before = shader_compiler.stats()
    data = shader_compiler.spirv(text)
    assert data[:4] == SPIRV_MAGIC and len(data) % 4 == 0
    assert shader_compiler.spirv(text) == data
    after = shader_compiler.stats()
    assert after["compiled"] - before["compiled"] == 1
    assert after["memory_hits"] - before["memory_hits"] == 1
    assert len(files(cache)) == 1
    shader_compiler._memory.clear()  # as a new process would start
    assert shader_compiler.spirv(text) == data
    assert shader_compiler.stats()["disk_hits"] - after["disk_hits"] == 1
    assert shader_compiler.stats()["compiled"] == after["compiled"]


@pytest.mark.parametrize("damage", ["flip a byte of the SPIR-V", "truncate", "another source's file", "empty",
                                    "not SPIR-V"])
def test_damaged_or_stale_files_are_compiled_again_and_rewritten(cache, damage):
    text, other = source(), source()
    data = shader_compiler.spirv(text)
    shader_compiler.spirv(other)
    mine = next(p for p in files(cache) if p.name == f"{shader_compiler._key(text).hex()}.spv")
    theirs = next(p for p in files(cache) if p != mine)
    raw = mine.read_bytes()
    if damage == "flip a byte of the SPIR-V":
        raw = raw[:-5] + bytes([raw[-5] ^ 1]) + raw[-4:]
    elif damage == "truncate":
        raw = raw[:-4]
    elif damage == "another source's file":
        raw = theirs.read_bytes()
    elif damage == "empty":
        raw = b""
    else:  # a whole, consistent header (its MAC right) over data that is not SPIR-V
        body = b"\0" * len(data)
        head = shader_compiler._HEADER.pack(shader_compiler.MAGIC, shader_compiler.FORMAT, shader_compiler._key(text),
                                            len(body), bytes(32))[:-32]
        with cache_files.open_folder("spirv") as folder:
            raw = head + folder.mac(head, body) + body
    mine.write_bytes(raw)
    shader_compiler._memory.clear()
    before = shader_compiler.stats()
    assert shader_compiler.spirv(text) == data
    after = shader_compiler.stats()
    assert after["disk_rejected"] - before["disk_rejected"] == 1
    assert after["compiled"] - before["compiled"] == 1
    assert mine.read_bytes()[-len(data):] == data  # rewritten whole
    shader_compiler._memory.clear()
    assert shader_compiler.spirv(text) == data
    assert shader_compiler.stats()["disk_hits"] - after["disk_hits"] == 1


def test_cache_dir_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("DMLGPU_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    shader_compiler.spirv(source())
    assert list(tmp_path.rglob("*.spv")) == []


def test_unwritable_cache_dir_fails_nothing(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("DMLGPU_CACHE_DIR", str(blocker))
    assert shader_compiler.spirv(source())[:4] == SPIRV_MAGIC


def test_memory_entries_are_bounded(cache, monkeypatch):
    monkeypatch.setattr(shader_compiler, "MEMORY_ENTRIES", 3)
    for _ in range(6):
        shader_compiler.spirv(source())
    assert shader_compiler.stats()["memory_entries"] <= 3


def test_disk_files_are_bounded(cache, monkeypatch):
    monkeypatch.setattr(shader_compiler, "DISK_FILES", 4)
    for _ in range(7):
        shader_compiler.spirv(source())
    assert len(files(cache)) == 4


def test_source_glslang_refuses_is_a_device_error(cache):
    with pytest.raises(DeviceError, match="glslang"):
        shader_compiler.spirv("#version 450\nvoid main() { undeclared = 1; }\n")
    assert files(cache) == []


def run_python(code: str, env: dict, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env={**os.environ, **env}, cwd="/",
                          capture_output=True, text=True, timeout=timeout)


def test_a_new_process_compiles_no_graph_an_earlier_one_did(tmp_path):
    """The generated code of a graph is on disk after the first process; the second finds it."""
    code = """
        import json, numpy as np, dmlgpu
        from dmlgpu.runtime import shader_compiler
        f = dmlgpu.fuse(lambda a, b: ((a ^ b) << 3) & 0x0F0F0F0F)
        x = np.arange(1000, dtype=np.uint32)
        assert np.array_equal(f(x, x[::-1].copy()), ((x ^ x[::-1]) << 3) & 0x0F0F0F0F)
        print(json.dumps(shader_compiler.stats()))
    """
    env = {"DMLGPU_CACHE_DIR": str(tmp_path)}
    first = run_python(code, env)
    assert first.returncode == 0, first.stderr
    second = run_python(code, env)
    assert second.returncode == 0, second.stderr
    one, two = (json.loads(p.stdout.strip().splitlines()[-1]) for p in (first, second))
    assert one["compiled"] >= 1 and one["disk_writes"] >= 1
    assert two["compiled"] == 0 and two["disk_hits"] >= 1


def test_exit_right_after_device_open_waits_for_the_warm_up():
    """glslang's warm-up thread starts when a device opens; a process that exits at once (the
    thread still compiling) exits cleanly, every time."""
    code = """
        import dmlgpu
        dmlgpu.default_device()
    """
    for _ in range(5):
        done = run_python(code, {}, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
