"""Why a built extension module of dmlgpu is missing, in words a user can act on.

The usual cause besides a broken install: Python started in dmlgpu's source tree (or with it on
PYTHONPATH) imports the source folder `./dmlgpu`, which has no built extensions, and so
shadows a dmlgpu installed elsewhere.
"""
from __future__ import annotations

import importlib.machinery
import os
import sys
from pathlib import Path

from ..errors import DeviceError

__all__ = ["missing_extension"]

#: This package's folder: the one Python imported.
_PACKAGE = Path(__file__).resolve().parents[1]


def _built_elsewhere(name: str) -> Path | None:
    """Another folder on sys.path whose `dmlgpu` has extension module `name`, if any."""
    for entry in sys.path:
        folder = Path(entry or os.getcwd()) / "dmlgpu"
        try:
            if folder.resolve() == _PACKAGE or not folder.is_dir():
                continue
            if any((folder / (name + suffix)).is_file() for suffix in importlib.machinery.EXTENSION_SUFFIXES):
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
