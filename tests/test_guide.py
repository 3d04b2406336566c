"""Every ```python block of the user guide (docs/guide/*.md) runs as written: each in a fresh
interpreter (as a reader runs it), in a folder of its own, with a timeout (a block may start a
cluster: processes and threads, which must never hang the run)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dmlgpu

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide"
ROOT = Path(dmlgpu.__file__).resolve().parents[1]
BLOCKS = [(page.name, i, block) for page in sorted(GUIDE.glob("*.md"))
          for i, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))]
TIMEOUT_S = 300


@pytest.mark.parametrize("page, i, block", BLOCKS, ids=[f"{p}-{i}" for p, i, _ in BLOCKS])
def test_guide_block_runs(page, i, block, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{page}[{i}] hung for {TIMEOUT_S} s:\n{exc.stdout}\n{exc.stderr}")
    assert done.returncode == 0, f"{page}[{i}]:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
