"""The documentation: every ```python block of README.md and docs/**/*.md runs as printed, each as
a script of its own in a subprocess with a timeout (a Dask one through its `if __name__ ==
"__main__":` guard); README stays a short front door whose table of contents reaches every page;
and the site builds with `mkdocs build --strict` (where mkdocs is installed: tools/versions.sh
puts it in the test environment)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dmlgpu

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: README's length at most: what it is, platforms, install, a first example per feature, contents.
README_LINES = 200
#: Sizes in a page's blocks that are too large for CI, and what the test runs instead (each must
#: still be found in some block, or the entry is stale).
SMALLER: dict = {}
TIMEOUT_S = 300


def pages() -> list:
    """README.md and every page of the site, in a fixed order."""
    return [README] + sorted(DOCS.rglob("*.md")) if README.is_file() else sorted(DOCS.rglob("*.md"))


def python_blocks() -> list:
    blocks = []
    for page in pages():
        text = page.read_text()
        for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
            line = text[:match.start()].count("\n") + 1
            blocks.append(pytest.param(match.group(1), id=f"{page.relative_to(ROOT)}-line-{line}"))
    return blocks


def test_the_pages_have_python_examples():
    readme = [p for p in python_blocks() if p.id.startswith("README.md")]
    assert len(readme) >= 6 and len(python_blocks()) >= 12


def test_every_smaller_size_is_still_in_a_block():
    text = "".join(p.values[0] for p in python_blocks())
    assert [large for large in SMALLER if large not in text] == []


@pytest.mark.parametrize("code", python_blocks())
def test_block_runs_as_printed(code, tmp_path):
    if "dmlgpu.dask" in code or "distributed" in code:
        pytest.importorskip("distributed", reason="dask is not installed (pip install .[dask])")
        if "Cluster(" in code:  # (a block on dask's synchronous scheduler starts no workers)
            assert 'if __name__ == "__main__":' in code, "a script that starts workers needs the main guard"
    for large, small in SMALLER.items():
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


def test_the_readme_is_a_short_front_door():
    text = README.read_text()
    assert len(text.splitlines()) <= README_LINES
    for heading in ("## Platforms", "## Install", "## User guide"):
        assert heading in text, heading
    for feature in ("dmlgpu.bit_xor", "dmlgpu.asarray", "create_operator", "@dmlgpu.fuse", "HammingIndex",
                    "dmlgpu.dask"):
        assert feature in text, f"README has no first example of {feature}"


def test_the_readme_lists_every_page_of_the_guide_and_the_internals():
    """README's user guide section is the table of contents: every page under docs/guide and
    docs/internals is linked from it."""
    text = README.read_text()
    contents = text[text.index("## User guide"):]
    linked = set(re.findall(r"\]\((docs/[\w/.-]+\.md)(?:#[^)]*)?\)", contents))
    pages_there = {str(p.relative_to(ROOT)) for folder in ("guide", "internals") for p in (DOCS / folder).glob("*.md")}
    assert pages_there - linked == set()


def test_every_link_between_pages_resolves():
    """Relative links of README and the pages name files that are there (the site's nav too)."""
    missing = []
    for page in pages():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).resolve().is_file():
                missing.append(f"{page.relative_to(ROOT)} -> {target}")
    nav = (ROOT / "mkdocs.yml").read_text()
    missing += [f"mkdocs.yml -> {name}" for name in re.findall(r"^\s+- (?:[^:\n]+: )?([\w/.-]+\.md)$", nav, re.M)
                if not (DOCS / name).is_file()]
    assert missing == []


def test_the_site_builds_without_warnings(tmp_path):
    """`mkdocs build --strict`, the API reference read from the package under test (its generated
    front-end modules included). Nothing here touches a device: the validation-layer pass skips it."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (tools/versions.sh TEST_PIP_PACKAGES has it)")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed (tools/versions.sh TEST_PIP_PACKAGES)")
    if os.environ.get("DMLGPU_VALIDATION"):
        pytest.skip("no device work: built once, in the plain pass")
    source = Path(dmlgpu.__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                             str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S,
                            env={**os.environ, "DMLGPU_DOCS_SOURCE": str(source)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "reference" / "front-end" / "index.html").is_file()
