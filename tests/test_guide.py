"""Every ```python block of the user guide (docs/guide/*.md) runs as written."""
import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide"
BLOCKS = [(page.name, i, block) for page in sorted(GUIDE.glob("*.md"))
          for i, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))]


@pytest.mark.parametrize("page, i, block", BLOCKS, ids=[f"{p}-{i}" for p, i, _ in BLOCKS])
def test_guide_block_runs(page, i, block):
    exec(compile(block, f"{page}[{i}]", "exec"), {})
