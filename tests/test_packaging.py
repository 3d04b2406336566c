"""The package as pip builds it: Kompute is dmlgpu's private extension module (no `kp` anywhere),
which needs only the Vulkan loader and the C/C++ runtime; and a build that lacks a prerequisite
stops at once with one message naming it and its Debian package (cmake/prerequisites.cmake)."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dmlgpu
import dmlgpu.runtime._glsl
import dmlgpu.runtime._host_copy
import dmlgpu.runtime._kompute

ROOT = Path(__file__).resolve().parents[1]
#: Where the dmlgpu under test is installed (the source tree, or a wheel's site-packages): a
#: subprocess must import that one, never a source tree that would shadow it.
INSTALLED = Path(dmlgpu.__file__).resolve().parents[1]
#: What an extension module may need: the C runtime (glibc's parts; before glibc 2.34 libpthread
#: and libdl were libraries of their own) and, where the build's compiler links it dynamically, the
#: C++ runtime. Never the Vulkan loader: dmlgpu.runtime.vulkan_loader opens it at run time.
RUNTIME_LIBRARIES = {"libstdc++.so.6", "libgcc_s.so.1", "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2",
                     "ld-linux-x86-64.so.2"}
#: The newest glibc a manylinux_2_28 wheel's modules may ask for.
MANYLINUX_GLIBC = (2, 28)


def test_glslang_is_linked_in_and_exports_only_the_module():
    """dmlgpu.runtime._glsl carries glslang (static): nothing of it is exported to clash with another
    glslang in the process."""
    assert dmlgpu.runtime._glsl.GLSLANG_VERSION.count(".") >= 2
    if shutil.which("nm") is None:
        pytest.skip("needs nm (binutils)")
    exported = subprocess.run(["nm", "-D", "--defined-only", dmlgpu.runtime._glsl.__file__], capture_output=True, text=True,
                              check=True).stdout.split()
    assert not [name for name in exported if "glslang" in name or "spvtools" in name]


def test_kompute_is_private_to_dmlgpu():
    assert importlib.util.find_spec("kp") is None
    assert dmlgpu.runtime._kompute.__name__ == "dmlgpu.runtime._kompute" and dmlgpu.runtime._kompute.__version__ == "0.9.0"
    assert hasattr(dmlgpu.runtime._kompute, "OpMemoryBarrier")  # our patch 0006


EXTENSIONS = (dmlgpu.runtime._kompute, dmlgpu.runtime._host_copy, dmlgpu.runtime._glsl)


def needed_libraries(path: str) -> set:
    dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic))


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs readelf (binutils)")
def test_extensions_need_only_the_c_runtime():
    for module in EXTENSIONS:
        needed = needed_libraries(module.__file__)
        assert needed <= RUNTIME_LIBRARIES, (module, needed)


def installed_wheel_tags() -> list:
    """The platform tags of the wheel dmlgpu was installed from (none for a source tree)."""
    for info in INSTALLED.glob("dmlgpu-*.dist-info"):
        return re.findall(r"^Tag: \S+-\S+-(\S+)$", (info / "WHEEL").read_text(), re.M)
    return []


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs readelf (binutils)")
def test_a_manylinux_wheel_asks_glibc_2_28_at_most_and_unwinds_with_libgcc_s():
    """The portable wheel (tools/build_wheel.sh): zig linked the C++ runtime in, every _Unwind_
    function comes from libgcc_s.so.1, the unwinder glibc's pthread_exit uses (a second one inside
    the module crashed threads ended at exit: cmake/manylinux_2_28.cmake), and no symbol asks for a
    glibc newer than the tag promises."""
    tags = installed_wheel_tags()
    if not any(tag.startswith("manylinux") for tag in tags):
        pytest.skip(f"dmlgpu is not installed from a manylinux wheel ({tags or 'a source tree'})")
    for module in EXTENSIONS:
        needed = needed_libraries(module.__file__)
        assert "libstdc++.so.6" not in needed and "libgcc_s.so.1" in needed, (module, needed)
        symbols = subprocess.run(["readelf", "--dyn-syms", "-W", module.__file__], capture_output=True, text=True,
                                 check=True).stdout
        assert re.search(r"\bUND _Unwind_RaiseException@GCC_", symbols), module
        versions = {tuple(map(int, v.split("."))) for v in re.findall(r"@GLIBC_(\d+\.\d+(?:\.\d+)?)", symbols)}
        assert versions and max(versions) <= MANYLINUX_GLIBC, (module, max(versions))


def test_a_missing_vulkan_loader_says_what_to_install():
    from dmlgpu.runtime import vulkan_loader
    message = vulkan_loader.open_loader("libvulkan-not-there.so.1")
    assert message.startswith("the Vulkan loader (libvulkan-not-there.so.1) could not be opened: ")
    assert "apt-get install libvulkan1" in message and "dnf install vulkan-loader" in message
    assert vulkan_loader.LOADER_ERROR is None  # the real one is open: this process runs Vulkan


def path_without(program: str, where: Path) -> str:
    """A PATH of one folder that offers every program of PATH except `program`."""
    where.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            target = where / entry.name
            if entry.name != program and not target.exists() and not target.is_symlink():
                target.symlink_to(entry.path)
    return str(where)


@pytest.mark.build
def test_a_missing_tool_stops_the_build_with_one_message(tmp_path):
    assert (ROOT / "pyproject.toml").is_file(), "needs the source tree next to the tests"
    build = tmp_path / "build"
    env = {**os.environ, "PATH": path_without("glslangValidator", tmp_path / "bin")}
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
         "--disable-pip-version-check", "-w", str(tmp_path / "wheel"), f"-Cbuild-dir={build}", str(ROOT)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    output = " ".join((result.stdout + result.stderr).split())  # CMake wraps its messages
    assert result.returncode != 0
    assert ("dmlgpu cannot be built, missing: glslangValidator (Debian package glslang-tools). "
            "Install with: apt-get install glslang-tools") in output, output
    assert output.count("CMake Error") == 1 and "Call Stack" not in output, output
    # It stopped before compiling anything.
    assert not [p for p in build.rglob("*") if p.suffix in (".o", ".spv", ".so")]


def test_an_isolated_build_compiles_against_a_copy_of_pybind11(tmp_path):
    """pip's isolated build installs pybind11 into a new temporary folder each time; compile lines
    that named it would recompile every extension module of a build tree kept across builds
    (`pip install .[dask]` after `pip install .` took 145 s instead of 19). A small project
    configured with cmake/pybind11_headers.cmake and pybind11 from such a folder: its module's
    compile lines name the copy in the build tree, never the folder."""
    pybind11 = pytest.importorskip("pybind11")
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("needs cmake")
    isolated = tmp_path / "pip-build-env-test" / "site-packages" / "pybind11"
    shutil.copytree(Path(pybind11.__file__).parent, isolated)
    project = tmp_path / "project"
    project.mkdir()
    (project / "module.cpp").write_text("#include <pybind11/pybind11.h>\nPYBIND11_MODULE(module, m) {}\n")
    (project / "CMakeLists.txt").write_text(f"""cmake_minimum_required(VERSION 3.21)
project(copy_test CXX)
find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
find_package(pybind11 CONFIG REQUIRED)
include({(ROOT / "cmake" / "pybind11_headers.cmake").as_posix()})
dmlgpu_pybind11_headers_in(${{CMAKE_BINARY_DIR}}/pybind11-include)
pybind11_add_module(module module.cpp)
""")
    build = tmp_path / "build"
    result = subprocess.run([cmake, "-S", str(project), "-B", str(build), "-G", "Unix Makefiles",
                             f"-DPython3_EXECUTABLE={sys.executable}",
                             f"-Dpybind11_DIR={isolated / 'share' / 'cmake' / 'pybind11'}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    flags = (build / "CMakeFiles" / "module.dir" / "flags.make").read_text()
    assert str(build / "pybind11-include") in flags
    assert "pip-build-env-test" not in flags, flags
    assert (build / "pybind11-include" / "pybind11" / "pybind11.h").is_file()


TOOL_MODULES = ("dmlgpu_tools", "dmlgpu.bench", "dmlgpu.bench_runtime", "dmlgpu.bench_report", "dmlgpu.demo")


@pytest.mark.parametrize("code", [
    "import dmlgpu",
    # The build's step: CMake asks the table what to compile.
    "import sys; from dmlgpu.__main__ import main; sys.stdout = open('/dev/null', 'w'); main(['shaders', 'variants'])",
], ids=["import", "shaders-step"])
def test_the_library_loads_none_of_the_tools(code):
    """The demo and the benchmarks live in `dmlgpu_tools`, beside the package: importing dmlgpu
    (or running the build's shader step) loads none of them, nor the optional packages they use."""
    probe = (f"{code}\nimport sys\n"
             f"print(file=sys.__stdout__, *[sorted(m for m in sys.modules if m.startswith({TOOL_MODULES!r}) "
             f"or m.split('.')[0] in ('matplotlib', 'tqdm', 'torch', 'cupy'))])")
    result = subprocess.run([sys.executable, "-c", probe], cwd="/", capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(INSTALLED)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_the_tools_are_not_in_the_library_package():
    assert not [name for name in ("bench", "bench_runtime", "bench_report", "demo")
                if importlib.util.find_spec(f"dmlgpu.{name}") is not None]
    assert importlib.util.find_spec("dmlgpu_tools.demo") is not None  # shipped beside it (pyproject's wheel.packages)


def test_bench_still_runs_from_the_command_line():
    """`python -m dmlgpu bench` reaches the tools on demand (`--help`: nothing is measured; the
    demo's command is run by tests/test_demo.py)."""
    result = subprocess.run([sys.executable, "-m", "dmlgpu", "bench", "--help"], cwd="/", capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(INSTALLED)})
    assert result.returncode == 0 and "python -m dmlgpu bench" in result.stdout, result.stderr
