"""dmlgpu's build backend: scikit-build-core, after checking that cmake is there.

CMake checks everything else the build needs (cmake/prerequisites.cmake) but cannot report its
own absence, and scikit-build-core would then fetch a cmake wheel or fail with a trace. One line
naming the Debian package instead, like CMake's own check.
"""
import shutil
import sys

from scikit_build_core import build as _skbuild
from scikit_build_core.build import *  # noqa: F401,F403  (the PEP 517 hooks)


def _require_cmake():
    if shutil.which("cmake") is None:
        sys.exit("dmlgpu cannot be built, missing: cmake (Debian package cmake). "
                 "Install with: apt-get install cmake")


def get_requires_for_build_wheel(config_settings=None):
    _require_cmake()
    return _skbuild.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_editable(config_settings=None):
    _require_cmake()
    return _skbuild.get_requires_for_build_editable(config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _require_cmake()
    return _skbuild.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _require_cmake()
    return _skbuild.build_editable(wheel_directory, config_settings, metadata_directory)
