"""The repository is self-contained: nothing in it points to files outside it, and every pointer
into `docs/` names a file (and a numbered section) that is there."""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Paths of the workplace the project was written in, which a clone does not have.
OUTSIDE = ("shared" + "/spec", "/work" + "/")


def tracked_text_files():
    if not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for name in names:
        path = ROOT / name
        if name.startswith("third_party/") or not path.is_file():
            continue
        try:
            yield name, path.read_text()
        except UnicodeDecodeError:
            continue


def test_nothing_points_outside_the_repository():
    found = [(name, marker) for name, text in tracked_text_files() for marker in OUTSIDE if marker in text]
    assert not found, found


def test_every_pointer_into_docs_resolves():
    """`docs/<file>.md` exists, and `docs/<file>.md` §N (or §N-M) names sections `## N.` that it has."""
    checked = 0
    for name, text in tracked_text_files():
        for match in re.finditer(r"docs/([\w./-]+\.md)`?(?:\s*\(?§(\d+)(?:-(\d+))?)?", text):
            doc = ROOT / "docs" / match[1]
            assert doc.is_file(), (name, match[0])
            if match[2]:
                headings = set(re.findall(r"^## (\d+)\.", doc.read_text(), re.M))
                wanted = range(int(match[2]), int(match[3] or match[2]) + 1)
                assert {str(n) for n in wanted} <= headings, (name, match[0])
            checked += 1
    assert checked >= 6  # operators, validation, bindings, stream, and two tests cite docs/
