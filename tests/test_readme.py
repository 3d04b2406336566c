"""Every python code block of the README runs as printed, each as a script of its own in a
subprocess with a timeout (the Dask one through its `if __name__ == "__main__":` guard, at a size
CI affords: the one substitution below, which must still apply)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dmlgpu

README = Path(__file__).resolve().parents[1] / "README.md"
#: The README's sizes that are too large for CI, and what the test runs instead (the blocks'
#: chunking is kept: 64 MiB blocks, which must fit lavapipe's 128 MiB buffers).
SMALLER = {"dd.random_bits((1 << 15, 1 << 14)": "dd.random_bits((1 << 11, 1 << 14)"}
TIMEOUT_S = 300


def python_blocks() -> list:
    if not README.is_file():
        return []
    text = README.read_text()
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        line = text[:match.start()].count("\n") + 1
        blocks.append(pytest.param(match.group(1), id=f"README-line-{line}"))
    return blocks


def test_the_readme_has_python_examples():
    assert len(python_blocks()) >= 4


@pytest.mark.parametrize("code", python_blocks())
def test_readme_block_runs_as_printed(code, tmp_path):
    if "dmlgpu.dask" in code:
        pytest.importorskip("distributed", reason="dask is not installed (pip install .[dask])")
        assert 'if __name__ == "__main__":' in code, "a Dask script needs the main guard (spawned workers)"
        for large, small in SMALLER.items():
            assert large in code, f"the README no longer has {large!r}: update SMALLER"
            code = code.replace(large, small)
    script = tmp_path / "example.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                            timeout=TIMEOUT_S, env={**os.environ, "PYTHONPATH": _pythonpath()})
    assert result.returncode == 0, result.stdout + result.stderr


def _pythonpath() -> str:
    """The dmlgpu under test first, as this process imports it."""
    root = str(Path(dmlgpu.__file__).resolve().parents[1])
    return os.pathsep.join([root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
