"""The installed wheel as a new user meets it: run by tools/bootstrap.sh (the `wheel` and `test`
jobs) with the Python of a fresh virtual environment that has only the wheel and its
dependencies, no compiler on PATH, and dmlgpu's disk caches off (so the fused graph is compiled
by the glslang inside the wheel, now).

    python tools/wheel_smoke.py README.md

Checks `python -m dmlgpu devices`, an element-wise operator, a fused graph and a Hamming search
against numpy, then runs the README's first Python example as printed.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "clang++", "zig")


def main(readme: Path) -> None:
    found = {name: shutil.which(name) for name in COMPILERS if shutil.which(name)}
    assert not found, f"a compiler is on PATH: {found}"
    assert os.environ.get("DMLGPU_CACHE_DIR") == "", "run with DMLGPU_CACHE_DIR= (caches off)"

    listing = subprocess.run([sys.executable, "-m", "dmlgpu", "devices"], capture_output=True, text=True,
                             timeout=120)
    assert listing.returncode == 0 and listing.stdout.strip(), listing.stderr
    print(listing.stdout.strip())

    import dmlgpu
    from dmlgpu.runtime import shader_compiler
    site = Path(dmlgpu.__file__).resolve().parents[1]
    assert site.name == "site-packages", f"dmlgpu imported from {site}, not an installed wheel"

    rng = np.random.default_rng(36)
    a, b = rng.integers(0, 1 << 16, (2, 1000), dtype=np.uint16)
    assert (dmlgpu.bit_xor(a, b) == a ^ b).all()

    @dmlgpu.fuse
    def unpack(w):
        return w & 15, (w >> 4) ^ 3

    w = rng.integers(0, 256, 4099, dtype=np.uint8)
    low, high = unpack(w)
    assert (low == w & 15).all() and (high == (w >> 4) ^ 3).all()
    assert shader_compiler.stats()["compiled"] >= 1, "the fused graph was not compiled by glslang"

    codes = rng.integers(0, 1 << 32, (2000, 4), dtype=np.uint32)
    queries = codes[:16] ^ np.uint32(1)
    distances, rows = dmlgpu.HammingIndex(codes).search(queries, k=5)
    bits = np.unpackbits((queries[:, None, :] ^ codes[None]).view(np.uint8), axis=-1).sum(-1, dtype=np.uint32)
    order = np.argsort(bits, axis=1, kind="stable")[:, :5]
    assert (rows == order).all() and (distances == np.take_along_axis(bits, order, 1)).all()

    first = re.search(r"```python\n(.*?)```", readme.read_text(), re.S)
    assert first, f"{readme} has no Python example"
    exec(compile(first[1], f"{readme} (first Python example)", "exec"), {"__name__": "__main__"})
    print(f"wheel smoke test passed: dmlgpu {dmlgpu.__version__} from {site}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
