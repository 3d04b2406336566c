"""The disk caches as a trust boundary (issue 32, rows 2-6; dmlgpu/runtime/cache_files.py): what
another local user, or a hostile file, puts in the cache directory never runs, hangs, exhausts
memory, or makes dmlgpu touch files that are not its own. Each probe is a fresh interpreter with
a timeout, as a real process meets the directory."""
from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from dmlgpu.runtime import cache_files, pipeline_cache, shader_compiler
from test_faults import ok, run

#: A process that fuses one function (SPIR-V cache), runs an operator (pipeline cache), closes
#: the device (saves the pipeline cache) and prints what both caches did and any warnings.
PROBE = """
import json, os, sys, warnings
warnings.simplefilter("always")
import numpy as np
import dmlgpu
from dmlgpu.runtime import shader_compiler
if os.environ.get("PROBE_UID"):  # another user's view of the same directory
    os.geteuid = lambda: int(os.environ["PROBE_UID"])
if os.environ.get("PROBE_UMASK"):
    os.umask(int(os.environ["PROBE_UMASK"], 8))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    w = (np.arange(4096, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    if os.environ.get("PROBE_EVIL"):
        got, want = dmlgpu.fuse(lambda w: (w & 0xAA) ^ (w >> 3))(w), (w & 0xAA) ^ (w >> 3)
    else:
        got, want = dmlgpu.fuse(lambda w: (w & 7) ^ (w >> 3))(w), (w & 7) ^ (w >> 3)
    assert np.array_equal(got, want), "the fused function computed something else"
    assert np.array_equal(dmlgpu.bit_not(w), ~w)
    device = dmlgpu.default_device()
    before = device.pipeline_stats()
    device.close()
print(json.dumps({"spirv": shader_compiler.stats(), "before": before, "after": device.pipeline_stats(),
                  "warnings": [f"{type(w.message).__name__}: {w.message}" for w in caught]}))
"""


#: The same through the caches alone, with no device (a tenth of the time): one GLSL source
#: compiled through the SPIR-V cache, and a pipeline-cache file of a made-up device loaded
#: and saved.
LITE = """
import json, os, struct, warnings
if os.environ.get("PROBE_UID"):
    os.geteuid = lambda: int(os.environ["PROBE_UID"])
if os.environ.get("PROBE_UMASK"):
    os.umask(int(os.environ["PROBE_UMASK"], 8))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from dmlgpu.runtime import pipeline_cache, shader_compiler
    source = ("#version 450\\nlayout(local_size_x = 1) in;\\nlayout(std430, binding = 0) buffer B { uint b[]; };\\n"
              "void main() { b[0] = ~b[0]; }\\n")
    assert shader_compiler.spirv(source) == shader_compiler._compiler().compile(source)
    uuid = bytes(range(16))
    data = struct.pack("<IIII16s", 32, 1, 0x10DE, 0x2335, uuid) + b"pipelines" * 8
    cache = pipeline_cache.DiskCache.for_device(uuid, 0x10DE, 0x2335, 1)
    loaded = cache.load()
    assert loaded in (b"", data), "the pipeline cache handed the driver something else"
    before = cache.info()
    cache.save(data)
print(json.dumps({"spirv": shader_compiler.stats(), "before": before, "after": cache.info(),
                  "warnings": [f"{type(w.message).__name__}: {w.message}" for w in caught]}))
"""


def probe(cache, timeout=120, code=PROBE, **env) -> dict:
    environ = {"DMLGPU_CACHE_DIR": str(cache)}
    environ.update({k: str(v) for k, v in env.items()})
    return json.loads(ok(run(code, timeout=timeout, env=environ)).strip().splitlines()[-1])


def lite(cache, timeout=60, **env) -> dict:
    return probe(cache, timeout, LITE, **env)


LITE_SOURCE = ("#version 450\nlayout(local_size_x = 1) in;\nlayout(std430, binding = 0) buffer B { uint b[]; };\n"
               "void main() { b[0] = ~b[0]; }\n")


def seed(cache, monkeypatch) -> None:
    """The entries `LITE` writes, written here (no process started): its SPIR-V and pipelines."""
    monkeypatch.setenv("DMLGPU_CACHE_DIR", str(cache))
    shader_compiler._memory.clear()
    shader_compiler.spirv(LITE_SOURCE)
    uuid = bytes(range(16))
    disk = pipeline_cache.DiskCache.for_device(uuid, 0x10DE, 0x2335, 1)
    assert disk.save(struct.pack("<IIII16s", 32, 1, 0x10DE, 0x2335, uuid) + b"pipelines" * 8)


def spv_files(cache) -> list:
    folder = Path(cache) / "spirv"
    return sorted(folder.glob("*.spv")) if folder.is_dir() else []


def pipeline_files(cache) -> list:
    return sorted(Path(cache).glob("pipelines-*.bin"))


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# -- row 2: another user writes into the cache ------------------------------------------------
def test_a_forged_spirv_file_is_rejected_and_rebuilt(tmp_path):
    """The entry of `(w & 7) ^ (w >> 3)` replaced by the SPIR-V of `(w & 0xAA) ^ (w >> 3)`, under
    the right name, with a whole header: the old format's unkeyed SHA-256, and this format's MAC
    under a secret the forger guessed. Both are refused; the right result comes out and the
    entry is rewritten."""
    good = tmp_path / "good"
    first = probe(good)
    assert first["spirv"]["disk_writes"] >= 1 and not [w for w in first["warnings"] if "CacheWarning" in w]
    [entry] = spv_files(good)
    evil = tmp_path / "evil"
    probe(evil, PROBE_EVIL=1)
    [evil_entry] = spv_files(evil)
    header = struct.Struct("<8sI32sQ32s")
    key = bytes.fromhex(entry.stem)
    spirv = evil_entry.read_bytes()[header.size:]
    assert spirv != entry.read_bytes()[header.size:]  # the forger's code is another graph's
    import hashlib
    import hmac
    forged = {
        "old format": header.pack(b"DMLGPUSV", 1, key, len(spirv), hashlib.sha256(spirv).digest()) + spirv,
        "guessed secret": header.pack(b"DMLGPUSV", shader_compiler.FORMAT, key, len(spirv), hmac.new(
            os.urandom(32), header.pack(b"DMLGPUSV", shader_compiler.FORMAT, key, len(spirv), bytes(32))[:-32]
            + spirv, hashlib.sha256).digest()) + spirv,
    }
    for what, raw in forged.items():
        entry.write_bytes(raw)
        os.chmod(entry, 0o600)
        again = probe(good)  # the probe itself checks the result
        assert again["spirv"]["disk_rejected"] == 1 and again["spirv"]["compiled"] >= 1, (what, again)
        assert entry.read_bytes()[-len(spirv):] != spirv, what  # rewritten with the right code


def test_a_forged_pipeline_cache_file_is_rejected(tmp_path, monkeypatch):
    seed(tmp_path, monkeypatch)
    [path] = pipeline_files(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # as a forger who cannot compute the MAC: any change of the data
    path.write_bytes(bytes(raw))
    again = lite(tmp_path)
    assert again["before"]["status"].startswith("rejected: MAC"), again["before"]
    assert again["after"]["status"] == "saved"


@pytest.mark.parametrize("how", ["writable by others", "another user's"])
def test_a_directory_that_is_not_private_is_not_used(tmp_path, how):
    cache = tmp_path / "cache"
    cache.mkdir()
    env = {}
    if how == "writable by others":
        os.chmod(cache, 0o777)
    else:  # the probe takes another uid as its own: the directory is then someone else's
        env["PROBE_UID"] = os.geteuid() + 4242
    result = lite(cache, **env)
    warned = [w for w in result["warnings"] if w.startswith("CacheWarning")]
    assert len(warned) == 1 and str(cache) in warned[0], result["warnings"]  # one, naming it
    assert ("chmod 700" in warned[0]) if how == "writable by others" else ("owned by uid" in warned[0])
    assert result["before"]["status"].startswith("rejected: the directory is not private"), result["before"]
    assert result["after"]["status"].startswith("save failed"), result["after"]
    assert list(cache.iterdir()) == []  # nothing read, nothing written
    assert result["spirv"]["compiled"] >= 1 and result["spirv"]["disk_writes"] == 0


def test_made_private_whatever_the_umask(tmp_path):
    cache = tmp_path / "a" / "b" / "cache"
    lite(cache, PROBE_UMASK="000")
    for folder in (tmp_path / "a", tmp_path / "a" / "b", cache, cache / "spirv"):
        assert mode(folder) == 0o700, folder
    files = [*spv_files(cache), *pipeline_files(cache), cache / cache_files.SECRET_NAME]
    assert len(files) >= 3 and all(mode(f) == 0o600 for f in files), [(f, oct(mode(f))) for f in files]


def test_processes_sharing_an_empty_directory_agree_on_one_secret(tmp_path):
    """Three processes start on an empty directory together: each makes the secret or takes the
    one another linked first; a fourth finds every entry valid."""
    procs = [subprocess.Popen([sys.executable, "-c", LITE], cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "DMLGPU_CACHE_DIR": str(tmp_path),
                                              "PYTHONPATH": str(Path(cache_files.__file__).parents[2])})
             for _ in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    last = lite(tmp_path)
    assert last["spirv"]["compiled"] == 0 and last["spirv"]["disk_rejected"] == 0, last["spirv"]
    assert last["before"]["status"] == "loaded"


@pytest.mark.parametrize("damage", ["a link", "open to others", "short", "a directory"])
def test_a_bad_secret_is_replaced(tmp_path, monkeypatch, damage):
    seed(tmp_path, monkeypatch)
    secret = tmp_path / cache_files.SECRET_NAME
    if damage == "a link":
        secret.unlink()
        (tmp_path / "elsewhere").write_bytes(os.urandom(32))
        secret.symlink_to(tmp_path / "elsewhere")
    elif damage == "open to others":
        os.chmod(secret, 0o644)
    elif damage == "short":
        secret.write_bytes(b"0123")
    else:
        secret.unlink()
        secret.mkdir()
    again = lite(tmp_path)  # entries MACed under the old secret are rebuilt (or, for the
    if damage == "a directory":  # directory in the way, the disk caches are off this time)
        return
    assert mode(secret) == 0o600 and not secret.is_symlink() and secret.stat().st_size == 32
    assert again["spirv"]["disk_hits"] == 0 and again["before"]["status"].startswith("rejected")
    assert again["after"]["status"] == "saved"


# -- rows 3 and 4: files that would hang or exhaust a reader ---------------------------------
@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "4 GiB sparse file", "directory"])
def test_a_hostile_file_at_a_cache_path_is_refused_unread(tmp_path, monkeypatch, kind):
    seed(tmp_path, monkeypatch)
    [entry] = spv_files(tmp_path)
    [pipelines] = pipeline_files(tmp_path)
    for path in (entry, pipelines):
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path, 0o600)
        elif kind == "link to /dev/zero":
            path.symlink_to("/dev/zero")
        elif kind == "4 GiB sparse file":
            with open(path, "wb") as f:
                f.truncate(4 << 30)
            os.chmod(path, 0o600)
        else:
            path.mkdir(0o700)
    again = lite(tmp_path, timeout=30)  # a FIFO hung every process before, /dev/zero MemoryError
    assert again["spirv"]["disk_rejected"] == 1 and again["spirv"]["compiled"] >= 1
    assert again["before"]["status"].startswith("rejected"), again["before"]
    if kind != "directory":  # replaced by the entries written after (a rename never follows)
        assert entry.is_file() and not entry.is_symlink() and entry.stat().st_size < 1 << 20
        assert pipelines.is_file() and not pipelines.is_symlink() and again["after"]["status"] == "saved"


# -- row 5: a planted link never takes dmlgpu outside the directory ----------------------------
def test_a_planted_spirv_link_is_not_followed(tmp_path):
    cache, foreign = tmp_path / "cache", tmp_path / "someone-elses"
    cache.mkdir(mode=0o700)
    foreign.mkdir()
    for i in range(shader_compiler.DISK_FILES + 6):  # more than the prune keeps
        path = foreign / f"{i:064x}.spv"
        path.write_bytes(b"theirs")
        os.utime(path, (1000 + i, 1000 + i))
    (cache / "spirv").symlink_to(foreign)
    result = lite(cache)
    assert len(list(foreign.iterdir())) == shader_compiler.DISK_FILES + 6  # none removed, none added
    assert all(p.read_bytes() == b"theirs" for p in foreign.iterdir())
    assert [w for w in result["warnings"] if "spirv" in w and "not a directory of its own" in w]
    assert result["spirv"]["disk_writes"] == 0 and result["before"]["status"] in ("missing", "loaded")


def test_the_prune_removes_only_its_own_files(tmp_path, monkeypatch):
    """Links, foreign names and directories in the folder stay; old temporary files go."""
    monkeypatch.setattr(shader_compiler, "DISK_FILES", 2)
    monkeypatch.setenv("DMLGPU_CACHE_DIR", str(tmp_path))
    shader_compiler.spirv("#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n// 0\n")
    folder = tmp_path / "spirv"
    outside = tmp_path / "outside.spv"
    outside.write_bytes(b"x")
    (folder / f"{1:064x}.spv").symlink_to(outside)
    (folder / "notes.txt").write_text("mine")
    (folder / f"{2:064x}.spv").mkdir()
    stale = folder / ".old-entry.tmp"
    stale.write_bytes(b"half")
    os.utime(stale, (1, 1))
    for i in range(4):
        shader_compiler._memory.clear()
        shader_compiler.spirv(f"#version 450\nlayout(local_size_x = 1) in;\nvoid main() {{}}\n// {i + 1}\n")
    assert outside.read_bytes() == b"x" and (folder / f"{1:064x}.spv").is_symlink()
    assert (folder / "notes.txt").exists() and (folder / f"{2:064x}.spv").is_dir() and not stale.exists()
    assert len([p for p in folder.glob("*.spv") if p.is_file() and not p.is_symlink()]) == 2


# -- row 6: XDG_CACHE_HOME -----------------------------------------------------------------------
def test_a_relative_xdg_cache_home_is_ignored(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "DMLGPU_CACHE_DIR"}
    env.update(HOME=str(home), XDG_CACHE_HOME="relative-dir",
               PYTHONPATH=str(Path(cache_files.__file__).parents[2]))
    done = subprocess.run([sys.executable, "-c", LITE], env=env, cwd=work, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert list(work.iterdir()) == []  # nothing under the working directory
    assert pipeline_files(home / ".cache" / "dmlgpu") and spv_files(home / ".cache" / "dmlgpu")


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("DMLGPU_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_files.cache_dir() == tmp_path / "dmlgpu"
    for relative in ("relative-dir", "./x", ""):
        monkeypatch.setenv("XDG_CACHE_HOME", relative)
        assert cache_files.cache_dir() == Path.home() / ".cache" / "dmlgpu"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_files.cache_dir() == Path.home() / ".cache" / "dmlgpu"
    monkeypatch.setenv("DMLGPU_CACHE_DIR", "")
    assert cache_files.cache_dir() is None
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DMLGPU_CACHE_DIR", "mine")
    assert cache_files.cache_dir() == tmp_path / "mine"  # absolute from the start


def test_reads_are_bounded_by_the_writers_largest_entry(tmp_path):
    with cache_files.open_folder(path=tmp_path) as folder:
        folder.write("big", b"x" * 100)
        assert folder.read("big", 100) == b"x" * 100
        with pytest.raises(cache_files.Untrusted, match="more than"):
            folder.read("big", 99)
    assert pipeline_cache.MAX_BYTES and shader_compiler.MAX_SPIRV_BYTES  # the bounds the readers pass
