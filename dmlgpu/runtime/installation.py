"""Why a part of dmlgpu that its build makes is missing, in words a user can act on: a built
extension module, or a module the build writes from the operator table (`dmlgpu.front.functions`,
`dmlgpu.front.tensor_operators`).

The usual cause besides a broken install: Python started in dmlgpu's source tree (or with it on
PYTHONPATH) imports the source folder `./dmlgpu`, which has no built extensions (and, never
built, no generated modules), and so shadows a dmlgpu installed elsewhere.
"""
from __future__ import annotations

import importlib.machinery
import os
import sys
from pathlib import Path

from ..errors import DeviceError

__all__ = ["missing_extension", "missing_generated"]

#: This package's folder: the one Python imported.
_PACKAGE = Path(__file__).resolve().parents[1]


def _built_elsewhere(name: str, suffixes=tuple(importlib.machinery.EXTENSION_SUFFIXES)) -> Path | None:
    """Another folder on sys.path whose `dmlgpu` has module `name` (a dotted path below the
    package, such as `runtime._kompute`: a file of that path + one of `suffixes`), if any."""
    *folders, leaf = name.split(".")
    for entry in sys.path:
        folder = Path(entry or os.getcwd()) / "dmlgpu"
        try:
            if folder.resolve() == _PACKAGE or not folder.is_dir():
                continue
            if any(folder.joinpath(*folders, leaf + suffix).is_file() for suffix in suffixes):
                return folder
        except OSError:
            continue
    return None


def missing_extension(name: str, what: str) -> DeviceError:
    """The error for extension module `dmlgpu.<name>` (`what` says what it is) not importable."""
    installed = _built_elsewhere(name)
    if installed is not None:
        return DeviceError(
            f"dmlgpu was imported from {_PACKAGE}, a source tree without its built extension "
            f"dmlgpu.{name}: this ./dmlgpu shadows the dmlgpu installed at {installed}. Run Python outside "
            f"the source tree (or take {_PACKAGE.parent} off sys.path: PYTHONPATH, the current folder), or "
            "build in place with "
            "tools/bootstrap.sh setup")
    if (_PACKAGE.parent / "pyproject.toml").is_file():
        return DeviceError(
            f"dmlgpu was imported from the source tree {_PACKAGE} without its built extension dmlgpu.{name} "
            f"({what}), and no other dmlgpu is installed: build it with tools/bootstrap.sh setup or "
            "pip install .")
    return DeviceError(f"dmlgpu.{name} ({what}) is missing: reinstall dmlgpu with pip install . or "
                       "tools/bootstrap.sh setup")


def missing_generated(error: ModuleNotFoundError) -> ImportError | None:
    """Where importing dmlgpu met `error` for a module of dmlgpu's own, as in a source tree never
    built (the build writes `dmlgpu.front.functions` and `dmlgpu.front.tensor_operators` from the operator
    table), the error to raise instead, saying why; None for any other missing module."""
    prefix = _PACKAGE.name + "."
    if not (error.name or "").startswith(prefix):
        return None
    name = error.name[len(prefix):]
    what = f"dmlgpu.{name} (dmlgpu's build writes it from the operator table)"
    installed = _built_elsewhere(name, (".py",))
    if installed is not None:
        return ImportError(
            f"dmlgpu was imported from {_PACKAGE}, a source tree without {what}: this ./dmlgpu shadows the "
            f"dmlgpu installed at {installed}. Run Python outside the source tree (or take {_PACKAGE.parent} "
            "off sys.path: PYTHONPATH, the current folder), or build in place with tools/bootstrap.sh setup",
            name=error.name)
    if (_PACKAGE.parent / "pyproject.toml").is_file():
        return ImportError(
            f"dmlgpu was imported from the source tree {_PACKAGE} without {what}, and no other dmlgpu is "
            "installed: build it with tools/bootstrap.sh setup or pip install . (python "
            "tools/generate_functions.py writes the generated modules alone)", name=error.name)
    return ImportError(f"{what} is missing: reinstall dmlgpu with pip install . or tools/bootstrap.sh setup",
                       name=error.name)
