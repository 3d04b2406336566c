"""tools/bootstrap.sh outside Debian and Ubuntu: it names the packages to install with the system's
own package manager and stops before changing anything (a copy of the script in a temporary
folder, told another os-release file, with a PATH that lacks the shader tools). And
tools/manylinux_deps.sh's route to its sources on each system, with stubs in place of apt and the
download."""
import os
import re
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


ROUTES = {  # os-release -> how tools/manylinux_deps.sh fetches glslang's tarball
    "debian": ('ID=debian\nVERSION_CODENAME=bookworm\n', "apt"),
    "ubuntu": ('ID=ubuntu\nID_LIKE=debian\nVERSION_CODENAME=noble\n', "download"),
    "fedora": ('ID=fedora\n', "download"),
}


@pytest.mark.skipif(not (ROOT / "tools" / "manylinux_deps.sh").is_file(),
                    reason="needs the source tree next to the tests")
@pytest.mark.skipif(not Path("/usr/include/vulkan/vulkan_core.h").is_file(),
                    reason="the script first checks the Vulkan headers")
@pytest.mark.parametrize("system", sorted(ROUTES))
def test_manylinux_deps_fetches_through_apt_only_on_debian(system, tmp_path):
    """tools/manylinux_deps.sh asks apt for Debian's source package only on Debian (elsewhere,
    Ubuntu included, apt lacks Debian's archive keys) and downloads the tarball from Debian's pool
    otherwise, even where apt-get is on PATH; a fetch that fails stops with a message naming it,
    not a sha256 mismatch. apt-get, apt-cache and the interpreter are stubs that log and fail:
    nothing is downloaded or built."""
    os_release, route = ROUTES[system]
    (tmp_path / "os-release").write_text(os_release)
    repo = tmp_path / "repo"
    for name in ("tools/manylinux_deps.sh", "tools/versions.sh", "cmake/manylinux_2_28.cmake"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, repo / name)
    stubs, log = tmp_path / "stubs", tmp_path / "calls.log"
    stubs.mkdir()
    for name in ("apt-get", "apt-cache"):
        (stubs / name).write_text(f'#!/bin/sh\necho "{name} $*" >>"{log}"\nexit 100\n')
    # The interpreter: zig's version for the first call, then a download that fails.
    (stubs / "python").write_text(f'#!/bin/sh\ncase "$2" in *ziglang*) echo 0.15.2 ;; '
                                  f'*urlretrieve*) echo "download $3" >>"{log}"; exit 1 ;; esac\n')
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "DMLGPU_OS_RELEASE": str(tmp_path / "os-release"),
           "DMLGPU_BUILD_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    result = subprocess.run(["bash", str(repo / "tools" / "manylinux_deps.sh"), str(stubs / "python")],
                            env=env, capture_output=True, text=True, timeout=60)
    calls = log.read_text()
    assert result.returncode == 1, result.stdout + result.stderr
    assert "sha256 differs" not in result.stderr, result.stderr
    if route == "apt":
        assert "apt-get" in calls and "download" not in calls, calls
        assert "tools/manylinux_deps.sh: apt-get update of Debian's deb-src lists" in result.stderr, result.stderr
    else:
        pool = r"https://deb\.debian\.org/debian/pool/main/g/glslang/glslang_\S+\.orig\.tar\.gz"
        url = re.fullmatch(f"download ({pool})\n", calls)
        assert url, calls
        assert f"tools/manylinux_deps.sh: could not download {url[1]}" in result.stderr, result.stderr
    assert not any((tmp_path / "cache" / "manylinux").glob("deps-*"))  # nothing built
