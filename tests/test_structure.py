"""The package's shape, read from its source: each layer subpackage imports only the layers below
it (the runtime nothing but the errors, the version and its own extensions), exactly one module
imports Kompute, no module reaches into another object's private fields
in the runtime, and no module is over `MAX_LINES` lines unless its docstring says why."""
import ast
from pathlib import Path

import pytest

import dmlgpu

PACKAGE = Path(dmlgpu.__file__).resolve().parent
#: Modules of dmlgpu outside the runtime that the runtime may import: the errors it raises, the
#: version (a leaf), and dmlgpu's own built extensions (Kompute, the host copy threads).
RUNTIME_MAY_IMPORT = {"dmlgpu.errors", "dmlgpu._version", "dmlgpu.runtime._kompute", "dmlgpu.runtime._host_copy", "dmlgpu.runtime._glsl"}
#: The layer subpackages, bottom first: each may import only itself, those before it, and the
#: leaves every layer shares (`LEAVES`). Imports anywhere in a module count (a lazy import too).
LAYERS = ["runtime", "table", "describe", "layout", "kernels", "compiler", "api", "front", "search", "dask"]
LEAVES = {"dmlgpu.errors", "dmlgpu._version"}
#: The package's top: the public face, the command line, test helpers; they sit above every layer.
TOP_MODULES = {"__init__.py", "__main__.py", "_version.py", "errors.py", "testing.py", "profiling.py", "py.typed"}
#: A module longer than this says why in its docstring, with a sentence naming the bound.
MAX_LINES = 500
#: Private attributes of the standard library the runtime may use: whether the calling thread
#: holds an RLock (threading has no public way to ask; Condition uses the same).
FOREIGN_PRIVATE_ALLOWED = {"_is_owned"}


def modules(folder: Path):
    return sorted(path for path in folder.rglob("*.py") if "__pycache__" not in path.parts)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set:
    """Absolute names of the modules (or module attributes) `path` imports."""
    tree = ast.parse(path.read_text(), str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module
            names.update(f"{stem}.{alias.name}" for alias in node.names)
    return names


def within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def test_imports_are_resolved():
    """The helper this file relies on reads relative imports right (or the checks below prove nothing)."""
    names = imported(PACKAGE / "runtime" / "device.py")
    assert "dmlgpu.errors.DeviceError" in names and "dmlgpu.runtime.vulkan" in names
    assert "dmlgpu.runtime.buffers.Buffer" in names
    assert "dmlgpu.runtime.limits.is_int" in names


def test_the_top_holds_only_the_face_and_the_layers():
    """`dmlgpu/` holds the layer subpackages and a few top modules, nothing else."""
    entries = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__" and not p.name.endswith(".so")
               and p.name not in ("spirv", "glsl")}
    assert entries - TOP_MODULES == set(LAYERS), sorted(entries - TOP_MODULES ^ set(LAYERS))


@pytest.mark.parametrize("layer", LAYERS)
def test_each_layer_imports_only_those_below_it(layer):
    allowed = LAYERS[:LAYERS.index(layer) + 1]
    found = []
    for path in modules(PACKAGE / layer):
        for name in sorted(imported(path)):
            if not within(name, "dmlgpu") or any(within(name, leaf) for leaf in LEAVES):
                continue
            parts = name.split(".")
            if len(parts) < 2 or parts[1] not in allowed:
                found.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not found, f"{layer} imports from above it (allowed: {allowed}): {found}"


def test_layer_rule_sees_an_upward_import():
    """The rule above can fail: the front end's Tensor imports the API layer, which the runtime may not."""
    names = imported(PACKAGE / "front" / "tensor.py")
    assert any(within(name, "dmlgpu.api") for name in names)


@pytest.mark.parametrize("path", modules(PACKAGE / "runtime"), ids=lambda p: p.name)
def test_runtime_imports_nothing_above_it(path):
    above = sorted(name for name in imported(path) if within(name, "dmlgpu") and not within(name, "dmlgpu.runtime")
                   and not any(within(name, allowed) for allowed in RUNTIME_MAY_IMPORT))
    assert not above, f"{path.name} imports from above the runtime: {above}"


def test_exactly_one_module_imports_kompute():
    importers = [module_name(path) for path in modules(PACKAGE)
                 if any(within(name, "dmlgpu.runtime._kompute") for name in imported(path))]
    assert importers == ["dmlgpu.runtime.vulkan"]


@pytest.mark.parametrize("path", modules(PACKAGE / "runtime"), ids=lambda p: p.name)
def test_runtime_touches_no_other_objects_private_fields(path):
    """`x._name` only where `_name` is the module's own: a private field or method its classes
    define (`self._name = ...`, `def _name`), or x is a private global of the module."""
    tree = ast.parse(path.read_text(), str(path))
    own = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id.startswith("_")}
    defined = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    defined |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) and node.value.id == "self"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and node.attr not in FOREIGN_PRIVATE_ALLOWED and node.attr not in defined:
            owner = node.value
            if isinstance(owner, ast.Name) and (owner.id in ("self", "cls") or owner.id in own):
                continue
            if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id in own:
                continue  # a module-private function's result, e.g. _module().copy
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    assert not found, f"{path.name} reaches into private fields: {found}"


@pytest.mark.parametrize("path", modules(PACKAGE), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_are_small_or_say_why(path):
    lines = path.read_text().count("\n")
    if lines <= MAX_LINES:
        return
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert f"{MAX_LINES} lines" in docstring, (
        f"{path.relative_to(PACKAGE)} has {lines} lines; split it, or say in its docstring why it is "
        f"longer than {MAX_LINES} lines")
