"""What a user sees of the package before computing anything: its metadata (license, classifiers,
URLs, one version), `python -m dmlgpu --version`, extras that name themselves when missing,
`__all__` in every public module, and a clear word when the source tree shadows an install."""
import importlib
import pkgutil
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import dmlgpu

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(dmlgpu.__file__).resolve().parent
#: Modules that are not the library's public surface: the command line, the runtime's rooms
#: (its interface is `dmlgpu.runtime` itself, whose __all__ lists it), the benchmark and demo
#: tools, and the extension modules.
NOT_PUBLIC = re.compile(r"^dmlgpu\.(__main__|runtime\..+|bench\w*|demo|_\w+)$")


@pytest.fixture(scope="module")
def pyproject():
    path = ROOT / "pyproject.toml"
    if not path.is_file():
        pytest.skip("needs the source tree next to the tests")
    return tomllib.loads(path.read_text())


def test_license_is_mit_everywhere(pyproject):
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text
    project = pyproject["project"]
    assert project["license"] == {"text": "MIT"}
    assert "License :: OSI Approved :: MIT License" in project["classifiers"]


def test_classifiers_keywords_and_urls(pyproject):
    project = pyproject["project"]
    assert {"Typing :: Typed", "Operating System :: POSIX :: Linux", "Environment :: GPU"} <= set(project["classifiers"])
    assert {"directml", "vulkan", "gpu"} <= set(project["keywords"])
    for label, url in project["urls"].items():  # real hosts only, no placeholders
        assert url.startswith("https://") and not re.search(r"example|your|todo|xxx", url, re.I), (label, url)


def test_one_version_source(pyproject):
    project = pyproject["project"]
    assert "version" not in project and "version" in project["dynamic"]
    [entry] = [e for e in pyproject["tool"]["dynamic-metadata"] if e["field"] == "version"]
    assert entry["input"] == "dmlgpu/_version.py"
    # The file the build reads is the one installed (the same text: the wheel is built from this tree).
    assert (ROOT / entry["input"]).read_text() == (PACKAGE / "_version.py").read_text()
    assert re.fullmatch(r"\d+\.\d+\.\d+", dmlgpu.__version__)
    found = subprocess.run([sys.executable, "-m", "dmlgpu", "--version"], capture_output=True, text=True,
                           timeout=120)
    assert found.returncode == 0 and found.stdout.strip() == f"dmlgpu {dmlgpu.__version__}", found


def test_extras(pyproject):
    extras = pyproject["project"]["optional-dependencies"]
    names = {k: {re.split(r"[\[<>=]", r)[0] for r in v} for k, v in extras.items()}
    assert names["bench"] == {"matplotlib", "tqdm"} and names["dask"] == {"dask", "distributed"}


def _without(modules: list, code: str) -> subprocess.CompletedProcess:
    """Run `code` in a Python where importing any of `modules` fails as if not installed."""
    block = "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    return subprocess.run([sys.executable, "-c", f"import sys\n{block}{code}"], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("missing", ["dask", "distributed"])
def test_dask_module_without_the_extra_names_it(missing):
    result = _without([missing, f"{missing}.array"], "import dmlgpu.dask")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: dmlgpu.dask needs dask[array] and distributed") \
        and ("pip install 'dask[array]' distributed, or dmlgpu's wheel with its extra: "
             "pip install 'dmlgpu-<version>-<tags>.whl[dask]'") in last, result.stderr


def test_bench_without_matplotlib_says_there_are_no_plots(tmp_path):
    result = _without(["matplotlib"], f"from dmlgpu_tools import bench_report\n"
                                      f"print(bench_report.plots(__import__('pathlib').Path({str(tmp_path)!r}), []))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "None"
    assert "no PNG plots: matplotlib is not installed (pip install matplotlib tqdm, or dmlgpu's wheel with its extra: pip install 'dmlgpu-<version>-<tags>.whl[bench]')" in result.stderr


def _public_modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages([str(PACKAGE)], "dmlgpu.")]
    return sorted(n for n in names if not NOT_PUBLIC.match(n))


def test_every_public_module_has_all():
    modules = _public_modules()
    assert {"dmlgpu.dask", "dmlgpu.front.functions", "dmlgpu.front.numpy_api", "dmlgpu.errors", "dmlgpu.runtime"} <= set(modules)
    for name in ["dmlgpu", *modules]:
        if name == "dmlgpu.dask":
            pytest.importorskip("distributed", reason="dask is not installed (pip install .[dask])")
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        assert isinstance(exported, list) and exported, f"{name} has no __all__"
        assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
        missing = [n for n in exported if not hasattr(module, n)]
        assert not missing, f"{name}.__all__ names what it lacks: {missing}"


@pytest.mark.parametrize("built", [True, False], ids=["built", "never-built"])
def test_a_source_tree_that_shadows_an_install_says_so(tmp_path, built):
    """Python started in a source tree (no built extensions; never built: nor the modules the build
    writes from the table) with dmlgpu installed elsewhere on sys.path: the error names the
    shadowing, not a broken install."""
    if not any(PACKAGE.glob("runtime/_kompute*")):
        pytest.skip("needs a built dmlgpu to shadow")
    tree = tmp_path / "src"
    generated = () if built else ("functions.py", "tensor_operators.py")
    shutil.copytree(PACKAGE, tree / "dmlgpu",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "spirv", "__pycache__", *generated))
    result = subprocess.run(
        [sys.executable, "-c", "import numpy as np, dmlgpu\ndmlgpu.bit_not(np.zeros(4, np.uint8))"],
        cwd=tree, env={"PYTHONPATH": str(PACKAGE.parent), "PATH": "/usr/bin:/bin"}, capture_output=True,
        text=True, timeout=120)
    last = result.stderr.strip().splitlines()[-1]
    error = "dmlgpu.errors.DeviceError" if built else "ImportError"
    assert last.startswith(f"{error}: dmlgpu was imported from "), result.stderr
    assert f"this ./dmlgpu shadows the dmlgpu installed at {PACKAGE}" in last, last
