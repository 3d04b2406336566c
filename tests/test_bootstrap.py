"""tools/bootstrap.sh outside Debian and Ubuntu: it names the packages to install with the system's
own package manager and stops before changing anything (a copy of the script in a temporary
folder, told another os-release file, with a PATH that lacks the shader tools)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = {
    "fedora": ('ID=fedora\nPRETTY_NAME="Fedora Linux 41"\n', "sudo dnf install cmake patch glslang spirv-tools"),
    "arch": ('ID=arch\nPRETTY_NAME="Arch Linux"\n', "sudo pacman -S --needed cmake patch glslang spirv-tools"),
    "opensuse": ('ID="opensuse-tumbleweed"\nID_LIKE="opensuse suse"\nPRETTY_NAME="openSUSE Tumbleweed"\n',
                 "sudo zypper install cmake patch glslang-devel spirv-tools"),
    "unknown": ('ID=plan9\nPRETTY_NAME="Plan 9"\n', "glslang (Fedora) / glslang (Arch) / glslang-devel (openSUSE)"),
}
#: What the script may use before it decides: a shell, Python and the core utilities, no build tools.
BASICS = ("bash", "python3", "sed", "tr", "awk", "cat", "cut", "sha256sum", "uname", "grep", "dirname", "env")


@pytest.mark.skipif(not (ROOT / "tools" / "bootstrap.sh").is_file(), reason="needs the source tree next to the tests")
@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_other_systems_are_told_what_to_install(system, tmp_path):
    os_release, install = SYSTEMS[system]
    (tmp_path / "os-release").write_text(os_release)
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    for name in ("bootstrap.sh", "versions.sh"):
        shutil.copy(ROOT / "tools" / name, repo / "tools" / name)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in BASICS:
        found = os.path.realpath(sys.executable) if name == "python3" else shutil.which(name)  # not a shim
        assert found, name
        (bin_dir / name).symlink_to(os.path.realpath(found))
    result = subprocess.run([str(bin_dir / "bash"), str(repo / "tools" / "bootstrap.sh"), "test"],
                            env={"PATH": str(bin_dir), "DMLGPU_OS_RELEASE": str(tmp_path / "os-release")},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert install in result.stderr and "Nothing was changed." in result.stderr, result.stderr
    assert "Missing: cmake patch glslangValidator spirv-opt spirv-val" in result.stderr, result.stderr
    assert sorted(p.name for p in repo.iterdir()) == ["tools"]  # no venv, no cache, no build tree
